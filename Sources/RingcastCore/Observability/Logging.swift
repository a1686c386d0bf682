import Synchronization

/// How log records become lines: text for people (`[info] message`), or one JSON object per line
/// for collectors (`logFormat` in config.json, `ringcast serve --log-format json`).

/// One named value a record carries besides its message (a peer's address, a reason, a port).
public typealias LogField = (String, JSONValue)

public enum LogFormat: String, CaseIterable, Sendable {
    case text, json
}

/// What a logger hands its destination.
public struct LogRecord: Sendable {
    public let level: LogLevel
    public let message: String
    public let fields: [LogField]

    public init(level: LogLevel, message: String, fields: [LogField] = []) {
        self.level = level
        self.message = message
        self.fields = fields
    }

    /// `[info] message`: the message says everything in words, so fields are left out. It may quote
    /// what a peer sent (a path, a Host, an Origin), so it is cleaned for the terminal that shows it:
    /// one record, one line, nothing that acts on the terminal. (JSON lines escape instead.)
    public var text: String { "[\(level.rawValue)] \(TerminalText.clean(message))" }

    /// `{"time":"2026-12-01T09:46:10.685Z","level":"info","message":"…", …fields}`: time, level and
    /// message first; a field named like one of them is left out rather than repeated.
    public func jsonLine(unixMilliseconds: Double) -> String {
        var writer = JSONWriter(capacity: 160)
        writer.beginObject()
        writer.key("time")
        writer.string(UTCTime.iso8601(unixMilliseconds: unixMilliseconds))
        writer.key("level")
        writer.string(level.rawValue)
        writer.key("message")
        writer.string(message)
        for (key, value) in fields where key != "time" && key != "level" && key != "message" {
            writer.key(key)
            writer.value(value)
        }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

/// Where a logger's records go.
public struct LogDestination: Sendable {
    public let emit: @Sendable (LogRecord) -> Void

    public init(_ emit: @escaping @Sendable (LogRecord) -> Void) { self.emit = emit }

    /// Each record as one line in `format`, handed to `write` (without its newline); JSON lines
    /// are stamped with `now()`, Unix milliseconds.
    public static func lines(
        _ format: LogFormat, now: @escaping @Sendable () -> Double,
        write: @escaping @Sendable (String) -> Void
    ) -> LogDestination {
        switch format {
        case .text: return LogDestination { write($0.text) }
        case .json: return LogDestination { write($0.jsonLine(unixMilliseconds: now())) }
        }
    }
}

/// Unix time as ISO 8601 in UTC, without Foundation.
public enum UTCTime {
    /// ECMAScript's date range, ±100 000 000 days from 1970 (years −271821 to 275760): every
    /// instant inside it formats with room to spare in Int64 arithmetic.
    public static let formattable = -8.64e15...8.64e15

    /// `2026-12-01T09:46:10.685Z`; a year outside 0…9999 is written with a sign and six digits
    /// (ISO 8601's expanded form). Total: NaN, an infinity or an instant outside `formattable`
    /// is written as `invalid time (…)`, never trapped on.
    public static func iso8601(unixMilliseconds: Double) -> String {
        guard formattable.contains(unixMilliseconds) else { return "invalid time (\(unixMilliseconds) ms)" }
        let total = Int64(unixMilliseconds.rounded(.down))
        let seconds = floorDivide(total, 1000)
        let millis = total - seconds * 1000
        let days = floorDivide(seconds, 86_400)
        let ofDay = seconds - days * 86_400
        // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day count from 1970-01-01.
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func padded(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let yearText = (0...9999).contains(year) ? padded(year, 4) : (year < 0 ? "-" : "+") + padded(abs(year), 6)
        return "\(yearText)-\(padded(month, 2))-\(padded(day, 2))T\(padded(ofDay / 3600, 2)):\(padded(ofDay / 60 % 60, 2)):"
            + "\(padded(ofDay % 60, 2)).\(padded(millis, 3))Z"
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let quotient = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient
    }
}

public enum LogLevel: String, CaseIterable, Comparable, Sendable {
    case debug, info, warning, error

    private var rank: Int { LogLevel.allCases.firstIndex(of: self)! }
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// Logs to a sink (stderr in the server) at or above a level; libraries take one, never make one.
/// A record's fields reach only destinations that keep them (JSON lines, Logging.swift); the
/// message says everything in words.
public struct Logger: Sendable {
    /// The level now: every copy of a logger shares it, so a reload's `logLevel` reaches them all.
    public var level: LogLevel { threshold.level }
    private let threshold: LogThreshold
    private let destination: LogDestination

    /// Text lines: `[level] message`.
    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.init(level: level, destination: LogDestination { sink($0.text) })
    }

    public init(level: LogLevel, destination: LogDestination) {
        threshold = LogThreshold(level)
        self.destination = destination
    }

    /// Sets the level of this logger and of every copy of it (SIGHUP's `logLevel`). Any thread.
    public func setLevel(_ level: LogLevel) { threshold.set(level) }

    public static let silent = Logger(level: .error) { _ in }

    public func log(_ messageLevel: LogLevel, _ message: @autoclosure () -> String, fields: @autoclosure () -> [LogField] = []) {
        guard messageLevel >= level else { return }
        destination.emit(LogRecord(level: messageLevel, message: message(), fields: fields()))
    }

    public func debug(_ message: @autoclosure () -> String, fields: @autoclosure () -> [LogField] = []) { log(.debug, message(), fields: fields()) }
    public func info(_ message: @autoclosure () -> String, fields: @autoclosure () -> [LogField] = []) { log(.info, message(), fields: fields()) }
    public func warning(_ message: @autoclosure () -> String, fields: @autoclosure () -> [LogField] = []) {
        log(.warning, message(), fields: fields())
    }
    public func error(_ message: @autoclosure () -> String, fields: @autoclosure () -> [LogField] = []) { log(.error, message(), fields: fields()) }
}

/// The level a logger and its copies share: read on every record, set by a reload.
private final class LogThreshold: Sendable {
    private let rank: Atomic<Int>

    init(_ level: LogLevel) { rank = Atomic(LogThreshold.rank(of: level)) }

    var level: LogLevel { LogLevel.allCases[rank.load(ordering: .relaxed)] }

    func set(_ level: LogLevel) { rank.store(LogThreshold.rank(of: level), ordering: .relaxed) }

    private static func rank(of level: LogLevel) -> Int { LogLevel.allCases.firstIndex(of: level)! }
}
