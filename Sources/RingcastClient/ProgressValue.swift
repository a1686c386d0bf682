/// A progress a producer reports: a fraction, unit counts (the server derives the fraction and can
/// weigh children by them), or none at all (indeterminate: a spinner).
public enum ProgressValue: Equatable, Sendable, ExpressibleByFloatLiteral {
    case fraction(Double)
    case units(completed: Double, total: Double)
    case indeterminate

    public init(floatLiteral value: Double) { self = .fraction(value) }

    /// The fraction 0…1 it stands for, or nil when indeterminate.
    public var fraction: Double? {
        switch self {
        case let .fraction(value): return value
        case let .units(completed, total): return total > 0 ? min(1, completed / total) : nil
        case .indeterminate: return nil
        }
    }
}
