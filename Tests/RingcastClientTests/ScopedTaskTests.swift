import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

private struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }

/// `withTask`: the body's outcome is the task's end; children roll up by weight; the lease is kept.
final class ScopedTaskTests: XCTestCase {
    private func field(_ server: TestServer, _ id: String, _ key: String) throws -> JSONValue? { try server.task(id)?[key] }

    func testReturningMarksDoneThrowingMarksFailedWithTheDescription() async throws {
        let server = try producerServer()
        try server.post("/api/tasks/scope.ok", #"{"state":"failed","detail":"an earlier run failed"}"#)
        let rc = try RingcastClient(url: server.httpURL)
        let value = try await rc.withTask("scope.ok", title: "Scoped") { task in
            XCTAssertEqual(task.id, "scope.ok")
            try await task.update(progress: 0.5, detail: "halfway")
            return 42
        }
        XCTAssertEqual(value, 42)
        XCTAssertEqual(try field(server, "scope.ok", "state"), .string("done"), "withTask waited for the final state to be kept")
        XCTAssertEqual(try field(server, "scope.ok", "progress"), .number(1))
        XCTAssertEqual(try field(server, "scope.ok", "title"), .string("Scoped"))
        XCTAssertEqual(try field(server, "scope.ok", "detail"), .string("halfway"))

        do {
            _ = try await rc.withTask("scope.boom") { _ in throw Boom() }
            XCTFail("withTask rethrows the body's error")
        } catch {
            XCTAssertTrue(error is Boom, "\(error)")
        }
        XCTAssertEqual(try field(server, "scope.boom", "state"), .string("failed"))
        XCTAssertEqual(try field(server, "scope.boom", "detail"), .string("boom"))
        XCTAssertEqual(try field(server, "scope.boom", "staleAfter"), .number(10), "the default lease")
        await rc.close()
    }

    func testAnEarlierRunsDetailIsClearedAndAnInvalidIDThrowsBeforeTheBody() async throws {
        let server = try producerServer()
        try server.post("/api/tasks/scope.again", #"{"state":"failed","detail":"an earlier run failed","hideAfter":600}"#)
        let rc = try RingcastClient(url: server.httpURL)
        let seenAtStart: JSONValue? = try await rc.withTask("scope.again", staleAfter: nil) { _ in
            try await rc.flush(timeout: 5)
            return try server.task("scope.again")
        }
        XCTAssertEqual(seenAtStart?["state"], .string("running"))
        XCTAssertNil(seenAtStart?["detail"])
        XCTAssertNil(seenAtStart?["hideAt"])
        XCTAssertNil(seenAtStart?["staleAfter"], "no lease asked: none kept")

        var ran = false
        do {
            try await rc.withTask("not valid!") { _ in ran = true }
            XCTFail("an invalid id throws")
        } catch let RingcastClientError.invalid(code, _, field) {
            XCTAssertEqual(code, "invalid_id")
            XCTAssertEqual(field, "id")
        }
        XCTAssertFalse(ran, "the body never ran")
        await rc.close()
    }

    func testCancellingTheSurroundingSwiftTaskMarksCancelled() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        let work = Task {
            try await rc.withTask("scope.cancel") { _ in try await Task.sleep(nanoseconds: 60_000_000_000) }
        }
        XCTAssertTrue(try eventually { try field(server, "scope.cancel", "state") == .string("running") })
        work.cancel()
        let outcome = await work.result
        guard case .failure(let error) = outcome else { return XCTFail("the body was not cancelled") }
        XCTAssertTrue(error is CancellationError, "\(error)")
        XCTAssertEqual(try field(server, "scope.cancel", "state"), .string("cancelled"))
        await rc.close()
    }

    func testChildrenRollUpByWeightAndEndWithTheirParent() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        try await rc.withTask("scope.family", title: "Family") { task in
            let heavy = try await task.child("heavy", title: "Heavy", weight: 3)
            let light = try await task.child("light")
            XCTAssertEqual(heavy.id, "scope.family.heavy")
            try await rc.flush(timeout: 5)
            XCTAssertEqual(try field(server, "scope.family.light", "title"), .string("light"))
            XCTAssertEqual(try field(server, "scope.family.heavy", "parent"), .string("scope.family"))
            XCTAssertEqual(try field(server, "scope.family", "progress"), .number(0))

            try await heavy.update(progress: 0.5)
            try await rc.flush(timeout: 5)
            XCTAssertEqual(try field(server, "scope.family", "progress"), .number(0.375), "1.5 of 4 units")
            XCTAssertEqual(try field(server, "scope.family.heavy", "progress"), .number(0.5))

            try await light.finish()
            try await light.update(progress: 0.1)  // ended: nothing more is sent for it
            try await heavy.update(completed: 2, total: 3)
            try await rc.flush(timeout: 5)
            XCTAssertEqual(try field(server, "scope.family.light", "state"), .string("done"))
            XCTAssertEqual(try field(server, "scope.family.light", "progress"), .number(1))
            XCTAssertEqual(try field(server, "scope.family", "progress"), .number(0.75), "2 of heavy's 3 and light's 1")
        }
        XCTAssertEqual(try field(server, "scope.family.heavy", "state"), .string("done"), "a running child ends with its parent")
        XCTAssertEqual(try field(server, "scope.family", "state"), .string("done"))
        XCTAssertEqual(try field(server, "scope.family", "progress"), .number(1))

        _ = try? await rc.withTask("scope.broken") { task in
            let done = try await task.child("first")
            _ = try await task.child("second")
            try await done.finish()
            throw Boom()
        }
        XCTAssertEqual(try field(server, "scope.broken.first", "state"), .string("done"), "a finished child keeps its state")
        XCTAssertEqual(try field(server, "scope.broken.second", "state"), .string("cancelled"))
        XCTAssertEqual(try field(server, "scope.broken", "state"), .string("failed"))

        do {
            try await rc.withTask("scope.weights") { task in _ = try await task.child("zero", weight: 0) }
            XCTFail("a weight of 0 throws")
        } catch let RingcastClientError.invalid(_, _, field) {
            XCTAssertEqual(field, "weight")
        }
        await rc.close()
    }

    func testTheLeaseIsRenewedWhileTheBodyRuns() async throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=scope.lease*")
        watcher.waitForSnapshot()
        let rc = try RingcastClient(url: server.httpURL)
        try await rc.withTask("scope.lease", staleAfter: 0.3) { task in
            _ = try await task.child("part")
            // Each renewal is an update the server applies: wait for a few of each task's.
            watcher.wait(timeout: 10) { events in
                events.filter { $0.id == "scope.lease" && $0.type == "progress" }.count >= 3
                    && events.filter { $0.id == "scope.lease.part" && $0.type == "progress" }.count >= 3
            }
        }
        XCTAssertEqual(try field(server, "scope.lease", "staleAfter"), .number(0.3))
        XCTAssertEqual(try field(server, "scope.lease.part", "staleAfter"), .number(0.3))
        await rc.close()
    }

    func testACancelRequestCancelsTheBodyAndIsOfferedAgainAfterAReconnect() async throws {
        let fake = try FakeServer()
        let rc = try RingcastClient(url: fake.url, options: quickReconnects)
        let handle = Inbox<RingcastTask>()
        let work = Task {
            try await rc.withTask("scope.remote") { task in
                handle.append(contentsOf: [task])
                try await Task.sleep(nanoseconds: 60_000_000_000)
            }
        }
        func offers(_ messages: [JSONValue]) -> Int {
            messages.filter { $0["id"] == .string("scope.remote") && $0["controls"] == .array([.string("cancel")]) }.count
        }
        fake.wait { offers($0) == 1 }
        fake.dropConnections()
        fake.wait { offers($0) == 2 }
        XCTAssertEqual(rc.statistics.connections, 2)

        fake.send(#"{"type":"control","id":"scope.other","action":"cancel","seq":1}"#)
        fake.send(#"{"type":"control","id":"scope.remote","action":"cancel","seq":2}"#)
        let outcome = await work.result
        guard case .failure(let error) = outcome else { return XCTFail("the body was not cancelled") }
        XCTAssertTrue(error is CancellationError, "\(error)")
        XCTAssertEqual(handle.all.first?.isCancelRequested, true)
        let end = fake.wait { $0.contains { $0["id"] == .string("scope.remote") && $0["state"] == .string("cancelled") } }
        XCTAssertEqual(end.last?["type"], .string("flush"), "withTask's end waits for the acknowledgement")
        await rc.close()
    }

    func testAFinalStateTheServerDoesNotAcknowledgeIsReportedNotThrown() async throws {
        let fake = try FakeServer()
        fake.answersFlush = false
        var options = RingcastClient.Options()
        options.acknowledgementTimeout = 0.2
        let rc = try RingcastClient(url: fake.url, options: options)
        let errors = Collector(rc.errors)
        let value = try await rc.withTask("scope.unheard", cancellable: false) { _ in "result" }
        XCTAssertEqual(value, "result")
        XCTAssertEqual(errors.wait { !$0.isEmpty }.first, .timedOut)
        XCTAssertTrue(fake.received.allSatisfy { $0["controls"] == nil }, "not cancellable: no controls offered")
        await rc.close(timeout: 0.2)
    }
}
