import XCTest

@testable import RingcastCore

/// The value types /metrics is made of: they count, add up across service threads, and render as
/// Prometheus text (the rules themselves are checked against a running server in RingcastTests).
final class MetricsTests: XCTestCase {
    func testAHistogramCountsEachValueInTheFirstBucketThatHoldsIt() {
        var histogram = Histogram(bounds: [0.1, 1, 10])
        for value in [0.05, 0.1, 0.5, 3, 30, 1] { histogram.observe(value) }
        XCTAssertEqual(histogram.counts, [2, 2, 1, 1], "a value on a bound belongs to it (le: less or equal)")
        XCTAssertEqual(histogram.cumulativeCounts, [2, 4, 5, 6])
        XCTAssertEqual(histogram.count, 6)
        XCTAssertEqual(histogram.sum, 34.65, accuracy: 1e-9)
    }

    func testHistogramsOfTwoThreadsAddUpToOneThatSawEverything() {
        var first = Histogram(bounds: Histogram.latencySeconds)
        var second = first
        var both = first
        for value in [0.0001, 0.003, 0.2] {
            first.observe(value)
            both.observe(value)
        }
        for value in [0.0004, 7, 100] {
            second.observe(value)
            both.observe(value)
        }
        XCTAssertEqual(first + second, both)
    }

    func testTransportMetricsAddUpInEveryField() {
        var one = TransportMetrics()
        // Every field, whatever its kind, is set from its place in the lists `+` walks.
        for (index, field) in TransportMetrics.counterFields.enumerated() { one[keyPath: field] = index + 1 }
        for field in TransportMetrics.labeledFields { one[keyPath: field]["a"] = 5 }
        for field in TransportMetrics.histogramFields { one[keyPath: field].observe(0.5) }
        let fieldCount = TransportMetrics.counterFields.count + TransportMetrics.labeledFields.count + TransportMetrics.histogramFields.count
        XCTAssertEqual(
            Mirror(reflecting: one).children.count, fieldCount,
            "a field of TransportMetrics is missing from the lists `+` walks: threads' copies would not add it up")

        let two = one + one
        for (index, field) in TransportMetrics.counterFields.enumerated() { XCTAssertEqual(two[keyPath: field], 2 * (index + 1)) }
        for field in TransportMetrics.labeledFields { XCTAssertEqual(two[keyPath: field]["a"], 10) }
        for field in TransportMetrics.histogramFields { XCTAssertEqual(two[keyPath: field].count, 2) }
        XCTAssertEqual(one.merged(with: TransportMetrics()), one)
        XCTAssertEqual(two.webSocketsOpen("a"), 0, "opened and closed alike")
    }

    func testLabelValuesAndHelpAreEscaped() {
        XCTAssertEqual(PrometheusText.escapeLabel(#"a\b"c"# + "\nd"), #"a\\b\"c\nd"#)
        XCTAssertEqual(PrometheusText.escapeHelp("a\\b\nc \"quoted\""), #"a\\b\nc "quoted""#)
        var text = PrometheusText()
        text.histogram(
            "x_seconds", "X.",
            {
                var histogram = Histogram(bounds: [0.5, 2])
                histogram.observe(1)
                return histogram
            }())
        XCTAssertEqual(
            text.text,
            """
            # HELP x_seconds X.
            # TYPE x_seconds histogram
            x_seconds_bucket{le="0.5"} 0
            x_seconds_bucket{le="2"} 1
            x_seconds_bucket{le="+Inf"} 1
            x_seconds_sum 1
            x_seconds_count 1

            """)
    }

    func testTheSnapshotShowsTheStoreAndTheReadinessOfEachCheck() throws {
        let store = TaskStore(epoch: "metricsepoch", retentionSeconds: 1)
        let api = API(store: store)
        try store.update("a", #"{"state":"done"}"#, now: t0)
        try store.update("b", #"{"progress":0.5}"#, now: t0)
        _ = store.runDue(now: t0 + 2000)
        var transport = TransportStatus()
        transport.readiness = [ReadinessStatus(name: "storage", failure: "storage: disk full")]
        let body = text(api.metricsSnapshot(transport: transport).render())
        XCTAssertTrue(body.contains("ringcast_tasks_by_state{state=\"running\"} 1\n"), body)
        XCTAssertTrue(body.contains("ringcast_tasks_by_state{state=\"done\"} 0\n"))
        XCTAssertTrue(body.contains("ringcast_tasks_retired_total 1\n"), "the done task ran out of its retention")
        XCTAssertTrue(body.contains("ringcast_ready{check=\"storage\"} 0\n"))
        XCTAssertTrue(body.contains("ringcast_build_info{version=\"\(RingcastVersion.version)\",protocol=\"\(ProtocolInfo.version)\"} 1\n"))
        XCTAssertTrue(body.contains("ringcast_refusals_total{reason=\"shutdown\"} 0\n"), "every reason has a series from the start")
        XCTAssertFalse(body.contains("ringcast_storage_commit_seconds"), "storage that keeps no count shows none")
    }
}
