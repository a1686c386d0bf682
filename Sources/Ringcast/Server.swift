import CLibWebSockets
import CRingcastShims
import Foundation
import RingcastCore
import RingcastLWS

public struct ServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The Ringcast server: one libwebsockets context serving, on one port, the static files of the
/// public directory, the HTTP API under /api/ and the watcher WebSocket at /ws.
///
/// All state (store, fan-out, connections) belongs to the service thread; other threads only call
/// `start` and `stop`, which synchronise through `lock`.
public final class RingcastServer: @unchecked Sendable {
    public enum Lifecycle { case initial, starting, running, stopping, stopped }

    public let config: ServerConfig
    let logger: Logger
    let store: TaskStore
    let api: API
    let fanOut: FanOut
    let writeBuffer = WriteBuffer()
    private let persistence: TaskPersistence
    private let publicDirectory: String

    private let lock = NSLock()
    private var lifecycle = Lifecycle.initial
    private var context: OpaquePointer?
    private var boundPort = 0
    private var startError: ServerError?
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    private var deadlineTimer: OpaquePointer?
    private var heartbeatTimer: OpaquePointer?
    private var storageTimer: OpaquePointer?
    private var storageFlushScheduled = false
    private var scheduledDeadline: Double?
    private var resources = CResources()
    private var metrics = ServerMetrics()

    /// - Parameter baseDirectory: where a relative `publicDir` is found (the config file's folder).
    public init(config: ServerConfig, baseDirectory: String, logger: Logger, persistence: TaskPersistence = MemoryOnlyPersistence()) {
        self.config = config
        self.logger = logger
        self.persistence = persistence
        store = TaskStore(persistence: persistence)
        api = API(store: store, policy: config.publishing)
        fanOut = FanOut(logCapacity: config.fanOutLogEvents, maxEventsPerFrame: config.maxEventsPerFrame)
        let directory = config.publicDir.hasPrefix("/") ? config.publicDir : baseDirectory + "/" + config.publicDir
        publicDirectory = URL(fileURLWithPath: directory).standardizedFileURL.path
    }

    /// The storage `config.storage` names: memory, or an SQLite file relative to `baseDirectory`.
    public static func persistence(for config: ServerConfig, baseDirectory: String, logger: Logger) throws -> TaskPersistence {
        guard config.storage != "memory" else { return MemoryOnlyPersistence() }
        let path = config.storage.hasPrefix("/") ? config.storage : baseDirectory + "/" + config.storage
        return try SQLitePersistence(path: path, logger: logger)
    }

    public var port: Int { lock.withLock { boundPort } }
    public var epoch: String { store.epoch }

    /// Creates the context on a new service thread and returns once it listens (or failed to).
    @discardableResult
    public func start() throws -> Int {
        lock.withLock {
            precondition(lifecycle == .initial, "a RingcastServer starts once")
            lifecycle = .starting
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: publicDirectory, isDirectory: &isDirectory), isDirectory.boolValue else {
            lock.withLock { lifecycle = .stopped }
            throw ServerError("publicDir '\(publicDirectory)' is not a directory: point \"publicDir\" in the config at the folder holding index.html")
        }
        let thread = Thread { [self] in serviceThread() }
        thread.name = "ringcast-service"
        thread.start()
        started.wait()
        if let startError {
            finished.wait()
            throw startError
        }
        return port
    }

    /// Stops the loop, closes every connection and returns when the context is gone. Any thread.
    public func stop() {
        let wasRunning: Bool = lock.withLock {
            guard lifecycle == .running else { return false }
            lifecycle = .stopping
            lws_cancel_service(context)
            return true
        }
        if wasRunning { finished.wait() }
    }

    // MARK: The service thread

    private func serviceThread() {
        guard let context = createContext() else {
            lock.withLock { lifecycle = .stopped }
            started.signal()
            finished.signal()
            return
        }
        lock.withLock { self.context = context }
        let user = Unmanaged.passUnretained(self).toOpaque()
        deadlineTimer = rc_timer_new(user) { Unmanaged<RingcastServer>.fromOpaque($0!).takeUnretainedValue().deadlineFired() }
        heartbeatTimer = rc_timer_new(user) { Unmanaged<RingcastServer>.fromOpaque($0!).takeUnretainedValue().heartbeatFired() }
        storageTimer = rc_timer_new(user) { Unmanaged<RingcastServer>.fromOpaque($0!).takeUnretainedValue().storageFired() }
        rc_timer_schedule(context, heartbeatTimer, Int64(config.heartbeatSeconds * 1_000_000))
        rescheduleDeadline()

        lock.withLock { lifecycle = .running }
        started.signal()
        logger.debug("service loop running on port \(port)")
        while lock.withLock({ lifecycle == .running }) {
            if lws_service(context, 0) < 0 { break }
        }
        closeWatchers(context)
        persistence.flush()
        for timer in [deadlineTimer, heartbeatTimer, storageTimer] {
            rc_timer_cancel(timer)
            rc_timer_free(timer)
        }
        lock.withLock { self.context = nil }
        lws_context_destroy(context)
        resources.release()
        lock.withLock { lifecycle = .stopped }
        logger.debug("service loop stopped")
        finished.signal()
    }

    /// lws destroys a context without close frames: tell each watcher the server is going away
    /// (after what it is still owed), and give them a moment to hear it.
    private func closeWatchers(_ context: OpaquePointer) {
        guard fanOut.subscriberCount > 0 else { return }
        fanOut.forEachSubscription { subscription in
            guard let connection = subscription.writer as? Connection else { return }
            if connection.closeReason == nil { connection.closeReason = (LWS_CLOSE_STATUS_GOINGAWAY, "server stopping") }
            subscription.requestWrite()
        }
        let deadline = Clock.now() + 300
        while fanOut.subscriberCount > 0, Clock.now() < deadline {
            // A timer wakes the loop even if no socket does.
            rc_timer_schedule(context, deadlineTimer, 20_000)
            if lws_service(context, 0) < 0 { break }
        }
    }

    private func createContext() -> OpaquePointer? {
        lws_set_log_level(Int32(LLL_ERR | LLL_WARN), nil)
        var info = lws_context_creation_info()
        info.port = Int32(config.port)
        info.iface = resources.string(config.host)
        info.protocols = resources.protocols(name: "ringcast", callback: ringcastCallback,
                                             sessionSize: SessionMemory.size,
                                             rxBufferSize: 0)
        info.mounts = resources.mounts(publicDirectory: publicDirectory, maxAge: config.staticMaxAge)
        info.headers = resources.headers([("access-control-allow-origin:", "*")])
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.timeout_secs = 10
        var options = UInt64(LWS_SERVER_OPTION_HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE)
            | UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8)
        // With IPv6 on, lws binds [::] whatever iface says: an IPv4 address must turn it off.
        if !config.host.contains(":") { options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        info.options = options
        LWS.raiseOpenFileLimit()
        guard let context = lws_create_context(&info) else {
            startError = ServerError("could not listen on \(config.host):\(config.port): the port is in use or the address is not on this machine; pick another \"port\" or \"host\"")
            return nil
        }
        let vhost = lws_get_vhost_by_name(context, "default")
        let port = Int(lws_get_vhost_listen_port(vhost))
        lock.withLock { boundPort = port }
        return context
    }

    // MARK: Publishing (service thread)

    func publish(_ events: [OutboundEvent]) {
        guard !events.isEmpty else { return }
        metrics.eventsPublished += events.count
        fanOut.publish(events)
        // Every callback that publishes does so once (a request, a message, a deadline), so asking
        // for writes right away costs one pass over the watchers per callback, however many events.
        fanOut.flush()
        rescheduleDeadline()
        scheduleStorageFlush()
    }

    /// Progress that storage writes behind leaves within a quarter second, in one transaction.
    private func scheduleStorageFlush() {
        guard !storageFlushScheduled, persistence.hasPendingWrites, let context = currentContext else { return }
        storageFlushScheduled = true
        rc_timer_schedule(context, storageTimer, Int64(SQLitePersistence.writeBehindSeconds * 1_000_000))
    }

    private func storageFired() {
        storageFlushScheduled = false
        persistence.flush()
    }

    private func rescheduleDeadline() {
        guard let context = currentContext else { return }
        guard let next = store.nextDeadline() else {
            if scheduledDeadline != nil { rc_timer_cancel(deadlineTimer); scheduledDeadline = nil }
            return
        }
        guard next != scheduledDeadline else { return }
        scheduledDeadline = next
        rc_timer_schedule(context, deadlineTimer, Int64(((next - Clock.now()) * 1000).rounded(.up)))
    }

    private func deadlineFired() {
        scheduledDeadline = nil
        publish(store.runDue(now: Clock.now()))
        rescheduleDeadline()
    }

    private func heartbeatFired() {
        fanOut.broadcast(OutboundEvent.heartbeat(now: Clock.now()))
        fanOut.flush()
        if let context = currentContext {
            rc_timer_schedule(context, heartbeatTimer, Int64(config.heartbeatSeconds * 1_000_000))
        }
    }

    /// The context, read on the service thread, which alone sets it.
    private var currentContext: OpaquePointer? { context }

    // MARK: HTTP

    func beginHTTP(_ wsi: OpaquePointer, sessionData: UnsafeMutableRawPointer?) -> Int32 {
        guard let sessionData, let (method, fullPath) = LWS.requestLine(wsi) else { return -1 }
        // lws hands the same session memory to the next request on a kept-alive connection.
        closeConnection(sessionData)
        let connection = Connection(wsi: wsi)
        Connection.attach(connection, to: sessionData)
        let query = LWS.queryArguments(wsi)
        connection.request = APIRequest(method: method, path: fullPath, query: query)
        let contentLength = Int(LWS.header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) ?? "") ?? 0
        connection.bodyTooLarge = contentLength > config.maxMessageBytes
        if contentLength > 0 && (method == "POST" || method == "PUT" || method == "PATCH") {
            connection.expectsBody = true
            return 0
        }
        answer(connection)
        return 0
    }

    func receiveBody(_ connection: Connection, _ bytes: UnsafeRawBufferPointer) {
        guard !connection.bodyTooLarge else { return }
        if (connection.request?.body.count ?? 0) + bytes.count > config.maxMessageBytes {
            connection.bodyTooLarge = true
            connection.request?.body = []
            return
        }
        connection.request?.body.append(contentsOf: bytes)
    }

    func answer(_ connection: Connection) {
        // Once per request: lws also reports BODY_COMPLETION for a POST with Content-Length: 0,
        // which beginHTTP has already answered.
        guard let request = connection.request else { return }
        connection.request = nil
        metrics.httpRequests += 1
        if request.path == "/metrics" {
            connection.response = (200, metrics.render(watchers: fanOut.subscriberCount, tasks: store.tasks.count, seq: store.seq,
                                                        resyncs: fanOut.resyncCount, patternSets: fanOut.groupCount))
            connection.contentType = "text/plain; version=0.0.4"
        } else if connection.bodyTooLarge {
            let error = APIError(.bodyTooLarge, "the body is larger than \(config.maxMessageBytes) bytes (maxMessageBytes); send less, or split a batch")
            connection.response = (error.status, error.encodedBody)
        } else if request.path == "/healthz" {
            connection.response = (200, api.healthBody(watchers: fanOut.subscriberCount))
        } else if request.method != "GET", let refusal = refuseOrigin(connection.wsi) {
            connection.response = (refusal.status, refusal.encodedBody)
        } else {
            let response = api.handle(request, now: Clock.now(), credential: credential(of: connection.wsi, token: LWS.header(connection.wsi, WSI_TOKEN_HTTP_AUTHORIZATION)))
            connection.response = (response.status, response.body)
            if response.status >= 400 { metrics.httpErrors += 1 }
            publish(response.events)
        }
        lws_callback_on_writable(connection.wsi)
    }

    /// Writes the answer, lets go of the exchange, then completes the transaction: lws may free the
    /// session memory inside lws_http_transaction_completed, so nothing may touch it afterwards.
    func writeHTTP(_ connection: Connection, sessionData: UnsafeMutableRawPointer?) -> Int32 {
        guard let response = connection.response else { return 0 }
        connection.response = nil
        let written = writeBuffer.writeHTTP(status: response.status, contentType: connection.contentType, body: response.body,
                                            extraHeaders: [("cache-control:", "no-store")], to: connection.wsi)
        closeConnection(sessionData)
        guard written else { return -1 }
        return lws_http_transaction_completed(connection.wsi) != 0 ? -1 : 0
    }

    private func credential(of wsi: OpaquePointer, token: String?) -> Credential {
        config.publishing.identify(authorization: token, fromLoopback: SessionMemory.isLoopbackPeer(wsi))
    }

    /// A browser page from a site not in allowedOrigins may not change or watch anything.
    private func refuseOrigin(_ wsi: OpaquePointer) -> APIError? {
        guard let origin = LWS.header(wsi, WSI_TOKEN_ORIGIN) else { return nil }
        let host = LWS.header(wsi, WSI_TOKEN_HOST) ?? ""
        if origin == "http://\(host)" || origin == "https://\(host)" { return nil }
        if config.allowedOrigins.contains(origin) { return nil }
        return APIError(.forbidden, "origin \(origin) is not allowed: add it to \"allowedOrigins\" in config.json", field: "Origin")
    }

    // MARK: WebSocket watchers

    func acceptsWebSocket(_ wsi: OpaquePointer) -> Bool {
        guard let path = LWS.header(wsi, WSI_TOKEN_GET_URI), path == "/ws" else {
            logger.debug("refused a WebSocket upgrade outside /ws")
            return false
        }
        if let refusal = refuseOrigin(wsi) {
            logger.info("refused a WebSocket: \(refusal.message)")
            return false
        }
        return true
    }

    func openWatcher(_ wsi: OpaquePointer, sessionData: UnsafeMutableRawPointer?) -> Int32 {
        guard let sessionData else { return -1 }
        closeConnection(sessionData)
        let connection = Connection(wsi: wsi)
        Connection.attach(connection, to: sessionData)
        let query = LWS.queryArguments(wsi)
        let now = Clock.now()
        let mode = query["mode"] ?? "watch"
        let publishOnly = mode == "publish"
        let requested: Result<WatchSet, APIError>
        switch mode {
        case "watch": requested = WatchSet.parse(query["watch"])
        // A publisher hears only its own replies and heartbeats: a pattern set that matches nothing.
        case "publish": requested = .success(WatchSet([]))
        default: requested = .failure(APIError(.invalidField, "mode '\(mode)' is not one of watch, publish", field: "mode"))
        }
        let watch: WatchSet
        switch requested {
        case let .success(parsed):
            watch = parsed
        case let .failure(error):
            connection.closeReason = (LWS_CLOSE_STATUS_POLICY_VIOLATION, "invalid \(error.field ?? "query")")
            let subscription = fanOut.subscribe(WatchSet([]), lastSeq: store.seq, writer: connection)
            connection.subscription = subscription
            sendError(error, to: subscription)
            return 0
        }
        metrics.watchersOpened += 1
        connection.credential = credential(of: wsi, token: LWS.header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION))
        let subscription = fanOut.subscribe(watch, lastSeq: store.seq, writer: connection)
        connection.subscription = subscription
        subscription.sendDirect(store.encodeHello(now: now, heartbeatSeconds: config.heartbeatSeconds))
        if !publishOnly {
            subscription.sendDirect(store.encodeSnapshot(matching: watch, since: resumePoint(query["since"]), now: now))
        }
        logger.debug("watcher from \(LWS.peerAddress(wsi)) watching \(watch.key)")
        return 0
    }

    /// `since=EPOCH:SEQ` resumes only within this server's epoch; anything else gets a full snapshot.
    private func resumePoint(_ value: String?) -> UInt64? {
        guard let value, let colon = value.lastIndex(of: ":") else { return nil }
        guard value[..<colon] == store.epoch else { return nil }
        return UInt64(value[value.index(after: colon)...])
    }

    func writeWatcher(_ connection: Connection) -> Int32 {
        guard let subscription = connection.subscription else { return 0 }
        subscription.writeableCallbackBegan()
        guard let plan = fanOut.nextFrame(for: subscription) else {
            if let reason = connection.closeReason {
                let text = Array(reason.text.utf8)
                text.withUnsafeBufferPointer { lws_close_reason(connection.wsi, reason.status, UnsafeMutablePointer(mutating: $0.baseAddress), text.count) }
                return -1
            }
            return 0
        }
        let frame: [UInt8]
        switch plan {
        case let .frame(bytes, events):
            frame = bytes
            metrics.eventsSent += events
        case let .resync(since):
            frame = store.encodeSnapshot(matching: subscription.watch, since: since, now: Clock.now())
            fanOut.markResynced(subscription, seq: store.seq)
            metrics.eventsSent += 1
        }
        metrics.framesSent += 1
        guard writeBuffer.writeText(frame, to: connection.wsi) else { return -1 }
        if subscription.hasPending || connection.closeReason != nil { subscription.requestWrite() }
        return 0
    }

    /// A message from a WebSocket client: one event or an array, applied like `POST /api/events`,
    /// except that each bad event gets its own `error` event and the rest still apply.
    func receiveMessage(_ connection: Connection, _ bytes: UnsafeRawBufferPointer, isFinal: Bool) {
        guard let subscription = connection.subscription else { return }
        if connection.incomingTooLarge || connection.incoming.count + bytes.count > config.maxMessageBytes {
            connection.incomingTooLarge = true
            connection.incoming = []
        } else {
            connection.incoming.append(contentsOf: bytes)
        }
        guard isFinal else { return }
        metrics.clientMessages += 1
        defer {
            connection.incoming = []
            connection.incomingTooLarge = false
        }
        if connection.incomingTooLarge {
            sendError(APIError(.bodyTooLarge, "a message is larger than \(config.maxMessageBytes) bytes (maxMessageBytes); split it"), to: subscription)
            return
        }
        let json: JSONValue
        do {
            json = try JSONParser.parseForAPI(connection.incoming)
        } catch {
            sendError(error, to: subscription)
            return
        }
        if json["type"] == .string("auth") {
            authenticate(connection, subscription, json)
            return
        }
        let items: [JSONValue]
        if case let .array(elements) = json { items = elements } else { items = [json] }
        let now = Clock.now()
        var events: [OutboundEvent] = []
        for (index, item) in items.enumerated() {
            do {
                let command = try Command.parse(event: item)
                try config.publishing.authorize(connection.credential, id: command.id)
                events += try store.apply(command, now: now).events
            } catch {
                var taskID: String?
                if case let .string(id)? = item["id"] { taskID = id }
                sendError((items.count > 1 ? error.within("events[\(index)]") : error), to: subscription, id: taskID)
            }
        }
        publish(events)
    }

    private func sendError(_ error: APIError, to subscription: Subscription, id: String? = nil) {
        metrics.clientErrors += 1
        subscription.sendDirect(error.encodedEvent(id: id))
    }

    /// `{"type":"auth","token":"…"}`: for browsers, which cannot set headers on a WebSocket.
    private func authenticate(_ connection: Connection, _ subscription: Subscription, _ message: JSONValue) {
        guard case let .string(token)? = message["token"] else {
            sendError(APIError(.missingField, "an auth message needs \"token\"", field: "token"), to: subscription)
            return
        }
        let credential = credential(of: connection.wsi, token: token)
        guard case let .publisher(publisher) = credential else {
            sendError(APIError(.unauthorized, "the token matches no publisher in config.json", field: "token"), to: subscription)
            return
        }
        connection.credential = credential
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("type"); writer.string("auth")
        writer.key("ok"); writer.bool(true)
        writer.key("publisher"); writer.string(publisher.name)
        writer.key("patterns"); writer.string(publisher.patterns.key)
        writer.endObject()
        subscription.sendDirect(writer.bytes)
    }

    func closeConnection(_ sessionData: UnsafeMutableRawPointer?) {
        guard let connection = Connection.detach(sessionData) else { return }
        if let subscription = connection.subscription { fanOut.unsubscribe(subscription) }
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

/// The single entry point lws calls for every connection of the context.
private func ringcastCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                              _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let serverPointer = lws_context_user(lws_get_context(wsi)) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    let server = Unmanaged<RingcastServer>.fromOpaque(serverPointer).takeUnretainedValue()
    switch reason {
    case LWS_CALLBACK_HTTP:
        // The path lws passes is the part after the mount point; the full one comes from the headers.
        return server.beginHTTP(wsi, sessionData: user)
    case LWS_CALLBACK_HTTP_BODY:
        if let connection = Connection.find(user), let input {
            server.receiveBody(connection, UnsafeRawBufferPointer(start: input, count: length))
        }
        return 0
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if let connection = Connection.find(user) { server.answer(connection) }
        return 0
    case LWS_CALLBACK_HTTP_WRITEABLE:
        guard let connection = Connection.find(user) else { return 0 }
        return server.writeHTTP(connection, sessionData: user)
    case LWS_CALLBACK_CLOSED_HTTP, LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        server.closeConnection(user)
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return server.acceptsWebSocket(wsi) ? 0 : 1
    case LWS_CALLBACK_ESTABLISHED:
        return server.openWatcher(wsi, sessionData: user)
    case LWS_CALLBACK_SERVER_WRITEABLE:
        guard let connection = Connection.find(user) else { return 0 }
        return server.writeWatcher(connection)
    case LWS_CALLBACK_RECEIVE:
        if let connection = Connection.find(user) {
            let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
            let isFinal = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            server.receiveMessage(connection, bytes, isFinal: isFinal)
        }
        return 0
    case LWS_CALLBACK_CLOSED:
        server.closeConnection(user)
        return 0
    default:
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
}
