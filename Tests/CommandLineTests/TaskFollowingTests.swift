import XCTest

@testable import ringcast

/// What `wait` and `watch` read and decide without a server: durations as people type them, and
/// the exit status each end of a task gives.
final class TaskFollowingTests: XCTestCase {
    func testDurationsAsPeopleTypeThem() {
        XCTAssertEqual(parseDuration("90"), 90)
        XCTAssertEqual(parseDuration("1.5"), 1.5)
        XCTAssertEqual(parseDuration("90s"), 90)
        XCTAssertEqual(parseDuration("10m"), 600)
        XCTAssertEqual(parseDuration("1h30m"), 5400)
        XCTAssertEqual(parseDuration("2d"), 172_800)
        for wrong in ["", "soon", "10x", "m", "1h30", "-5", "5 m", "nan", "inf"] {
            XCTAssertNil(parseDuration(wrong), "'\(wrong)' is no duration")
        }
    }

    func testEachEndHasItsOwnStatus() {
        XCTAssertEqual(EndStatus.of(state: "done"), 0)
        XCTAssertEqual(EndStatus.of(state: "failed"), 1)
        XCTAssertEqual(EndStatus.of(state: "cancelled"), 3)
        for going in ["running", "paused", "stalled"] { XCTAssertNil(EndStatus.of(state: going)) }
        let statuses: Set<Int32> = [EndStatus.reached, EndStatus.failed, 2, EndStatus.cancelled, EndStatus.timedOut, EndStatus.endedOtherwise, 130]
        XCTAssertEqual(statuses.count, 7, "every outcome a status of its own")
    }
}
