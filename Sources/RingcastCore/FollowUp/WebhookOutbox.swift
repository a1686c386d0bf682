/// Whether a hook's receiver is tried: `closed` (normal), `open` (it failed `circuitFailures` times
/// in a row: nothing is sent until `circuitOpenSeconds` pass), `halfOpen` (one delivery probes it;
/// its success closes the circuit, its failure opens it again).
public enum WebhookCircuit: String, Sendable, Equatable {
    case closed
    case open
    case halfOpen = "half-open"

    /// `ringcast_webhook_circuit_state{hook}`: 0 closed, 1 half-open, 2 open.
    public var gaugeValue: Double {
        switch self {
        case .closed: return 0
        case .halfOpen: return 1
        case .open: return 2
        }
    }
}

/// How one attempt ended, as the sender saw it.
public enum WebhookAttempt: Sendable, Equatable {
    /// The receiver answered with this status.
    case answered(Int)
    /// No answer: why (a refused connection, a deadline, a lie in the framing).
    case failed(String)
}

/// What became of a delivery after an attempt.
public enum WebhookOutcome: Sendable, Equatable {
    case delivered(status: Int)
    /// Failed; tried again at `delivery.due` (its `attempts` counts this one).
    case retrying(WebhookDelivery, reason: String)
    case gaveUp(reason: String)
}

/// One hook's owed deliveries as its sender holds them, and what to send next: at most
/// `maxOutbox` owed (one more drops the oldest not in flight, counted by the caller), at most
/// `concurrency` in flight, each when due, none while the circuit is open. Pure: times are Unix ms
/// given by the caller; the sender keeps it under its lock.
public struct WebhookOutbox: Sendable {
    public let rule: WebhookRule
    /// Owed, oldest first, in flight ones included.
    public private(set) var owed: [WebhookDelivery] = []
    public private(set) var inFlight: Set<String> = []
    public private(set) var circuit = WebhookCircuit.closed
    public private(set) var consecutiveFailures = 0
    /// Times the circuit opened.
    public private(set) var opens = 0
    /// While open: when the probe may go.
    public private(set) var probeAt: Double?
    /// While half-open: the delivery probing the receiver.
    private var probe: String?
    /// Counts the changes, so a status reported late never overwrites a newer one.
    private var changes: UInt64 = 0

    public init(rule: WebhookRule) { self.rule = rule }

    /// Takes a delivery in; returns the one it drops to stay within `maxOutbox`: the oldest that is
    /// not in flight (the new one itself when every other is).
    public mutating func admit(_ delivery: WebhookDelivery) -> WebhookDelivery? {
        changes += 1
        owed.append(delivery)
        guard owed.count > rule.maxOutbox, let oldest = owed.firstIndex(where: { !inFlight.contains($0.id) }) else { return nil }
        return owed.remove(at: oldest)
    }

    /// The delivery to attempt now, marked in flight; nil when none is due, every slot is taken,
    /// or the circuit holds them back.
    public mutating func take(now: Double) -> WebhookDelivery? {
        if circuit == .open {
            guard let probeAt, now >= probeAt else { return nil }
            circuit = .halfOpen
            self.probeAt = nil
        }
        if circuit == .halfOpen, probe != nil { return nil }
        guard inFlight.count < rule.concurrency,
            let next = owed.first(where: { $0.due <= now && !inFlight.contains($0.id) })
        else { return nil }
        changes += 1
        inFlight.insert(next.id)
        if circuit == .halfOpen { probe = next.id }
        return next
    }

    /// When `take` may next have something (nil: only when an attempt ends or a delivery comes in).
    public func nextLook(now: Double) -> Double? {
        switch circuit {
        case .open: return probeAt
        case .halfOpen where probe != nil: return nil
        default:
            guard inFlight.count < rule.concurrency else { return nil }
            return owed.lazy.filter { !self.inFlight.contains($0.id) }.map(\.due).min()
        }
    }

    /// An attempt ended: the delivery leaves (delivered, or its last attempt failed) or waits for
    /// its retry where it was in the order; the circuit follows. `random` jitters the back-off.
    public mutating func finish(_ delivery: WebhookDelivery, _ attempt: WebhookAttempt, now: Double, random: Double) -> WebhookOutcome {
        changes += 1
        inFlight.remove(delivery.id)
        let wasProbe = probe == delivery.id
        if wasProbe { probe = nil }
        let index = owed.firstIndex { $0.id == delivery.id }
        let reason: String
        switch attempt {
        case .answered(let status) where (200..<300).contains(status):
            consecutiveFailures = 0
            (circuit, probeAt, probe) = (.closed, nil, nil)
            if let index { owed.remove(at: index) }
            return .delivered(status: status)
        case .answered(let status): reason = "answered \(status)"
        case .failed(let why): reason = why
        }
        consecutiveFailures += 1
        if (circuit == .closed && consecutiveFailures >= rule.circuitFailures) || (circuit == .halfOpen && wasProbe) {
            (circuit, probeAt) = (.open, now + rule.circuitOpenSeconds * 1000)
            opens += 1
        }
        var again = delivery
        again.attempts += 1
        guard again.attempts < rule.maxAttempts else {
            if let index { owed.remove(at: index) }
            return .gaveUp(reason: reason)
        }
        again.due = now + WebhookRetry.delaySeconds(afterAttempt: again.attempts, random: random) * 1000
        // Not owed any more (admit drops none in flight, so this is defensive): not tried again.
        if let index { owed[index] = again } else { return .gaveUp(reason: reason + "; dropped from the outbox meanwhile") }
        return .retrying(again, reason: reason)
    }

    /// For `/readyz` and `/metrics`.
    public var status: WebhookHookStatus {
        WebhookHookStatus(
            url: rule.url, circuit: circuit, consecutiveFailures: consecutiveFailures, opens: opens, owed: owed.count, inFlight: inFlight.count,
            probeAt: probeAt, version: changes)
    }
}

/// A hook as operators see it: its circuit and what it owes.
public struct WebhookHookStatus: Sendable, Equatable {
    public var url: String
    public var circuit: WebhookCircuit
    public var consecutiveFailures: Int
    /// Times its circuit opened since the server started.
    public var opens: Int
    /// Deliveries its sender holds (in flight included), and those in flight.
    public var owed: Int
    public var inFlight: Int
    public var probeAt: Double?
    /// Which change of the outbox this is: reports reach the state from several threads, and
    /// only a newer one replaces what is shown.
    public var version: UInt64

    public init(
        url: String, circuit: WebhookCircuit = .closed, consecutiveFailures: Int = 0, opens: Int = 0, owed: Int = 0, inFlight: Int = 0,
        probeAt: Double? = nil, version: UInt64 = 0
    ) {
        (self.url, self.circuit, self.consecutiveFailures, self.opens) = (url, circuit, consecutiveFailures, opens)
        (self.owed, self.inFlight, self.probeAt, self.version) = (owed, inFlight, probeAt, version)
    }
}
