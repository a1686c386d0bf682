/// A publisher's allowance: `rate` events a second, saving up at most `burst`. Spending may go
/// into debt (a batch is charged whole once applied); while the balance is below zero the next
/// message is refused. Times are Unix ms, passed in.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private var balance: Double
    private var updatedAt: Double

    /// `rate` 0 means no limit.
    public init(rate: Double, burst: Double? = nil, now: Double) {
        self.rate = rate
        self.burst = burst ?? rate
        balance = self.burst
        updatedAt = now
    }

    public var isUnlimited: Bool { rate <= 0 }

    /// Whether a new message may be taken now.
    public mutating func allows(now: Double) -> Bool {
        guard !isUnlimited else { return true }
        refill(now: now)
        return balance >= 0
    }

    /// Charges what a message published.
    public mutating func spend(_ events: Int, now: Double) {
        guard !isUnlimited, events > 0 else { return }
        refill(now: now)
        balance -= Double(events)
    }

    private mutating func refill(now: Double) {
        guard now > updatedAt else { return }
        balance = min(burst, balance + (now - updatedAt) / 1000 * rate)
        updatedAt = now
    }
}
