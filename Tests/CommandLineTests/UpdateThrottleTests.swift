import RingcastCore
import XCTest

@testable import ringcast

/// `ringcast pipe`'s throttle, on a clock the test gives it: at most one update per 50 ms, each the
/// latest value offered by then, and the last one out within 50 ms of its line.
final class UpdateThrottleTests: XCTestCase {
    private let ms: UInt64 = 1_000_000

    private func render(_ fields: [(String, JSONValue)]?) -> String? {
        fields.map { String(decoding: JSONWriter.encode(.object($0)), as: UTF8.self) }
    }

    func testTheFirstUpdateGoesAtOnceAndTheNextNoSoonerThanTheInterval() {
        var throttle = UpdateThrottle(interval: 50 * ms)
        XCTAssertNil(throttle.due(), "nothing waits")
        XCTAssertNil(throttle.take(now: 1_000 * ms))
        throttle.latest([("state", .string("running"))])
        XCTAssertEqual(throttle.due(), 0, "the first goes whenever asked")
        XCTAssertEqual(render(throttle.take(now: 1_000 * ms)), #"{"state":"running"}"#)
        XCTAssertEqual(throttle.lastSent, 1_000 * ms)

        throttle.latest([("progress", .number(0.1))])
        XCTAssertEqual(throttle.due(), 1_050 * ms)
        XCTAssertNil(throttle.take(now: 1_050 * ms - 1), "a nanosecond early")
        throttle.latest([("progress", .number(0.2))])
        XCTAssertEqual(render(throttle.take(now: 1_050 * ms)), #"{"progress":0.2}"#, "the latest, when due")
        XCTAssertNil(throttle.take(now: 2_000 * ms), "a value goes once")

        throttle.latest([("progress", .number(0.3))])
        XCTAssertEqual(render(throttle.take(now: 2_000 * ms)), #"{"progress":0.3}"#, "after a quiet spell, at once")
    }

    func testIrregularInputGoesOutAtMostOncePerIntervalAlwaysTheLatestAndTheLastInTime() {
        // As the pipe's loop runs: a line offers its value and tries to send; poll wakes at the due
        // time when that comes before the next line. Gaps between lines: bursts, 200 a second, pauses.
        let gaps: [UInt64] = [0, 0, 0, 1, 5, 5, 5, 13, 49, 50, 51, 120, 2, 0, 5]
        var throttle = UpdateThrottle(interval: 50 * ms)
        var offered: [(at: UInt64, progress: Double)] = []
        /// Each update sent, and how many lines had been offered when it went.
        var sent: [(at: UInt64, progress: Double, lines: Int)] = []
        func send(at now: UInt64) {
            guard let fields = throttle.take(now: now) else { return }
            sent.append((now, fields.first { $0.0 == "progress" }?.1.numberValue ?? -1, offered.count))
        }
        var now: UInt64 = 3 * ms
        for line in 1...99 {
            now += gaps[line % gaps.count] * ms
            if let due = throttle.due(), due < now { send(at: due) }
            let progress = Double(line) / 100
            throttle.latest([("progress", .number(progress))])
            offered.append((now, progress))
            send(at: now)
        }
        // The input stays open and quiet: poll wakes for what waits.
        if let due = throttle.due() { send(at: due) }
        XCTAssertNil(throttle.due(), "nothing is left waiting")

        for (earlier, later) in zip(sent, sent.dropFirst()) {
            XCTAssertGreaterThanOrEqual(later.at - earlier.at, 50 * ms, "updates at \(earlier.at / ms) and \(later.at / ms) ms")
        }
        for update in sent {
            XCTAssertEqual(update.progress, offered[update.lines - 1].progress, "at \(update.at / ms) ms: the latest line by then")
        }
        XCTAssertEqual(sent.last?.progress, 0.99, "the last value goes out")
        XCTAssertLessThanOrEqual(sent.last!.at - offered.last!.at, 50 * ms, "within one interval of its line")
        XCTAssertLessThan(sent.count, offered.count / 2, "lines within an interval are merged: \(sent.count) updates")
    }

    func testFieldsMergeANewerValueWinsAndCountsDropAnOlderFraction() {
        var throttle = UpdateThrottle(interval: 50 * ms)
        throttle.latest([("progress", .number(0.5)), ("detail", .string("a"))])
        throttle.latest([("detail", .string("b")), ("title", .string("T"))])
        XCTAssertEqual(render(throttle.take(now: 0)), #"{"progress":0.5,"detail":"b","title":"T"}"#)
        throttle.latest([("progress", .number(0.5))])
        throttle.latest([("completed", .number(3)), ("total", .number(10))])
        XCTAssertEqual(render(throttle.take(now: 50 * ms)), #"{"completed":3,"total":10}"#, "the server derives the fraction from the counts")
    }

    func testAfterAFailedSendNoneGoesForFiveSecondsExceptTheLast() {
        var throttle = UpdateThrottle(interval: 50 * ms)
        throttle.latest([("progress", .number(0.1))])
        XCTAssertNotNil(throttle.take(now: 0))
        throttle.sendFailed(now: 3 * ms)
        throttle.latest([("progress", .number(0.2))])
        XCTAssertEqual(throttle.due(), 5_003 * ms)
        XCTAssertNil(throttle.take(now: 5_003 * ms - 1))
        XCTAssertEqual(throttle.due(retrying: false), 50 * ms, "the end of the input does not wait out the retry")
        XCTAssertEqual(render(throttle.take(now: 50 * ms, retrying: false)), #"{"progress":0.2}"#)
    }

    func testTheTraceWritesNanosecondsAsSecondsWithoutRounding() {
        XCTAssertEqual(ThrottledUpdater.seconds(1_050_000_007), "1.050000007")
        XCTAssertEqual(ThrottledUpdater.seconds(5), "0.000000005")
        XCTAssertEqual(ThrottledUpdater.seconds(86_400_000_000_000), "86400.000000000")
    }
}
