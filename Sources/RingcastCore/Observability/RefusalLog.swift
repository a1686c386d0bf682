/// Decides which refusals reach the log: the first for each offender and reason, then at most one a
/// minute with a count of those left out, so a flood cannot fill the disk. Remembers a bounded
/// number of offenders (the oldest are forgotten first). Not thread-safe: one owner.
public struct RefusalLog {
    public let intervalMilliseconds: Double
    public let capacity: Int
    private var entries: [String: (loggedAt: Double, suppressed: Int)] = [:]
    private var order: [String] = []

    public init(intervalSeconds: Double = 60, capacity: Int = 4096) {
        intervalMilliseconds = intervalSeconds * 1000
        self.capacity = capacity
    }

    /// Whether to log this refusal now, and how many of the same were left out since the last line.
    public mutating func admit(reason: String, offender: String, now: Double) -> (log: Bool, suppressed: Int) {
        let key = reason + " " + offender
        if var entry = entries[key] {
            guard now - entry.loggedAt >= intervalMilliseconds else {
                entry.suppressed += 1
                entries[key] = entry
                return (false, 0)
            }
            entries[key] = (now, 0)
            return (true, entry.suppressed)
        }
        if entries.count >= capacity, !order.isEmpty {
            // Forget the oldest half at once, so a flood of new offenders costs O(1) per refusal on average.
            for old in order.prefix(capacity / 2) { entries.removeValue(forKey: old) }
            order.removeFirst(min(order.count, capacity / 2))
        }
        entries[key] = (now, 0)
        order.append(key)
        return (true, 0)
    }
}
