import RingcastLWS

/// Where each libwebsockets callback goes: the one dispatch from the service loop to the server's
/// roles (HTTPExchange.swift, SocketSessions.swift). Service thread only.
extension RingcastServer: ServiceHandler {
    package func handle(_ event: ServiceEvent, on link: LWSConnection) -> Bool {
        switch event {
        case .httpFilter:
            return admitsHTTP(link)
        case .httpRequest:
            // The path lws passes is the part after the mount point; the full one comes from the headers.
            return beginHTTP(link)
        case let .httpBody(piece):
            receiveBody(piece, on: link)
            return true
        case .httpBodyComplete:
            if let exchange = link.attachment(as: Connection.self)?.exchange { answer(exchange, on: link) }
            return true
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
        case let .received(piece, isLast):
            receive(piece, isLast: isLast, on: link)
            return true
        case .peerClosing, .connectFailed, .appendHandshakeHeaders:
            return true
        }
    }

    package func loopWillStop(_ loop: ServiceLoop) { closeWatchers(loop) }
}
