import RingcastCore

/// A progress a producer reports: a fraction, unit counts (the server derives the fraction and can
/// weigh children by them), or none at all (indeterminate: a spinner).
///
/// A float literal converts (`progress: 0.42`); a computed value of any floating-point type goes
/// through ``init(_:)`` or straight to the `update` overloads that take a `BinaryFloatingPoint`.
public enum ProgressValue: Equatable, Sendable, ExpressibleByFloatLiteral {
    /// A fraction from 0 to 1 (0.42 is 42 %).
    case fraction(Double)
    /// `completed` of `total` units (total above 0).
    case units(completed: Double, total: Double)
    /// No known progress: the dashboard shows a spinner.
    case indeterminate

    /// A fraction literal: `0.42` is 42 %.
    public init(floatLiteral value: Double) { self = .fraction(value) }

    /// A fraction of any floating-point type (`Double(i) / 20`, a `Float`, a `CGFloat`).
    public init<Fraction: BinaryFloatingPoint>(_ fraction: Fraction) { self = .fraction(Double(fraction)) }

    /// Unit counts of any integer type: `ProgressValue(completed: rows, total: 5_000)`.
    public init<Count: BinaryInteger>(completed: Count, total: Count) {
        self = .units(completed: Double(completed), total: Double(total))
    }

    /// The fraction 0…1 it stands for, or nil when indeterminate.
    public var fraction: Double? {
        switch self {
        case .fraction(let value): return value
        case .units(let completed, let total): return total > 0 ? min(1, completed / total) : nil
        case .indeterminate: return nil
        }
    }

    /// The fields of an update that carry it.
    var fields: [(String, JSONValue)] {
        switch self {
        case .fraction(let value): return [("progress", .number(value))]
        case .units(let completed, let total): return [("completed", .number(completed)), ("total", .number(total))]
        case .indeterminate: return [("progress", .null)]
        }
    }
}
