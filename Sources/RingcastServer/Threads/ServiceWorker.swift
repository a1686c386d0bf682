import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import Synchronization

/// One service thread of the server: its libwebsockets contexts (serving, each its descriptor range, the
/// sockets its own SO_REUSEPORT listener accepts), its connections, its watchers' fan-out and heartbeat. What is
/// published on any thread reaches it through its inbox in `SharedState`; it delivers on its own
/// thread. Worker 0 also keeps the state's deadline and write-behind timers.
///
/// `@unchecked Sendable`: everything but `counters` (atomics) and the immutable lets belongs to
/// the loop's service thread; other threads only call `loop.notify()` and read `counters`.
final class ServiceWorker: @unchecked Sendable {
    let index: Int
    let loop: ServiceLoop
    unowned let server: Server
    let state: SharedState
    let config: ServerConfig
    let logger: Logger
    let gate: RequestGate
    let fanOut: FanOut
    let counters = WorkerCounters()
    private let listener: ListeningSocket

    // Service thread only.
    /// Deliveries waiting for their storage ticket, in seq order.
    @exclusivity(unchecked) private var waiting: [SharedState.Delivery] = []
    @exclusivity(unchecked) private var waitingHead = 0
    /// Answers waiting for their ticket, in the order they were made.
    @exclusivity(unchecked) private var held: [(ticket: UInt64, release: (Bool) -> Void)] = []
    @exclusivity(unchecked) private var heldHead = 0
    /// What is known of each open socket, by its connection's identity, from `created` to `destroyed`.
    @exclusivity(unchecked) var peers: [Int: Peer] = [:]
    /// The socket just accepted, for the `created` that follows.
    @exclusivity(unchecked) var acceptedPeer: Peer?
    /// In a cluster: what this thread's clients asked that went to the log, by token, waiting for its outcome.
    @exclusivity(unchecked) var submitted: [UInt64: (SharedState.Outcome) -> Void] = [:]
    private var lastToken: UInt64 = 0
    private var heartbeatTimer: LoopTimer?
    private var deadlineTimer: LoopTimer?
    private var writeBehindTimer: LoopTimer?
    /// Closes watchers whose signed token expired, or that never sent the `auth` they were waiting for.
    var sessionTimer: LoopTimer?
    /// The sockets with such a deadline, and when it falls (Unix ms).
    @exclusivity(unchecked) var sessionDeadlines: [ObjectIdentifier: (socket: SocketPeer, at: Double)] = [:]
    /// Closes HTTP requests whose body did not arrive whole within `handshakeTimeoutSeconds`.
    var bodyTimer: LoopTimer?
    /// The requests whose body is still arriving, and when it must be whole (Unix ms).
    @exclusivity(unchecked) var bodyDeadlines: [ObjectIdentifier: (exchange: HTTPExchange, link: LWSConnection, at: Double)] = [:]
    /// The coalescing window (`flushMilliseconds`); nil when it is 0 and events are published as
    /// they come. Its timer is armed by the first event of a window, so an idle server is never woken.
    let window: CoalescingWindowOwner?
    /// Watchers to write to when this round of the loop ends (`queueWriteAtRoundEnd`).
    @exclusivity(unchecked) var queuedForRoundEnd: [SocketPeer] = []
    /// When each recent seq's change was applied, to time its frames (Operations.swift).
    @exclusivity(unchecked) var publishTimes = PublishTimes()
    /// Frame figures not yet added to `counters.metrics` (`noteFrameWritten`).
    @exclusivity(unchecked) var unreportedFrames = TransportMetrics()
    @exclusivity(unchecked) var isFrameReportDue = false
    var frameReportTimer: LoopTimer?
    /// WebSockets with output waiting: since when the peer took none of it (Unix ms), and what it
    /// had acknowledged then (WriteDeadline.swift).
    @exclusivity(unchecked) var writeWatch: [ObjectIdentifier: (socket: SocketPeer, since: Double, acked: Int64?)] = [:]
    var writeWatchTimer: LoopTimer?
    /// How late `/metrics` may show a thread's frame figures.
    static let frameReportSeconds = 0.25

    init(index: Int, server: Server, listener: ListeningSocket) {
        self.index = index
        self.server = server
        state = server.state
        config = server.config
        logger = server.logger
        gate = RequestGate(config: server.config)
        self.listener = listener
        fanOut = FanOut(logCapacity: config.fanOutLogEvents, maxEventsPerFrame: config.maxEventsPerFrame)
        window = config.flushMilliseconds > 0 ? CoalescingWindowOwner(fanOut: fanOut, milliseconds: config.flushMilliseconds) : nil
        loop = ServiceLoop(name: "ringcast-\(index)", logger: logger)
    }

    /// The loop's first moments, on its thread: its listener and timers.
    func prepare(_ loop: ServiceLoop) throws {
        try loop.adoptListener(listener)
        heartbeatTimer = try loop.makeTimer { [unowned self] in heartbeatFired() }
        frameReportTimer = try loop.makeTimer { [unowned self] in reportFrames() }
        sessionTimer = try loop.makeTimer { [unowned self] in sessionDeadlineFell() }
        writeWatchTimer = try loop.makeTimer { [unowned self] in writeWatchFired() }
        bodyTimer = try loop.makeTimer { [unowned self] in bodyDeadlineFell() }
        heartbeatTimer?.schedule(seconds: config.heartbeatSeconds)
        try window?.prepare(loop) { [unowned self] in windowFired() }
        if index == 0 {
            deadlineTimer = try loop.makeTimer { [unowned self] in deadlineFired() }
            writeBehindTimer = try loop.makeTimer { [unowned self] in state.writeBehind() }
            try server.operations.startAsking(on: loop)
        }
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
        let published = deliverKept(mail.deliveries)
        // Every callback that publishes settles once, so asking for writes right away costs one
        // pass over the watchers per callback, however many events.
        if closingWindow {
            if window?.close() == true || published { fanOut.flush() }
        } else if published {
            fanOut.flush()
        }
        releaseKeptAnswers()
        for (token, outcome) in mail.completions { submitted.removeValue(forKey: token)?(outcome) }
        if let (through, error) = mail.lostThrough {
            for token in submitted.keys.filter({ $0 <= through }).sorted() { submitted.removeValue(forKey: token)?(.refused(error)) }
        }
        if mail.resyncEveryone { fanOut.resyncEveryone() }
        if let deadline = mail.deadline { arm(deadline) }
        if mail.armWriteBehind { writeBehindTimer?.schedule(seconds: SQLitePersistence.writeBehindSeconds) }
        counters.update(from: fanOut)
    }

    /// Adds `deliveries` to those waiting for storage, and hands the fan-out (or the window) every
    /// one whose ticket is kept, in seq order. True when any reached the fan-out's logs, to be
    /// written now; false when there were none or the window holds them.
    private func deliverKept(_ deliveries: [SharedState.Delivery]) -> Bool {
        waiting += deliveries
        let committed = state.committedTicket
        var published = false
        while waitingHead < waiting.count, waiting[waitingHead].ticket <= committed {
            notePublished(waiting[waitingHead])
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

    /// Runs, in order, every held answer whose ticket storage has kept (or lost).
    private func releaseKeptAnswers() {
        let committed = state.committedTicket
        while heldHead < held.count, held[heldHead].ticket <= committed {
            let (ticket, release) = held[heldHead]
            heldHead += 1
            release(ticket == 0 || state.wasKept(ticket))
        }
        if heldHead == held.count {
            held.removeAll(keepingCapacity: true)
            heldHead = 0
        }
    }

    /// After a change made on this thread: deliver what may leave, and `answer` once `ticket` is
    /// kept (at once when it is 0 or already kept and nothing before it waits).
    func settle(ticket: UInt64, answer: ((_ kept: Bool) -> Void)?) {
        if let answer { held.append((ticket, answer)) }
        settle()
    }

    /// What a client on this thread asked, through the state's one door (`SharedState.perform`):
    /// `answer` runs here once the outcome is kept (a change storage could not keep is refused
    /// with `storage_failed`), or, in a cluster, once this node has applied it from the log.
    /// Returns what the state did at once: the frames the sender may have now, the session as the
    /// message left it, and how many commands the publisher's allowance pays for.
    func perform(_ asked: SharedState.Asked, now: Double, answer: @escaping (SharedState.Outcome) -> Void) -> SharedState.Performed {
        assertOnThread(of: loop)
        lastToken += 1
        let server = self.server
        let performed = state.perform(asked, from: index, token: lastToken, now: now) { server.transportStatus }
        if let outcome = performed.outcome {
            settle(ticket: performed.ticket) { kept in answer(kept ? outcome : .refused(APIError.storageFailed)) }
        } else {
            submitted[lastToken] = answer
        }
        return performed
    }

    /// The window's timer: the window closes, what waits in the inbox joins what it held, and every
    /// watcher is asked for one write, for the latest of each task changed in it and every sticky event.
    private func windowFired() {
        window?.beginClosing()
        settle(closingWindow: true)
    }

    private func arm(_ deadline: Double?) {
        guard let deadline else {
            deadlineTimer?.cancel()
            return
        }
        deadlineTimer?.schedule(microseconds: UnixTime.microseconds(until: deadline, now: Clock.now()))
    }

    private func deadlineFired() {
        settle(ticket: state.deadlineFell(from: index, now: Clock.now()), answer: nil)
    }

    private func heartbeatFired() {
        // An open window goes first, so the heartbeat follows its events in the same frame.
        if window?.isOpen == true { windowFired() }
        fanOut.broadcast(OutboundEvent.heartbeat(now: Clock.now()))
        fanOut.flush()
        heartbeatTimer?.schedule(seconds: config.heartbeatSeconds)
    }

    /// Storage is flushed first, so whatever waits for it leaves; then lws destroys the context
    /// without close frames, so each watcher is told the server is going away (after what it is
    /// still owed) and given a moment to hear it.
    func closeWatchers(_ loop: ServiceLoop) {
        state.flush()
        settle()
        if window?.isOpen == true { windowFired() }
        if fanOut.subscriberCount > 0 {
            server.refusalCounts.withLock { $0[RefusalReason.shutdown.rawValue] += fanOut.subscriberCount }
            fanOut.forEachSubscription { subscription in
                guard let socket = subscription.writer as? SocketPeer else { return }
                if socket.closeReason == nil { socket.closeReason = (.goingAway, "server stopping") }
                subscription.requestWrite()
            }
            loop.service(forAtMost: 300) { fanOut.subscriberCount == 0 }
        }
        reportFrames()
    }
}

/// A worker's figures that /healthz and /metrics read from other threads: written by its thread only.
final class WorkerCounters: Sendable {
    let watchers = Atomic<Int>(0)
    let resyncs = Atomic<Int>(0)
    let patternSets = Atomic<Int>(0)
    let framesSent = Atomic<Int>(0)
    let eventsSent = Atomic<Int>(0)
    let socketsOpened = Atomic<Int>(0)
    let coalesced = Atomic<Int>(0)
    /// The rest of what /metrics shows of this thread: written by it, read by a scrape on any thread.
    let metrics = Locked(TransportMetrics())

    func update(from fanOut: FanOut) {
        watchers.store(fanOut.subscriberCount, ordering: .relaxed)
        coalesced.store(fanOut.coalescedCount, ordering: .relaxed)
        resyncs.store(fanOut.resyncCount, ordering: .relaxed)
        patternSets.store(fanOut.groupCount, ordering: .relaxed)
    }

    /// Counts one written frame of `events` events (from the writer thread alone, so load-add-store is safe).
    func wrote(events: Int) {
        framesSent.store(framesSent.load(ordering: .relaxed) + 1, ordering: .relaxed)
        eventsSent.store(eventsSent.load(ordering: .relaxed) + events, ordering: .relaxed)
    }
}
