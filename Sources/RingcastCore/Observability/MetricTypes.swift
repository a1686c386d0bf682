/// The value types /metrics is made of. Each is plain numbers that add up (`+`), so every service
/// thread can keep its own copy and a scrape sums them; rendering is `PrometheusText`'s.

/// A Prometheus histogram: fixed upper bounds, how many observations fell in each bucket (not
/// cumulative here; the text makes them so), their sum and count. The owner's thread only.
public struct Histogram: Equatable, Sendable {
    /// Upper bounds, ascending; the `+Inf` bucket is implicit.
    public let bounds: [Double]
    /// `bounds.count + 1` counts; the last is for values above every bound.
    public private(set) var counts: [Int]
    public private(set) var sum = 0.0
    public private(set) var count = 0

    public init(bounds: [Double]) {
        precondition(!bounds.isEmpty && zip(bounds, bounds.dropFirst()).allSatisfy { $0 < $1 }, "bounds must ascend")
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count + 1)
    }

    /// Seconds, from half a millisecond to ten seconds: latencies on one machine and across a network.
    public static let latencySeconds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Powers of two up to 1024: events in one frame (`maxEventsPerFrame` defaults to 256).
    public static let eventCounts: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

    public mutating func observe(_ value: Double) {
        var index = 0
        while index < bounds.count, value > bounds[index] { index += 1 }
        counts[index] += 1
        sum += value
        count += 1
    }

    /// The counts at or below each bound, then the total (`+Inf`): what the text format shows.
    public var cumulativeCounts: [Int] {
        var running = 0
        return counts.map {
            running += $0
            return running
        }
    }

    /// Both together, as if every observation had gone into one; the bounds must be the same.
    public static func + (lhs: Histogram, rhs: Histogram) -> Histogram {
        precondition(lhs.bounds == rhs.bounds, "only histograms with the same buckets add up")
        var sum = lhs
        for index in sum.counts.indices { sum.counts[index] += rhs.counts[index] }
        sum.sum += rhs.sum
        sum.count += rhs.count
        return sum
    }
}

/// A counter split by one label's value (a reason, a kind). The owner's thread only.
public struct LabeledCounts: Equatable, Sendable {
    public private(set) var values: [String: Int] = [:]

    public init(_ values: [String: Int] = [:]) { self.values = values }

    public subscript(label: String) -> Int {
        get { values[label, default: 0] }
        set { values[label] = newValue }
    }

    public var total: Int { values.values.reduce(0, +) }

    public static func + (lhs: LabeledCounts, rhs: LabeledCounts) -> LabeledCounts {
        LabeledCounts(lhs.values.merging(rhs.values, uniquingKeysWith: +))
    }
}

/// Prometheus' text exposition format, version 0.0.4: each family once, its HELP and TYPE lines
/// first, then its samples; label values escaped; a histogram's buckets cumulative, ending at `+Inf`,
/// then `_sum` and `_count`.
public struct PrometheusText {
    public private(set) var text = ""
    private var families: Set<String> = []

    public init() {}

    public var bytes: [UInt8] { Array(text.utf8) }

    public mutating func counter(_ name: String, _ help: String, _ value: Int) {
        family(name, "counter", help)
        sample(name, [], Double(value))
    }

    public mutating func gauge(_ name: String, _ help: String, _ value: Double) {
        family(name, "gauge", help)
        sample(name, [], value)
    }

    /// One series per label value; `always` are shown (at 0) even before anything counted them,
    /// so a dashboard's rate() has a series from the start.
    public mutating func counter(_ name: String, _ help: String, label: String, _ counts: LabeledCounts, always: [String] = []) {
        family(name, "counter", help)
        for value in Set(always).union(counts.values.keys).sorted() { sample(name, [(label, value)], Double(counts[value])) }
    }

    public mutating func gauge(_ name: String, _ help: String, label: String, _ values: [(String, Double)]) {
        family(name, "gauge", help)
        for (value, number) in values { sample(name, [(label, value)], number) }
    }

    public mutating func histogram(_ name: String, _ help: String, _ histogram: Histogram) {
        family(name, "histogram", help)
        for (bound, count) in zip(histogram.bounds.map(PrometheusText.number) + ["+Inf"], histogram.cumulativeCounts) {
            sample(name + "_bucket", [("le", bound)], Double(count))
        }
        sample(name + "_sum", [], histogram.sum)
        sample(name + "_count", [], Double(histogram.count))
    }

    /// HELP and TYPE, once per family, before its first sample.
    public mutating func family(_ name: String, _ type: String, _ help: String) {
        precondition(families.insert(name).inserted, "metric family \(name) rendered twice")
        text += "# HELP \(name) \(PrometheusText.escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    public mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(PrometheusText.escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + PrometheusText.number(value) + "\n"
    }

    /// Whole numbers without a fraction, others as Swift prints them (which Go's ParseFloat reads).
    public static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        return value.plain
    }

    /// In a label value: backslash, double quote and line feed are escaped.
    public static func escapeLabel(_ value: String) -> String {
        var escaped = ""
        for character in value {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// In HELP text: backslash and line feed are escaped.
    public static func escapeHelp(_ value: String) -> String {
        value.replacingAll("\\", with: "\\\\").replacingAll("\n", with: "\\n")
    }
}

extension String {
    /// Without Foundation: every `target` replaced.
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
