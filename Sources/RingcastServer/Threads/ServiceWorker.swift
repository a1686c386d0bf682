import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import Synchronization

/// One service thread of the server: the handler its `ServiceLoop` calls (Callbacks.swift), which
/// hands each callback to the role it concerns and owns nothing else: admission (`peers`), the
/// HTTP role (`http`, HTTPRole.swift), the WebSocket role (`sockets`, SocketRole.swift), delivery
/// and ticket order (`delivery`, DeliveryOrder.swift), the state's timers (`timers`) and its
/// figures (`figures`). What is published on any thread reaches it through its inbox in
/// `SharedState`; it delivers on its own thread. Worker 0 also keeps the state's deadline and
/// write-behind timers.
///
/// `@unchecked Sendable`: everything but `figures.counters` (atomics) and the immutable lets belongs
/// to the loop's service thread; other threads only call `loop.notify()` and read the counters.
final class ServiceWorker: @unchecked Sendable {
    let index: Int
    let loop: ServiceLoop
    let state: SharedState
    /// The server's books: open sockets, their limits, refusals.
    let ledger: ServerLedger
    let config: ServerConfig
    /// The sockets this thread holds, from `accepted` to `destroyed`.
    @exclusivity(unchecked) var peers = PeerTable()
    let http: HTTPRole
    let sockets: SocketRole
    let delivery: DeliveryOrder
    let timers: WorkerTimers
    let figures = WorkerFigures()

    init(index: Int, server: Server) {
        self.index = index
        state = server.state
        ledger = server.ledger
        config = server.config
        http = HTTPRole(config: server.config, signIn: server.signIn)
        sockets = SocketRole(config: server.config)
        delivery = DeliveryOrder(config: server.config)
        timers = WorkerTimers(heartbeatSeconds: server.config.heartbeatSeconds)
        loop = ServiceLoop(name: "ringcast-\(index)", logger: server.logger)
    }

    var logger: Logger { ledger.logger }
    var signIn: ProviderSignIn? { http.signIn }
    var fanOut: FanOut { delivery.fanOut }
    var window: CoalescingWindowOwner? { delivery.window }
    var counters: WorkerCounters { figures.counters }

    /// Counts something of this thread's in its `TransportMetrics`. Service thread only.
    func count(_ body: (inout TransportMetrics) -> Void) { figures.count(body) }

    /// The loop's first moments, on its thread: its listener and timers.
    func prepare(_ loop: ServiceLoop, listener: ListeningSocket) throws {
        try loop.adoptListener(listener)
        try figures.prepare(loop)
        try sockets.prepare(
            loop, sessionDeadlineFell: { [unowned self] in sessionDeadlineFell() }, writeWatchFired: { [unowned self] in writeWatchFired() })
        try http.prepare(loop) { [unowned self] in bodyDeadlineFell() }
        try timers.prepare(
            loop, heartbeatFired: { [unowned self] in heartbeatFired() },
            deadlineFired: index == 0 ? { [unowned self] in deadlineFired() } : nil,
            writeBehindFired: { [unowned self] in state.writeBehind() })
        try window?.prepare(loop) { [unowned self] in windowFired() }
        settle()
    }

    // MARK: Delivering (service thread)

    /// What the thread does whenever it wakes or changes something, in this order: take its mail;
    /// deliver to the fan-out what storage has kept; start writing it (or let the window hold it);
    /// release the answers that waited for storage; hand the cluster's outcomes to whoever asked;
    /// resync every watcher if the state was replaced; rearm worker 0's timers.
    func settle(closingWindow: Bool = false) {
        assertOnThread(of: loop)
        let mail = state.takeMail(index)
        let published = delivery.deliverKept(mail.deliveries, committed: state.committedTicket) { figures.notePublished($0) }
        // Every callback that publishes settles once, so asking for writes right away costs one
        // pass over the watchers per callback, however many events.
        if closingWindow {
            if window?.close() == true || published { fanOut.flush() }
        } else if published {
            fanOut.flush()
        }
        delivery.releaseKeptAnswers(committed: state.committedTicket, wasKept: state.wasKept)
        delivery.complete(mail.completions, lostThrough: mail.lostThrough)
        if mail.resyncEveryone { fanOut.resyncEveryone() }
        if let deadline = mail.deadline { timers.arm(deadline) }
        if mail.armWriteBehind { timers.armWriteBehind() }
        counters.update(from: fanOut)
    }

    /// After a change made on this thread: deliver what may leave, and `answer` once `ticket` is
    /// kept (at once when it is 0 or already kept and nothing before it waits).
    func settle(ticket: UInt64, answer: ((_ kept: Bool) -> Void)?) {
        if let answer { delivery.hold(ticket: ticket, answer: answer) }
        settle()
    }

    /// What a client on this thread asked, through the state's one door (`SharedState.perform`):
    /// `answer` runs here once the outcome is kept (a change storage could not keep is refused
    /// with `storage_failed`), or, in a cluster, once this node has applied it from the log.
    /// Returns what the state did at once: the frames the sender may have now, the session as the
    /// message left it, and how many commands the publisher's allowance pays for.
    func perform(_ asked: SharedState.Asked, now: Double, answer: @escaping (SharedState.Outcome) -> Void) -> SharedState.Performed {
        assertOnThread(of: loop)
        let token = delivery.nextToken()
        let performed = state.perform(asked, from: index, token: token, now: now)
        if let outcome = performed.outcome {
            settle(ticket: performed.ticket) { kept in answer(kept ? outcome : .refused(APIError.storageFailed)) }
        } else {
            delivery.awaitOutcome(of: token, answer)
        }
        return performed
    }

    /// The window's timer: the window closes, what waits in the inbox joins what it held, and every
    /// watcher is asked for one write, for the latest of each task changed in it and every sticky event.
    private func windowFired() {
        window?.beginClosing()
        settle(closingWindow: true)
    }

    private func deadlineFired() {
        settle(ticket: state.deadlineFell(from: index, now: Clock.now()), answer: nil)
    }

    private func heartbeatFired() {
        // An open window goes first, so the heartbeat follows its events in the same frame.
        if window?.isOpen == true { windowFired() }
        fanOut.broadcast(OutboundEvent.heartbeat(now: Clock.now()))
        fanOut.flush()
        timers.scheduleHeartbeat()
    }

    /// Storage is flushed first, so whatever waits for it leaves; then lws destroys the context
    /// without close frames, so each watcher is told the server is going away (after what it is
    /// still owed) and given a moment to hear it.
    func closeWatchers(_ loop: ServiceLoop) {
        state.flush()
        settle()
        if window?.isOpen == true { windowFired() }
        if fanOut.subscriberCount > 0 {
            ledger.refusalCounts.withLock { $0[RefusalReason.shutdown.rawValue] += fanOut.subscriberCount }
            fanOut.forEachSubscription { subscription in
                guard let socket = subscription.writer as? SocketPeer else { return }
                if socket.closeReason == nil { socket.closeReason = (.goingAway, "server stopping") }
                subscription.requestWrite()
            }
            loop.service(forAtMost: 300) { fanOut.subscriberCount == 0 }
        }
        figures.reportFrames()
    }
}
