import RingcastCore
import RingcastLWS

/// A service thread's delivery: the fan-out to its watchers (behind the coalescing window, if
/// there is one), the events that wait for their storage ticket before they may leave, the
/// answers that wait for theirs in the order they were made, and, in a cluster, the answers that
/// come back through the log. Service thread only.
final class DeliveryOrder {
    let fanOut: FanOut
    /// The coalescing window (`flushMilliseconds`); nil when it is 0 and events are published as
    /// they come. Its timer is armed by the first event of a window, so an idle server is never woken.
    let window: CoalescingWindowOwner?
    /// Deliveries waiting for their storage ticket, in seq order.
    @exclusivity(unchecked) private var waiting: [SharedState.Delivery] = []
    @exclusivity(unchecked) private var waitingHead = 0
    /// Answers waiting for their ticket, in the order they were made.
    @exclusivity(unchecked) private var held: [(ticket: UInt64, release: (Bool) -> Void)] = []
    @exclusivity(unchecked) private var heldHead = 0
    /// In a cluster: what this thread's clients asked that went to the log, by token, waiting for its outcome.
    @exclusivity(unchecked) private var submitted: [UInt64: (SharedState.Outcome) -> Void] = [:]
    private var lastToken: UInt64 = 0

    init(config: ServerConfig) {
        fanOut = FanOut(logCapacity: config.fanOutLogEvents, maxEventsPerFrame: config.maxEventsPerFrame)
        window = config.flushMilliseconds > 0 ? CoalescingWindowOwner(fanOut: fanOut, milliseconds: config.flushMilliseconds) : nil
    }

    /// Adds `deliveries` to those waiting for storage, and hands the fan-out (or the window) every
    /// one whose ticket is kept, in seq order, `noted` first. True when any reached the fan-out's
    /// logs, to be written now; false when there were none or the window holds them.
    func deliverKept(_ deliveries: [SharedState.Delivery], committed: UInt64, noting noted: (SharedState.Delivery) -> Void) -> Bool {
        waiting += deliveries
        var published = false
        while waitingHead < waiting.count, waiting[waitingHead].ticket <= committed {
            noted(waiting[waitingHead])
            if let window {
                if !window.hold(waiting[waitingHead].events) { published = true }
            } else {
                fanOut.publish(waiting[waitingHead].events)
                published = true
            }
            waitingHead += 1
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        }
        return published
    }

    /// `answer` runs once `ticket` is kept, after every answer held before it.
    func hold(ticket: UInt64, answer: @escaping (_ kept: Bool) -> Void) { held.append((ticket, answer)) }

    /// Runs, in order, every held answer whose ticket storage has kept (or lost).
    func releaseKeptAnswers(committed: UInt64, wasKept: (UInt64) -> Bool) {
        while heldHead < held.count, held[heldHead].ticket <= committed {
            let (ticket, release) = held[heldHead]
            heldHead += 1
            release(ticket == 0 || wasKept(ticket))
        }
        if heldHead == held.count {
            held.removeAll(keepingCapacity: true)
            heldHead = 0
        }
    }

    /// The token the next thing this thread asks of the state goes under.
    func nextToken() -> UInt64 {
        lastToken += 1
        return lastToken
    }

    /// In a cluster: `answer` runs when the outcome of what went to the log under `token` comes back.
    func awaitOutcome(of token: UInt64, _ answer: @escaping (SharedState.Outcome) -> Void) { submitted[token] = answer }

    /// The cluster's outcomes to whoever asked; what was handed to a log that was lost, up to
    /// `lostThrough`'s token, is answered with its error.
    func complete(_ completions: [(token: UInt64, outcome: SharedState.Outcome)], lostThrough: (token: UInt64, error: APIError)?) {
        for (token, outcome) in completions { submitted.removeValue(forKey: token)?(outcome) }
        if let (through, error) = lostThrough {
            for token in submitted.keys.filter({ $0 <= through }).sorted() { submitted.removeValue(forKey: token)?(.refused(error)) }
        }
    }
}
