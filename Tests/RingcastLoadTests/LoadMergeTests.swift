import Foundation
import RingcastCore
import RingcastPlatform
import XCTest

@testable import RingcastLoad

/// Runs added up from their --json: counts sum, and percentiles come from the added histograms.
final class LoadMergeTests: XCTestCase {
    /// A run that delivered `latencies` (µs) to `watchers`, as its --json would carry it.
    private func run(_ id: String, latencies: [UInt64], watchers: Int) throws -> LoadResult {
        var result = LoadResult(options: LoadTestOptions(url: ServerURL("http://127.0.0.1:8080")!), run: id)
        for value in latencies { result.histogram.record(value) }
        result.connected = watchers
        result.openAtStart = watchers
        result.published = latencies.count / watchers
        result.matchingPublished = result.published
        result.expected = latencies.count + 7
        result.delivered = latencies.count
        result.deliverySeconds = 2
        result.publishBegan = 1_800_000_000
        // Through the JSON and back, as `ringcast load merge` reads it.
        let text = JSONWriter.encode(result.json)
        return try LoadResult(json: try JSONParser.parse(text), source: id)
    }

    func testMergedPercentilesEqualOneRunOverTheUnionOfTheLatencies() throws {
        // Known inputs on both sides of the exact range (2 048 µs), with a long tail in one run.
        var generator = SplitMix(seed: 42)
        let first: [UInt64] = (0..<3_000).map { _ in 200 + generator.next() % 1_800 }
        let second: [UInt64] = (0..<2_000).map { _ in 900 + generator.next() % 150_000 } + [4_000_000]
        let merged = LoadResult.merge([try run("aaaaaa", latencies: first, watchers: 10), try run("bbbbbb", latencies: second, watchers: 7)])

        var union = LatencyHistogram()
        for value in first + second { union.record(value) }
        for p in [50.0, 90, 99, 99.9] {
            XCTAssertEqual(merged.histogram.percentile(p), union.percentile(p), "p\(p)")
        }
        XCTAssertEqual(merged.histogram.max, 4_000_000)
        XCTAssertEqual(merged.histogram.min, first.min())
        XCTAssertEqual(merged.histogram.count, 5_001)
        XCTAssertEqual(merged.histogram.sum, (first + second).reduce(0, +))
        // Nearest rank over the sorted union: p50 is the 2 501st value; below 2 048 µs a bucket holds one value.
        let sorted = (first + second).sorted()
        XCTAssertEqual(merged.histogram.percentile(50), Percentile.nearestRank(sorted, 50))
        XCTAssertLessThan(Percentile.nearestRank(sorted, 50)!, 2_048, "the exact range: no rounding to hide behind")
        // Not an average of the two runs' percentiles.
        let a = try run("aaaaaa", latencies: first, watchers: 10).histogram.percentile(99)!
        let b = try run("bbbbbb", latencies: second, watchers: 7).histogram.percentile(99)!
        XCTAssertNotEqual(merged.histogram.percentile(99), (a + b) / 2)

        XCTAssertEqual(merged.connected, 17)
        XCTAssertEqual(merged.delivered, 5_001)
        XCTAssertEqual(merged.expected, 5_015)
        XCTAssertEqual(merged.loss, 14)
        XCTAssertEqual(merged.mergedRuns, ["aaaaaa", "bbbbbb"])
        XCTAssertEqual(merged.deliveriesPerSecond!, 5_001.0 / 2, accuracy: 1e-9, "side by side: the runs' rates add")
        XCTAssertTrue(merged.table.contains("merged"), merged.table)
        XCTAssertTrue(merged.html.contains("A merge has no timeline"))

        // A merge of merges is the merge of all.
        let again = LoadResult.merge([
            try LoadResult(json: try JSONParser.parse(JSONWriter.encode(merged.json)), source: "m"), try run("cccccc", latencies: [5], watchers: 1),
        ])
        XCTAssertEqual(again.mergedRuns, ["aaaaaa", "bbbbbb", "cccccc"])
        XCTAssertEqual(again.histogram.count, 5_002)
        XCTAssertEqual(
            again.histogram.percentile(99),
            {
                var h = union
                h.record(5)
                return h.percentile(99)
            }())
    }

    func testAFileWithoutAHistogramOrWithForeignBucketsIsRefusedByName() throws {
        let full = try JSONParser.parse(JSONWriter.encode(try run("aaaaaa", latencies: [3_000, 5], watchers: 1).json))
        guard case .object(var members) = full else { return XCTFail("not an object") }
        members.removeAll { $0.0 == "latencyHistogram" }
        XCTAssertThrowsError(try LoadResult(json: .object(members), source: "old.json")) { error in
            XCTAssertTrue("\(error)".contains("old.json: no \"latencyHistogram\""), "\(error)")
        }
        // 3 001 µs is inside the bucket that starts at 3 000: not a bucket's lowest value.
        members.append(
            (
                "latencyHistogram",
                .object([
                    ("sum", .number(3001)), ("min", .number(3001)), ("max", .number(3001)),
                    ("buckets", .array([.array([.number(3001), .number(1)])])),
                ])
            ))
        XCTAssertThrowsError(try LoadResult(json: .object(members), source: "odd.json")) { error in
            XCTAssertTrue("\(error)".contains("odd.json: its latency buckets"), "\(error)")
        }
    }
}

/// A small seeded generator: the same inputs on every run.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
