/// Instants as the server counts them (Unix milliseconds, Doubles) and the one way a span until
/// one becomes an integer. Times arrive from tokens, headers, stored rows and clients: any of them
/// may be NaN, infinite or a million years away, and `Int64(_:)` of such a Double traps the
/// process. So a number from outside is checked against `range` before it is believed, and
/// every timer, `Max-Age` and countdown goes through `microseconds(until:now:)` or
/// `seconds(until:now:)`, which clamp instead of trapping.
public enum UnixTime {
    /// 1970-01-01T00:00:00.000Z, in Unix ms.
    public static let earliest = 0.0
    /// 9999-12-31T23:59:59.999Z, in Unix ms: the last instant a four-digit year writes.
    public static let latest = 253_402_300_799_999.0
    /// The instants believed when they come from outside: finite, from 1970 through 9999.
    public static let range = earliest...latest

    /// Whether `milliseconds` is a finite instant from 1970 through 9999.
    public static func isSane(milliseconds: Double) -> Bool { range.contains(milliseconds) }

    /// Whether `seconds` (a JWT NumericDate) is a finite instant from 1970 through 9999.
    public static func isSane(seconds: Double) -> Bool { seconds.isFinite && isSane(milliseconds: seconds * 1000) }

    /// The longest span a deadline may be away: from the earliest instant to the latest. Any
    /// deadline further off (or NaN) is treated as that far: it never falls in practice, and a
    /// timer armed for it fits every integer type a timer takes.
    public static let longestSpan = latest - earliest

    /// Milliseconds from `now` until `deadline`, held to 0…`longestSpan`; NaN counts as never.
    public static func milliseconds(until deadline: Double, now: Double) -> Double {
        let left = deadline - now
        guard !left.isNaN else { return longestSpan }
        return min(max(left, 0), longestSpan)
    }

    /// Microseconds from `now` until `deadline`, rounded up, for a timer: never negative, never
    /// more than `longestSpan`, never a trap.
    public static func microseconds(until deadline: Double, now: Double) -> Int64 {
        Int64((milliseconds(until: deadline, now: now) * 1000).rounded(.up))
    }

    /// Whole seconds from `now` until `deadline`, rounded down (a cookie's `Max-Age`).
    public static func seconds(until deadline: Double, now: Double) -> Int {
        Int((milliseconds(until: deadline, now: now) / 1000).rounded(.down))
    }
}
