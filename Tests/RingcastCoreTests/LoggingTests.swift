import XCTest

@testable import RingcastCore

/// Log lines for people (unchanged) and for collectors (one JSON object per line).
final class LoggingTests: XCTestCase {
    func testTextLinesAreUnchangedAndJSONLinesCarryTimeLevelMessageAndFields() {
        let record = LogRecord(
            level: .warning, message: "refused a \"WebSocket\"",
            fields: [("peer", .string("10.0.0.7")), ("level", .string("ignored")), ("n", .number(3))])
        XCTAssertEqual(record.text, #"[warning] refused a "WebSocket""#, "people read the message; fields are for collectors")
        XCTAssertEqual(
            record.jsonLine(unixMilliseconds: 1_764_489_600_123),
            #"{"time":"2025-11-30T08:00:00.123Z","level":"warning","message":"refused a \"WebSocket\"","peer":"10.0.0.7","n":3}"#)
    }

    func testISOTimesAcrossLeapDaysAndCenturies() {
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: 0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: 951_782_400_000), "2000-02-29T00:00:00.000Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: 4_107_542_399_999), "2100-02-28T23:59:59.999Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: -1), "1969-12-31T23:59:59.999Z")
    }

    func testALoggerWritesItsFormat() {
        // @unchecked Sendable: the logger calls its destination on this thread only.
        final class Lines: @unchecked Sendable { var items: [String] = [] }
        let lines = Lines()
        let logger = Logger(level: .info, destination: .lines(.json, now: { 0 }) { lines.items.append($0) })
        logger.debug("hidden")
        logger.info("listening", fields: [("port", .number(8080))])
        XCTAssertEqual(lines.items, [#"{"time":"1970-01-01T00:00:00.000Z","level":"info","message":"listening","port":8080}"#])
    }
}
