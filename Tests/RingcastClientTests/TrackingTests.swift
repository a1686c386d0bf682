import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// A Progress whose additional description says how many files, as Apple's Foundation derives one.
private final class FileCopy: Progress, @unchecked Sendable {
    override var localizedAdditionalDescription: String! { "\(completedUnitCount) of \(totalUnitCount) files" }
}

/// `track`: a Foundation Progress published as a task, and control requests handed back to it.
final class TrackingTests: XCTestCase {
    private func field(_ server: TestServer, _ id: String, _ key: String) throws -> JSONValue? { try server.task(id)?[key] }

    func testAProgressIsPublishedUntilItFinishes() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        let copy = FileCopy(totalUnitCount: 10)
        let tracking = rc.track(copy, as: "track.copy", title: "Copy")
        XCTAssertTrue(tracking.isTracking)
        XCTAssertEqual(tracking.id, "track.copy")
        copy.completedUnitCount = 4
        XCTAssertTrue(try eventually { try field(server, "track.copy", "completed") == .number(4) })
        XCTAssertEqual(try field(server, "track.copy", "total"), .number(10))
        XCTAssertEqual(try field(server, "track.copy", "progress"), .number(0.4))
        XCTAssertEqual(try field(server, "track.copy", "detail"), .string("4 of 10 files"))
        XCTAssertEqual(try field(server, "track.copy", "title"), .string("Copy"))
        XCTAssertEqual(try field(server, "track.copy", "state"), .string("running"))
        copy.completedUnitCount = 10
        XCTAssertTrue(try eventually { try field(server, "track.copy", "state") == .string("done") })
        XCTAssertEqual(try field(server, "track.copy", "completed"), .number(10))
        XCTAssertEqual(try field(server, "track.copy", "detail"), .string("10 of 10 files"))
        XCTAssertTrue(eventually { !tracking.isTracking }, "a finished Progress ends its tracking")
        tracking.stop()
        await rc.close()
    }

    func testManyChangesAreCoalescedToAFewUpdatesASecond() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        let rows = Progress(totalUnitCount: 10_000)
        try await rc.update("track.start", progress: 0)
        try await rc.flush(timeout: 5)
        let before = try server.seq()
        let tracking = rc.track(rows, as: "track.rows")
        for _ in 0..<10_000 { rows.completedUnitCount += 1 }
        XCTAssertTrue(try eventually { try field(server, "track.rows", "state") == .string("done") })
        let applied = try server.seq() - before
        XCTAssertLessThan(applied, 1_000, "10 000 changes cost \(Int(applied)) updates")
        tracking.stop()
        await rc.close()
    }

    func testCancelledPausedAndStoppedProgressAndACloseTakesALastLook() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        let cancelled = Progress(totalUnitCount: 5)
        rc.track(cancelled, as: "track.cancelled")
        cancelled.completedUnitCount = 2
        cancelled.cancel()
        XCTAssertTrue(try eventually { try field(server, "track.cancelled", "state") == .string("cancelled") })

        let pausable = Progress(totalUnitCount: 5)
        pausable.isPausable = true
        let pausing = rc.track(pausable, as: "track.paused")
        pausable.pause()
        XCTAssertTrue(try eventually { try field(server, "track.paused", "state") == .string("paused") })
        pausable.resume()
        XCTAssertTrue(try eventually { try field(server, "track.paused", "state") == .string("running") })
        pausable.completedUnitCount = 3
        pausing.stop()
        XCTAssertFalse(pausing.isTracking)
        pausable.completedUnitCount = 4
        try await rc.flush(timeout: 5)
        XCTAssertEqual(try field(server, "track.paused", "completed"), .number(3), "stop() sent its last look, then nothing")
        XCTAssertEqual(try field(server, "track.paused", "state"), .string("running"))

        let unsent = Progress(totalUnitCount: 10)
        let kept = rc.track(unsent, as: "track.closing")
        unsent.completedUnitCount = 7
        await rc.close()
        XCTAssertEqual(try field(server, "track.closing", "completed"), .number(7), "close() looked once more before its flush")
        XCTAssertFalse(kept.isTracking)
    }

    func testAnInvalidIDIsReportedOnErrors() async throws {
        let rc = try RingcastClient(url: "http://127.0.0.1:\(closedLoopbackPort())")
        let errors = Collector(rc.errors)
        let tracking = rc.track(Progress(totalUnitCount: 1), as: "no spaces")
        XCTAssertFalse(tracking.isTracking)
        // No server listens there: connection errors come too.
        func invalid(_ errors: [RingcastClientError]) -> [String] {
            errors.compactMap {
                if case .invalid(let code, _, _) = $0 { return code }
                return nil
            }
        }
        XCTAssertEqual(invalid(errors.wait { !invalid($0).isEmpty }), ["invalid_id"])
        await rc.close(timeout: 0.1)
    }

    func testControlRequestsReachTheProgress() async throws {
        let fake = try FakeServer()
        let rc = try RingcastClient(url: fake.url)
        let work = Progress(totalUnitCount: 100)
        work.isPausable = true
        let cancelled = Inbox<Bool>()
        work.cancellationHandler = { cancelled.append(contentsOf: [true]) }
        let tracking = rc.track(work, as: "track.remote", title: "Remote")
        fake.wait { $0.contains { $0["id"] == .string("track.remote") && $0["controls"] == .array([.string("cancel"), .string("pause")]) } }

        fake.send(#"{"type":"control","id":"track.remote","action":"pause","seq":1}"#)
        XCTAssertTrue(eventually { work.isPaused })
        fake.wait { $0.contains { $0["id"] == .string("track.remote") && $0["state"] == .string("paused") } }
        fake.send(#"{"type":"control","id":"track.remote","action":"resume","seq":2}"#)
        XCTAssertTrue(eventually { !work.isPaused })
        fake.send(#"{"type":"control","id":"track.remote","action":"cancel","seq":3}"#)
        cancelled.wait { !$0.isEmpty }
        XCTAssertTrue(work.isCancelled)
        fake.wait { $0.contains { $0["id"] == .string("track.remote") && $0["state"] == .string("cancelled") } }
        XCTAssertTrue(eventually { !tracking.isTracking })

        // A Progress that cannot pause offers cancel alone; stopping takes the offer back.
        let plain = Progress(totalUnitCount: 3)
        let plainTracking = rc.track(plain, as: "track.plain")
        fake.wait { $0.contains { $0["id"] == .string("track.plain") && $0["controls"] == .array([.string("cancel")]) } }
        plainTracking.stop()
        fake.wait { $0.contains { $0["id"] == .string("track.plain") && $0["controls"] == .array([]) } }
        await rc.close()
    }
}
