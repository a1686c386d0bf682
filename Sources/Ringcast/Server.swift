import Foundation
import RingcastCore
import RingcastLWS

public struct ServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The Ringcast server: one libwebsockets service loop serving, on one port, the static files of the
/// public directory, the HTTP API under /api/ (with /healthz and /metrics) and the WebSocket at /ws.
///
/// Its life is the loop's: `start` creates the context on the service thread, `stop` closes every
/// connection (watchers hear 1001), flushes storage and returns once the context is gone.
///
/// `@unchecked Sendable`: `start`, `stop`, `port` and `epoch` may be called from any thread and touch
/// only the loop (which locks) and immutable state; everything else — store, API, fan-out, timers,
/// connections — belongs to the service thread.
public final class RingcastServer: @unchecked Sendable {
    public let config: ServerConfig
    let logger: Logger
    let store: TaskStore
    let api: API
    let fanOut: FanOut
    let persistence: TaskPersistence
    /// Readiness answers and publish times, for operators (Operations.swift).
    let operations: OperationsState
    private let publicDirectory: String
    /// The certificate and key, resolved against the config's folder, when `tls` is set.
    private let certificate: (cert: String, key: String)?
    let loop: ServiceLoop

    // Service thread only.
    private var deadlineTimer: LoopTimer?
    private var heartbeatTimer: LoopTimer?
    private var storageTimer: LoopTimer?
    private var storageFlushScheduled = false
    private var scheduledDeadline: Double?
    var refusals = RefusalLog()
    /// Open sockets per address, for `maxConnectionsPerAddress`.
    var connectionsByAddress: [String: Int] = [:]
    /// The socket just accepted, for the `created` that follows.
    var acceptedPeer: Peer?
    /// What is known of each open socket, by its connection's identity, from `created` to `destroyed`.
    var peers: [Int: Peer] = [:]
    /// Answers and events held until storage reports their commit kept, in the order they were made.
    private var held: [(ticket: UInt64, release: (Bool) -> Void)] = []
    private var heldHead = 0
    private var lastTicket: UInt64 = 0

    /// - Parameter baseDirectory: where a relative `publicDir` is found (the config file's folder).
    public init(config: ServerConfig, baseDirectory: String, logger: Logger, persistence: TaskPersistence = MemoryOnlyPersistence()) {
        self.config = config
        self.logger = logger
        self.persistence = persistence
        operations = OperationsState(probes: RingcastServer.readinessProbes(for: persistence))
        store = TaskStore(persistence: persistence, retentionSeconds: config.retentionSeconds, maxTasks: config.maxTasks)
        api = API(store: store, config: config)
        fanOut = FanOut(logCapacity: config.fanOutLogEvents, maxEventsPerFrame: config.maxEventsPerFrame)
        func resolved(_ path: String) -> String {
            URL(fileURLWithPath: path.hasPrefix("/") ? path : baseDirectory + "/" + path).standardizedFileURL.path
        }
        publicDirectory = resolved(config.publicDir)
        certificate = config.tls.map { (resolved($0.cert), resolved($0.key)) }
        loop = ServiceLoop(name: "ringcast-service", logger: logger)
    }

    /// The storage `config.storage` names: memory, or an SQLite file relative to `baseDirectory`.
    public static func persistence(for config: ServerConfig, baseDirectory: String, logger: Logger) throws -> TaskPersistence {
        guard config.storage != "memory" else { return MemoryOnlyPersistence() }
        let path = config.storage.hasPrefix("/") ? config.storage : baseDirectory + "/" + config.storage
        return try SQLitePersistence(path: path, logger: logger)
    }

    public var port: Int { loop.port }
    public var epoch: String { store.epoch }
    /// Where the server answers, `http://` or (with `tls`) `https://`, for the first line `serve` prints.
    public var url: String {
        let host = config.host.contains(":") ? "[\(config.host)]" : config.host
        return "\(certificate == nil ? "http" : "https")://\(host):\(port)"
    }

    /// Creates the context on a new service thread and returns once it listens (or failed to).
    @discardableResult
    public func start() throws -> Int {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: publicDirectory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ServerError("publicDir '\(publicDirectory)' is not a directory: point \"publicDir\" in the config at the folder holding index.html")
        }
        if let certificate {
            for (field, path) in [("tls.cert", certificate.cert), ("tls.key", certificate.key)] where !FileManager.default.isReadableFile(atPath: path) {
                let reason = FileManager.default.fileExists(atPath: path) ? "is not readable by this user" : "does not exist"
                throw ServerError("\(field): the file '\(path)' \(reason); point \"tls\" in the config at a PEM certificate and its key")
            }
        }
        LWSLog.route(to: logger)
        var settings = ContextSettings(name: "ringcast")
        settings.certificate = certificate
        settings.listener = .init(host: config.host, port: config.port)
        settings.staticFiles = .init(directory: publicDirectory, maxAge: config.staticMaxAge, callbackPaths: ["/api", "/healthz", "/readyz", "/metrics"])
        settings.sessionBytes = LWSConnection.sessionBytes
        settings.headers = [("access-control-allow-origin:", "*")]
        settings.enforceSecurityHeaders = true
        settings.validateUTF8 = true
        settings.timeoutSeconds = config.handshakeTimeoutSeconds
        do {
            return try loop.start(settings, handler: self) { [self] loop in try prepare(loop) }
        } catch let error as LWSError {
            throw ServerError(error.detail)
        }
    }

    /// Stops the loop, closes every connection and returns when the context is gone. Any thread.
    public func stop() { loop.stop() }

    /// The loop's first moments, on its thread: the server's timers.
    private func prepare(_ loop: ServiceLoop) throws {
        persistence.startWriting { [self] ticket, kept in
            loop.post { [self] in committed(ticket, kept: kept) }
        }
        deadlineTimer = try loop.makeTimer { [unowned self] in deadlineFired() }
        heartbeatTimer = try loop.makeTimer { [unowned self] in heartbeatFired() }
        storageTimer = try loop.makeTimer { [unowned self] in storageFired() }
        heartbeatTimer?.schedule(seconds: config.heartbeatSeconds)
        try startOperations(loop)
        rescheduleDeadline()
        logger.debug("serving on port \(loop.port)")
    }

    /// Storage is flushed first, so whatever is held for it leaves; then lws destroys the context
    /// without close frames, so each watcher is told the server is going away (after what it is
    /// still owed) and given a moment to hear it.
    func closeWatchers(_ loop: ServiceLoop) {
        persistence.flush()
        committed(lastTicket, kept: true)
        if fanOut.subscriberCount > 0 {
            api.metrics.refusals[RefusalReason.shutdown.rawValue] += fanOut.subscriberCount
            fanOut.forEachSubscription { subscription in
                guard let socket = subscription.writer as? SocketPeer else { return }
                if socket.closeReason == nil { socket.closeReason = (.goingAway, "server stopping") }
                subscription.requestWrite()
            }
            loop.service(forAtMost: 300) { fanOut.subscriberCount == 0 }
        }
        persistence.flush()
    }

    // MARK: Publishing (service thread)

    /// After a callback changed state: rearms the deadline and storage timers, and hands the events
    /// (then `answer`) on once storage has kept what must be kept. Nothing overtakes what is held,
    /// so watchers see every seq in order. `durable` commits even plain progress (a `flush` message).
    func publish(_ events: [OutboundEvent], durable: Bool = false, answer: ((_ kept: Bool) -> Void)? = nil) {
        rescheduleDeadline()
        let mustCommit = persistence.hasUrgentWrites || (durable && persistence.hasPendingWrites)
        if !mustCommit, heldHead == held.count {
            deliver(events)
            answer?(true)
            scheduleStorageFlush()
            return
        }
        if mustCommit { lastTicket = persistence.commit() }
        held.append((lastTicket, { [self] kept in
            deliver(events)
            answer?(kept)
        }))
        scheduleStorageFlush()
    }

    private func deliver(_ events: [OutboundEvent]) {
        guard !events.isEmpty else { return }
        api.metrics.eventsPublished += events.count
        notePublished(events)
        fanOut.publish(events)
        // Every callback that publishes does so once (a request, a message, a deadline), so asking
        // for writes right away costs one pass over the watchers per callback, however many events.
        fanOut.flush()
    }

    /// Storage kept (or, after its retries, lost) everything up to `ticket`: what waited for it leaves.
    private func committed(_ ticket: UInt64, kept: Bool) {
        if !kept { logger.error("storage: a commit failed; its answers say so (503) and its changes live in memory only") }
        while heldHead < held.count, held[heldHead].ticket <= ticket {
            let release = held[heldHead].release
            heldHead += 1
            release(kept)
        }
        if heldHead == held.count {
            held.removeAll(keepingCapacity: true)
            heldHead = 0
        }
    }

    /// Progress that storage writes behind leaves within a quarter second, in one transaction.
    private func scheduleStorageFlush() {
        guard !storageFlushScheduled, persistence.hasPendingWrites else { return }
        storageFlushScheduled = true
        storageTimer?.schedule(seconds: SQLitePersistence.writeBehindSeconds)
    }

    private func storageFired() {
        storageFlushScheduled = false
        if persistence.hasPendingWrites { lastTicket = persistence.commit() }
    }

    private func rescheduleDeadline() {
        guard let next = store.nextDeadline() else {
            if scheduledDeadline != nil { deadlineTimer?.cancel(); scheduledDeadline = nil }
            return
        }
        guard next != scheduledDeadline else { return }
        scheduledDeadline = next
        deadlineTimer?.schedule(microseconds: Int64(((next - Clock.now()) * 1000).rounded(.up)))
    }

    private func deadlineFired() {
        scheduledDeadline = nil
        publish(store.runDue(now: Clock.now()))
    }

    private func heartbeatFired() {
        fanOut.broadcast(OutboundEvent.heartbeat(now: Clock.now()))
        fanOut.flush()
        heartbeatTimer?.schedule(seconds: config.heartbeatSeconds)
    }

    /// What `/healthz` and `/metrics` report of the transport.
    var transportStatus: TransportStatus {
        withOperations(TransportStatus(watchers: fanOut.subscriberCount, resyncs: fanOut.resyncCount, patternSets: fanOut.groupCount))
    }
}

/// Unix time in milliseconds, the protocol's clock.
enum Clock {
    static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) * 1000 + Double(spec.tv_nsec) / 1_000_000
    }
}

extension RingcastServer {
    /// A refused client, logged once per offender and reason (then at most once a minute, with a count).
    func logRefusal(_ reason: String, offender: String, _ message: @autoclosure () -> String) {
        api.metrics.refusals[reason] += 1
        let verdict = refusals.admit(reason: reason, offender: offender, now: Clock.now())
        guard verdict.log else { return }
        let suppressed = verdict.suppressed > 0 ? " (and \(verdict.suppressed) more like it since the last report)" : ""
        logger.warning("\(message())\(suppressed)", fields: [("reason", .string(reason)), ("peer", .string(offender)), ("suppressed", .number(Double(verdict.suppressed)))])
    }
}
