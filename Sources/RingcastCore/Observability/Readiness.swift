/// What `/readyz` asks: whether each thing the server depends on answers (storage now, Redis when
/// a node uses it). The server asks every probe on a short interval and remembers the answers; the
/// API reports them.

/// Something the server depends on that can be asked whether it answers. `checkReadiness` is called
/// on a service thread; a probe that must wait (a writer thread's trivial commit, a Redis PING) does
/// so elsewhere and calls `answer` once, from any thread.
public protocol ReadinessProbe: AnyObject {
    /// What `/readyz` and `ringcast_ready{check=…}` call it: `"storage"`, `"redis"`.
    var readinessName: String { get }
    /// `answer(nil)` when it answered as it should, else `answer(why not)`, once.
    func checkReadiness(_ answer: @escaping @Sendable (_ failure: String?) -> Void)
}

/// One dependency as `/readyz` reports it.
public struct ReadinessStatus: Equatable, Sendable {
    public var name: String
    /// nil while it answers; otherwise why it is not ready, in words an operator can act on.
    public var failure: String?
    public var ready: Bool { failure == nil }

    public init(name: String, failure: String? = nil) {
        self.name = name
        self.failure = failure
    }
}

/// The answers of one probe over time, and what they mean now: not ready before the first answer,
/// after a failed one, or while a question has waited longer than `deadline`. Times are Unix ms,
/// given by the caller. The owner's thread only.
public struct ReadinessTracker: Sendable {
    public let name: String
    /// Milliseconds a question may wait for its answer before the dependency counts as not answering.
    public let deadline: Double
    /// When the question still waiting was asked.
    public private(set) var askedAt: Double?
    public private(set) var answeredAt: Double?
    private var failure: String?
    /// How long the last answer took, in milliseconds.
    public private(set) var lastLatency: Double?

    public init(name: String, deadlineSeconds: Double) {
        self.name = name
        deadline = deadlineSeconds * 1000
    }

    /// True when no question is waiting: the caller asks one and calls `asked`.
    public var isIdle: Bool { askedAt == nil }

    public mutating func asked(now: Double) { askedAt = now }

    public mutating func answered(_ failure: String?, now: Double) {
        if let askedAt { lastLatency = max(0, now - askedAt) }
        askedAt = nil
        answeredAt = now
        self.failure = failure
    }

    /// Whether the question waiting has waited past the deadline.
    public func isOverdue(now: Double) -> Bool {
        guard let askedAt else { return false }
        return now - askedAt >= deadline
    }

    public func status(now: Double) -> ReadinessStatus {
        if let askedAt, isOverdue(now: now) {
            return ReadinessStatus(
                name: name,
                failure:
                    "\(name) has not answered for \((((now - askedAt) / 100).rounded() / 10).plain) s (the deadline is \((deadline / 1000).plain) s)")
        }
        guard answeredAt != nil else { return ReadinessStatus(name: name, failure: "\(name) has not answered yet") }
        return ReadinessStatus(name: name, failure: failure.map { "\(name): \($0)" })
    }
}

/// Memory always answers.
extension MemoryOnlyPersistence: ReadinessProbe {
    public var readinessName: String { "storage" }
    public func checkReadiness(_ answer: @escaping @Sendable (String?) -> Void) { answer(nil) }
}
