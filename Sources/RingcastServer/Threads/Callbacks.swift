import RingcastCore
import RingcastLWS
import RingcastPlatform

/// Where each libwebsockets callback goes: the one dispatch from a service loop to its worker's
/// roles (admission here, HTTPRole.swift, SocketRole.swift). Service thread only.
extension ServiceWorker: ServiceHandler {
    func handle(_ event: ServiceEvent, on link: LWSConnection) -> Bool {
        assertOnThread(of: loop)
        switch event {
        case .accepted(let address):
            return admitsConnection(from: address)
        case .created:
            // lws makes the accepted socket's connection right after `accepted`, on this thread.
            if let peer = peers.accepted {
                peers[link.identifier] = peer
                peers.accepted = nil
                count { $0.connectionsAccepted += 1 }
            }
            return true
        case .destroyed:
            if let peer = peers.removeValue(forKey: link.identifier) {
                forget(peer)
                count { $0.connectionsClosed += 1 }
            }
            return true
        case .httpFilter:
            return admitsHTTP(link)
        case .httpRequest:
            // The path lws passes is the part after the mount point; the full one comes from the headers.
            return beginHTTP(link)
        case .httpBody(let piece):
            return receiveBody(piece, on: link)
        case .httpBodyComplete:
            return completeBody(on: link)
        case .httpWriteable:
            return writeHTTP(on: link)
        case .httpClosed, .closed:
            release(link.detach())
            return true
        case .upgradeRequested:
            return acceptsUpgrade(link)
        case .opened:
            return openSocket(link)
        case .writeable:
            return writeSocket(on: link)
        case .received(let piece, let isLast, let isBinary):
            return receive(piece, isLast: isLast, isBinary: isBinary, on: link)
        case .peerClosing:
            link.withAttachment(as: Connection.self) { $0.socket?.peerIsClosing = true }
            return true
        case .connectFailed, .appendHandshakeHeaders, .rawReceived:
            return true
        }
    }

    func loopWillStop(_ loop: ServiceLoop) { closeWatchers(loop) }

    func loopWasNotified(_ loop: ServiceLoop) { settle() }

    func loopRoundEnded(_ loop: ServiceLoop) { writeQueuedSockets() }

    func loopPausedAccepting(_ loop: ServiceLoop, reason: String) {
        count { $0.acceptPauses += 1 }
        ledger.logAcceptPause(reason)
    }

    func loopResumedAccepting(_ loop: ServiceLoop) {
        count { $0.acceptResumes += 1 }
        logger.debug("service thread \(index): accepting again")
    }

    /// The server holds at most `maxConnections` sockets, an address at most
    /// `maxConnectionsPerAddress` (loopback too, unless `limitLoopback` is off; a trusted proxy's
    /// address never counts), across every service thread (`Server.connections`).
    private func admitsConnection(from address: PeerAddress) -> Bool {
        // A socket accepted before whose connection lws never made: its count goes back.
        if let stale = peers.accepted { forget(stale) }
        let loopback = address.isLoopback
        // The text only where it may be counted by: a loopback peer that is not limited needs none
        // (formatting it was a tenth of an accept's cost).
        let text = !loopback || config.limitLoopback ? address.text : nil
        let countedAs = text.flatMap { config.trustedProxies.contains($0) ? nil : $0 }
        let refusal: (held: Int, limit: Int, setting: String)? = ledger.connections.withLock { book in
            guard book.total < book.limits.total else { return (book.total, book.limits.total, "maxConnections") }
            if let countedAs, book.limits.perAddress > 0 {
                let open = book.byAddress[countedAs, default: 0]
                guard open < book.limits.perAddress else { return (open, book.limits.perAddress, "maxConnectionsPerAddress") }
                book.byAddress[countedAs] = open + 1
            }
            book.total += 1
            return nil
        }
        if let refusal {
            state.record { $0.connectionsRefused += 1 }
            let holder = refusal.setting == "maxConnections" ? "the server holds" : "it holds"
            let text = text ?? address.text
            ledger.logRefusal(
                "connections", offender: text,
                "refused a connection from \(text): \(holder) \(refusal.held) already (\(refusal.setting) is \(refusal.limit))")
            return false
        }
        peers.accepted = Peer(
            address: address, isLoopback: loopback, countedAs: countedAs,
            allowance: TokenBucket(rate: config.maxPublishRate, now: Clock.now()))
        return true
    }

    /// Whether the link's client is on this machine: its peer, known from its accept (else asked
    /// of the socket), or, when the peer is one of `trustedProxies`, the address it forwarded for
    /// in `forwardedHeader` alone. The one judge for HTTP requests and WebSocket upgrades alike.
    func isFromLoopback(_ link: LWSConnection) -> Bool {
        let peer = peers[link.identifier]
        let peerIsLoopback = peer?.isLoopback ?? link.isLoopbackPeer
        guard !http.gate.trustedProxies.isEmpty else { return peerIsLoopback }
        let value =
            switch http.gate.forwardedHeader {
            case .xForwardedFor: link.header(.xForwardedFor)
            case .forwarded: link.customHeader("forwarded:")
            }
        return http.gate.clientIsLoopback(peer: peer?.address.text ?? link.peerAddress, peerIsLoopback: peerIsLoopback, forwardedValue: value)
    }

    /// Who config's `proxyAuth` headers name, read only when the link's own peer is one of
    /// `trustedProxies`: from anyone else they are a client's claim and are ignored.
    func proxiedIdentity(_ link: LWSConnection) -> ProxiedIdentity? {
        guard let proxyAuth = config.proxyAuth else { return nil }
        guard http.gate.isTrustedProxy(peer: peers[link.identifier]?.address.text ?? link.peerAddress) else { return nil }
        guard let user = link.customHeader(proxyAuth.userHeader.lowercased() + ":"), !user.isEmpty else { return nil }
        let groups = proxyAuth.groupsHeader.flatMap { link.customHeader($0.lowercased() + ":") }
        return ProxiedIdentity(user: user, groups: ProxiedIdentity.groups(fromHeader: groups))
    }

    /// A provider's token may need a key the server has not fetched: fetched here, before the
    /// state's lock is taken, so that no other thread waits on the provider.
    func prepareProviderKeys(_ headers: RequestHeaders, now: Double) {
        // The headers first: `signIn` takes a lock, and most connects present no token.
        guard headers.authorization != nil || headers.cookie != nil, let providers = signIn?.providers else { return }
        providers.prepareKeys(
            authorization: headers.authorization, cookie: headers.cookie,
            cookieName: config.tls != nil ? AccessPolicy.securedCookieName : AccessPolicy.cookieName, now: now)
    }

    /// The same for the token of an `auth` message (a browser's socket cannot send headers).
    func prepareProviderKeys(authMessage bytes: [UInt8], now: Double) {
        guard signIn != nil, bytes.count <= SignedToken.maxBytes + 100, bytes.firstRange(of: Array("auth".utf8)) != nil,
            let message = try? JSONParser.parse(bytes), message["type"]?.stringValue == "auth", let token = message["token"]?.stringValue
        else { return }
        prepareProviderKeys(RequestHeaders(authorization: "Bearer " + token), now: now)
    }

    private func forget(_ peer: Peer) {
        if peer === peers.accepted { peers.accepted = nil }
        ledger.connections.withLock { book in
            book.total -= 1
            guard let address = peer.countedAs, let open = book.byAddress[address] else { return }
            if open <= 1 { book.byAddress.removeValue(forKey: address) } else { book.byAddress[address] = open - 1 }
        }
    }
}
