import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

final class ClientLibraryTests: XCTestCase {
    func testEveryCallArrivesAtAWatcherInOrder() async throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let rc = try RingcastClient(url: URL(string: server.httpURL)!)
        try await rc.update("svc.import", progress: 0.25, title: "Import", detail: "reading", staleAfter: 30)
        try await rc.show("svc.import", hideAfter: 60, modal: true, detail: "busy")
        try await rc.hide("svc.import")
        try await rc.update("svc.units", progress: .units(completed: 3, total: 12))
        try await rc.update("svc.spin", progress: .indeterminate, parent: "svc")
        try await rc.startTimer("svc.tea", seconds: 30, interval: 0.5, title: "Tea")
        try await rc.pauseTimer("svc.tea")
        try await rc.resumeTimer("svc.tea")
        try await rc.cancelTimer("svc.tea")
        try await rc.update("svc.import", state: .done)
        try await rc.remove("svc.units")
        try await rc.flush(timeout: 5)

        let events = watcher.wait { $0.contains { $0.type == "remove" } }.filter { $0.id?.hasPrefix("svc.") == true && $0.type != "tick" }
        let summary = events.map { "\($0.type!) \($0.id!)" + ($0.type == "state" ? " \($0.string("state")!)" : "") }
        guard summary.count == 11 else { return XCTFail("events: \(summary)") }
        XCTAssertEqual(
            summary,
            [
                "progress svc.import", "show svc.import", "hide svc.import", "progress svc.units", "progress svc.spin",
                "show svc.tea", "state svc.tea paused", "state svc.tea running", "state svc.tea cancelled",
                "state svc.import done", "remove svc.units",
            ])
        XCTAssertEqual(events[0].number("progress"), 0.25)
        XCTAssertEqual(events[0].string("title"), "Import")
        XCTAssertEqual(events[0].number("staleAfter"), 30)
        XCTAssertEqual(events[1].event["modal"], .bool(true))
        XCTAssertEqual(events[1].string("detail"), "busy")
        XCTAssertEqual(events[3].number("progress"), 0.25)
        XCTAssertEqual(events[3].number("total"), 12)
        XCTAssertEqual(events[4].event["progress"], .null)
        XCTAssertEqual(events[4].string("parent"), "svc")
        XCTAssertEqual(events[5].string("title"), "Tea")
        XCTAssertEqual(rc.statistics.connections, 1)
        await rc.close()

        // The WebSocket URL works as the address too.
        let second = try RingcastClient(url: server.wsURL, options: quickReconnects)
        try await second.update("svc.ws", progress: 0.5)
        try await second.flush(timeout: 5)
        watcher.wait { $0.contains { $0.id == "svc.ws" } }
        await second.close()
    }

    func testABurstOfTenThousandUpdatesToOneTaskCoalescesAndTheLastValueArrives() async throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=burst")
        watcher.waitForSnapshot()
        let rc = try RingcastClient(url: server.httpURL)
        XCTAssertTrue(eventually { rc.isConnected })
        let seqBefore = try server.seq()

        for step in 1...10_000 {
            try await rc.update("burst", progress: .fraction(Double(step) / 10_000))
        }
        try await rc.flush(timeout: 10)
        watcher.wait { $0.contains { $0.number("progress") == 1 } }

        let statistics = rc.statistics
        XCTAssertEqual(statistics.accepted, 10_000)
        XCTAssertGreaterThan(statistics.coalesced, 0)
        XCTAssertEqual(statistics.sent + statistics.coalesced, 10_000)
        let applied = try server.seq() - seqBefore
        XCTAssertLessThan(applied, 10_000, "the server applied \(Int(applied)) updates: the client did not coalesce")
        XCTAssertEqual(Int(applied), statistics.sent)
        let seen = watcher.events(for: "burst").compactMap { $0.number("progress") }
        XCTAssertLessThan(seen.count, 10_000)
        XCTAssertEqual(seen, seen.sorted(), "coalescing never reorders one task's values")
        XCTAssertEqual(seen.last, 1)
        print(
            "burst of 10000 updates: \(statistics.sent) sent in \(statistics.frames) frames, \(statistics.coalesced) coalesced, \(seen.count) events seen"
        )
        await rc.close()
    }

    func testStateVisibilityAndOtherEventsAreNeverMergedAway() async throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        // Queued before the socket opens, so every update of the task could have merged.
        let rc = try RingcastClient(url: server.httpURL)
        try await rc.update("job", progress: 0.1, title: "Job")
        try await rc.update("job", progress: 0.2)
        try await rc.update("job", state: .paused)
        try await rc.update("other", progress: 0.5)
        try await rc.update("job", progress: 0.3)
        try await rc.show("job", hideAfter: 60)
        try await rc.update("job", progress: 0.4)
        try await rc.hide("job")
        try await rc.update("job", state: .running)
        try await rc.update("other", progress: 0.6)
        try await rc.update("job", progress: 0.5)
        try await rc.update("job", state: .done)
        try await rc.flush(timeout: 5)

        let events = watcher.wait { $0.contains { $0.id == "job" && $0.string("state") == "done" } }
        let job = events.filter { $0.id == "job" }
        func index(_ predicate: (Received) -> Bool) -> Int { job.firstIndex(where: predicate) ?? -1 }
        let paused = index { $0.string("state") == "paused" }
        let shown = index { $0.type == "show" }
        let hidden = index { $0.type == "hide" }
        let resumed = index { $0.type == "state" && $0.string("state") == "running" }
        let done = index { $0.string("state") == "done" }
        guard 0 <= paused && paused < shown && shown < hidden && hidden < resumed && resumed < done else {
            return XCTFail("order: \(job.map { "\($0.type!) \($0.string("state")!)" })")
        }
        XCTAssertEqual(job[paused].number("progress"), 0.2, "the paused update carries the progress merged into it")
        XCTAssertEqual(job[shown].number("progress"), 0.3)
        let progress = job.compactMap { $0.number("progress") }
        XCTAssertEqual(progress, progress.sorted())
        XCTAssertEqual(try server.task("other")?["progress"], .number(0.6))
        XCTAssertLessThan(rc.statistics.sent, rc.statistics.accepted)
        await rc.close()
    }

    func testInvalidCallsThrowAndServerRefusalsArriveOnErrors() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        let errors = Collector(rc.errors)
        func refusal(_ call: () async throws -> Void) async -> RingcastClientError? {
            do {
                try await call()
                return nil
            } catch { return error as? RingcastClientError }
        }
        guard case .invalid(let code, _, _)? = await refusal({ try await rc.update("bad id", progress: 0.1) }) else {
            return XCTFail("no invalid_id")
        }
        XCTAssertEqual(code, "invalid_id")
        guard case .invalid(let rangeCode, let message, let field)? = await refusal({ try await rc.update("x", progress: 1.5) }) else {
            return XCTFail()
        }
        XCTAssertEqual(rangeCode, "invalid_field")
        XCTAssertEqual(field, "progress")
        XCTAssertTrue(message.contains("0.42"), message)
        let zeroTimer = await refusal { try await rc.startTimer("t", seconds: 0) }
        let negativeHide = await refusal { try await rc.show("x", hideAfter: -1) }
        let longTitle = await refusal { try await rc.update("x", title: String(repeating: "a", count: 201)) }
        XCTAssertNotNil(zeroTimer)
        XCTAssertNotNil(negativeHide)
        XCTAssertNotNil(longTitle)
        XCTAssertThrowsError(try RingcastClient(url: "ftp://example"))
        XCTAssertThrowsError(try RingcastClient(url: server.httpURL, token: "two words"))
        XCTAssertEqual(rc.statistics.accepted, 0, "nothing invalid was queued")

        try await rc.hide("never-created")
        try await rc.update("plain", progress: 0.1)
        try await rc.pauseTimer("plain")
        try await rc.update("fine", progress: 0.3)
        let got = errors.wait { $0.count >= 2 }
        XCTAssertEqual(
            got.prefix(2).map { error -> String in
                if case .server(let code, _, _) = error { return code }
                return "\(error)"
            }, ["not_found", "not_a_timer"])
        // A refused event does not cost the connection: later ones still apply.
        XCTAssertTrue(try eventually { try server.task("fine")?["progress"] == .number(0.3) })
        XCTAssertEqual(rc.statistics.connections, 1)
        await rc.close()
        XCTAssertTrue(errors.waitForFinish(), "close() finishes the errors stream")
    }

    func testTheTokenIsSentOnTheUpgrade() async throws {
        let token = "svc-token-0123456789abcdef"
        let server = try producerServer {
            $0.access = AccessPolicy(
                publishers: [.publisher(name: "svc", token: token, patterns: WatchSet([Glob("svc.*")]))],
                anonymousLocalPublish: false)
        }
        let anonymous = try RingcastClient(url: server.httpURL)
        let anonymousErrors = Collector(anonymous.errors)
        try await anonymous.update("svc.a", progress: 0.1)
        XCTAssertEqual(anonymousErrors.wait { !$0.isEmpty }.first.map { "\($0)" }?.hasPrefix("unauthorized"), true)
        await anonymous.close()

        let publisher = try RingcastClient(url: server.httpURL, token: token)
        let publisherErrors = Collector(publisher.errors)
        try await publisher.update("svc.a", progress: 0.7)
        try await publisher.update("deploy.web", progress: 0.1)
        XCTAssertEqual(publisherErrors.wait { !$0.isEmpty }.first.map { "\($0)" }?.hasPrefix("forbidden"), true)
        XCTAssertEqual(try server.task("svc.a")?["progress"], .number(0.7))
        XCTAssertNil(try server.task("deploy.web"))
        await publisher.close()
    }

    func testReconnectsAfterTheServerRestartsOnTheSamePort() async throws {
        var first: TestServer? = try producerServer()
        let port = first!.port
        let rc = try RingcastClient(url: "http://127.0.0.1:\(port)", options: quickReconnects)
        let errors = Collector(rc.errors)
        try await rc.update("svc.job", progress: 0.1)
        try await rc.flush(timeout: 5)
        XCTAssertTrue(try eventually { try first!.task("svc.job")?["progress"] == .number(0.1) })

        first = nil  // stops the server: every connection closes
        XCTAssertTrue(eventually { !rc.isConnected }, "the client noticed the server went away")
        func connectionErrors(_ errors: [RingcastClientError]) -> Int {
            errors.filter {
                if case .connection = $0 { return true }
                return false
            }.count
        }
        errors.wait { connectionErrors($0) >= 1 }
        // Queued while the server is down: they wait, and the updates to one task merge.
        try await rc.update("svc.job", progress: 0.2)
        try await rc.update("svc.job", progress: 0.3, detail: "after the restart")
        try await rc.show("svc.banner", hideAfter: 30)
        // A few reconnect attempts fail, backing off, before the server is back.
        errors.wait { connectionErrors($0) >= 3 }

        let second = try producerServer { $0.port = port }
        XCTAssertEqual(second.port, port)
        XCTAssertTrue(eventually { rc.isConnected }, "the client reconnected to the new server")
        try await rc.flush(timeout: 5)
        XCTAssertTrue(try eventually { try second.task("svc.job")?["progress"] == .number(0.3) })
        XCTAssertEqual(try second.task("svc.job")?["detail"], .string("after the restart"))
        XCTAssertEqual(try second.task("svc.banner")?["visible"], .bool(true))
        let statistics = rc.statistics
        // With several service threads, the ones still running may take one more connection while
        // the first server stops (each has its own listener): at least the two servers' hellos.
        XCTAssertGreaterThanOrEqual(statistics.connections, 2)
        XCTAssertGreaterThanOrEqual(statistics.coalesced, 1)
        await rc.close()
    }

    func testQueuedCallsWaitForSpaceAndCloseEndsThem() async throws {
        var options = quickReconnects
        options.maxQueuedEvents = 3
        let rc = try RingcastClient(url: "http://127.0.0.1:\(closedLoopbackPort())", options: options)
        try await rc.show("a")
        try await rc.show("b")
        try await rc.update("c", progress: 0.1)
        try await rc.update("c", progress: 0.2)  // merges: no new slot
        let blocked = Task { () -> RingcastClientError? in
            do {
                try await rc.show("d")
                return nil
            } catch { return error as? RingcastClientError }
        }
        XCTAssertTrue(eventually { rc.callsWaitingForSpace == 1 }, "show(\"d\") never waited for space")
        XCTAssertEqual(rc.statistics.accepted, 4, "the fourth distinct event waits for space")
        do {
            try await rc.flush(timeout: 0.2)
            XCTFail("flush cannot finish without a server")
        } catch {
            XCTAssertEqual(error as? RingcastClientError, .timedOut)
        }
        let closing = Date()
        await rc.close(timeout: 0.2)
        XCTAssertLessThan(Date().timeIntervalSince(closing), 2)
        let outcome = await blocked.value
        XCTAssertEqual(outcome, .closed)
        do {
            try await rc.update("e", progress: 0.5)
            XCTFail("a closed client takes no more calls")
        } catch {
            XCTAssertEqual(error as? RingcastClientError, .closed)
        }
    }

    func testCloseSendsWhatIsQueued() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        for step in 1...100 { try await rc.update("svc.last", progress: .fraction(Double(step) / 100)) }
        await rc.close()
        XCTAssertEqual(try server.task("svc.last")?["progress"], .number(1))
        XCTAssertFalse(rc.isConnected)
    }
}
