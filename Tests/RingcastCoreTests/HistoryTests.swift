import XCTest

@testable import RingcastCore

/// ETA from history: kinds remember their finished runs; a new run expects their median, is slow
/// past their 90th percentile, and takes its ETA from them until its own rate settles. No clock:
/// every time is a `now` the test gives.
final class HistoryTests: XCTestCase {
    /// One run of `id` from `start` to done `seconds` later (a finished task set running again begins a new one).
    private func run(_ store: TaskStore, _ id: String, at start: Double, seconds: Double, body: String = #"{"progress": null, "state": "running"}"#)
        throws
    {
        try store.update(id, body, now: start)
        try store.update(id, #"{"state": "done"}"#, now: start + seconds * 1000)
    }

    func testTheDefaultKindIsTheIdWithoutItsTrailingNumber() {
        XCTAssertEqual(TaskKind.defaultKind(of: "ci.build-42"), "ci.build")
        XCTAssertEqual(TaskKind.defaultKind(of: "nightly7"), "nightly")
        XCTAssertEqual(TaskKind.defaultKind(of: "etl.load_2024"), "etl.load")
        XCTAssertEqual(TaskKind.defaultKind(of: "deploy.web"), "deploy.web")
        XCTAssertEqual(TaskKind.defaultKind(of: "42"), "42", "nothing but a number is its own kind")
        XCTAssertEqual(TaskKind.defaultKind(of: "v1.2.3"), "v1.2", "one trailing number goes")
    }

    func testThreeFinishedRunsGiveTheFourthTheirMedian() throws {
        let store = TaskStore(epoch: "e")
        try run(store, "ci.build-1", at: t0, seconds: 60)
        try run(store, "ci.build-2", at: t0 + 100_000, seconds: 90)
        try run(store, "ci.build-3", at: t0 + 200_000, seconds: 75)
        XCTAssertEqual(store.history.kinds["ci.build"]?.seconds, [60, 90, 75])
        XCTAssertNil(store.task("ci.build-1")?.expectedSeconds, "the first run had nothing to go by")
        XCTAssertEqual(store.task("ci.build-3")?.expectedSeconds, 75, "the third: the mean of the two middle of 60 and 90")

        let fourth = decode(try XCTUnwrap(single(try store.update("ci.build-4", #"{"title": "Build 4"}"#, now: t0 + 300_000))))
        XCTAssertEqual(fourth["expectedSeconds"], .number(75))
        XCTAssertEqual(fourth["eta"], .number(75), "an indeterminate task gets an ETA from its kind")
        XCTAssertNil(fourth["kind"], "kind is written only when the publisher named one")
        try store.update("ci.build-4", "{}", now: t0 + 330_000)
        XCTAssertEqual(store.task("ci.build-4")?.eta, 45, "the median less the time it has run")
        try store.update("ci.build-4", "{}", now: t0 + 380_000)
        XCTAssertNil(store.task("ci.build-4")?.eta, "past what it usually takes, a spinner has no guess")
    }

    func testAnEvenCountTakesTheMeanOfTheMiddleTwoAndOnlyTheLastTwentyCount() throws {
        let store = TaskStore(epoch: "e")
        for k in 1...25 { try run(store, "job", at: t0 + Double(k) * 1_000_000, seconds: Double(k)) }
        XCTAssertEqual(store.history.kinds["job"]?.seconds, (6...25).map(Double.init), "the last twenty runs, oldest first")
        let runs = try XCTUnwrap(store.history.kinds["job"])
        XCTAssertEqual(runs.median, 15.5)
        XCTAssertEqual(runs.p90, 23, "nearest rank: the 18th of 20")
        XCTAssertEqual(KindRuns(seconds: [3, 1, 2], lastFinishedAt: 0).p90, 3)
        XCTAssertEqual(KindRuns(seconds: Array(stride(from: 10.0, through: 1, by: -1)), lastFinishedAt: 0).p90, 9)
    }

    func testUntilItsRateSettlesADeterminateTaskTakesItsETAFromItsKind() throws {
        let store = TaskStore(epoch: "e")
        for k in 0..<3 { try run(store, "etl.load-\(k)", at: t0 + Double(k) * 1_000_000, seconds: 100) }
        let start = t0 + 5_000_000
        try store.update("etl.load-9", #"{"progress": 0}"#, now: start)
        try store.update("etl.load-9", #"{"progress": 0.5}"#, now: start + 10_000)
        XCTAssertEqual(store.task("etl.load-9")?.eta, 90, "one step says little: the kind's 100 s less 10 s")
        for step in 1...5 {
            try store.update("etl.load-9", #"{"progress": \#(0.5 + Double(step) * 0.05)}"#, now: start + 10_000 + Double(step) * 1000)
        }
        let settled = try XCTUnwrap(store.task("etl.load-9"))
        XCTAssertEqual(try XCTUnwrap(settled.eta), (1 - 0.75) / 0.05, accuracy: 1e-6, "its own rate, once settled, as tqdm computes it")
    }

    func testARunPastTheNinetiethPercentileIsFlaggedSlowOnTimeAndTheFlagEndsWithIt() throws {
        let store = TaskStore(epoch: "e")
        try run(store, "ci.test-1", at: t0, seconds: 60)
        try run(store, "ci.test-2", at: t0 + 100_000, seconds: 80)
        XCTAssertNil(store.task("ci.test-2")?.slowAfter, "two runs say little of what is unusual")
        try run(store, "ci.test-3", at: t0 + 200_000, seconds: 70)
        let start = t0 + 300_000
        try store.update("ci.test-4", #"{"progress": 0.1}"#, now: start)
        XCTAssertEqual(store.task("ci.test-4")?.slowAfter, 80)
        XCTAssertEqual(store.nextDeadline(), start + 80_000, "the moment it turns slow is a deadline")
        XCTAssertTrue(store.runDue(now: start + 79_999).isEmpty)
        let events = store.runDue(now: start + 80_000)
        XCTAssertEqual(events.map(\.type), [.progress])
        XCTAssertEqual(decode(events[0])["slow"], .bool(true))
        XCTAssertNil(decode(events[0])["eta"], "past what its kind takes and without a rate of its own: no stale guess")
        XCTAssertNotEqual(store.nextDeadline(), start + 80_000, "flagged once")
        let done = decode(try XCTUnwrap(single(try store.update("ci.test-4", #"{"state": "done"}"#, now: start + 95_000))))
        XCTAssertNil(done["slow"], "a finished task is not running slow")
        XCTAssertEqual(store.history.kinds["ci.test"]?.seconds, [60, 80, 70, 95])

        // A paused task is not flagged; running again past the mark, it is at once.
        try store.update("ci.test-5", #"{"progress": 0.1}"#, now: start + 200_000)
        try store.update("ci.test-5", #"{"state": "paused"}"#, now: start + 210_000)
        XCTAssertTrue(store.runDue(now: start + 300_000).allSatisfy { $0.id != "ci.test-5" })
        XCTAssertEqual(
            decode(try XCTUnwrap(single(try store.update("ci.test-5", #"{"state": "running"}"#, now: start + 300_000))))["slow"], .bool(true))
    }

    func testOnlyRunsThatEndDoneCountAndARunBeginsAgainAfterAFinish() throws {
        let store = TaskStore(epoch: "e")
        try store.update("deploy", "{}", now: t0)
        try store.update("deploy", #"{"state": "failed"}"#, now: t0 + 5_000)
        try store.update("deploy", #"{"state": "cancelled"}"#, now: t0 + 6_000)
        XCTAssertNil(store.history.kinds["deploy"], "a failed or cancelled run says nothing of how long the work takes")
        try store.update("deploy", #"{"state": "running"}"#, now: t0 + 100_000)
        XCTAssertEqual(store.task("deploy")?.runStartedAt, t0 + 100_000)
        try store.update("deploy", #"{"state": "done"}"#, now: t0 + 130_000)
        XCTAssertEqual(store.history.kinds["deploy"]?.seconds, [30], "from the run's own start")
        try store.update("deploy", #"{"state": "done"}"#, now: t0 + 140_000)
        XCTAssertEqual(store.history.kinds["deploy"]?.seconds, [30], "staying done is no new run")
        try store.update("instant", #"{"state": "done"}"#, now: t0)
        XCTAssertNil(store.history.kinds["instant"], "a task created done ran for no time")
        try store.startTimer("tea-1", seconds: 1, interval: 1, now: t0)
        _ = store.runDue(now: t0 + 1000)
        XCTAssertEqual(store.task("tea-1")?.state, .done)
        XCTAssertNil(store.history.kinds["tea"], "a timer knows its length")
    }

    func testAKindThePublisherNamesWinsAndNullGoesBackToTheDefault() throws {
        let store = TaskStore(epoch: "e")
        try run(store, "a", at: t0, seconds: 40, body: #"{"kind": "backup"}"#)
        try run(store, "b-1", at: t0 + 100_000, seconds: 20)
        XCTAssertEqual(store.history.kinds["backup"]?.seconds, [40])
        let named = decode(try XCTUnwrap(single(try store.update("nightly-3", #"{"kind": "backup"}"#, now: t0 + 200_000))))
        XCTAssertEqual(named["kind"], .string("backup"))
        XCTAssertEqual(named["expectedSeconds"], .number(40))
        try store.update("nightly-3", #"{"kind": "b"}"#, now: t0 + 201_000)
        XCTAssertEqual(store.task("nightly-3")?.expectedSeconds, 20, "a run under way takes its new kind's expectation")
        try store.update("nightly-3", #"{"kind": null}"#, now: t0 + 202_000)
        XCTAssertNil(store.task("nightly-3")?.kind)
        XCTAssertNil(store.task("nightly-3")?.expectedSeconds, "'nightly' has no runs")
        XCTAssertThrowsError(try TaskPatch.parse(json(#"{"kind": "no spaces"}"#))) { error in
            XCTAssertEqual((error as? APIError)?.field, "kind")
        }
    }

    func testHistoryIsSavedWithTheDoneThatMadeItAndComesBackWithTheState() throws {
        final class Saving: TaskPersistence {
            var history: [String: KindRuns?] = [:]
            var urgent = false
            func load() -> PersistedState? { nil }
            func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) { if urgent { self.urgent = true } }
            func remove(id: String, epoch: String, seq: UInt64) {}
            var hasPendingWrites: Bool { false }
            func flush() {}
            func saveHistory(kind: String, runs: KindRuns?) { history[kind] = runs }
        }
        let storage = Saving()
        let store = TaskStore(persistence: storage, epoch: "e")
        try store.update("ci.build-1", "{}", now: t0)
        try store.update("ci.build-1", #"{"state": "done"}"#, now: t0 + 30_000)
        XCTAssertEqual(storage.history["ci.build"], .some(KindRuns(seconds: [30], lastFinishedAt: t0 + 30_000)))
        XCTAssertTrue(storage.urgent, "the done is committed before its answer, and the run with it")

        let restored = TaskStore(
            persistence: RecordingPersistence(
                initial: PersistedState(
                    epoch: "e", seq: 2, tasks: [], history: ["ci.build": KindRuns(seconds: [30, 50], lastFinishedAt: t0)])))
        try restored.update("ci.build-2", "{}", now: t0 + 100_000)
        XCTAssertEqual(restored.task("ci.build-2")?.expectedSeconds, 40)

        // The task's own fields survive storage: when its run began and when it turns slow.
        try store.update("x", #"{"kind": "backup"}"#, now: t0 + 1000)
        var task = try XCTUnwrap(store.task("x"))
        task.expectedSeconds = 12
        task.slowAfter = 20
        task.slow = true
        let back = try XCTUnwrap(TaskRecord(stored: task.encodedForStorage()))
        XCTAssertEqual(back.kind, "backup")
        XCTAssertEqual(back.runStartedAt, t0 + 1000)
        XCTAssertEqual(back.expectedSeconds, 12)
        XCTAssertEqual(back.slowAfter, 20)
        XCTAssertTrue(back.slow)
    }

    func testPastMaxKindsTheKindFinishedLongestAgoIsForgottenAlikeEverywhere() throws {
        var history = KindHistory()
        for k in 0..<KindHistory.maxKinds { _ = history.record(1, kind: "k\(k)", at: t0 + Double(k % 7)) }
        let changes = history.record(2, kind: "new", at: t0 + 100)
        XCTAssertEqual(history.kinds.count, KindHistory.maxKinds)
        XCTAssertEqual(changes.map(\.kind), ["new", "k0"], "the oldest finish, ties broken by name")
        XCTAssertNil(changes[1].runs)
    }

    func testTwoStoresGivenTheSameCommandsKeepTheSameHistory() throws {
        let first = TaskStore(epoch: "e")
        let second = TaskStore(epoch: "e")
        for store in [first, second] {
            for k in 0..<30 {
                let start = t0 + Double(k) * 10_000
                try store.update("kind\(k % 4).run-\(k)", #"{"progress": 0.1}"#, now: start)
                try store.update("kind\(k % 4).run-\(k)", #"{"state": "done"}"#, now: start + Double((k * 7919) % 13 + 1) * 1000)
            }
            try store.update("kind1.run-99", "{}", now: t0 + 1_000_000)
        }
        XCTAssertEqual(first.history.encoded(), second.history.encoded())
        XCTAssertEqual(first.task("kind1.run-99")?.encodedObject(now: 0), second.task("kind1.run-99")?.encodedObject(now: 0))
    }

    func testKindsAreListedWithTheirRunCountMedianAndP90() throws {
        let store = TaskStore(epoch: "e")
        let api = API(store: store)
        for (k, seconds) in [60.0, 90, 75].enumerated() { try run(store, "ci.build-\(k)", at: t0 + Double(k) * 100_000, seconds: seconds) }
        try run(store, "lint", at: t0, seconds: 5)
        let answer = api.handle(APIRequest(method: "GET", path: "/api/kinds"), now: t0 + 1_000_000)
        XCTAssertEqual(answer.status, 200)
        let kinds = json(answer.body)["kinds"]
        XCTAssertEqual(
            kinds,
            json(
                #"""
                [{"kind": "ci.build", "runs": 3, "median": 75, "p90": 90, "last": 75, "durations": [60, 90, 75], "lastFinishedAt": \#(Int(t0) + 275_000)},
                 {"kind": "lint", "runs": 1, "median": 5, "p90": 5, "last": 5, "durations": [5], "lastFinishedAt": \#(Int(t0) + 5_000)}]
                """#))
        XCTAssertEqual(api.handle(APIRequest(method: "POST", path: "/api/kinds"), now: t0).status, 405)
    }
}
