import RingcastCore
import RingcastLWS

/// The WebSocket roles of the server: watchers and publishers on `/ws`. The protocol itself (the
/// query, hello and snapshot, messages, auth) is the core's; this is the transport. Service thread only.
extension RingcastServer {
    func acceptsUpgrade(_ link: LWSConnection) -> Bool {
        guard link.requestLine()?.path == "/ws" else {
            logger.debug("refused a WebSocket upgrade outside /ws")
            return false
        }
        do {
            try api.checkHost(link.header(.host))
            try api.checkOrigin(RequestHeaders(host: link.header(.host), origin: link.header(.origin)))
        } catch {
            logRefusal(error.code == .misdirected ? "host" : "origin", offender: link.peerAddress, "refused a WebSocket from \(link.peerAddress): \(error.message)")
            return false
        }
        return true
    }

    func openSocket(_ link: LWSConnection) -> Bool {
        let socket = SocketPeer(link: link, messageLimit: config.maxMessageBytes)
        switch SocketRequest.parse(link.queryArguments()) {
        case let .failure(error):
            release(link.attach(Connection(.watcher(socket))))
            socket.closeReason = (.policyViolation, "invalid \(error.field ?? "query")")
            let subscription = fanOut.subscribe(SocketRequest.nothing, lastSeq: store.seq, writer: socket)
            socket.subscription = subscription
            subscription.sendDirect(api.refusalFrame(error))
        case let .success(request):
            let headers = RequestHeaders(host: link.header(.host), origin: link.header(.origin), authorization: link.header(.authorization))
            let (session, frames) = api.openSocket(request, headers: headers, fromLoopback: link.isLoopbackPeer, now: Clock.now())
            socket.session = session
            release(link.attach(Connection(request.mode == .publish ? .publisher(socket) : .watcher(socket))))
            api.metrics.watchersOpened += 1
            api.metrics.webSocketsOpened[request.mode == .publish ? "publisher" : "watcher"] += 1
            let subscription = fanOut.subscribe(request.watch, lastSeq: store.seq, writer: socket)
            socket.subscription = subscription
            for frame in frames { subscription.sendDirect(frame) }
            logger.debug("\(request.mode.rawValue) socket from \(link.peerAddress) watching \(request.watch.key)")
        }
        return true
    }

    func writeSocket(on link: LWSConnection) -> Bool {
        guard let socket = link.attachment(as: Connection.self)?.socket, let subscription = socket.subscription else { return true }
        subscription.writeableCallbackBegan()
        let seenBefore = subscription.lastSeq
        guard let plan = fanOut.nextFrame(for: subscription) else {
            if let reason = socket.closeReason {
                link.setCloseReason(reason.status, reason.text)
                return false
            }
            return true
        }
        let frame: [UInt8]
        switch plan {
        case let .frame(bytes, events):
            frame = bytes
            api.metrics.eventsSent += events
            api.metrics.eventsPerFrame.observe(Double(events))
        case let .resync(since):
            frame = store.encodeSnapshot(matching: subscription.watch, since: since, now: Clock.now())
            fanOut.markResynced(subscription, seq: store.seq)
            api.metrics.eventsSent += 1
        }
        api.metrics.framesSent += 1
        guard link.writeText(frame) else { return false }
        noteFrameWritten(frame, newestSeq: subscription.lastSeq > seenBefore ? subscription.lastSeq : nil)
        if subscription.hasPending || socket.closeReason != nil { subscription.requestWrite() }
        return true
    }

    /// A piece of a client's message; a whole one goes to the core's protocol, its replies to the
    /// sender and its events to the fan-out. False closes the socket (a publisher past its rate).
    func receive(_ piece: UnsafeRawBufferPointer, isLast: Bool, isBinary: Bool, on link: LWSConnection) -> Bool {
        guard let socket = link.attachment(as: Connection.self)?.socket, let subscription = socket.subscription else { return true }
        socket.incoming.append(piece)
        guard isLast, var session = socket.session else { return true }
        let (bytes, tooLarge) = socket.incoming.take()
        let now = Clock.now()
        let peer = peers[link.identifier]
        if tooLarge { logRefusal("oversize", offender: link.peerAddress, "dropped a WebSocket message from \(link.peerAddress): larger than maxMessageBytes (\(config.maxMessageBytes))") }
        if let peer, !peer.allowance.allows(now: now) {
            api.metrics.rateLimited += 1
            logRefusal("rate", offender: peer.address, "closed a WebSocket from \(peer.address): past maxPublishRate (\(config.maxPublishRate.plain) events a second)")
            link.setCloseReason(.policyViolation, "publish rate over maxPublishRate")
            return false
        }
        let message: SocketMessage = tooLarge ? .tooLarge : (isBinary ? .binary : .text(bytes))
        let reply = api.receive(message, on: &session, now: now)
        peer?.allowance.spend(max(1, reply.events.count), now: now)
        socket.session = session
        // Replies (a `flushed` acknowledgement among them) leave once storage has kept what came before.
        publish(reply.events, durable: reply.wantsDurable) { _ in
            for frame in reply.frames { subscription.sendDirect(frame) }
        }
        return true
    }

    /// Lets go of what a finished connection held: its place in the fan-out, or its exchange.
    func release(_ previous: AnyObject?) {
        guard let connection = previous as? Connection else { return }
        switch connection.role {
        case let .http(exchange):
            exchange.isOpen = false
        case let .watcher(socket), let .publisher(socket):
            if socket.session != nil { api.metrics.webSocketsClosed[socket.session?.request.mode == .publish ? "publisher" : "watcher"] += 1 }
            if let subscription = socket.subscription { fanOut.unsubscribe(subscription) }
        }
    }
}
