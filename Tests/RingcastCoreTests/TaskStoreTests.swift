import XCTest

@testable import RingcastCore

final class TaskStoreTests: XCTestCase {
    private var store: TaskStore!

    override func setUp() {
        store = TaskStore(epoch: "testepoch")
    }

    private func types(_ events: [OutboundEvent]) -> [String] { events.map(\.type.rawValue) }

    // MARK: Merge rules

    func testANewTaskHasDefaults() throws {
        let change = try store.update("ci.build-42", "{}", now: t0)
        let task = try XCTUnwrap(change.task)
        XCTAssertEqual(task.title, "ci.build-42", "the title defaults to the id")
        XCTAssertNil(task.progress)
        XCTAssertNil(task.detail)
        XCTAssertEqual(task.state, .running)
        XCTAssertTrue(task.visible)
        XCTAssertFalse(task.modal)
        XCTAssertEqual(task.updatedAt, t0)
        XCTAssertEqual(task.seq, 1)
        let event = try XCTUnwrap(single(change))
        XCTAssertEqual(event.type, .progress)
        XCTAssertEqual(event.seq, 1)
        XCTAssertEqual(event.id, "ci.build-42")
        let body = decode(event)
        XCTAssertEqual(body.keys, ["type", "id", "title", "progress", "state", "visible", "modal", "updatedAt", "seq", "startedAt"])
        XCTAssertEqual(body["progress"], .null)
        XCTAssertEqual(body["updatedAt"], .number(t0))
    }

    func testPartialUpdatesKeepOtherFields() throws {
        try store.update("a", #"{"title": "Build", "detail": "compiling", "progress": 0.2, "modal": true, "parent": "p"}"#, now: t0)
        let task = try XCTUnwrap(store.update("a", #"{"progress": 0.5}"#, now: t0 + 1000).task)
        XCTAssertEqual(task.title, "Build")
        XCTAssertEqual(task.detail, "compiling")
        XCTAssertEqual(task.progress, 0.5)
        XCTAssertTrue(task.modal)
        XCTAssertEqual(task.parent, "p")
        let retitled = try XCTUnwrap(store.update("a", #"{"title": "Build 2"}"#, now: t0 + 2000).task)
        XCTAssertEqual(retitled.progress, 0.5, "an update without progress keeps it")
        XCTAssertEqual(retitled.detail, "compiling")
        XCTAssertEqual(store.task("a")?.title, "Build 2")
    }

    func testNullClearsDetailAndMakesProgressIndeterminate() throws {
        try store.update("a", #"{"detail": "x", "progress": 0}"#, now: t0)
        try store.update("a", #"{"progress": 0.5}"#, now: t0 + 1000)
        XCTAssertNotNil(store.task("a")?.rate)
        let change = try store.update("a", #"{"detail": null, "progress": null}"#, now: t0 + 2000)
        let task = try XCTUnwrap(change.task)
        XCTAssertNil(task.detail)
        XCTAssertNil(task.progress)
        XCTAssertNil(task.rate, "an indeterminate task has no rate")
        XCTAssertNil(task.eta)
        let body = decode(change.events[0])
        XCTAssertEqual(body["progress"], .null, "indeterminate is sent as an explicit null")
        XCTAssertNil(body["detail"])
        XCTAssertNil(body["rate"])
    }

    func testCompletedAndTotalDeriveProgress() throws {
        XCTAssertEqual(try store.update("a", #"{"completed": 3, "total": 4}"#, now: t0).task?.progress, 0.75)
        XCTAssertEqual(try store.update("a", #"{"completed": 4}"#, now: t0 + 1).task?.progress, 1, "total is remembered")
        XCTAssertEqual(try store.update("a", #"{"total": 8}"#, now: t0 + 2).task?.progress, 0.5, "completed is remembered")
        XCTAssertEqual(try store.update("a", #"{"completed": 12}"#, now: t0 + 3).task?.progress, 1, "clamped to 1")
        XCTAssertEqual(try store.update("a", #"{"completed": 1, "progress": 0.9}"#, now: t0 + 4).task?.progress, 0.9, "an explicit progress wins")
        XCTAssertEqual(try store.update("a", #"{"title": "t"}"#, now: t0 + 5).task?.progress, 0.9, "no unit change, no derivation")
        // Only completed, no total: nothing to derive from.
        XCTAssertNil(try store.update("b", #"{"completed": 5}"#, now: t0).task?.progress)
        let task = try XCTUnwrap(store.task("a"))
        XCTAssertEqual(task.completed, 1)
        XCTAssertEqual(task.total, 8)
    }

    func testDoneSetsProgressToOne() throws {
        try store.update("a", "{}", now: t0)
        let change = try store.update("a", #"{"state": "done"}"#, now: t0 + 1000)
        XCTAssertEqual(change.task?.progress, 1)
        XCTAssertEqual(change.task?.state, .done)
        XCTAssertEqual(change.events.first?.type, .state)
        XCTAssertEqual(decode(change.events[0])["state"], .string("done"))
        XCTAssertEqual(try store.update("b", #"{"progress": 0.3, "state": "done"}"#, now: t0).task?.progress, 1)
        XCTAssertEqual(try store.update("c", #"{"progress": 0.3, "state": "failed"}"#, now: t0).task?.progress, 0.3, "failed keeps its progress")
    }

    func testEventTypeFollowsWhatChanged() throws {
        XCTAssertEqual(try store.update("a", #"{"progress": 0.1}"#, now: t0).events.map(\.type), [.progress], "creation")
        XCTAssertEqual(try store.update("a", #"{"progress": 0.2}"#, now: t0 + 1).events.map(\.type), [.progress])
        XCTAssertEqual(try store.update("a", #"{"state": "paused"}"#, now: t0 + 2).events.map(\.type), [.state])
        XCTAssertEqual(
            try store.update("a", #"{"state": "paused", "progress": 0.3}"#, now: t0 + 3).events.map(\.type), [.progress], "same state: progress")
        XCTAssertEqual(try store.update("a", #"{"visible": false}"#, now: t0 + 4).events.map(\.type), [.hide])
        XCTAssertEqual(try store.update("a", #"{"visible": false}"#, now: t0 + 5).events.map(\.type), [.progress], "already hidden")
        XCTAssertEqual(try store.update("a", #"{"visible": true, "state": "running"}"#, now: t0 + 6).events.map(\.type), [.show], "visibility wins")
        XCTAssertEqual(try store.update("a", #"{"state": "cancelled"}"#, now: t0 + 7).events.map(\.type), [.state])
        XCTAssertEqual(try store.update("b", #"{"visible": false}"#, now: t0).events.map(\.type), [.progress], "created hidden")
    }

    func testStalledTurnsBackToRunningOnAnyUpdate() throws {
        try store.update("a", #"{"staleAfter": 1}"#, now: t0)
        XCTAssertEqual(types(store.runDue(now: t0 + 1000)), ["state"])
        XCTAssertEqual(store.task("a")?.state, .stalled)
        let change = try store.update("a", #"{"detail": "alive"}"#, now: t0 + 1500)
        XCTAssertEqual(change.task?.state, .running)
        XCTAssertEqual(change.events.first?.type, .state)
        XCTAssertEqual(try store.update("a", #"{"state": "failed"}"#, now: t0 + 1600).task?.state, .failed, "an explicit state wins")
    }

    func testVisibleFalseClearsHideAtAndModal() throws {
        _ = try store.apply(.show(id: "a", options: ShowOptions(hideAfter: 5, modal: true)), now: t0)
        XCTAssertEqual(store.task("a")?.hideAt, t0 + 5000)
        XCTAssertEqual(store.task("a")?.modal, true)
        let task = try XCTUnwrap(store.update("a", #"{"visible": false}"#, now: t0 + 1000).task)
        XCTAssertNil(task.hideAt)
        XCTAssertFalse(task.modal)
        XCTAssertFalse(try XCTUnwrap(store.update("a", #"{"modal": true}"#, now: t0 + 1100).task).modal, "a hidden task cannot be modal")
        XCTAssertEqual(store.runDue(now: t0 + 10_000).count, 0, "no stray hide later")
        XCTAssertEqual(try store.update("a", #"{"visible": true, "modal": true}"#, now: t0 + 11_000).task?.modal, true)
    }

    func testSeqIncrementsByOnePerChangeAcrossTasks() throws {
        var seqs: [UInt64] = []
        seqs += try store.update("a", "{}", now: t0).events.map(\.seq)
        seqs += try store.update("b", "{}", now: t0).events.map(\.seq)
        seqs += try store.apply(.show(id: "a", options: ShowOptions()), now: t0).events.map(\.seq)
        seqs += try store.apply(.hide(id: "b"), now: t0).events.map(\.seq)
        seqs += try store.apply(.remove(id: "a"), now: t0).events.map(\.seq)
        seqs += try store.update("a", "{}", now: t0).events.map(\.seq)
        XCTAssertEqual(seqs, [1, 2, 3, 4, 5, 6])
        XCTAssertEqual(store.seq, 6)
        XCTAssertEqual(store.task("b")?.seq, 4)
    }

    // MARK: Show, hide and hideAfter

    func testShowAndHideCommands() throws {
        let shown = try store.apply(.show(id: "a", options: ShowOptions(modal: true, detail: "Loading")), now: t0)
        XCTAssertEqual(shown.events.map(\.type), [.show])
        XCTAssertEqual(shown.task?.detail, "Loading")
        XCTAssertEqual(shown.task?.modal, true)
        XCTAssertNil(shown.task?.hideAt)
        XCTAssertEqual(try store.apply(.show(id: "a", options: ShowOptions()), now: t0 + 1).task?.modal, false, "a plain show is not modal")
        XCTAssertEqual(store.task("a")?.detail, "Loading", "show without detail keeps it")
        let hidden = try store.apply(.hide(id: "a"), now: t0 + 2)
        XCTAssertEqual(hidden.events.map(\.type), [.hide])
        XCTAssertEqual(hidden.task?.visible, false)
        XCTAssertEqual(decode(hidden.events[0])["visible"], .bool(false))
        XCTAssertThrowsError(try store.apply(.hide(id: "nope"), now: t0)) { error in
            XCTAssertEqual((error as? APIError)?.code, .notFound)
            XCTAssertEqual((error as? APIError)?.field, "id")
        }
    }

    func testHideAfterEmitsHideAtTheRightTime() throws {
        let shown = try store.apply(.show(id: "splash", options: ShowOptions(hideAfter: 1, modal: true)), now: t0)
        XCTAssertEqual(decode(shown.events[0])["hideAt"], .number(t0 + 1000))
        XCTAssertEqual(store.nextDeadline(), t0 + 1000)
        XCTAssertEqual(store.runDue(now: t0 + 999).count, 0)
        let events = store.runDue(now: t0 + 1000)
        XCTAssertEqual(types(events), ["hide"])
        XCTAssertEqual(events.first?.seq, 2)
        let task = try XCTUnwrap(store.task("splash"))
        XCTAssertFalse(task.visible)
        XCTAssertFalse(task.modal)
        XCTAssertNil(task.hideAt)
        XCTAssertEqual(store.nextDeadline(), t0 + 1000 + store.retentionSeconds * 1000, "only its retention is left")
        XCTAssertEqual(store.runDue(now: t0 + 5000).count, 0, "hidden once")
    }

    func testALaterShowRestartsTheHideClock() throws {
        _ = try store.apply(.show(id: "a", options: ShowOptions(hideAfter: 1)), now: t0)
        _ = try store.apply(.show(id: "a", options: ShowOptions(hideAfter: 1)), now: t0 + 600)
        XCTAssertEqual(store.runDue(now: t0 + 1000).count, 0, "the first clock was replaced")
        XCTAssertEqual(store.runDue(now: t0 + 1599).count, 0)
        XCTAssertEqual(types(store.runDue(now: t0 + 1600)), ["hide"])
        // A show without hideAfter stays.
        _ = try store.apply(.show(id: "a", options: ShowOptions(hideAfter: 1)), now: t0 + 2000)
        _ = try store.apply(.show(id: "a", options: ShowOptions()), now: t0 + 2500)
        XCTAssertEqual(store.runDue(now: t0 + 60_000).count, 0)
        XCTAssertEqual(store.task("a")?.visible, true)
    }

    func testHideAfterInAnUpdate() throws {
        try store.update("a", #"{"progress": 0.5, "hideAfter": 2}"#, now: t0)
        XCTAssertEqual(store.runDue(now: t0 + 1999).count, 0)
        XCTAssertEqual(types(store.runDue(now: t0 + 2000)), ["hide"])
        try store.update("b", #"{"hideAfter": 2}"#, now: t0)
        try store.update("b", #"{"hideAfter": null}"#, now: t0 + 1000)
        XCTAssertEqual(store.runDue(now: t0 + 9000).count, 0, "null cancels the automatic hide")
    }

    // MARK: Timers

    func testFortyTicksAtExactTimesThenDone() throws {
        let start = try store.startTimer("tea", seconds: 2, interval: 0.05, now: t0)
        XCTAssertEqual(start.events.map(\.type), [.show])
        XCTAssertEqual(start.task?.progress, 0)
        XCTAssertEqual(start.task?.total, 2)
        var ticks: [JSONValue] = []
        var lastSeq = store.seq
        for k in 1...40 {
            let due = try XCTUnwrap(store.nextDeadline(), "tick \(k)")
            XCTAssertEqual(due, t0 + Double(k) * 50, accuracy: 0.001, "tick \(k) falls at start + k·interval")
            XCTAssertEqual(store.runDue(now: due - 0.5).count, 0, "nothing before tick \(k)")
            let events = store.runDue(now: due)
            XCTAssertEqual(types(events), k < 40 ? ["tick"] : ["tick", "state"], "at tick \(k)")
            for event in events {
                XCTAssertEqual(event.seq, lastSeq + 1)
                lastSeq = event.seq
            }
            ticks.append(decode(events[0]))
        }
        XCTAssertEqual(ticks.count, 40)
        for (index, tick) in ticks.enumerated() {
            let k = Double(index + 1)
            XCTAssertEqual(tick["type"], .string("tick"))
            XCTAssertEqual(tick["remaining"]?.numberValue, roundedSeconds(2 - 0.05 * k), "remaining at tick \(index + 1)")
            XCTAssertEqual(tick["elapsed"]?.numberValue, roundedSeconds(0.05 * k))
            XCTAssertEqual(tick["completed"]?.numberValue, roundedSeconds(0.05 * k))
            XCTAssertEqual(tick["progress"]?.numberValue ?? -1, k / 40, accuracy: 1e-12)
            XCTAssertEqual(tick["now"]?.numberValue ?? -1, (t0 + 50 * k).rounded(), accuracy: 0.5)
        }
        XCTAssertEqual(ticks[0]["remaining"], .number(1.95))
        XCTAssertEqual(ticks[39]["remaining"], .number(0))
        let task = try XCTUnwrap(store.task("tea"))
        XCTAssertEqual(task.state, .done)
        XCTAssertEqual(task.progress, 1)
        XCTAssertEqual(store.nextDeadline(), task.updatedAt + store.retentionSeconds * 1000, "only its retention is left")
        XCTAssertEqual(store.runDue(now: t0 + 60_000).count, 0)
    }

    func testPauseAndResumeShiftTheRemainingTicks() throws {
        try store.startTimer("t", seconds: 1, interval: 0.25, now: t0)
        XCTAssertEqual(types(store.runDue(now: t0 + 250)), ["tick"])
        let paused = try store.apply(.pauseTimer(id: "t"), now: t0 + 300)
        XCTAssertEqual(paused.events.map(\.type), [.state])
        XCTAssertEqual(paused.task?.state, .paused)
        XCTAssertEqual(store.runDue(now: t0 + 2000).count, 0, "no ticks while paused")
        let resumed = try store.apply(.resumeTimer(id: "t"), now: t0 + 2300)
        XCTAssertEqual(resumed.task?.state, .running)
        XCTAssertEqual(resumed.task?.timer?.startedAt, t0 + 2000, "shifted by the 2 s pause")
        // Tick 2 moves from t0+500 to t0+2500, and the rest follow at 250 ms.
        XCTAssertEqual(store.runDue(now: t0 + 2499).count, 0)
        XCTAssertEqual(types(store.runDue(now: t0 + 2500)), ["tick"])
        XCTAssertEqual(store.task("t")?.completed, 0.5)
        XCTAssertEqual(types(store.runDue(now: t0 + 2750)), ["tick"])
        XCTAssertEqual(store.runDue(now: t0 + 2999).count, 0)
        XCTAssertEqual(types(store.runDue(now: t0 + 3000)), ["tick", "state"])
        XCTAssertEqual(store.task("t")?.state, .done)
    }

    func testALateLoopSkipsToTheNewestDueTick() throws {
        try store.startTimer("t", seconds: 10, interval: 1, now: t0)
        let events = store.runDue(now: t0 + 3500)
        XCTAssertEqual(types(events), ["tick"], "one tick, not three bunched together")
        let tick = decode(events[0])
        XCTAssertEqual(tick["remaining"], .number(7))
        XCTAssertEqual(tick["elapsed"], .number(3))
        XCTAssertEqual(store.task("t")?.timer?.ticksEmitted, 3)
        XCTAssertEqual(store.nextDeadline(), t0 + 4000, "the phase is kept")
        XCTAssertEqual(types(store.runDue(now: t0 + 20_000)), ["tick", "state"], "very late: straight to the end")
    }

    func testTwoTimersKeepTheirOwnPhase() throws {
        try store.startTimer("a", seconds: 1, interval: 0.1, now: t0)
        try store.startTimer("b", seconds: 1, interval: 0.1, now: t0 + 30)
        var fired: [(String, Double)] = []
        while let due = store.nextDeadline() {
            for event in store.runDue(now: due) where event.type == .tick { fired.append((event.id, due)) }
        }
        XCTAssertEqual(fired.count, 20)
        for (id, time) in fired {
            let offset = (time - t0).truncatingRemainder(dividingBy: 100)
            XCTAssertEqual(offset, id == "a" ? 0 : 30, accuracy: 0.001, "\(id) at +\(time - t0) ms")
        }
    }

    func testCancelStopsTheTimer() throws {
        try store.startTimer("t", seconds: 10, interval: 1, now: t0, hideAfter: 2)
        XCTAssertEqual(types(store.runDue(now: t0 + 1000)), ["tick"])
        let cancelled = try store.apply(.cancelTimer(id: "t"), now: t0 + 1500)
        XCTAssertEqual(cancelled.events.map(\.type), [.state])
        XCTAssertEqual(cancelled.task?.state, .cancelled)
        XCTAssertEqual(cancelled.task?.progress, 0.1, "frozen where it was")
        XCTAssertEqual(cancelled.task?.hideAt, t0 + 3500, "hideAfter runs from the cancel")
        XCTAssertEqual(store.runDue(now: t0 + 3499).count, 0, "no more ticks")
        XCTAssertEqual(types(store.runDue(now: t0 + 3500)), ["hide"])
        for command in [Command.cancelTimer(id: "t"), .pauseTimer(id: "t"), .resumeTimer(id: "t")] {
            XCTAssertThrowsError(try store.apply(command, now: t0 + 4000)) { error in
                XCTAssertEqual((error as? APIError)?.code, .conflict)
                XCTAssertEqual((error as? APIError)?.status, 409)
            }
        }
        // Starting it again is allowed and starts from zero.
        let restarted = try store.startTimer("t", seconds: 3, interval: 1, now: t0 + 5000)
        XCTAssertEqual(restarted.events.map(\.type), [.state])
        XCTAssertEqual(restarted.task?.state, .running)
        XCTAssertEqual(restarted.task?.progress, 0)
        XCTAssertEqual(restarted.task?.visible, true)
        XCTAssertEqual(types(store.runDue(now: t0 + 6000)), ["tick"])
    }

    func testTimerEndWithHideAfter() throws {
        try store.startTimer("t", seconds: 1, interval: 1, now: t0, hideAfter: 0.5)
        XCTAssertEqual(types(store.runDue(now: t0 + 1000)), ["tick", "state"])
        XCTAssertEqual(store.task("t")?.hideAt, t0 + 1500)
        XCTAssertEqual(store.runDue(now: t0 + 1499).count, 0)
        XCTAssertEqual(types(store.runDue(now: t0 + 1500)), ["hide"])
    }

    func testTimerCommandsOnAPlainTaskOrNoTask() throws {
        try store.update("plain", "{}", now: t0)
        for command in [Command.pauseTimer(id: "plain"), .resumeTimer(id: "plain"), .cancelTimer(id: "plain")] {
            XCTAssertThrowsError(try store.apply(command, now: t0)) { error in
                let apiError = error as? APIError
                XCTAssertEqual(apiError?.code, .notATimer)
                XCTAssertEqual(apiError?.status, 409)
                XCTAssertEqual(apiError?.field, "id")
            }
        }
        XCTAssertThrowsError(try store.apply(.pauseTimer(id: "ghost"), now: t0)) { error in
            XCTAssertEqual((error as? APIError)?.status, 404)
        }
        XCTAssertEqual(store.seq, 1, "failed commands change nothing")
    }

    func testPausingAndResumingATimerThroughItsState() throws {
        try store.startTimer("t", seconds: 4, interval: 1, now: t0)
        XCTAssertEqual(types(store.runDue(now: t0 + 1000)), ["tick"])
        try store.update("t", #"{"state": "paused"}"#, now: t0 + 1500)
        XCTAssertEqual(store.runDue(now: t0 + 5000).count, 0, "a paused task's timer does not tick")
        let resumed = try store.update("t", #"{"state": "running"}"#, now: t0 + 6500)
        XCTAssertEqual(resumed.task?.state, .running)
        // Paused 5 s: tick 2 falls at t0 + 2000 + 5000.
        XCTAssertEqual(store.runDue(now: t0 + 6999).count, 0)
        XCTAssertEqual(types(store.runDue(now: t0 + 7000)), ["tick"], "running again means ticking again")
    }

    func testTimerTasksHaveNoRate() throws {
        try store.startTimer("t", seconds: 4, interval: 1, now: t0)
        _ = store.runDue(now: t0 + 1000)
        _ = store.runDue(now: t0 + 2000)
        let task = try XCTUnwrap(store.update("t", #"{"detail": "brewing"}"#, now: t0 + 2100).task)
        XCTAssertNil(task.rate)
        XCTAssertNil(task.eta)
        XCTAssertEqual(task.progress, 0.5)
    }

    // MARK: Rate and ETA through the store

    func testRateAndEtaOnAKnownSequence() throws {
        XCTAssertNil(try store.update("a", #"{"progress": 0}"#, now: t0).task?.rate)
        let first = try XCTUnwrap(store.update("a", #"{"progress": 0.1}"#, now: t0 + 1000).task)
        XCTAssertEqual(first.rate!, 0.1, accuracy: 1e-12)  // 0.1 in 1 s
        XCTAssertEqual(first.eta!, 9, accuracy: 1e-9)  // 0.9 left at 0.1/s
        // A detail update 1 s later is no measurement; then 0.3 at +3 s: Δp = 0.2 over Δt = 2 s.
        // EMA(Δp) = 0.3·0.2 + 0.7·0.03 = 0.081; EMA(Δt) = 0.3·2 + 0.7·0.3 = 0.81 → rate 0.1; ETA 0.7/0.1 = 7.
        let detail = try XCTUnwrap(store.update("a", #"{"detail": "half way"}"#, now: t0 + 2000).task)
        XCTAssertEqual(detail.rate!, 0.1, accuracy: 1e-12)
        let second = try XCTUnwrap(store.update("a", #"{"progress": 0.3}"#, now: t0 + 3000).task)
        XCTAssertEqual(second.rate!, 0.081 / 0.81, accuracy: 1e-12)
        XCTAssertEqual(second.eta!, 7, accuracy: 1e-9)
        let body = decode(try store.update("a", #"{"progress": 0.3}"#, now: t0 + 3500).events[0])
        XCTAssertEqual(body["rate"]?.numberValue ?? 0, 0.1, accuracy: 1e-12)
        XCTAssertEqual(body["eta"]?.numberValue ?? 0, 7, accuracy: 1e-9)
        // Paused: neither rate nor ETA are shown.
        let paused = try XCTUnwrap(store.update("a", #"{"state": "paused"}"#, now: t0 + 4000).task)
        XCTAssertNil(paused.rate)
        XCTAssertNil(paused.eta)
        XCTAssertNil(decode(try store.update("a", "{}", now: t0 + 4100).events[0])["eta"])
    }

    // MARK: Removal and resumption

    func testRemovalLeavesATombstone() throws {
        try store.update("a.one", "{}", now: t0)  // 1
        try store.update("b.two", "{}", now: t0)  // 2
        try store.update("a.three", "{}", now: t0)  // 3
        let removed = try store.apply(.remove(id: "a.one"), now: t0)  // 4
        XCTAssertNil(removed.task)
        let event = try XCTUnwrap(single(removed))
        XCTAssertEqual(event.type, .remove)
        XCTAssertEqual(text(event.bytes), #"{"type":"remove","seq":4,"id":"a.one"}"#)
        XCTAssertNil(store.task("a.one"))
        XCTAssertThrowsError(try store.apply(.remove(id: "a.one"), now: t0)) { error in
            XCTAssertEqual((error as? APIError)?.code, .notFound)
        }
        try store.update("b.two", #"{"progress": 0.5}"#, now: t0)  // 5

        let all = try WatchSet.parse("*").get()
        let since2 = try XCTUnwrap(store.changes(since: 2, matching: all))
        XCTAssertEqual(since2.tasks.map(\.id), ["a.three", "b.two"], "changed after 2, oldest first")
        XCTAssertEqual(since2.removed, ["a.one"])
        let aOnly = try XCTUnwrap(store.changes(since: 2, matching: try WatchSet.parse("a.*").get()))
        XCTAssertEqual(aOnly.tasks.map(\.id), ["a.three"])
        XCTAssertEqual(aOnly.removed, ["a.one"])
        let since4 = try XCTUnwrap(store.changes(since: 4, matching: all))
        XCTAssertEqual(since4.tasks.map(\.id), ["b.two"])
        XCTAssertEqual(since4.removed, [])
        XCTAssertEqual(store.changes(since: 5, matching: all)?.tasks.count, 0)
        XCTAssertNil(store.changes(since: 6, matching: all), "a seq from the future cannot be answered")

        try store.update("a.one", "{}", now: t0)  // 6: back again
        let since2again = try XCTUnwrap(store.changes(since: 2, matching: all))
        XCTAssertEqual(since2again.removed, [], "re-created: no longer removed")
        XCTAssertEqual(since2again.tasks.map(\.id), ["a.three", "b.two", "a.one"])
    }

    func testForgottenRemovalsForceAFullSnapshot() throws {
        let store = TaskStore(maxRemembered: 4, epoch: "e")
        for i in 1...5 { try store.update("t\(i)", "{}", now: t0) }  // seq 1…5
        for i in 1...4 { _ = try store.apply(.remove(id: "t\(i)"), now: t0) }  // seq 6…9
        XCTAssertEqual(store.removalHorizon, 0)
        _ = try store.apply(.remove(id: "t5"), now: t0)  // seq 10: five tombstones > 4
        // The oldest 5 − 4/2 = 3 are forgotten (removed at 6, 7, 8): resuming from before 8 needs a snapshot.
        XCTAssertEqual(store.removalHorizon, 8)
        let all = try WatchSet.parse(nil).get()
        XCTAssertNil(store.changes(since: 7, matching: all))
        XCTAssertEqual(store.changes(since: 8, matching: all)?.removed, ["t4", "t5"])
        let snapshot = json(store.encodeSnapshot(matching: all, since: 7, now: t0))
        XCTAssertEqual(snapshot["full"], .bool(true))
        XCTAssertNil(snapshot["removed"])
    }

    func testStaleAfterTurnsASilentTaskStalled() throws {
        try store.update("job", #"{"progress": 0.1, "staleAfter": 2}"#, now: t0)
        try store.update("job", #"{"progress": 0.2}"#, now: t0 + 1500)  // renews the lease to t0+3500
        XCTAssertEqual(store.runDue(now: t0 + 2000).count, 0)
        XCTAssertEqual(store.runDue(now: t0 + 3499).count, 0)
        let events = store.runDue(now: t0 + 3500)
        XCTAssertEqual(types(events), ["state"])
        XCTAssertEqual(decode(events[0])["state"], .string("stalled"))
        let task = try XCTUnwrap(store.task("job"))
        XCTAssertEqual(task.state, .stalled)
        XCTAssertNil(task.rate)
        XCTAssertNil(task.eta)
        XCTAssertEqual(store.runDue(now: t0 + 99_000).count, 0, "stalled once")
        // Finished tasks hold no lease.
        try store.update("done", #"{"staleAfter": 1, "state": "done"}"#, now: t0)
        XCTAssertEqual(store.runDue(now: t0 + 99_000).count, 0)
        XCTAssertEqual(store.task("done")?.state, .done)
    }

    // MARK: Encodings

    func testSnapshotsAndTaskLists() throws {
        try store.update("a.x", "{}", now: t0)
        try store.update("b.y", "{}", now: t0)
        try store.update("a.z", "{}", now: t0)
        let watchA = try WatchSet.parse("a.*").get()
        let full = json(store.encodeSnapshot(matching: watchA, now: t0))
        XCTAssertEqual(full.keys, ["type", "epoch", "seq", "full", "tasks"])
        XCTAssertEqual(full["type"], .string("snapshot"))
        XCTAssertEqual(full["epoch"], .string("testepoch"))
        XCTAssertEqual(full["seq"], .number(3))
        XCTAssertEqual(full["full"], .bool(true))
        XCTAssertEqual(full["tasks"]?.arrayValue?.map { $0["id"] }, [.string("a.x"), .string("a.z")])

        _ = try store.apply(.remove(id: "a.x"), now: t0)
        let delta = json(store.encodeSnapshot(matching: watchA, since: 3, now: t0))
        XCTAssertEqual(delta["full"], .bool(false))
        XCTAssertEqual(delta["since"], .number(3))
        XCTAssertEqual(delta["tasks"], .array([]))
        XCTAssertEqual(delta["removed"], .array([.string("a.x")]))

        let list = json(store.encodeTaskList(matching: try WatchSet.parse(nil).get(), now: t0))
        XCTAssertEqual(list.keys, ["epoch", "seq", "tasks"])
        XCTAssertEqual(list["tasks"]?.arrayValue?.map { $0["id"] }, [.string("b.y"), .string("a.z")])

        let hello = json(store.encodeHello(now: t0 + 0.4, heartbeatSeconds: 15))
        XCTAssertEqual(
            text(JSONWriter.encode(hello)),
            #"{"type":"hello","protocol":6,"epoch":"testepoch","seq":4,"now":1700000000000,"heartbeat":15,"server":"\#(RingcastVersion.version)"}"#)
    }

    func testTheHelloKeepsItsFixedPartsButFollowsSeqAndANewEpoch() throws {
        let version = RingcastVersion.version
        XCTAssertEqual(
            text(store.encodeHello(now: t0, heartbeatSeconds: 15)),
            #"{"type":"hello","protocol":6,"epoch":"testepoch","seq":0,"now":1700000000000,"heartbeat":15,"server":"\#(version)"}"#)
        try store.update("a", #"{"progress": 0.5}"#, now: t0)
        XCTAssertEqual(
            text(store.encodeHello(now: t0 + 1000, heartbeatSeconds: 2.5)),
            #"{"type":"hello","protocol":6,"epoch":"testepoch","seq":1,"now":1700000001000,"heartbeat":2.5,"server":"\#(version)"}"#)
        store.replace(with: PersistedState(epoch: "other", seq: 7, tasks: []))
        XCTAssertEqual(
            text(store.encodeHello(now: t0, heartbeatSeconds: 2.5)),
            #"{"type":"hello","protocol":6,"epoch":"other","seq":7,"now":1700000000000,"heartbeat":2.5,"server":"\#(version)"}"#)
    }

    func testTimerFieldsInTheTaskObject() throws {
        try store.startTimer("t", seconds: 3, interval: 1, now: t0)
        _ = store.runDue(now: t0 + 1000)
        let object = json(try XCTUnwrap(store.task("t")).encodedObject(now: t0 + 1000))
        XCTAssertEqual(
            object["timer"].map { text(JSONWriter.encode($0)) },
            #"{"seconds":3,"interval":1,"startedAt":1700000000000,"endsAt":1700000003000,"remaining":2,"elapsed":1}"#)
        _ = try store.apply(.pauseTimer(id: "t"), now: t0 + 1200)
        XCTAssertEqual(json(try XCTUnwrap(store.task("t")).encodedObject(now: t0))["timer"]?["pausedAt"], .number(t0 + 1200))
    }

    // MARK: Persistence seam

    func testEveryChangeReachesPersistenceAndARestartResumes() throws {
        let persistence = RecordingPersistence()
        let first = TaskStore(persistence: persistence, epoch: "one")
        try first.update("a", #"{"progress": 0.5}"#, now: t0)
        _ = try first.apply(.show(id: "b", options: ShowOptions(hideAfter: 10)), now: t0)
        try first.update("c", "{}", now: t0)
        _ = try first.apply(.remove(id: "c"), now: t0)
        XCTAssertEqual(persistence.saved["a"]?.1, 1)
        XCTAssertEqual(persistence.saved["b"]?.0.hideAt, t0 + 10_000)
        XCTAssertEqual(persistence.removed.map(\.0), ["c"])
        XCTAssertEqual(persistence.removed.map(\.1), [4])

        let restored = RecordingPersistence(
            initial: PersistedState(
                epoch: "one", seq: first.seq, tasks: [persistence.saved["a"]!.0, persistence.saved["b"]!.0]))
        let second = TaskStore(persistence: restored, epoch: "ignored")
        XCTAssertEqual(second.epoch, "one", "the saved epoch is kept")
        XCTAssertEqual(second.seq, 4)
        XCTAssertEqual(second.task("a")?.progress, 0.5)
        XCTAssertNil(second.changes(since: 3, matching: try WatchSet.parse(nil).get()), "removals before the restart are unknown")
        XCTAssertEqual(second.nextDeadline(), t0 + 10_000, "deadlines are rebuilt")
        XCTAssertEqual(types(second.runDue(now: t0 + 10_000)), ["hide"])
        XCTAssertEqual(second.seq, 5)
    }
}
