import RingcastCore
import RingcastLWS
import RingcastPlatform

/// Where each libwebsockets callback goes: the one dispatch from a service loop to its worker's
/// roles (HTTPExchange.swift, SocketSessions.swift). Service thread only.
extension ServiceWorker: ServiceHandler {
    func handle(_ event: ServiceEvent, on link: LWSConnection) -> Bool {
        assertOnThread(of: loop)
        switch event {
        case .accepted(let address):
            return admitsConnection(from: address)
        case .created:
            // lws makes the accepted socket's connection right after `accepted`, on this thread.
            if let peer = acceptedPeer {
                peers[link.identifier] = peer
                acceptedPeer = nil
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
        case .connectFailed, .appendHandshakeHeaders:
            return true
        }
    }

    func loopWillStop(_ loop: ServiceLoop) { closeWatchers(loop) }

    func loopWasNotified(_ loop: ServiceLoop) { settle() }

    func loopRoundEnded(_ loop: ServiceLoop) { writeQueuedSockets() }

    /// An address may hold at most `maxConnectionsPerAddress` sockets (loopback only with
    /// `limitLoopback`), counted across every service thread.
    private func admitsConnection(from address: PeerAddress) -> Bool {
        // A socket accepted before whose connection lws never made: its count goes back.
        if let stale = acceptedPeer { forget(stale) }
        let loopback = address.isLoopback
        var countedAs: String?
        if config.maxConnectionsPerAddress > 0 && (!loopback || config.limitLoopback) {
            let limit = config.maxConnectionsPerAddress
            let text = address.text
            let open: Int? = server.connectionsByAddress.withLock { counts in
                let open = counts[text, default: 0]
                guard open < limit else { return open }
                counts[text] = open + 1
                return nil
            }
            if let open {
                state.record { $0.connectionsRefused += 1 }
                server.logRefusal(
                    "connections", offender: text,
                    "refused a connection from \(text): it holds \(open) already (maxConnectionsPerAddress is \(limit))")
                return false
            }
            countedAs = text
        }
        acceptedPeer = Peer(
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
        guard !gate.trustedProxies.isEmpty else { return peerIsLoopback }
        let value =
            switch gate.forwardedHeader {
            case .xForwardedFor: link.header(.xForwardedFor)
            case .forwarded: link.customHeader("forwarded:")
            }
        return gate.clientIsLoopback(peer: peer?.address.text ?? link.peerAddress, peerIsLoopback: peerIsLoopback, forwardedValue: value)
    }

    private func forget(_ peer: Peer) {
        if peer === acceptedPeer { acceptedPeer = nil }
        guard let address = peer.countedAs else { return }
        server.connectionsByAddress.withLock { counts in
            guard let open = counts[address] else { return }
            if open <= 1 { counts.removeValue(forKey: address) } else { counts[address] = open - 1 }
        }
    }
}
