import Foundation

/// Bounds a run must stay within, for a CI job to gate on: `--fail-if "p99>50ms,loss>0,failed>0"`.
/// A run that ends with any of them holding fails (exit status 3), the bound named.
///
/// Grammar (spaces allowed around each part):
///
///     bounds  = bound *("," bound)
///     bound   = metric op number [unit]
///     op      = ">" | ">=" | "<" | "<="
///     metric  = p50 | p90 | p99 | p99.9 | max | mean   (latency: unit ms, s or us required)
///             | loss          (deliveries lost: a count, or a share with unit %)
///             | failed        (watchers that could not connect: a count)
///             | dropped       (watchers closed by the server during the run: a count)
///             | errors        (error events the watchers received: a count)
///             | throughput    (deliveries per second: unit /s, optional)
package struct LoadThresholds: Sendable, Equatable, CustomStringConvertible {
    package enum Metric: String, Sendable, CaseIterable {
        case p50, p90, p99
        case p999 = "p99.9"
        case max, mean, loss, failed, dropped, errors, throughput

        var isLatency: Bool { [.p50, .p90, .p99, .p999, .max, .mean].contains(self) }
    }

    package enum Comparison: String, Sendable {
        case above = ">"
        case atLeast = ">="
        case below = "<"
        case atMost = "<="

        func holds(_ value: Double, _ bound: Double) -> Bool {
            switch self {
            case .above: return value > bound
            case .atLeast: return value >= bound
            case .below: return value < bound
            case .atMost: return value <= bound
            }
        }
    }

    /// One bound: latency in microseconds, loss as a count or (with `percent`) a share.
    package struct Bound: Sendable, Equatable, CustomStringConvertible {
        package var metric: Metric
        package var comparison: Comparison
        package var value: Double
        package var percent = false
        /// As the user wrote it, for the message that names it.
        package var text: String

        package var description: String { text }
    }

    package var bounds: [Bound]

    package var description: String { bounds.map(\.text).joined(separator: ",") }

    package static let grammar =
        "write bounds like \"p99>50ms,loss>0,failed>0\": a metric (p50, p90, p99, p99.9, max, mean with ms, s or us; "
        + "loss as a count or N%; failed; dropped; errors; throughput with /s), then >, >=, < or <=, then a number"

    /// Parses `--fail-if`; a wrong bound is refused with what to write instead.
    package static func parse(_ text: String) throws(LoadError) -> LoadThresholds {
        var bounds: [Bound] = []
        for piece in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = piece.trimmingCharacters(in: .whitespaces)
            guard !part.isEmpty else { throw LoadError("--fail-if has an empty bound in \"\(text)\"; \(grammar)") }
            bounds.append(try parseBound(part))
        }
        return LoadThresholds(bounds: bounds)
    }

    private static func parseBound(_ part: String) throws(LoadError) -> Bound {
        guard let opStart = part.firstIndex(where: { $0 == ">" || $0 == "<" }) else {
            throw LoadError("--fail-if \"\(part)\" has no comparison; \(grammar)")
        }
        let name = part[..<opStart].trimmingCharacters(in: .whitespaces).lowercased()
        guard let metric = Metric(rawValue: name) else {
            throw LoadError("--fail-if \"\(part)\": unknown metric '\(name)'; \(grammar)")
        }
        var rest = part[opStart...]
        let comparison: Comparison
        if rest.hasPrefix(">=") || rest.hasPrefix("<=") {
            comparison = Comparison(rawValue: String(rest.prefix(2)))!
            rest = rest.dropFirst(2)
        } else {
            comparison = Comparison(rawValue: String(rest.prefix(1)))!
            rest = rest.dropFirst(1)
        }
        let operand = rest.trimmingCharacters(in: .whitespaces)
        let digits = operand.prefix { $0.isNumber || $0 == "." }
        let unit = operand.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        guard let number = Double(digits), number.isFinite else {
            throw LoadError("--fail-if \"\(part)\": '\(operand)' is not a number; \(grammar)")
        }
        var bound = Bound(metric: metric, comparison: comparison, value: number, text: part.replacingOccurrences(of: " ", with: ""))
        if metric.isLatency {
            switch unit {
            case "ms": bound.value = number * 1000
            case "s": bound.value = number * 1_000_000
            case "us", "µs": bound.value = number
            default:
                throw LoadError("--fail-if \"\(part)\": a latency needs its unit, ms, s or us (like \(metric.rawValue)>50ms)")
            }
            return bound
        }
        switch (metric, unit) {
        case (.loss, "%"): bound.percent = true
        case (.throughput, "/s"), (.throughput, ""): break
        case (_, ""): break
        default:
            throw LoadError(
                "--fail-if \"\(part)\": \(metric.rawValue) takes \(metric == .loss ? "a count or a share with %" : metric == .throughput ? "deliveries per second, like throughput<1000/s" : "a count"), not '\(unit)'"
            )
        }
        return bound
    }

    /// The value `bound` is compared with in `result`, and how it reads in a message.
    static func measure(_ bound: Bound, in result: LoadResult) -> (value: Double, text: String)? {
        func latency(_ microseconds: UInt64?) -> (Double, String)? {
            microseconds.map { (Double($0), "\(milliseconds(Double($0) / 1000)) ms") }
        }
        let histogram = result.histogram
        switch bound.metric {
        case .p50: return latency(histogram.percentile(50))
        case .p90: return latency(histogram.percentile(90))
        case .p99: return latency(histogram.percentile(99))
        case .p999: return latency(histogram.percentile(99.9))
        case .max: return latency(histogram.count > 0 ? histogram.max : nil)
        case .mean: return histogram.mean.map { ($0, "\(milliseconds($0 / 1000)) ms") }
        case .loss:
            return bound.percent ? (result.lossPercent, "\(fixed(result.lossPercent, 3)) %") : (Double(result.loss), "\(result.loss)")
        case .failed: return (Double(result.failed), "\(result.failed)")
        case .dropped: return (Double(result.dropped), "\(result.dropped)")
        case .errors: return (Double(result.errorFrames), "\(result.errorFrames)")
        case .throughput:
            let rate = result.deliveriesPerSecond ?? 0
            return (rate, "\(Int(rate.rounded()))/s")
        }
    }

    /// The bounds that hold for `result`, each as "p99>50ms (p99 was 72.3 ms)". A latency bound
    /// over a run that delivered nothing cannot hold: `loss>0` is the bound that catches that run.
    package func breached(by result: LoadResult) -> [String] {
        bounds.compactMap { bound in
            guard let (value, text) = LoadThresholds.measure(bound, in: result), bound.comparison.holds(value, bound.value) else { return nil }
            return "\(bound.text) (\(bound.metric.rawValue) was \(text))"
        }
    }
}
