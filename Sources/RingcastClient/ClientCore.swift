import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform

/// One event waiting to be sent, or a flush marker (`type` "flush": everything before it is to be
/// acknowledged by the server). An `update` slot may still take later updates of its task.
struct Outgoing {
    let type: String
    let id: String
    var fields: [(String, JSONValue)]

    static func flushMarker() -> Outgoing { Outgoing(type: "flush", id: "", fields: []) }
    var isFlush: Bool { type == "flush" }

    /// An update that says which control requests its task takes: it travels as an event of its own,
    /// never merged, so a server that does not know the field refuses nothing else with it.
    static func controls(_ actions: [RingcastClient.ControlAction], for id: String) -> Outgoing {
        Outgoing(type: "update", id: id, fields: [("controls", .array(actions.map { .string($0.rawValue) }))])
    }
    var isControls: Bool { type == "update" && fields.count == 1 && fields[0].0 == "controls" }

    /// Fields an update may carry that change more than progress: they are never merged over.
    static let significantFields: Set<String> = ["state", "visible", "modal", "hideAfter"]
    var isSignificant: Bool { type == "update" && fields.contains { Outgoing.significantFields.contains($0.0) } }

    mutating func merge(_ newer: [(String, JSONValue)]) {
        // Counts without a fraction make the server derive the fraction: an older fraction must not win.
        let setsUnits = newer.contains { $0.0 == "completed" || $0.0 == "total" }
        if setsUnits, !newer.contains(where: { $0.0 == "progress" }) { fields.removeAll { $0.0 == "progress" } }
        for (key, value) in newer {
            if let index = fields.firstIndex(where: { $0.0 == key }) { fields[index].1 = value } else { fields.append((key, value)) }
        }
    }

    func write(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("type")
        writer.string(type)
        writer.key("id")
        writer.string(id)
        for (key, value) in fields {
            writer.key(key)
            writer.value(value)
        }
        writer.endObject()
    }
}

/// The client's state and its WebSocket delegate. Every `var` is guarded by `lock`: the calls touch
/// it from any thread, the WebSocket callbacks from the client context's service thread.
/// Continuations are resumed outside the lock.
/// @unchecked Sendable: every `var` is read and written under `lock`; the `let`s are Sendable or immutable.
final class ClientCore: WebSocketDelegate, @unchecked Sendable {
    /// The connection's life: connecting (until the server's `hello`) → open → (closed by the peer)
    /// waiting → connecting …; `close()` moves any of them to closing, then closed.
    enum Lifecycle: Equatable {
        case connecting(attempt: Int)
        case open
        case waiting(attempt: Int)
        case closing
        case closed
    }

    let url: ServerURL
    let headers: [(String, String)]
    let options: RingcastClient.Options
    let context: WebSocketClientContext
    let errors: AsyncStream<RingcastClientError>
    private let errorSink: AsyncStream<RingcastClientError>.Continuation
    let controlRequests: AsyncStream<RingcastClient.ControlRequest>
    private let controlSink: AsyncStream<RingcastClient.ControlRequest>.Continuation

    private let lock = NSLock()
    private var lifecycle = Lifecycle.connecting(attempt: 0)
    private var connection: WebSocketConnection?
    /// The queue: `slots[base + i]` for i ≥ head are waiting; `base + head` events have been written.
    private var slots: [Outgoing] = []
    private var head = 0
    private var base = 0
    /// Task id → absolute index of its update slot that may still be merged into.
    private var openSlots: [String: Int] = [:]
    /// A writeable callback is on its way: no need to wake the service thread again.
    private var writeRequested = false
    private var stats = RingcastClient.Statistics()
    private var nextWaiterID = 0
    private var flushWaiters: [Int: (target: Int, continuation: CheckedContinuation<Void, Error>)] = [:]
    /// Durable flushes: each waits for the acknowledgement of the flush marker at absolute index `marker`.
    private var durableWaiters: [Int: (marker: Int, continuation: CheckedContinuation<Void, Error>)] = [:]
    /// Every slot below this absolute index is acknowledged (or given up on, when its connection died).
    private var acknowledged = 0
    /// Flush markers written on the open connection whose `flushed` has not come yet.
    private var pendingAcks: [Int] = []
    /// The protocol version the open connection's `hello` named; version 1 servers have no `flushed`.
    private var serverProtocol = 0
    /// The open connection's server refused the `controls` field (it predates control requests):
    /// controls events are no longer sent to it.
    private var controlsRefused = false
    /// Tasks that take control requests: what each offers and who acts on a request (track, withTask).
    /// What must happen before `close()` flushes (each tracker's last look), by token.
    private var closeHooks: [Int: @Sendable () -> Void] = [:]
    private var controlHandlers:
        [String: (token: Int, actions: [RingcastClient.ControlAction], act: @Sendable (RingcastClient.ControlAction) -> Void)] = [:]
    private var spaceWaiters: [Int: CheckedContinuation<Void, Error>] = [:]
    private var closedWaiter: CheckedContinuation<Void, Never>?

    init(url: ServerURL, headers: [(String, String)], options: RingcastClient.Options) throws {
        self.url = url
        self.headers = headers
        self.options = options
        let named = ProcessInfo.processInfo.environment["RINGCAST_CA_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        let tls = TLSSettings(caFile: options.caFile ?? named, insecure: options.insecure)
        context = try WebSocketClientContext(trustedCertificates: tls.effectiveCAFile, insecure: tls.insecure)
        (errors, errorSink) = AsyncStream.makeStream(of: RingcastClientError.self, bufferingPolicy: .bufferingNewest(256))
        (controlRequests, controlSink) = AsyncStream.makeStream(of: RingcastClient.ControlRequest.self, bufferingPolicy: .bufferingNewest(256))
    }

    private var waiting: Int { base + slots.count - (base + head) }
    private var written: Int { base + head }

    var isConnected: Bool { lock.withLock { lifecycle == .open } }
    var statistics: RingcastClient.Statistics { lock.withLock { stats } }
    var callsWaitingForSpace: Int { lock.withLock { spaceWaiters.count } }

    /// Connects. The lock is held across `connect` so that no callback of the new connection can
    /// look before `connection` names it (lws calls back only after its service thread has taken the
    /// connect from the context's queue; the service thread never waits for this lock while holding that one).
    func start() {
        lock.withLock { connection = context.connect(url, headers: headers, delegate: self) }
    }

    // MARK: Calls (any thread)

    private enum Admission {
        case queued(wake: WebSocketConnection?)
        case full, closed
    }

    /// Checks an event with the server's rules and queues it; with `controls`, an event saying which
    /// control requests the task takes follows it (alone when `fields` is empty and it is an update).
    func enqueue(_ type: String, _ id: String, _ fields: [(String, JSONValue)], controls: [RingcastClient.ControlAction]? = nil) async throws {
        let controlsOnly = controls != nil && type == "update" && fields.isEmpty
        try check(controlsOnly ? nil : type, id, fields)
        let outgoing =
            (controlsOnly ? [] : [Outgoing(type: type, id: id, fields: fields)]) + (controls.map { [Outgoing.controls(unique($0), for: id)] } ?? [])
        for event in outgoing {
            while true {
                switch lock.withLock({ admit(event, force: false) }) {
                case .queued(let wake):
                    wake?.requestWrite()
                case .closed:
                    throw RingcastClientError.closed
                case .full:
                    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                        let verdict: Result<Void, Error>? = lock.withLock {
                            if lifecycle == .closing || lifecycle == .closed { return .failure(RingcastClientError.closed) }
                            if waiting < options.maxQueuedEvents { return .success(()) }
                            nextWaiterID += 1
                            spaceWaiters[nextWaiterID] = continuation
                            return nil
                        }
                        if let verdict { continuation.resume(with: verdict) }
                    }
                    continue
                }
                break
            }
        }
    }

    /// Queues an event without waiting, past `maxQueuedEvents` if need be (one slot per task at a
    /// time: the tracker's samples, lease renewals, the controls a task offers). False when the
    /// event is invalid (the error goes to `errors`) or the client is closed.
    @discardableResult
    func enqueueNow(_ type: String, _ id: String, _ fields: [(String, JSONValue)]) -> Bool {
        do { try check(type, id, fields) } catch let error as RingcastClientError {
            errorSink.yield(error)
            return false
        } catch { return false }
        return admitNow(Outgoing(type: type, id: id, fields: fields))
    }

    /// Hands a problem no call can throw to `errors`.
    func report(_ error: RingcastClientError) { errorSink.yield(error) }

    private func admitNow(_ event: Outgoing) -> Bool {
        guard case .queued(let wake) = lock.withLock({ admit(event, force: true) }) else { return false }
        wake?.requestWrite()
        return true
    }

    /// Throws `.invalid` for what the server would refuse; `type` nil checks the id alone.
    func check(_ type: String?, _ id: String, _ fields: [(String, JSONValue)]) throws {
        do {
            if let type {
                _ = try Command.parse(event: .object([("type", .string(type)), ("id", .string(id))] + fields))
            } else {
                try Command.validateID(id)
            }
        } catch {
            throw RingcastClientError.invalid(code: error.code.rawValue, message: error.message, field: error.field)
        }
    }

    private func unique(_ actions: [RingcastClient.ControlAction]) -> [RingcastClient.ControlAction] {
        var seen = Set<RingcastClient.ControlAction>()
        return actions.filter { seen.insert($0).inserted }
    }

    /// Runs `hook` when the client closes, before the last flush; returns the token that removes it.
    func onClose(_ hook: @escaping @Sendable () -> Void) -> Int {
        lock.withLock {
            nextWaiterID += 1
            closeHooks[nextWaiterID] = hook
            return nextWaiterID
        }
    }

    func removeCloseHook(_ token: Int) { lock.withLock { closeHooks[token] = nil } }

    /// Runs (and forgets) the close hooks, outside the lock: they queue events of their own.
    private func runCloseHooks() {
        let hooks = lock.withLock { () -> [@Sendable () -> Void] in
            defer { closeHooks = [:] }
            return closeHooks.sorted { $0.key < $1.key }.map(\.value)
        }
        for hook in hooks { hook() }
    }

    // MARK: Control requests (any thread)

    /// Offers `actions` for task `id` (an event saying so is queued) and routes the requests that
    /// arrive for it to `act`, on a global queue. Returns the token `withdrawControls` takes.
    func offerControls(
        _ actions: [RingcastClient.ControlAction], for id: String,
        act: @escaping @Sendable (RingcastClient.ControlAction) -> Void
    ) -> Int {
        let token: Int = lock.withLock {
            nextWaiterID += 1
            controlHandlers[id] = (nextWaiterID, unique(actions), act)
            return nextWaiterID
        }
        _ = admitNow(.controls(unique(actions), for: id))
        return token
    }

    /// Stops routing requests for `id` to the handler `token` named; with `announce`, tells the
    /// server the task takes none any more (a task that has ended needs no word).
    func withdrawControls(for id: String, token: Int, announce: Bool) {
        let removed: Bool = lock.withLock {
            guard controlHandlers[id]?.token == token else { return false }
            controlHandlers[id] = nil
            return true
        }
        if removed, announce { _ = admitNow(.controls([], for: id)) }
    }

    /// Under the lock: merges into the task's open slot, or appends, or says why not. `force`
    /// appends past `maxQueuedEvents`.
    private func admit(_ event: Outgoing, force: Bool) -> Admission {
        if lifecycle == .closing || lifecycle == .closed { return .closed }
        if event.isControls {
            // The open connection's server does not take them: say nothing it would refuse again.
            if controlsRefused { return .queued(wake: nil) }
        } else if event.type == "update", let index = openSlots[event.id] {
            slots[index - base].merge(event.fields)
            if event.isSignificant { openSlots[event.id] = nil }
            stats.accepted += 1
            stats.coalesced += 1
            return .queued(wake: wakeIfNeeded())
        }
        guard force || waiting < options.maxQueuedEvents else { return .full }
        slots.append(event)
        openSlots[event.id] = event.type == "update" && !event.isSignificant && !event.isControls ? base + slots.count - 1 : nil
        if !event.isControls { stats.accepted += 1 }
        return .queued(wake: wakeIfNeeded())
    }

    /// Under the lock: the connection to wake, when it is open and no writeable callback is pending.
    private func wakeIfNeeded() -> WebSocketConnection? {
        guard lifecycle == .open, !writeRequested, let connection else { return nil }
        writeRequested = true
        return connection
    }

    /// Waits until everything queued before it has been written (`durable` false) or acknowledged by
    /// the server as kept (`durable` true: a flush marker goes out behind it).
    func flush(durable: Bool, timeout: Double?) async throws {
        let id: Int = lock.withLock {
            nextWaiterID += 1
            return nextWaiterID
        }
        if let timeout {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                self?.failFlushWaiter(id, with: RingcastClientError.timedOut)
            }
        }
        var wake: WebSocketConnection?
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            let verdict: Result<Void, Error>? = lock.withLock {
                let target = base + slots.count
                if durable {
                    if written >= target, acknowledged >= written { return .success(()) }
                    if lifecycle == .closed { return .failure(RingcastClientError.closed) }
                    // One marker serves every flush that nothing was queued between.
                    var marker = target - 1
                    if slots.last?.isFlush != true || marker < written {
                        slots.append(.flushMarker())
                        marker = target
                        wake = wakeIfNeeded()
                    }
                    durableWaiters[id] = (marker, continuation)
                    return nil
                }
                if written >= target { return .success(()) }
                if lifecycle == .closed { return .failure(RingcastClientError.closed) }
                flushWaiters[id] = (target, continuation)
                return nil
            }
            if let verdict { continuation.resume(with: verdict) }
            wake?.requestWrite()
        }
    }

    private func failFlushWaiter(_ id: Int, with error: Error) {
        let waiter = lock.withLock { flushWaiters.removeValue(forKey: id)?.continuation ?? durableWaiters.removeValue(forKey: id)?.continuation }
        waiter?.resume(throwing: error)
    }

    /// Under the lock: takes the durable waiters whose marker is below `index`.
    private func takeDurableWaiters(below index: Int) -> [CheckedContinuation<Void, Error>] {
        let due = durableWaiters.filter { $0.value.marker < index }
        for id in due.keys { durableWaiters[id] = nil }
        return due.values.map(\.continuation)
    }

    func close(timeout: Double) async {
        let alreadyClosing: Bool = lock.withLock {
            if lifecycle == .closing || lifecycle == .closed { return true }
            return false
        }
        if alreadyClosing { return }
        runCloseHooks()
        // Calls made before close() still go out and are kept, if a connection comes within the timeout.
        try? await flush(durable: true, timeout: timeout)
        let connection: WebSocketConnection? = lock.withLock {
            lifecycle = .closing
            return self.connection
        }
        failSpaceWaiters()
        if let connection {
            // Wait (briefly) for the close handshake, then stop the context's thread.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let gone: Bool = lock.withLock {
                    if self.connection == nil { return true }
                    closedWaiter = continuation
                    return false
                }
                if gone {
                    continuation.resume()
                    return
                }
                connection.close()
                DispatchQueue.global().asyncAfter(deadline: .now() + 1) { [weak self] in self?.resumeClosedWaiter() }
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let context = self.context
            DispatchQueue.global().async {
                context.shutdown()
                continuation.resume()
            }
        }
        finish()
    }

    /// The client was dropped without `close()`: stop without waiting (deinit may run on any thread).
    func abandon() {
        let (wasClosed, connection): (Bool, WebSocketConnection?) = lock.withLock {
            let wasClosed = lifecycle == .closed
            lifecycle = .closed
            return (wasClosed, self.connection)
        }
        guard !wasClosed else { return }
        runCloseHooks()
        connection?.close()
        let context = self.context
        DispatchQueue.global().async { context.shutdown() }
        finish()
    }

    private func finish() {
        let (flushes, spaces): ([CheckedContinuation<Void, Error>], [CheckedContinuation<Void, Error>]) = lock.withLock {
            lifecycle = .closed
            connection = nil
            defer {
                flushWaiters = [:]
                durableWaiters = [:]
                spaceWaiters = [:]
            }
            return (flushWaiters.values.map(\.continuation) + durableWaiters.values.map(\.continuation), Array(spaceWaiters.values))
        }
        for continuation in flushes + spaces { continuation.resume(throwing: RingcastClientError.closed) }
        errorSink.finish()
        controlSink.finish()
    }

    private func failSpaceWaiters() {
        let spaces = lock.withLock { () -> [CheckedContinuation<Void, Error>] in
            defer { spaceWaiters = [:] }
            return Array(spaceWaiters.values)
        }
        for continuation in spaces { continuation.resume(throwing: RingcastClientError.closed) }
    }

    private func resumeClosedWaiter() {
        let waiter = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { closedWaiter = nil }
            return closedWaiter
        }
        waiter?.resume()
    }

    // MARK: WebSocket callbacks (the context's service thread)

    /// The socket is open; the client writes once the server's `hello` has said its protocol version.
    func webSocketDidOpen(_ connection: WebSocketConnection) {}

    /// Under the lock: the server greeted the connection; returns whether to ask for a write.
    private func greeted(_ connection: WebSocketConnection, protocolVersion: Int) -> Bool {
        guard connection === self.connection, case .connecting = lifecycle else { return false }
        lifecycle = .open
        serverProtocol = protocolVersion
        pendingAcks = []
        controlsRefused = false
        stats.connections += 1
        if stats.connections > 1 {
            // A new connection (the server may have restarted): say again which tasks take requests,
            // so the server routes them to this socket.
            for (id, handler) in controlHandlers.sorted(by: { $0.key < $1.key }) { _ = admit(.controls(handler.actions, for: id), force: true) }
        }
        writeRequested = waiting > 0
        return writeRequested
    }

    func webSocketNextMessage(_ connection: WebSocketConnection) -> [UInt8]? {
        var resumed: [CheckedContinuation<Void, Error>] = []
        let frame: [UInt8]? = lock.withLock {
            guard connection === self.connection, lifecycle == .open || lifecycle == .closing else {
                writeRequested = false
                return nil
            }
            // A server without acknowledgements (protocol 1) is sent no markers: written is all it
            // gives. A server that refused `controls` is sent no more of them.
            func skippable(_ slot: Outgoing) -> Bool { (slot.isFlush && serverProtocol < 2) || (slot.isControls && controlsRefused) }
            while head < slots.count, skippable(slots[head]) {
                head += 1
                if serverProtocol < 2 {
                    acknowledged = written
                    resumed += takeDurableWaiters(below: written)
                }
            }
            guard waiting > 0 else {
                writeRequested = false
                for (id, waiter) in flushWaiters where waiter.target <= written {
                    flushWaiters[id] = nil
                    resumed.append(waiter.continuation)
                }
                return nil
            }
            var writer = JSONWriter(capacity: 4096)
            var single = false
            if slots[head].isFlush {
                // A marker travels alone: the server reads `flush` only as a message of its own.
                let marker = base + head
                writer.beginObject()
                writer.key("type")
                writer.string("flush")
                writer.key("ref")
                writer.string(String(marker))
                writer.endObject()
                pendingAcks.append(marker)
                head += 1
            } else {
                // Events up to the next marker, as an array; one event alone goes as an object.
                writer.beginArray()
                var taken = 0
                while head < slots.count, !slots[head].isFlush, taken < options.maxEventsPerFrame,
                    taken == 0 || writer.bytes.count < options.maxFrameBytes
                {
                    let index = base + head
                    let slot = slots[head]
                    head += 1
                    if openSlots[slot.id] == index { openSlots[slot.id] = nil }
                    if skippable(slot) { continue }
                    slot.write(into: &writer)
                    taken += 1
                }
                writer.endArray()
                stats.sent += taken
                stats.frames += 1
                single = taken == 1
            }
            // The socket layer asks again after a message it was given.
            writeRequested = true
            for (id, waiter) in flushWaiters where waiter.target <= written {
                flushWaiters[id] = nil
                resumed.append(waiter.continuation)
            }
            if waiting < options.maxQueuedEvents {
                resumed += spaceWaiters.values
                spaceWaiters = [:]
            }
            compact()
            return single ? Array(writer.bytes.dropFirst().dropLast()) : writer.bytes
        }
        for continuation in resumed { continuation.resume() }
        return frame
    }

    /// Under the lock: drops written slots once they are most of the array.
    private func compact() {
        guard head >= 1024, head * 2 >= slots.count else { return }
        slots.removeFirst(head)
        base += head
        head = 0
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        guard let json = try? JSONParser.parse(message) else { return }
        let events: [JSONValue]
        if case .array(let items) = json { events = items } else { events = [json] }
        for event in events {
            switch event["type"] {
            case .string("hello")?:
                var version = 1
                if case .number(let number)? = event["protocol"] { version = Int(number) }
                if lock.withLock({ greeted(connection, protocolVersion: version) }) { connection.requestWrite() }
            case .string("flushed")?:
                guard case .string(let ref)? = event["ref"], let marker = Int(ref) else { continue }
                let resumed: [CheckedContinuation<Void, Error>] = lock.withLock {
                    guard connection === self.connection, pendingAcks.contains(marker) else { return [] }
                    // The server answers in order: a marker's acknowledgement covers every one before it.
                    pendingAcks.removeAll { $0 <= marker }
                    acknowledged = max(acknowledged, marker + 1)
                    return takeDurableWaiters(below: marker + 1)
                }
                for continuation in resumed { continuation.resume() }
            case .string("control")?:
                guard case .string(let id)? = event["id"], case .string(let name)? = event["action"],
                    let action = RingcastClient.ControlAction(rawValue: name)
                else { continue }
                var seq: Int?
                if case .number(let number)? = event["seq"] { seq = Int(number) }
                controlSink.yield(RingcastClient.ControlRequest(id: id, action: action, seq: seq))
                if let act = lock.withLock({ controlHandlers[id]?.act }) {
                    // Off the service thread: a Progress's cancellation handler may take its time.
                    DispatchQueue.global().async { act(action) }
                }
            case .string("error")?:
                guard case .string(let code)? = event["error"] else { continue }
                let messageText: String
                if case .string(let text)? = event["message"] { messageText = text } else { messageText = "" }
                var field: String?
                if case .string(let name)? = event["field"] { field = name }
                if code == "unknown_field", field == "controls" || field?.hasSuffix(".controls") == true {
                    // A server from before control requests: said once per connection, then not sent again.
                    let first: Bool = lock.withLock {
                        guard connection === self.connection else { return false }
                        defer { controlsRefused = true }
                        return !controlsRefused
                    }
                    if !first { continue }
                }
                errorSink.yield(.server(code: code, message: messageText, field: field))
            default:
                continue
            }
        }
    }

    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) {
        enum Next {
            case nothing
            case closed(CheckedContinuation<Void, Never>?)
            case reconnect(after: Double, attempt: Int)
        }
        var unacknowledged: [CheckedContinuation<Void, Error>] = []
        let next: Next = lock.withLock {
            guard connection === self.connection else { return .nothing }
            self.connection = nil
            writeRequested = false
            // What this connection was sent and never acknowledged may be lost: every flush waiting
            // now covers it and says so; later flushes answer only for what follows.
            if written > acknowledged {
                unacknowledged = durableWaiters.values.map(\.continuation)
                durableWaiters = [:]
            }
            pendingAcks = []
            acknowledged = written
            switch lifecycle {
            case .closing, .closed:
                defer { closedWaiter = nil }
                return .closed(closedWaiter)
            case .open:
                lifecycle = .waiting(attempt: 0)
            case .connecting(let attempt), .waiting(let attempt):
                lifecycle = .waiting(attempt: attempt + 1)
            }
            guard case .waiting(let attempt) = lifecycle else { return .nothing }
            let ceiling = min(options.reconnectCap, options.reconnectBase * pow(2, Double(min(attempt, 30))))
            return .reconnect(after: Double.random(in: 0...ceiling), attempt: attempt)
        }
        let lost = RingcastClientError.connection("the connection closed before the server acknowledged what was written on it; it may be lost")
        for continuation in unacknowledged { continuation.resume(throwing: lost) }
        switch next {
        case .nothing:
            return
        case .closed(let waiter):
            waiter?.resume()
        case .reconnect(let delay, let attempt):
            errorSink.yield(.connection(error ?? "the server closed the connection"))
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in self?.reconnect(attempt: attempt) }
        }
    }

    private func reconnect(attempt: Int) {
        let proceed: Bool = lock.withLock {
            guard lifecycle == .waiting(attempt: attempt) else { return false }
            lifecycle = .connecting(attempt: attempt)
            return true
        }
        if proceed { start() }
    }
}
