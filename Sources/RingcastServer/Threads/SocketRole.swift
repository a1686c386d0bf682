import RingcastCore
import RingcastLWS
import RingcastPlatform

/// The WebSocket role of a service thread: watchers and publishers on `/ws`, with the deadlines
/// each may have (the end of its wait for an `auth` message, its signed token's `exp`, and the
/// write deadline, WriteDeadline.swift), and the watchers to write to when the loop's round ends.
/// The protocol itself (the query, hello and snapshot, messages, auth) is the core's; this is the
/// transport. Service thread only.
final class SocketRole {
    let handshakeSeconds: Double
    /// `writeTimeoutSeconds`, in seconds (0: no write deadline).
    let writeTimeoutSeconds: Int
    /// Closes watchers whose signed token expired, or that never sent the `auth` they were waiting for.
    private var sessionTimer: LoopTimer?
    /// The sockets with such a deadline, and when it falls (Unix ms).
    @exclusivity(unchecked) private var sessionDeadlines: [ObjectIdentifier: (socket: SocketPeer, at: Double)] = [:]
    /// WebSockets with output waiting: since when the peer took none of it (Unix ms), and what it
    /// had acknowledged then (WriteDeadline.swift).
    @exclusivity(unchecked) var writeWatch: [ObjectIdentifier: (socket: SocketPeer, since: Double, acked: Int64?)] = [:]
    var writeWatchTimer: LoopTimer?
    /// Watchers to write to when this round of the loop ends (`queueWriteAtRoundEnd`).
    @exclusivity(unchecked) private var queuedForRoundEnd: [SocketPeer] = []
    /// Where a stream's writeable callback frames what it sends (StreamRole.swift), kept between
    /// callbacks so that a delivery allocates nothing.
    @exclusivity(unchecked) var streamScratch: [UInt8] = []

    init(config: ServerConfig) {
        handshakeSeconds = Double(config.handshakeTimeoutSeconds)
        writeTimeoutSeconds = config.writeTimeoutSeconds
    }

    func prepare(_ loop: ServiceLoop, sessionDeadlineFell: @escaping () -> Void, writeWatchFired: @escaping () -> Void) throws {
        sessionTimer = try loop.makeTimer(sessionDeadlineFell)
        writeWatchTimer = try loop.makeTimer(writeWatchFired)
    }

    /// Arms the session timer for the socket's deadline: the end of the wait for its `auth`
    /// message, or its signed token's `exp`.
    func watchSessionDeadline(of socket: SocketPeer) {
        let key = ObjectIdentifier(socket)
        guard let session = socket.session else { return }
        var deadline = session.expiresAt ?? .infinity
        if session.awaitingAuth { deadline = min(deadline, socket.openedAt + handshakeSeconds * 1000) }
        guard deadline.isFinite else {
            sessionDeadlines.removeValue(forKey: key)
            return
        }
        sessionDeadlines[key] = (socket, deadline)
        armSessionTimer()
    }

    func armSessionTimer() {
        guard let next = sessionDeadlines.values.map(\.at).min() else {
            sessionTimer?.cancel()
            return
        }
        sessionTimer?.schedule(microseconds: max(1000, UnixTime.microseconds(until: next, now: Clock.now())))
    }

    /// The sockets whose session deadline has fallen, let go of.
    func takeFallenSessions(now: Double) -> [SocketPeer] {
        var fallen: [SocketPeer] = []
        for (key, entry) in sessionDeadlines where entry.at <= now {
            sessionDeadlines.removeValue(forKey: key)
            fallen.append(entry.socket)
        }
        return fallen
    }

    /// The socket's connection is gone: no deadline of its own is watched any more.
    func forget(_ socket: SocketPeer) {
        sessionDeadlines.removeValue(forKey: ObjectIdentifier(socket))
        writeWatch.removeValue(forKey: ObjectIdentifier(socket))
    }

    /// The delivery path's short cut: a watcher with new events and no write on order is written
    /// to when this round of the loop ends, not in a writeable callback of its own, when lws allows
    /// it then (`mayWriteOutsideCallback`). Waiting for the round's end keeps what batching a
    /// writeable callback gave: whatever a round brings (a publisher's whole read, a window)
    /// leaves in one frame per watcher, and the busier the server the more a round brings. A
    /// frame that is to close the socket always waits for the callback, since only a callback's
    /// answer closes it. False leaves the watcher to a writeable callback.
    func queueWriteAtRoundEnd(_ socket: SocketPeer) -> Bool {
        guard socket.closeReason == nil, !socket.peerIsClosing, !socket.isCompressed else { return false }
        if !socket.isQueuedToWrite {
            socket.isQueuedToWrite = true
            queuedForRoundEnd.append(socket)
        }
        return true
    }

    /// The round is over: the watchers `queueWriteAtRoundEnd` took are written to (`write`), or,
    /// where lws holds their output now, get a writeable callback ordered.
    func writeQueuedSockets(_ write: (SocketPeer, LWSConnection) -> Bool) {
        guard !queuedForRoundEnd.isEmpty else { return }
        var index = 0
        while index < queuedForRoundEnd.count {
            let socket = queuedForRoundEnd[index]
            index += 1
            socket.isQueuedToWrite = false
            // A socket released in the round has no subscription, and its connection is gone.
            guard let subscription = socket.subscription else { continue }
            let link = socket.link
            if socket.closeReason == nil, !socket.peerIsClosing, link.mayWriteOutsideCallback {
                if !write(socket, link) { link.closeSoon() }
            } else if subscription.hasPending || socket.closeReason != nil {
                subscription.requestWrite()
            }
        }
        queuedForRoundEnd.removeAll(keepingCapacity: true)
    }
}

/// The worker's WebSocket callbacks.
extension ServiceWorker {
    func acceptsUpgrade(_ link: LWSConnection) -> Bool {
        guard link.requestLine()?.path == "/ws" else {
            logger.debug("refused a WebSocket upgrade outside /ws")
            return false
        }
        do throws(APIError) {
            let host = try checkHead(link)
            try http.gate.checkOrigin(RequestHeaders(host: host, origin: link.header(.origin)))
        } catch {
            ledger.logRefusal(
                error.code == .misdirected ? "host" : error.code == .forbidden ? "origin" : "request", offender: link.peerAddress,
                "refused a WebSocket from \(link.peerAddress): \(error.message)")
            return false
        }
        return true
    }

    func openSocket(_ link: LWSConnection) -> Bool {
        let socket = SocketPeer(link: link, worker: self, messageLimit: config.maxMessageBytes)
        // lws agrees to permessage-deflate whenever it offers it and the client asks.
        socket.isCompressed = config.compression && link.header(.webSocketExtensions)?.contains("permessage-deflate") == true
        switch SocketRequest.parse(link.queryArguments()) {
        case .failure(let error):
            release(link.attach(Connection(.watcher(socket))))
            socket.closeReason = (.policyViolation, "invalid \(error.field ?? "query")")
            let (frame, seq) = state.refuseWatcher(error)
            let subscription = fanOut.subscribe(SocketRequest.nothing, lastSeq: seq, writer: socket)
            socket.subscription = subscription
            subscription.sendDirect(frame)
        case .success(let request):
            let headers = RequestHeaders(
                host: link.header(.host), origin: link.header(.origin), authorization: link.header(.authorization), cookie: link.header(.cookie),
                proxied: proxiedIdentity(link))
            let fromLoopback = isFromLoopback(link)
            prepareProviderKeys(headers, now: Clock.now())
            // The snapshot and the seq it was taken at, in one look: events up to that seq still in
            // this thread's inbox are skipped for this watcher (FanOut never sends one it has).
            let (opening, seq, _) = state.connectWatcher(
                request, headers: headers, fromLoopback: fromLoopback, controls: ControlChannel(worker: self, socket: socket))
            socket.session = opening.session
            release(link.attach(Connection(request.mode == .publish ? .publisher(socket) : .watcher(socket))))
            counters.socketsOpened.add(1, ordering: .relaxed)
            count { $0.webSocketsOpened[request.mode == .publish ? "publisher" : "watcher"] += 1 }
            // Counted before anything is sent: one past its entry's share gets hello and the
            // reason, not a snapshot it may not keep.
            let refusal = opening.close == nil ? admitConnection(socket, of: opening.session) : nil
            if let refusal {
                let error = APIError(.rateLimited, refusal.reason)
                subscribe(socket, to: SocketRequest.nothing, lastSeq: seq, frames: [opening.frames[0], error.encodedEvent()])
            } else {
                subscribe(socket, to: opening.session.watch, lastSeq: seq, frames: opening.frames)
            }
            if let close = opening.close ?? refusal {
                closeSocket(socket, close, peer: link.peerAddress)
            } else {
                sockets.watchSessionDeadline(of: socket)
            }
            logger.debug("\(request.mode.rawValue) socket from \(link.peerAddress) watching \(opening.session.watch.key)")
        }
        counters.update(from: fanOut)
        return true
    }

    /// Puts the socket in the fan-out for `watch`, with `frames` (hello, a snapshot, an error)
    /// before anything else it receives.
    func subscribe(_ socket: SocketPeer, to watch: WatchSet, lastSeq: UInt64, frames: [[UInt8]]) {
        let subscription = fanOut.subscribe(watch, lastSeq: lastSeq, writer: socket)
        socket.subscription = subscription
        for frame in frames { subscription.sendDirect(frame) }
    }

    /// An `auth` message changed what a watcher reads (or let one that waited for it in): it
    /// starts over in the fan-out with a full snapshot of what it may read now.
    private func resubscribe(_ socket: SocketPeer) {
        guard let session = socket.session, let old = socket.subscription else { return }
        let owed = old.takeDirectFrames()
        fanOut.unsubscribe(old)
        let (snapshot, seq, _) = state.snapshot(matching: session.watch)
        subscribe(socket, to: session.watch, lastSeq: seq, frames: owed + [snapshot])
        counters.update(from: fanOut)
    }

    /// Counts the socket against its entry's `maxConnections` (across every thread); the close
    /// it gets when the entry already holds them all.
    func admitConnection(_ socket: SocketPeer, of session: SocketSession) -> SocketClose? {
        guard let grant = session.credential.grant, let limit = grant.maxConnections else { return nil }
        let admitted: Bool = ledger.connectionsByEntry.withLock { counts in
            guard counts[grant.name, default: 0] < limit else { return false }
            counts[grant.name, default: 0] += 1
            return true
        }
        guard admitted else {
            return SocketClose(
                code: SocketClose.tooManyConnections, reason: "\(grant.described) holds its \(limit) connections (maxConnections)")
        }
        socket.countedEntry = grant.name
        return nil
    }

    private func releaseConnectionCount(_ socket: SocketPeer) {
        guard let name = socket.countedEntry else { return }
        socket.countedEntry = nil
        ledger.connectionsByEntry.withLock { counts in
            if counts[name, default: 0] <= 1 { counts.removeValue(forKey: name) } else { counts[name]! -= 1 }
        }
    }

    /// Closes the socket once what it is owed has left (the error event first), with `close`'s code and reason.
    func closeSocket(_ socket: SocketPeer, _ close: SocketClose, peer: String) {
        guard socket.closeReason == nil else { return }
        socket.closeReason = (CloseStatus(code: close.code), close.reason)
        ledger.logRefusal(
            close.code == SocketClose.tooManyConnections ? RefusalReason.quota.rawValue : RefusalReason.token.rawValue, offender: peer,
            "closed a WebSocket from \(peer) (\(close.code)): \(close.reason)")
        socket.subscription?.requestWrite()
    }

    /// The session timer: watchers that never signed in, and those whose token expired, are closed.
    func sessionDeadlineFell() {
        let now = Clock.now()
        for socket in sockets.takeFallenSessions(now: now) {
            guard let session = socket.session else { continue }
            if let expiresAt = session.expiresAt, expiresAt <= now {
                closeSocket(
                    socket, SocketClose(code: SocketClose.tokenExpired, reason: "the token expired: sign in again"), peer: socket.link.peerAddress)
            } else if session.awaitingAuth {
                closeSocket(
                    socket,
                    SocketClose(
                        code: SocketClose.unauthorized,
                        reason: "reading needs a token: none came within \(config.handshakeTimeoutSeconds) s (send {\"type\":\"auth\",…})"),
                    peer: socket.link.peerAddress)
            }
        }
        sockets.armSessionTimer()
    }

    /// The delivery path: every watcher's writeable callback. Borrows its objects rather than
    /// retaining them (`withAttachment`), since this runs once per delivery.
    func writeSocket(on link: LWSConnection) -> Bool {
        link.withAttachment(as: Connection.self) { connection in
            guard let socket = connection.socket else { return true }
            return write(socket, on: link)
        } ?? true
    }

    /// The round is over: the watchers queued to write at its end are written to.
    func writeQueuedSockets() { sockets.writeQueuedSockets { write($0, on: $1) } }

    /// Frames one writeable callback may send while the socket takes them (the reference server's
    /// batch): a new watcher's hello and snapshot leave in one pass of the service loop, not two.
    static let framesPerWriteable = 8

    /// The largest piece of a message written at once. lws keeps a copy of whatever of a write
    /// the kernel did not take, so a snapshot of megabytes written whole to a watcher that reads
    /// nothing would sit copied in memory once per watcher; in fragments of this size, lws holds at
    /// most one fragment, the kernel at most `sendBufferBytes`, and the message itself is shared.
    static let fragmentBytes = 64 * 1024

    private func write(_ socket: SocketPeer, on link: LWSConnection) -> Bool {
        if socket.stream != nil { return writeStream(socket, on: link) }
        guard let subscription = socket.subscription else { return true }
        subscription.writeableCallbackBegan()
        if socket.unfinished != nil {
            if case .failed = writeNextFragment(of: socket, on: link) { return false }
            if socket.unfinished != nil || link.isChoked {
                subscription.requestWrite()
                sockets.watchOutput(of: socket)
                return true
            }
        }
        var frames = 0
        var written = LWSConnection.SocketWrite.sent
        repeat {
            let seenBefore = subscription.newestSeqSent
            guard let plan = fanOut.nextFrame(for: subscription) else {
                if frames == 0, let reason = socket.closeReason {
                    link.setCloseReason(reason.status, reason.text)
                    return false
                }
                break
            }
            let sent: (bytes: Int, events: Int)
            switch plan {
            case .frame(let bytes, let count):
                counters.wrote(events: count)
                written = writeMessage(bytes, to: socket, on: link)
                sent = (bytes.count, count)
            case .resync(let since):
                let (snapshot, seq, _) = state.snapshot(matching: subscription.watch, since: since)
                fanOut.markResynced(subscription, seq: seq)
                counters.wrote(events: 1)
                written = writeMessage(snapshot, to: socket, on: link)
                sent = (snapshot.count, 1)
            }
            if case .failed = written { return false }
            figures.noteFrameWritten(
                bytes: sent.bytes, events: sent.events, newestSeq: subscription.newestSeqSent > seenBefore ? subscription.newestSeqSent : nil)
            frames += 1
            // lws takes a second write in one callback only while nothing of the first is buffered.
        } while frames < (socket.isCompressed ? 1 : Self.framesPerWriteable) && subscription.hasPending && !link.isChoked
            && socket.unfinished == nil
        let pending = subscription.hasPending
        if pending || socket.closeReason != nil || socket.unfinished != nil { subscription.requestWrite() }
        // The last write says whether lws holds output: no second look into lws per delivery. (Matched
        // by case: `==` on another module's enum is a call through its Equatable witness.)
        var held = false
        if case .held = written { held = true }
        if pending || socket.unfinished != nil || held { sockets.watchOutput(of: socket) }
        return true
    }

    /// Writes a message whole, or, past `fragmentBytes`, its first fragment (the rest follows in
    /// the next writeable callbacks, before anything else). lws 4.1.6's deflater takes a message
    /// only whole, so a compressed socket gets it whole.
    private func writeMessage(_ bytes: [UInt8], to socket: SocketPeer, on link: LWSConnection) -> LWSConnection.SocketWrite {
        guard bytes.count > Self.fragmentBytes, !socket.isCompressed else { return link.writeText(bytes) }
        socket.unfinished = (bytes, 0)
        return writeNextFragment(of: socket, on: link)
    }

    private func writeNextFragment(of socket: SocketPeer, on link: LWSConnection) -> LWSConnection.SocketWrite {
        guard let (bytes, offset) = socket.unfinished else { return .sent }
        let end = min(bytes.count, offset + Self.fragmentBytes)
        socket.unfinished = end == bytes.count ? nil : (bytes, end)
        return link.writeTextFragment(bytes, offset..<end, first: offset == 0, last: end == bytes.count)
    }

    /// A piece of a client's message; a whole one goes to the core's protocol, its replies to the
    /// sender and its events to the fan-out. False closes the socket (a publisher past its rate).
    func receive(_ piece: UnsafeRawBufferPointer, isLast: Bool, isBinary: Bool, on link: LWSConnection) -> Bool {
        guard let socket = link.attachment(as: Connection.self)?.socket, socket.subscription != nil else { return true }
        socket.incoming.append(piece)
        guard isLast, let session = socket.session else { return true }
        let (bytes, tooLarge) = socket.incoming.take()
        let now = Clock.now()
        let peer = peers[link.identifier]
        if tooLarge {
            ledger.logRefusal(
                "oversize", offender: link.peerAddress,
                "dropped a WebSocket message from \(link.peerAddress): larger than maxMessageBytes (\(config.maxMessageBytes))")
        }
        if let peer, !peer.allowance.allows(now: now) {
            state.record { $0.rateLimited += 1 }
            ledger.logRefusal(
                "rate", offender: peer.address.text,
                "closed a WebSocket from \(peer.address): past maxPublishRate (\(config.maxPublishRate.plain) events a second)")
            link.setCloseReason(.policyViolation, "publish rate over maxPublishRate")
            return false
        }
        let message: SocketMessage = tooLarge ? .tooLarge : (isBinary ? .binary : .text(bytes))
        if case .text(let text) = message { prepareProviderKeys(authMessage: text, now: now) }
        // Replies (a `flushed` acknowledgement among them) leave once storage has kept what came
        // before; in a cluster, what the message earned at once (refusals, `auth`) leaves now.
        let performed = perform(.message(message, session), now: now) { outcome in
            switch outcome {
            case .message(let reply): for frame in reply.frames { socket.subscription?.sendDirect(frame) }
            case .refused(let error): socket.subscription?.sendDirect(error.encodedEvent())
            case .request: break
            }
        }
        for frame in performed.early { socket.subscription?.sendDirect(frame) }
        if let session = performed.session {
            let before = socket.session
            socket.session = session
            if session.credential != before?.credential { grantChanged(socket, from: before) }
        }
        peer?.allowance.spend(max(1, performed.commands), now: now)
        return true
    }

    /// An `auth` message gave the socket another grant: it is counted against the new entry, its
    /// deadline follows the new token, and a watcher whose patterns changed starts over.
    func grantChanged(_ socket: SocketPeer, from before: SocketSession?) {
        guard let session = socket.session else { return }
        releaseConnectionCount(socket)
        if let close = admitConnection(socket, of: session) {
            closeSocket(socket, close, peer: socket.link.peerAddress)
            return
        }
        if session.request.mode == .watch, before?.watch != session.watch || before?.awaitingAuth == true { resubscribe(socket) }
        sockets.watchSessionDeadline(of: socket)
    }

    /// Lets go of what a finished connection held: its place in the fan-out, or its exchange.
    func release(_ previous: AnyObject?) {
        guard let connection = previous as? Connection else { return }
        switch connection.role {
        case .http(let exchange):
            exchange.isOpen = false
            http.forget(exchange)
        case .watcher(let socket), .publisher(let socket), .stream(let socket):
            releaseConnectionCount(socket)
            sockets.forget(socket)
            if let session = socket.session, socket.stream == nil {
                count { $0.webSocketsClosed[session.request.mode == .publish ? "publisher" : "watcher"] += 1 }
            }
            if let subscription = socket.subscription { fanOut.unsubscribe(subscription) }
            socket.subscription = nil
            counters.update(from: fanOut)
            guard let session = socket.session else { return }
            // A publisher gone: its leased tasks stall at once (not while the server stops; in a
            // cluster, when their lease runs out, since the stall would have to go through the log).
            let stall = loop.isRunning && !state.isClustered
            let (_, ticket) = state.change(from: index) { api, _, _ in
                ((), api.socketClosed(session, now: Clock.now(), stallTasks: stall))
            }
            if ticket != 0 || stall { settle(ticket: ticket, answer: nil) }
        }
    }
}

/// Where control frames for one socket go: posted to the socket's own service thread, whichever
/// thread (or, in a cluster, whichever node's log reader) the request was applied on, and sent in
/// the socket's subscription of the moment (an `auth` message may have replaced it since; one
/// closed meanwhile has none). It is registered while the socket opens, before its subscription
/// exists: the posted job runs after the callback that opened the socket, which subscribed it.
/// It holds the socket: the API lets go of it when the socket closes (`API.socketClosed`), and
/// the socket holds nothing of it.
/// @unchecked Sendable: the socket is touched only on the worker's thread, inside the posted job.
final class ControlChannel: ControlSink, @unchecked Sendable {
    private unowned let worker: ServiceWorker
    private let socket: SocketPeer

    init(worker: ServiceWorker, socket: SocketPeer) {
        self.worker = worker
        self.socket = socket
    }

    func send(_ frame: [UInt8]) {
        worker.loop.post { [self] in socket.subscription?.sendDirect(frame) }
    }
}
