import Foundation

/// A reader of Prometheus' text exposition format (version 0.0.4) that enforces its rules instead
/// of guessing: what a scraper would refuse, or silently misread, is an error here.
package struct PrometheusScrape {
    package struct Sample: Equatable {
        package let name: String
        package let labels: [String: String]
        package let value: Double
    }

    package struct Family {
        package let name: String
        package var type = "untyped"
        package var help: String?
        package var samples: [Sample] = []
    }

    package private(set) var families: [String: Family] = [:]

    /// Parses `text`, or throws naming the line and the rule it breaks.
    package init(_ text: String) throws {
        guard text.hasSuffix("\n") else { throw PrometheusFormatError(line: 0, "the text must end with a line feed") }
        var seenSeries = Set<String>()
        var current: String?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let number = index + 1
            func fail(_ rule: String) -> PrometheusFormatError { PrometheusFormatError(line: number, "\(rule): \(line)") }
            if line.isEmpty { continue }
            if line.hasPrefix("#") {
                let words = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
                guard words.count >= 3, words[1] == "HELP" || words[1] == "TYPE" else { continue }  // a plain comment
                let name = words[2]
                guard PrometheusScrape.isMetricName(name) else { throw fail("not a metric name") }
                if families[name] == nil {
                    families[name] = Family(name: name)
                } else if current != name {
                    throw fail("a family's lines must be together")
                }
                guard families[name]!.samples.isEmpty else { throw fail("HELP and TYPE come before the family's samples") }
                if words[1] == "HELP" {
                    guard families[name]!.help == nil else { throw fail("HELP twice") }
                    families[name]!.help = words.count > 3 ? words[3] : ""
                } else {
                    guard words.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(words[3]) else {
                        throw fail("unknown TYPE")
                    }
                    guard families[name]!.type == "untyped" else { throw fail("TYPE twice") }
                    families[name]!.type = words[3]
                }
                current = name
                continue
            }
            let sample = try PrometheusScrape.sample(String(line), fail: fail)
            let family = PrometheusScrape.family(of: sample.name, in: families)
            guard let family, family == current else { throw fail("a sample follows its family's TYPE, with the family's other samples") }
            let series = sample.name + "{" + sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}"
            guard seenSeries.insert(series).inserted else { throw fail("the same series twice") }
            families[family]!.samples.append(sample)
        }
        for family in families.values { try PrometheusScrape.check(family) }
    }

    /// The family a sample belongs to: its own name, or the histogram or summary it is a part of.
    private static func family(of name: String, in families: [String: Family]) -> String? {
        if families[name] != nil { return name }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if let family = families[base], family.type == "histogram" || (family.type == "summary" && suffix != "_bucket") { return base }
        }
        return nil
    }

    private static func check(_ family: Family) throws {
        func fail(_ rule: String) -> PrometheusFormatError { PrometheusFormatError(line: 0, "\(family.name): \(rule)") }
        if family.type == "counter" {
            guard family.name.hasSuffix("_total") else { throw fail("a counter's name ends in _total") }
            guard family.samples.allSatisfy({ $0.value >= 0 }) else { throw fail("a counter is never negative") }
        }
        guard family.type == "histogram" else { return }
        // For each label set (le aside): buckets ascending by le, cumulative, ending at +Inf, whose
        // count is _count's; and a _sum.
        let buckets = family.samples.filter { $0.name == family.name + "_bucket" }
        guard !buckets.isEmpty else { throw fail("a histogram has buckets") }
        for labels in Set(buckets.map { $0.labels.filter { $0.key != "le" } }) {
            var bounds: [Double] = []
            var counts: [Double] = []
            for bucket in buckets where bucket.labels.filter({ $0.key != "le" }) == labels {
                guard let le = bucket.labels["le"], let bound = le == "+Inf" ? Double.infinity : Double(le) else {
                    throw fail("each bucket has an le")
                }
                bounds.append(bound)
                counts.append(bucket.value)
            }
            guard zip(bounds, bounds.dropFirst()).allSatisfy({ $0 < $1 }) else { throw fail("buckets ascend by le") }
            guard bounds.last == .infinity else { throw fail("the last bucket is le=\"+Inf\"") }
            guard zip(counts, counts.dropFirst()).allSatisfy({ $0 <= $1 }) else { throw fail("bucket counts are cumulative") }
            let own = family.samples.filter { $0.labels == labels }
            guard let count = own.first(where: { $0.name == family.name + "_count" }), count.value == counts.last else {
                throw fail("_count equals the +Inf bucket")
            }
            guard own.contains(where: { $0.name == family.name + "_sum" }) else { throw fail("a histogram has a _sum") }
        }
    }

    private static func sample(_ line: String, fail: (String) -> PrometheusFormatError) throws -> Sample {
        var rest = Substring(line)
        let name = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" })
        guard isMetricName(name) else { throw fail("not a metric name") }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let label = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
                guard isLabelName(label) else { throw fail("not a label name") }
                rest = rest.dropFirst(label.count)
                guard rest.hasPrefix("=\"") else { throw fail("a label's value is quoted after =") }
                rest = rest.dropFirst(2)
                var value = ""
                while true {
                    guard let character = rest.first else { throw fail("an unterminated label value") }
                    rest = rest.dropFirst()
                    if character == "\"" { break }
                    if character == "\\" {
                        guard let escaped = rest.first else { throw fail("an unterminated escape") }
                        rest = rest.dropFirst()
                        switch escaped {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw fail("only \\\\, \\\" and \\n may be escaped")
                        }
                    } else {
                        value.append(character)
                    }
                }
                guard labels.updateValue(value, forKey: label) == nil else { throw fail("a label twice") }
                if rest.first == "," { rest = rest.dropFirst() } else if rest.first != "}" { throw fail("labels are separated by commas") }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " " else { throw fail("a space before the value") }
        let fields = rest.split(separator: " ")
        guard fields.count == 1 || (fields.count == 2 && Int64(fields[1]) != nil) else { throw fail("a value, and at most a timestamp") }
        let text = String(fields[0])
        let value: Double
        switch text {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default:
            guard let number = Double(text), number.isFinite else { throw fail("not a number") }
            value = number
        }
        return Sample(name: name, labels: labels, value: value)
    }

    static func isMetricName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter || first == "_" || first == ":" else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") }
    }

    static func isLabelName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter || first == "_" else { return false }
        return !name.hasPrefix("__") && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }

    /// The value of the series with exactly these labels (nil when there is none).
    package func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        guard let family = PrometheusScrape.family(of: name, in: families) else { return nil }
        return families[family]?.samples.first { $0.name == name && $0.labels == labels }?.value
    }
}

package struct PrometheusFormatError: Error, CustomStringConvertible {
    package let description: String
    init(line: Int, _ rule: String) { description = line > 0 ? "line \(line): \(rule)" : rule }
}
