import Foundation
import RingcastClient
import RingcastCore

/// A local server's CPU time and memory over a run, read from /proc.
package struct ServerFigures: Sendable {
    package var pid: Int32
    /// `schedstat` (nanoseconds, every thread) or `stat` (utime + stime in clock ticks).
    package var cpuSource: String
    /// CPU time from the start of publishing to the end of the drain (connecting excluded).
    package var cpuSeconds: Double
    /// CPU time spent while the watchers connected.
    package var connectCPUSeconds: Double
    /// VmRSS at the end, with every watcher still connected.
    package var residentKiB: Int
    /// VmRSS before the first watcher connected.
    package var residentBeforeKiB: Int
}

/// Watchers the run closed and reopened (`--churn`, `--storm`), and how they came back.
package struct ReconnectFigures: Sendable {
    /// Watchers the run closed.
    package var closed = 0
    /// Of those, how many were live again (their resume snapshot in) by the end.
    package var back = 0
    /// Closed and not back by the end of the drain.
    package var stillAway = 0
    /// Reconnects that failed (refused, or closed before their snapshot) and were tried again.
    package var failedAttempts = 0
    /// Each watcher's time from its close to its resume snapshot, in microseconds.
    package var backTimes = LatencyHistogram()
    /// Updates the returning watchers held by their resume snapshot instead of one by one.
    package var resumedUpdates = 0
    /// With `--storm`: the watchers it closed, and the time from then until every one was live
    /// again (nil when some were not).
    package var stormWatchers: Int?
    package var stormSeconds: Double?

    package func backMilliseconds(_ p: Double) -> Double? { backTimes.percentile(p).map { Double($0) / 1000 } }
}

/// The figures of one load run: what the table, `--json` and `--report` show.
package struct LoadResult: Sendable {
    package let options: LoadTestOptions
    package let run: String
    package var connected = 0
    package var failed = 0
    package var timedOut = 0
    /// Watchers that were open and closed before the end.
    package var dropped = 0
    package var connectErrors: [String: Int] = [:]
    package var connectSeconds = 0.0
    /// Watchers open when publishing began: every matching update should reach each of them.
    package var openAtStart = 0
    package var published = 0
    /// Published updates whose task the watchers' patterns match.
    package var matchingPublished = 0
    package var publishSeconds = 0.0
    package var expected = 0
    package var delivered = 0
    /// From the start of publishing to the last delivery.
    package var deliverySeconds = 0.0
    package var runSeconds = 0.0
    /// From the start of publishing to the end of the drain: the window CPU times are taken over.
    package var measuredSeconds = 0.0
    /// This load process's own CPU time over that window.
    package var loadCPUSeconds = 0.0
    /// Each watcher thread's CPU time over that window (from its schedstat), in shard order.
    package var watcherThreadCPUSeconds: [Double]?
    /// The publisher thread's CPU time (it runs only while publishing).
    package var publisherThreadCPUSeconds: Double?
    package var histogram = LatencyHistogram()
    package var timeline = LatencyTimeline(origin: 0)
    /// Where publishing began on the timeline's clock, in seconds.
    package var timelineOffset = 0.0
    /// Every frame the watchers received, hello and snapshot included.
    package var frames = 0
    /// Frames that carried at least one update of this run.
    package var dataFrames = 0
    /// Snapshots after the first: a watcher that fell behind was sent the latest state instead.
    package var resyncs = 0
    /// Markers of other runs, or with numbers this run never sent.
    package var foreignMarkers = 0
    package var errorFrames = 0
    package var firstErrorFrame: String?
    /// Watchers that saw the last matching update (delivered, or in a resync snapshot).
    package var finalValueSeenBy = 0
    package var perWatcherMin = 0
    package var perWatcherMax = 0
    package var interrupted = false
    package var server: ServerFigures?
    /// With `--latest-value`: per update and watcher, the time until the watcher held its value or
    /// a newer one of its task.
    package var latestValue: LatencyHistogram?
    /// With `--latest-value`: (watcher, task) pairs that never held their task's last update.
    package var staleAtEnd: Int?
    /// When publishing began, in Unix seconds (wall clock): how runs on several machines line up.
    package var publishBegan: Double?
    /// With `--start-at`: how long after that time publishing began (connecting took longer).
    package var startLateSeconds: Double?
    /// With `--churn` or `--storm`.
    package var reconnects: ReconnectFigures?
    /// The runs a merge added up (`ringcast load merge`); empty for one run.
    package var mergedRuns: [String] = []

    package init(options: LoadTestOptions, run: String) {
        self.options = options
        self.run = run
    }

    /// Updates that neither arrived nor were held by a returning watcher's resume snapshot.
    package var loss: Int { max(0, expected - delivered - (reconnects?.resumedUpdates ?? 0)) }
    /// The `--fail-if` bounds that held, each named with the value that broke it; empty: passed.
    package var breaches: [String] { options.failIf?.breached(by: self) ?? [] }
    package var lossPercent: Double { expected > 0 ? Double(loss) / Double(expected) * 100 : 0 }
    package var deliveriesPerSecond: Double? { deliverySeconds > 0 && delivered > 0 ? Double(delivered) / deliverySeconds : nil }
    package var publishRate: Double? { publishSeconds > 0 && published > 0 ? Double(published) / publishSeconds : nil }
    package var eventsPerFrame: Double? { dataFrames > 0 ? Double(delivered) / Double(dataFrames) : nil }

    /// Latency percentiles in milliseconds (p50, p90, p99, p99.9), then max.
    package var latencyMilliseconds: [(label: String, value: Double?)] {
        Percentile.reported.map { p in ("p" + LoadResult.trim(p), histogram.percentile(p).map { Double($0) / 1000 }) }
            + [("max", histogram.count > 0 ? Double(histogram.max) / 1000 : nil)]
    }

    /// Server CPU milliseconds per 1000 deliveries (which is also microseconds per delivery).
    package var cpuMillisecondsPer1000: Double? {
        guard let server, delivered > 0 else { return nil }
        return server.cpuSeconds * 1e6 / Double(delivered)
    }

    /// Deliveries per second of server CPU time.
    package var deliveriesPerCPUSecond: Double? {
        guard let server, server.cpuSeconds > 0, delivered > 0 else { return nil }
        return Double(delivered) / server.cpuSeconds
    }

    /// Server memory added per connected watcher, in KiB.
    package var residentPerWatcherKiB: Double? {
        guard let server, connected > 0 else { return nil }
        return Double(server.residentKiB - server.residentBeforeKiB) / Double(connected)
    }

    /// Latest-value latency percentiles in milliseconds, then max (with `--latest-value`).
    package var latestValueMilliseconds: [(label: String, value: Double?)]? {
        guard let latestValue else { return nil }
        return Percentile.reported.map { p in ("p" + LoadResult.trim(p), latestValue.percentile(p).map { Double($0) / 1000 }) }
            + [("max", latestValue.count > 0 ? Double(latestValue.max) / 1000 : nil)]
    }

    /// Server CPU microseconds per published update (what merging updates saves shows here).
    package var cpuMicrosecondsPerPublished: Double? {
        guard let server, published > 0 else { return nil }
        return server.cpuSeconds * 1e6 / Double(published)
    }

    static func trim(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    // MARK: The table

    package var table: String {
        let o = options
        var lines: [(String, String)] = []
        let errors = connectErrors.sorted { $0.value > $1.value }.prefix(3).map { "\($0.value)× \($0.key)" }.joined(separator: "; ")
        lines.append(
            (
                "watchers",
                "connected \(group(connected)) of \(group(o.clients)), failed \(group(failed))"
                    + (timedOut > 0 ? " (\(group(timedOut)) timed out)" : "") + ", dropped during the run \(group(dropped))"
                    + ", connecting took \(fixed(connectSeconds, 2)) s" + (errors.isEmpty ? "" : " — \(errors)")
            ))
        lines.append(
            (
                "published",
                "\(group(published)) updates in \(fixed(publishSeconds, 2)) s"
                    + (publishRate.map { " = \(group(Int($0.rounded())))/s" } ?? "")
                    + " over \(o.publish.rawValue)" + (o.publish == .http ? "" : " (\(o.batchSize) per \(o.publish == .ws ? "frame" : "request"))")
                    + ", \(o.tasks) task\(o.tasks == 1 ? "" : "s")"
                    + (matchingPublished != published ? ", \(group(matchingPublished)) matching --watch" : "")
            ))
        lines.append(
            (
                "expected",
                "\(group(expected)) deliveries "
                    + (mergedRuns.isEmpty
                        ? "(\(group(matchingPublished)) × \(group(openAtStart)) watchers)"
                        : "(each run's own updates × its own watchers, added)")
            ))
        lines.append(("delivered", "\(group(delivered))" + (o.clients > 1 ? " (per watcher \(group(perWatcherMin))…\(group(perWatcherMax)))" : "")))
        lines.append(
            ("loss", "\(group(loss)) (\(fixed(lossPercent, 3)) %)" + (resyncs > 0 ? "; \(group(resyncs)) resync snapshots (conflated)" : "")))
        lines.append(("deliveries/s", deliveriesPerSecond.map { group(Int($0.rounded())) } ?? "–"))
        let latency = latencyMilliseconds.map { "\($0.label) \($0.value.map { milliseconds($0) } ?? "–")" }.joined(separator: "  ")
        lines.append(("latency (ms)", latency))
        if let latest = latestValueMilliseconds, let latestValue {
            lines.append(
                (
                    "latest value (ms)",
                    latest.map { "\($0.label) \($0.value.map { milliseconds($0) } ?? "–")" }.joined(separator: "  ")
                        + " — until each watcher held each update or a newer one of its task (\(group(Int(latestValue.count))) updates × watchers)"
                        + (staleAtEnd.map { $0 > 0 ? "; \(group($0)) watcher × task pairs never held their task's last update" : "" } ?? "")
                ))
        }
        lines.append(
            (
                "frames",
                "\(group(dataFrames)) with updates, \(eventsPerFrame.map { fixed($0, 2) } ?? "–") updates per frame; \(group(frames)) frames in all"
            ))
        if published > 0 {
            lines.append(("final value", "the last update seen by \(group(finalValueSeenBy)) of \(group(openAtStart)) watchers"))
        }
        if let server {
            let perDelivery = cpuMillisecondsPer1000.map { "\(fixed($0, 3)) ms per 1000 deliveries" } ?? "no deliveries"
            let perSecond = deliveriesPerCPUSecond.map { ", \(group(Int($0.rounded()))) deliveries per CPU-second" } ?? ""
            let perPublished = cpuMicrosecondsPerPublished.map { ", \(fixed($0, 1)) µs per published update" } ?? ""
            lines.append(
                (
                    "server CPU",
                    "\(fixed(server.cpuSeconds, 3)) s while publishing = \(perDelivery)\(perSecond)\(perPublished) (pid \(server.pid), \(server.cpuSource)); \(fixed(server.connectCPUSeconds, 3)) s while connecting"
                ))
            lines.append(
                (
                    "server memory",
                    "RSS \(mebibytes(server.residentKiB)) MiB (\(mebibytes(server.residentBeforeKiB)) MiB before the watchers)"
                        + (residentPerWatcherKiB.map { ", \(fixed($0, 2)) KiB per watcher" } ?? "")
                ))
        }
        if measuredSeconds > 0 {
            lines.append(
                (
                    "load generator",
                    "\(fixed(loadCPUSeconds, 2)) s CPU in \(fixed(measuredSeconds, 2)) s (\(Int((loadCPUSeconds / measuredSeconds * 100).rounded())) % of one core"
                        + (mergedRuns.isEmpty ? ")" : ", all runs together)")
                        // Each watcher thread can use one core; near that, the tool set the figures.
                        + (mergedRuns.isEmpty && loadCPUSeconds / measuredSeconds > 0.9 * Double(o.threads) ? ": it was the bottleneck" : "")
                        + threadShares
                ))
        }
        if let r = reconnects {
            let scenario =
                o.storm
                ? "storm: \(group(r.stormWatchers ?? 0)) watchers closed at once, "
                    + (r.stormSeconds.map { "all live again after \(fixed($0, 2)) s" } ?? "not all back by the end")
                : "churn: \(LoadResult.trim(o.churnPerSecond)) a second, \(group(r.closed)) closed"
            let times = ["p50", "p99", "max"].map { label -> String in
                let value =
                    label == "max" ? (r.backTimes.count > 0 ? Double(r.backTimes.max) / 1000 : nil) : r.backMilliseconds(label == "p50" ? 50 : 99)
                return "\(label) \(value.map { milliseconds($0) } ?? "–")"
            }.joined(separator: "  ")
            lines.append(
                (
                    "reconnects",
                    "\(scenario); \(group(r.back)) back (\(times) ms from close to resume snapshot, the dashboard's back-off included)"
                        + (r.stillAway > 0 ? ", \(group(r.stillAway)) still away at the end" : "")
                        + (r.failedAttempts > 0 ? ", \(group(r.failedAttempts)) attempts failed" : "")
                        + "; \(group(r.resumedUpdates)) updates came in resume snapshots (not lost, not deliveries)"
                ))
        }
        if foreignMarkers > 0 { lines.append(("note", "\(group(foreignMarkers)) updates of other runs were ignored")) }
        if errorFrames > 0 { lines.append(("errors", "\(errorFrames) error events, first: \(firstErrorFrame ?? "")")) }
        if interrupted { lines.append(("note", "interrupted: figures cover the run until then")) }
        if let late = startLateSeconds, late > 0.05 {
            lines.append(("note", "publishing began \(fixed(late, 2)) s after --start-at: connecting took longer"))
        }
        if !mergedRuns.isEmpty {
            lines.append(
                (
                    "merged",
                    "\(mergedRuns.count) runs (\(mergedRuns.joined(separator: ", "))): counts added, percentiles from the added histograms, "
                        + "durations the longest run's"
                ))
        }
        if let failIf = o.failIf {
            let breaches = self.breaches
            lines.append(("verdict", breaches.isEmpty ? "passed --fail-if \(failIf)" : "FAILED --fail-if: " + breaches.joined(separator: "; ")))
        }
        let width = lines.map(\.0.count).max() ?? 0
        let header =
            "ringcast load \(o.url.hostHeader): \(group(o.clients)) watchers (watch \(o.watch)"
            + (o.threads > 1 ? ", on \(o.threads) threads" : "")
            + (o.sourceAddresses.isEmpty ? "" : ", from \(o.sourceAddresses.joined(separator: ","))") + "), "
            + (o.messages == 0
                ? "idle for \(o.duration.map { fixed($0, 1) } ?? "0") s"
                : "\(o.rate > 0 ? "\(LoadResult.trim(o.rate)) updates/s" : "as fast as possible")"
                    + (o.messages.map { ", \(group($0)) updates" } ?? "") + (o.duration.map { ", \(LoadResult.trim($0)) s" } ?? ""))
            + ", detail \(max(o.payloadBytes, LoadMarker.detail(run: run, number: 0, length: 0).count)) bytes"
        return ([header] + lines.map { "  " + $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }).joined(separator: "\n")
    }

    /// "; watcher threads 48 %, 47 %; publisher 20 %": each thread's share of a core.
    private var threadShares: String {
        guard measuredSeconds > 0, let watchers = watcherThreadCPUSeconds else { return "" }
        func share(_ seconds: Double) -> String { "\(Int((seconds / measuredSeconds * 100).rounded())) %" }
        return "; watcher thread\(watchers.count == 1 ? "" : "s") " + watchers.map(share).joined(separator: ", ")
            + (publisherThreadCPUSeconds.map { "; publisher \(share($0))" } ?? "")
    }

    // MARK: JSON

    package var json: JSONValue {
        let o = options
        func number(_ value: Double?) -> JSONValue { value.map { .number(($0 * 1000).rounded() / 1000) } ?? .null }
        func count(_ value: Int) -> JSONValue { .number(Double(value)) }
        var members: [(String, JSONValue)] = [
            ("url", .string("http://\(o.url.hostHeader)")),
            ("run", .string(run)),
            ("clients", count(o.clients)),
            ("threads", count(o.threads)),
            ("sourceAddresses", .array(o.sourceAddresses.map { .string($0) })),
            ("rate", .number(o.rate)),
            ("duration", number(o.duration)),
            ("messages", o.messages.map(count) ?? .null),
            ("payloadBytes", count(o.payloadBytes)),
            ("watch", .string(o.watch)),
            ("tasks", count(o.tasks)),
            ("publish", .string(o.publish.rawValue)),
            ("batchSize", count(o.batchSize)),
            ("connected", count(connected)),
            ("failed", count(failed)),
            ("timedOut", count(timedOut)),
            ("dropped", count(dropped)),
            ("connectSeconds", number(connectSeconds)),
            ("openAtStart", count(openAtStart)),
            ("published", count(published)),
            ("matchingPublished", count(matchingPublished)),
            ("publishSeconds", number(publishSeconds)),
            ("publishRate", number(publishRate)),
            ("expected", count(expected)),
            ("delivered", count(delivered)),
            ("loss", count(loss)),
            ("lossPercent", number(lossPercent)),
            ("deliveriesPerSecond", number(deliveriesPerSecond)),
            ("deliverySeconds", number(deliverySeconds)),
            ("runSeconds", number(runSeconds)),
            (
                "latencyMs",
                .object(
                    latencyMilliseconds.map { ($0.label, number($0.value)) }
                        + [("mean", number(histogram.mean.map { $0 / 1000 }))])
            ),
            ("frames", count(frames)),
            ("dataFrames", count(dataFrames)),
            ("eventsPerFrame", number(eventsPerFrame)),
            ("resyncs", count(resyncs)),
            ("finalValueSeenBy", count(finalValueSeenBy)),
            ("perWatcherMin", count(perWatcherMin)),
            ("perWatcherMax", count(perWatcherMax)),
            ("foreignMarkers", count(foreignMarkers)),
            ("errorFrames", count(errorFrames)),
            ("measuredSeconds", number(measuredSeconds)),
            ("loadCpuSeconds", number(loadCPUSeconds)),
            ("watcherThreadCpuSeconds", watcherThreadCPUSeconds.map { .array($0.map(number)) } ?? .null),
            ("publisherThreadCpuSeconds", number(publisherThreadCPUSeconds)),
            ("interrupted", .bool(interrupted)),
        ]
        members.append(("publishBegan", publishBegan.map { .number(($0 * 1000).rounded() / 1000) } ?? .null))
        if let startAt = o.startAt { members.append(("startAt", .number(startAt))) }
        if !mergedRuns.isEmpty { members.append(("runs", .array(mergedRuns.map { .string($0) }))) }
        members.append(("latencyHistogram", LoadResult.encode(histogram)))
        if let r = reconnects {
            var figures: [(String, JSONValue)] = [
                ("churnPerSecond", .number(o.churnPerSecond)),
                ("storm", .bool(o.storm)),
                ("closed", count(r.closed)),
                ("back", count(r.back)),
                ("stillAway", count(r.stillAway)),
                ("failedAttempts", count(r.failedAttempts)),
                ("resumedUpdates", count(r.resumedUpdates)),
                (
                    "backMs",
                    .object([
                        ("p50", number(r.backMilliseconds(50))), ("p99", number(r.backMilliseconds(99))),
                        ("max", number(r.backTimes.count > 0 ? Double(r.backTimes.max) / 1000 : nil)),
                    ])
                ),
                ("backHistogram", LoadResult.encode(r.backTimes)),
            ]
            if let watchers = r.stormWatchers {
                figures.append(("stormWatchers", count(watchers)))
                figures.append(("allLiveSeconds", number(r.stormSeconds)))
            }
            members.append(("reconnects", .object(figures)))
        }
        if let failIf = o.failIf {
            members.append(("failIf", .string(failIf.description)))
            members.append(("breached", .array(breaches.map { .string($0) })))
        }
        if let latest = latestValueMilliseconds, let latestValue {
            members.append(
                (
                    "latestValueLatencyMs",
                    .object(
                        latest.map { ($0.label, number($0.value)) }
                            + [("mean", number(latestValue.mean.map { $0 / 1000 }))])
                ))
            members.append(("latestValueCount", count(Int(latestValue.count))))
            members.append(("staleAtEnd", staleAtEnd.map(count) ?? .null))
        }
        if !connectErrors.isEmpty {
            members.append(("connectErrors", .object(connectErrors.sorted { $0.value > $1.value }.map { ($0.key, count($0.value)) })))
        }
        if let server {
            members.append(
                (
                    "server",
                    .object([
                        ("pid", count(Int(server.pid))),
                        ("cpuSource", .string(server.cpuSource)),
                        ("cpuSeconds", .number((server.cpuSeconds * 1e6).rounded() / 1e6)),
                        ("connectCpuSeconds", .number((server.connectCPUSeconds * 1e6).rounded() / 1e6)),
                        ("cpuMsPer1000Deliveries", number(cpuMillisecondsPer1000)),
                        ("deliveriesPerCpuSecond", number(deliveriesPerCPUSecond)),
                        ("cpuUsPerPublished", number(cpuMicrosecondsPerPublished)),
                        ("rssKiB", count(server.residentKiB)),
                        ("rssBeforeKiB", count(server.residentBeforeKiB)),
                        ("rssPerWatcherKiB", number(residentPerWatcherKiB)),
                    ])
                ))
        }
        return .object(members)
    }

    /// The exact histogram, so that runs can be added (`ringcast load merge`): every non-empty
    /// bucket as [its lowest value, count], in microseconds, with the exact sum, min and max.
    static func encode(_ histogram: LatencyHistogram) -> JSONValue {
        .object([
            ("unit", .string("us")),
            ("count", .number(Double(histogram.count))),
            ("sum", .number(Double(histogram.sum))),
            ("min", .number(Double(histogram.count > 0 ? histogram.min : 0))),
            ("max", .number(Double(histogram.max))),
            ("buckets", .array(histogram.nonEmptyBuckets.map { .array([.number(Double($0.lower)), .number(Double($0.count))]) })),
        ])
    }

    // MARK: The HTML report

    /// A self-contained page: the table, an SVG latency histogram and latency over time.
    package var html: String {
        let title = "ringcast load — \(options.url.hostHeader), \(options.clients) watchers"
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <title>\(escape(title))</title>
            <style>
            body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #1d2430; }
            pre { background: #f4f6f8; padding: 1em; white-space: pre-wrap; font-size: 12px; }
            svg { background: #fff; border: 1px solid #d8dde3; }
            svg text { font: 11px system-ui, sans-serif; fill: #46505c; }
            .bar { fill: #3b82c4; } .p50 { stroke: #2a9d4b; } .p99 { stroke: #d9822b; } .max { stroke: #c0392b; }
            .verdict { padding: .6em 1em; font-weight: 600; border-radius: 4px; }
            .verdict.passed { background: #e3f4e8; color: #1b5e2f; } .verdict.failed { background: #fbe4e1; color: #8c1f12; }
            .axis { stroke: #8a949e; } .grid { stroke: #eceff2; }
            .legend span { display: inline-block; margin-right: 1.5em; }
            .legend i { display: inline-block; width: 1.5em; height: 3px; vertical-align: middle; margin-right: .4em; }
            </style>
            </head>
            <body>
            <h1>\(escape(title))</h1>
            \(verdictHTML)<pre>\(escape(table))</pre>
            <h2>Latency histogram</h2>
            <p>Deliveries by latency from publish to delivery (logarithmic bins); the lines mark p50 and p99.</p>
            \(histogramSVG())
            <h2>Latency over time</h2>
            <p class="legend"><span><i style="background:#2a9d4b"></i>p50</span><span><i style="background:#d9822b"></i>p99</span><span><i style="background:#c0392b"></i>max</span> per 100 ms of delivery time (more when the run is long), from the start of publishing.</p>
            \(timelineSVG())
            <h2>Deliveries per second over time</h2>
            \(throughputSVG())
            </body>
            </html>

            """
    }

    /// A banner at the top of the page when `--fail-if` was given: which bounds held, or that none did.
    private var verdictHTML: String {
        guard let failIf = options.failIf else { return "" }
        let breaches = self.breaches
        if breaches.isEmpty {
            return "<p class=\"verdict passed\">Passed: none of the bounds --fail-if \(escape(failIf.description)) held.</p>\n"
        }
        return "<p class=\"verdict failed\">Failed --fail-if: \(breaches.map(escape).joined(separator: "; "))</p>\n"
    }

    private func histogramSVG() -> String {
        let width = 940.0
        let height = 300.0
        let left = 60.0
        let bottom = 40.0
        let top = 10.0
        let right = 20.0
        guard histogram.count > 0 else { return "<p>No deliveries.</p>" }
        let low = max(1.0, Double(histogram.min))
        let high = max(low * 1.01, Double(histogram.max) + 1)
        let binCount = 60
        let ratio = pow(high / low, 1 / Double(binCount))
        var bins = Array(repeating: 0.0, count: binCount)
        for bucket in histogram.nonEmptyBuckets {
            let middle = max(low, (Double(bucket.lower) + Double(bucket.upper)) / 2)
            let bin = min(binCount - 1, max(0, Int(log(middle / low) / log(ratio))))
            bins[bin] += Double(bucket.count)
        }
        let peak = bins.max() ?? 1
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let x = { (value: Double) in left + log(max(low, value) / low) / log(high / low) * plotWidth }
        var svg =
            "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"latency histogram\">\n"
        svg += line(left, top + plotHeight, left + plotWidth, top + plotHeight, "axis") + line(left, top, left, top + plotHeight, "axis")
        for (index, value) in bins.enumerated() where value > 0 {
            let x0 = left + Double(index) / Double(binCount) * plotWidth
            let barHeight = value / peak * plotHeight
            svg +=
                "<rect class=\"bar\" x=\"\(f(x0 + 0.5))\" y=\"\(f(top + plotHeight - barHeight))\" width=\"\(f(plotWidth / Double(binCount) - 1))\" height=\"\(f(barHeight))\"><title>\(group(Int(value))) deliveries around \(milliseconds(low * pow(ratio, Double(index) + 0.5) / 1000)) ms</title></rect>\n"
        }
        for tick in logTicks(low, high) {
            let position = x(tick)
            svg += line(position, top + plotHeight, position, top + plotHeight + 5, "axis")
            svg += "<text x=\"\(f(position))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\">\(milliseconds(tick / 1000))</text>\n"
        }
        svg += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 4))\" text-anchor=\"middle\">latency (ms)</text>\n"
        svg += "<text x=\"\(f(left - 8))\" y=\"\(f(top + 10))\" text-anchor=\"end\">\(group(Int(peak)))</text>\n"
        svg += "<text x=\"\(f(left - 8))\" y=\"\(f(top + plotHeight))\" text-anchor=\"end\">0</text>\n"
        for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
            if let value = histogram.percentile(p) {
                let position = x(Double(value))
                svg +=
                    "<line class=\"\(name)\" x1=\"\(f(position))\" y1=\"\(f(top))\" x2=\"\(f(position))\" y2=\"\(f(top + plotHeight))\" stroke-width=\"2\" stroke-dasharray=\"4 3\"/>\n"
                svg += "<text x=\"\(f(position + 4))\" y=\"\(f(top + 12))\">\(name) \(milliseconds(Double(value) / 1000))</text>\n"
            }
        }
        return svg + "</svg>"
    }

    /// The timeline's slots merged so a plot has at most `limit` points: (seconds, slot).
    private func mergedSlots(limit: Int = 600) -> [(seconds: Double, slot: LatencyTimeline.Slot, width: Double)] {
        let slots = timeline.slots
        guard !slots.isEmpty else { return [] }
        let factor = max(1, (slots.count + limit - 1) / limit)
        let slotSeconds = Double(LatencyTimeline.slotNanoseconds) / 1e9
        return stride(from: 0, to: slots.count, by: factor).map { start in
            var merged = slots[start]
            for index in (start + 1)..<min(slots.count, start + factor) { merged.merge(slots[index]) }
            return (Double(start) * slotSeconds - timelineOffset, merged, Double(factor) * slotSeconds)
        }
    }

    private func timelineSVG() -> String {
        if !mergedRuns.isEmpty { return LoadResult.noTimeline }
        let points = mergedSlots().filter { $0.slot.count > 0 }
        guard !points.isEmpty else { return "<p>No deliveries.</p>" }
        let width = 940.0
        let height = 300.0
        let left = 60.0
        let bottom = 40.0
        let top = 10.0
        let right = 20.0
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let t0 = min(0, points.first!.seconds)
        let t1 = max(points.last!.seconds + points.last!.width, t0 + 0.1)
        let low = max(1.0, Double(points.compactMap { $0.slot.percentile(50) }.min() ?? 1) * 0.8)
        let high = max(low * 2, Double(points.map { $0.slot.max }.max() ?? 1) * 1.2)
        let x = { (t: Double) in left + (t - t0) / (t1 - t0) * plotWidth }
        let y = { (v: Double) in top + plotHeight - log(max(low, v) / low) / log(high / low) * plotHeight }
        var svg =
            "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"latency over time\">\n"
        for tick in logTicks(low, high) {
            svg += line(left, y(tick), left + plotWidth, y(tick), "grid")
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(y(tick) + 4))\" text-anchor=\"end\">\(milliseconds(tick / 1000))</text>\n"
        }
        svg += line(left, top + plotHeight, left + plotWidth, top + plotHeight, "axis") + line(left, top, left, top + plotHeight, "axis")
        for tick in linearTicks(t0, t1) {
            svg +=
                "<text x=\"\(f(x(tick)))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\">\(LoadResult.trim((tick * 100).rounded() / 100))</text>\n"
        }
        svg +=
            "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 4))\" text-anchor=\"middle\">seconds since publishing began; latency (ms, log scale)</text>\n"
        for (name, value) in [
            ("max", { (s: LatencyTimeline.Slot) in Double(s.max) }),
            ("p99", { (s: LatencyTimeline.Slot) in Double(s.percentile(99) ?? 0) }),
            ("p50", { (s: LatencyTimeline.Slot) in Double(s.percentile(50) ?? 0) }),
        ] {
            let path = points.map { "\(f(x($0.seconds + $0.width / 2))),\(f(y(value($0.slot))))" }.joined(separator: " ")
            svg += "<polyline class=\"\(name)\" fill=\"none\" stroke-width=\"1.5\" points=\"\(path)\"/>\n"
        }
        return svg + "</svg>"
    }

    private func throughputSVG() -> String {
        if !mergedRuns.isEmpty { return LoadResult.noTimeline }
        let points = mergedSlots()
        guard !points.isEmpty, points.contains(where: { $0.slot.count > 0 }) else { return "<p>No deliveries.</p>" }
        let width = 940.0
        let height = 200.0
        let left = 60.0
        let bottom = 40.0
        let top = 10.0
        let right = 20.0
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let t0 = min(0, points.first!.seconds)
        let t1 = max(points.last!.seconds + points.last!.width, t0 + 0.1)
        let rates = points.map { Double($0.slot.count) / $0.width }
        let peak = max(1, rates.max() ?? 1)
        let x = { (t: Double) in left + (t - t0) / (t1 - t0) * plotWidth }
        let y = { (v: Double) in top + plotHeight - v / peak * plotHeight }
        var svg =
            "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"deliveries per second over time\">\n"
        svg += line(left, top + plotHeight, left + plotWidth, top + plotHeight, "axis") + line(left, top, left, top + plotHeight, "axis")
        svg += "<text x=\"\(f(left - 6))\" y=\"\(f(top + 10))\" text-anchor=\"end\">\(group(Int(peak)))</text>\n"
        svg += "<text x=\"\(f(left - 6))\" y=\"\(f(top + plotHeight))\" text-anchor=\"end\">0</text>\n"
        for tick in linearTicks(t0, t1) {
            svg +=
                "<text x=\"\(f(x(tick)))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\">\(LoadResult.trim((tick * 100).rounded() / 100))</text>\n"
        }
        svg +=
            "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 4))\" text-anchor=\"middle\">seconds since publishing began; deliveries per second</text>\n"
        let path = zip(points, rates).map { "\(f(x($0.0.seconds + $0.0.width / 2))),\(f(y($0.1)))" }.joined(separator: " ")
        svg += "<polyline class=\"p50\" fill=\"none\" stroke-width=\"1.5\" points=\"\(path)\"/>\n"
        return svg + "</svg>"
    }

    static let noTimeline = "<p>A merge has no timeline: each run's --report shows its own.</p>"

    private func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, _ cls: String) -> String {
        "<line class=\"\(cls)\" x1=\"\(f(x1))\" y1=\"\(f(y1))\" x2=\"\(f(x2))\" y2=\"\(f(y2))\"/>\n"
    }

    /// 1-2-5 steps between `low` and `high` (microseconds).
    private func logTicks(_ low: Double, _ high: Double) -> [Double] {
        var ticks: [Double] = []
        var decade = pow(10, floor(log10(low)))
        while decade <= high {
            for step in [1.0, 2.0, 5.0] where decade * step >= low && decade * step <= high { ticks.append(decade * step) }
            decade *= 10
        }
        return ticks
    }

    private func linearTicks(_ low: Double, _ high: Double) -> [Double] {
        let span = high - low
        let raw = span / 8
        let magnitude = pow(10, floor(log10(raw)))
        let step = [1.0, 2.0, 5.0, 10.0].map { $0 * magnitude }.first { $0 >= raw } ?? raw
        return stride(from: (low / step).rounded(.up) * step, through: high, by: step).map { $0 }
    }
}

extension LatencyTimeline.Slot {
    mutating func merge(_ other: LatencyTimeline.Slot) {
        count += other.count
        max = Swift.max(max, other.max)
        for index in buckets.indices { buckets[index] += other.buckets[index] }
    }
}

private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
}

private func f(_ value: Double) -> String { String(format: "%.1f", value) }

/// 1 234 567: thousands separated by thin spaces, readable in a terminal and in a page.
func group(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (index, character) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { out.append(" ") }
        out.append(character)
    }
    return (value < 0 ? "-" : "") + out
}

func fixed(_ value: Double, _ places: Int) -> String { String(format: "%.\(places)f", value) }

func mebibytes(_ kibibytes: Int) -> String { fixed(Double(kibibytes) / 1024, 1) }

/// Milliseconds with three significant digits at least, microsecond resolution at most.
func milliseconds(_ value: Double) -> String {
    if value >= 100 { return fixed(value, 0) }
    if value >= 10 { return fixed(value, 1) }
    if value >= 1 { return fixed(value, 2) }
    return fixed(value, 3)
}
