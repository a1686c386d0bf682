import XCTest

@testable import RingcastCore

/// The pure tick arithmetic of TimerSpec: tick k at startedAt + min(k·interval, seconds), shifted by pauses.
final class TimerScheduleTests: XCTestCase {
    func testTickCount() {
        XCTAssertEqual(TimerSpec(seconds: 2, interval: 0.05, startedAt: t0).tickCount, 40)
        XCTAssertEqual(TimerSpec(seconds: 3, interval: 1, startedAt: t0).tickCount, 3)
        XCTAssertEqual(TimerSpec(seconds: 0.3, interval: 0.1, startedAt: t0).tickCount, 3, "0.3/0.1 is 2.9999999999999996 in binary")
        XCTAssertEqual(TimerSpec(seconds: 2.5, interval: 1, startedAt: t0).tickCount, 3, "a last, short tick at the end")
        XCTAssertEqual(TimerSpec(seconds: 0.5, interval: 1, startedAt: t0).tickCount, 1, "interval longer than the countdown")
    }

    func testTickTimesAreDerivedNotAccumulated() {
        let timer = TimerSpec(seconds: 2, interval: 0.05, startedAt: t0)
        for k in 1...40 {
            XCTAssertEqual(timer.tickTime(k), t0 + Double(k) * 50, accuracy: 1e-6, "tick \(k)")
        }
        // The last tick never passes the end, even when the interval does not divide the length.
        let uneven = TimerSpec(seconds: 2.5, interval: 1, startedAt: t0)
        XCTAssertEqual((1...3).map(uneven.tickTime), [t0 + 1000, t0 + 2000, t0 + 2500])
        XCTAssertEqual(uneven.endsAt, t0 + 2500)
        XCTAssertEqual(uneven.elapsedSeconds(tick: 3), 2.5)
    }

    func testDueTickSkipsToTheNewestDueTick() {
        var timer = TimerSpec(seconds: 10, interval: 1, startedAt: t0)
        XCTAssertNil(timer.dueTick(at: t0 + 999.9))
        XCTAssertEqual(timer.nextTickTime, t0 + 1000)
        XCTAssertEqual(timer.dueTick(at: t0 + 1000), 1, "a tick is due at its exact time")
        XCTAssertEqual(timer.dueTick(at: t0 + 3500), 3, "a late loop gets the newest tick, not tick 1")
        timer.ticksEmitted = 3
        XCTAssertNil(timer.dueTick(at: t0 + 3999))
        XCTAssertEqual(timer.nextTickTime, t0 + 4000)
        XCTAssertEqual(timer.dueTick(at: t0 + 60_000), 10, "never past the last tick")
        timer.ticksEmitted = 10
        XCTAssertNil(timer.dueTick(at: t0 + 60_000))
        XCTAssertNil(timer.nextTickTime, "a finished timer has no next tick")
    }

    func testPauseFreezesAndResumeShiftsTheRemainingTicks() {
        var timer = TimerSpec(seconds: 5, interval: 1, startedAt: t0)
        timer.ticksEmitted = 2
        timer.pause(at: t0 + 2300)
        XCTAssertNil(timer.dueTick(at: t0 + 10_000), "no ticks while paused")
        XCTAssertNil(timer.nextTickTime)
        XCTAssertEqual(timer.elapsedSeconds(at: t0 + 9000), 2.3, accuracy: 1e-9, "the clock stops at the pause")
        timer.pause(at: t0 + 2800)
        XCTAssertEqual(timer.pausedAt, t0 + 2300, "a second pause keeps the first pause time")
        timer.resume(at: t0 + 4300)
        // Paused for 2 s: tick 3 moves from t0+3000 to t0+5000, and so on.
        XCTAssertNil(timer.pausedAt)
        XCTAssertEqual(timer.startedAt, t0 + 2000)
        XCTAssertEqual(timer.nextTickTime, t0 + 5000)
        XCTAssertEqual((3...5).map(timer.tickTime), [t0 + 5000, t0 + 6000, t0 + 7000])
        XCTAssertEqual(timer.endsAt, t0 + 7000)
        XCTAssertEqual(timer.elapsedSeconds(at: t0 + 4800), 2.8, accuracy: 1e-9)
        let before = timer
        timer.resume(at: t0 + 9000)
        XCTAssertEqual(timer, before, "resuming a running timer changes nothing")
    }

    func testElapsedIsClampedToTheCountdown() {
        let timer = TimerSpec(seconds: 2, interval: 0.5, startedAt: t0)
        XCTAssertEqual(timer.elapsedSeconds(at: t0 - 500), 0)
        XCTAssertEqual(timer.elapsedSeconds(at: t0 + 750), 0.75)
        XCTAssertEqual(timer.elapsedSeconds(at: t0 + 9000), 2)
    }

    func testTwoTimersKeepTheirOwnPhases() {
        let a = TimerSpec(seconds: 1, interval: 0.1, startedAt: t0)
        let b = TimerSpec(seconds: 1, interval: 0.1, startedAt: t0 + 30)
        for k in 1...10 {
            XCTAssertEqual(b.tickTime(k) - a.tickTime(k), 30, accuracy: 1e-6)
        }
    }

    func testRoundedSecondsPrintsToTheMillisecond() {
        XCTAssertEqual(roundedSeconds(2 - 0.05 * 1), 1.95)
        XCTAssertEqual(text(JSONWriter.encode(.number(roundedSeconds(2 - 0.05 * 3)))), "1.85")
        XCTAssertEqual(roundedSeconds(0.1 + 0.2), 0.3)
    }

    // MARK: DeadlineQueue

    func testDeadlineQueuePopsInTimeOrderAndSkipsSupersededEntries() {
        var queue = DeadlineQueue()
        queue.schedule("c", at: 30)
        queue.schedule("a", at: 10)
        queue.schedule("b", at: 20)
        queue.schedule("d", at: 5)
        queue.schedule("d", at: 40)  // supersedes d@5
        XCTAssertEqual(queue.earliest(), 10, "the superseded d@5 is not reported")
        XCTAssertNil(queue.popDue(now: 9))
        XCTAssertEqual(queue.popDue(now: 25), "a")
        XCTAssertEqual(queue.popDue(now: 25), "b")
        XCTAssertNil(queue.popDue(now: 25))
        XCTAssertEqual(queue.popDue(now: 100), "c")
        XCTAssertEqual(queue.popDue(now: 100), "d")
        XCTAssertNil(queue.popDue(now: 100))
        XCTAssertNil(queue.earliest())
    }

    func testDeadlineQueueManyEntries() {
        var queue = DeadlineQueue()
        let times = (0..<200).map { Double(($0 * 7919) % 200) }
        for (i, time) in times.enumerated() { queue.schedule("t\(i)", at: time) }
        var popped: [Double] = []
        while let id = queue.popDue(now: 1000) { popped.append(queue.scheduled[id]!) }
        XCTAssertEqual(popped, times.sorted())
    }
}
