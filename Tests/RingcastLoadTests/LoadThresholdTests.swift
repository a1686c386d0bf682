import Foundation
import RingcastPlatform
import XCTest

@testable import RingcastLoad

/// `--fail-if`: the grammar, and which bounds hold for known figures.
final class LoadThresholdTests: XCTestCase {
    private func result(latencies: [UInt64], expected: Int = 0, delivered: Int = 0) -> LoadResult {
        var result = LoadResult(options: LoadTestOptions(url: ServerURL("http://127.0.0.1:9")!), run: "abcdef")
        for value in latencies { result.histogram.record(value) }
        result.expected = expected
        result.delivered = delivered
        return result
    }

    func testBoundsParseWithUnitsAndComparisons() throws {
        let parsed = try LoadThresholds.parse(" p99 > 50ms, loss>=0.5%,failed>0, max<=2s, p50<300us, throughput<1000/s, errors>0")
        XCTAssertEqual(parsed.bounds.map(\.metric), [.p99, .loss, .failed, .max, .p50, .throughput, .errors])
        XCTAssertEqual(parsed.bounds.map(\.comparison), [.above, .atLeast, .above, .atMost, .below, .below, .above])
        XCTAssertEqual(parsed.bounds.map(\.value), [50_000, 0.5, 0, 2_000_000, 300, 1000, 0])
        XCTAssertEqual(parsed.bounds[1].percent, true)
        XCTAssertEqual(parsed.description, "p99>50ms,loss>=0.5%,failed>0,max<=2s,p50<300us,throughput<1000/s,errors>0")
    }

    func testWrongBoundsAreRefusedWithWhatToWrite() {
        for (text, hint) in [
            ("p99>50", "a latency needs its unit"), ("p98>5ms", "unknown metric 'p98'"), ("loss", "no comparison"),
            ("failed>2ms", "failed takes a count"), ("loss>1x", "a count or a share"), ("p99>,loss>0", "is not a number"),
            ("p99>1ms,,loss>0", "empty bound"),
        ] {
            XCTAssertThrowsError(try LoadThresholds.parse(text), text) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains(hint), "\(text): \(message)")
            }
        }
    }

    func testOnlyTheBoundsThatHoldAreNamedWithTheirValues() throws {
        // 1…1000 µs: p50 = 500 µs, p99 = 990 µs, max = 1 ms; 10 of 1000 lost (1 %).
        let run = result(latencies: (1...1000).map(UInt64.init), expected: 1000, delivered: 990)
        let bounds = try LoadThresholds.parse("p99>0.9ms,p50>0.5ms,loss>=1%,loss>10,max>=1ms,failed>0")
        XCTAssertEqual(
            bounds.breached(by: run),
            ["p99>0.9ms (p99 was 0.990 ms)", "loss>=1% (loss was 1.000 %)", "max>=1ms (max was 1.00 ms)"])
        XCTAssertEqual(try LoadThresholds.parse("p99>1ms,loss>10").breached(by: run), [])
    }

    func testALatencyBoundCannotHoldForARunThatDeliveredNothingButLossCatchesIt() throws {
        let empty = result(latencies: [], expected: 50, delivered: 0)
        XCTAssertEqual(try LoadThresholds.parse("p99>1ms").breached(by: empty), [])
        XCTAssertEqual(try LoadThresholds.parse("loss>0").breached(by: empty), ["loss>0 (loss was 50)"])
    }
}
