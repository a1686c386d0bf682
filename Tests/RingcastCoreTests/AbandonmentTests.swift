import XCTest

@testable import RingcastCore

/// Stalled work that nobody comes back to ends failed, "abandoned", after `abandonAfter`.
final class AbandonmentTests: XCTestCase {
    func testAStalledTaskEndsFailedAfterAbandonAfter() throws {
        let store = TaskStore(epoch: "e")
        store.abandonAfterSeconds = 60
        try store.update("job", #"{"staleAfter": 10, "abandonAfter": 5, "progress": 0.3}"#, now: t0)
        XCTAssertEqual(store.nextDeadline(), t0 + 10_000)
        XCTAssertEqual(store.runDue(now: t0 + 10_000).map(\.type), [.state])
        XCTAssertEqual(store.task("job")?.state, .stalled)
        XCTAssertEqual(store.nextDeadline(), t0 + 15_000, "the task's own abandonAfter wins over the server's")
        XCTAssertTrue(store.runDue(now: t0 + 14_999).isEmpty)
        let events = store.runDue(now: t0 + 15_000)
        XCTAssertEqual(events.map(\.type), [.state])
        let failed = decode(events[0])
        XCTAssertEqual(failed["state"], .string("failed"))
        XCTAssertEqual(failed["detail"], .string("abandoned: no update for 15 s"))
        XCTAssertNil(store.task("job")?.stalledAt)
    }

    func testTheServersDefaultAppliesAndZeroMeansNever() throws {
        let store = TaskStore(epoch: "e")
        store.abandonAfterSeconds = 0
        try store.update("a", #"{"staleAfter": 1}"#, now: t0)
        _ = store.runDue(now: t0 + 1000)
        XCTAssertEqual(store.task("a")?.state, .stalled)
        XCTAssertNil(store.nextDeadline().flatMap { $0 < t0 + 86_400_000 ? $0 : nil }, "0: a stalled task waits for its publisher forever")
        store.abandonAfterSeconds = 2
        XCTAssertEqual(store.nextDeadline(), t0 + 3000, "a new default reschedules the stalled tasks")
        _ = store.runDue(now: t0 + 3000)
        XCTAssertEqual(store.task("a")?.state, .failed)
        XCTAssertEqual(store.task("a")?.detail, "abandoned: no update for 3 s")
    }

    func testAnUpdateBeforeTheEndBringsItBackAndStartsOver() throws {
        let store = TaskStore(epoch: "e")
        store.abandonAfterSeconds = 5
        try store.update("b", #"{"staleAfter": 1}"#, now: t0)
        _ = store.runDue(now: t0 + 1000)
        try store.update("b", #"{"progress": 0.5}"#, now: t0 + 3000)
        XCTAssertEqual(store.task("b")?.state, .running)
        XCTAssertNil(store.task("b")?.stalledAt)
        XCTAssertTrue(store.runDue(now: t0 + 3500).isEmpty)
        _ = store.runDue(now: t0 + 4000)
        XCTAssertEqual(store.task("b")?.state, .stalled)
        XCTAssertEqual(store.task("b")?.stalledAt, t0 + 4000)
        XCTAssertTrue(store.runDue(now: t0 + 6000).isEmpty, "the first stall's end (1 s + 5 s) is gone: it starts over")
        _ = store.runDue(now: t0 + 9000)
        XCTAssertEqual(store.task("b")?.state, .failed)
    }

    func testStalledAtSurvivesARestartSoTheClockRunsOn() throws {
        let store = TaskStore(epoch: "e")
        try store.update("c", #"{"staleAfter": 1, "abandonAfter": 10}"#, now: t0)
        _ = store.runDue(now: t0 + 1000)
        let stored = try XCTUnwrap(TaskRecord(stored: store.task("c")!.encodedForStorage()))
        XCTAssertEqual(stored.stalledAt, t0 + 1000)
        XCTAssertEqual(stored.abandonAfter, 10)
        let restarted = TaskStore(persistence: Restoring(PersistedState(epoch: "e", seq: 5, tasks: [stored])))
        XCTAssertEqual(restarted.nextDeadline(), t0 + 11_000)
    }

    func testAbandonedAndStalledChildrenMoveTheirParentLikeAnyOther() throws {
        let store = TaskStore(epoch: "e")
        store.abandonAfterSeconds = 1
        try store.update("p", #"{"title": "Parent"}"#, now: t0)
        try store.update("p.a", #"{"parent": "p", "progress": 0.5, "staleAfter": 1}"#, now: t0)
        try store.update("p.b", #"{"parent": "p", "progress": 1, "state": "done"}"#, now: t0)
        let stalled = store.runDue(now: t0 + 1000)
        XCTAssertEqual(stalled.map(\.id), ["p.a"], "the parent's progress is unchanged by a stall")
        let abandoned = store.runDue(now: t0 + 2000)
        XCTAssertEqual(abandoned.map(\.id), ["p.a"])
        XCTAssertEqual(store.task("p")?.progress, 0.75)
    }
}
