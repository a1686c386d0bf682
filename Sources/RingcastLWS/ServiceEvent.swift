import RingcastCore

/// What happened on a connection, as lws's callback reported it, in the order lws reports it.
package enum ServiceEvent {
    /// A socket was accepted from `address` (lws has not made a connection of it yet): answer false
    /// to close it at once. The `created` that follows is that socket's.
    case accepted(address: PeerAddress)
    /// A connection object exists (accepted sockets, and lws's own listener).
    case created
    /// The connection object is going away: the last event it gets.
    case destroyed
    /// Any HTTP request (static files too) is about to be served: answer false to refuse it, after
    /// writing the refusal (`writeHTTP`); the connection then closes.
    case httpFilter
    /// An HTTP request for a callback path; its headers are in, a body may follow in `httpBody` pieces.
    case httpRequest
    /// A piece of the body, lent for the duration of the call.
    case httpBody(UnsafeRawBufferPointer)
    case httpBodyComplete
    case httpWriteable
    /// The HTTP connection (or the exchange an upgrade replaced) is gone.
    case httpClosed
    /// A WebSocket upgrade asks to be accepted: answer false to refuse it.
    case upgradeRequested
    /// A WebSocket is open (server side: upgraded; client side: connected).
    case opened
    /// A piece of a message, lent for the duration of the call; `isLast` when it ends the message,
    /// `isBinary` when the message is a binary one.
    case received(UnsafeRawBufferPointer, isLast: Bool, isBinary: Bool)
    case writeable
    /// The peer sent a close frame, with its status code when it gave one.
    case peerClosing(code: Int?, reason: String)
    case closed
    /// A client connection could not be made.
    case connectFailed(String)
    /// A client handshake is being written: add headers to it.
    case appendHandshakeHeaders(HandshakeHeaders)
    /// Bytes read from a raw client socket (one that speaks its protocol itself), lent for the
    /// duration of the call. Its connect, writeable and close arrive as `opened`, `writeable`, `closed`.
    case rawReceived(UnsafeRawBufferPointer)
}

/// What a context's connections do. Called on the context's service thread only.
package protocol ServiceHandler: AnyObject {
    /// Returns false to close the connection (for `.upgradeRequested`: to refuse the upgrade).
    func handle(_ event: ServiceEvent, on connection: LWSConnection) -> Bool
    /// The loop is about to destroy its context: the last moment to send close frames, with `loop.service(forAtMost:until:)`.
    func loopWillStop(_ loop: ServiceLoop)
    /// Another thread called `notify()` (once per wake-up, however many calls).
    func loopWasNotified(_ loop: ServiceLoop)
    /// A round of the loop is over: every socket that was ready and every timer that was due has
    /// been handled, and the loop is about to wait again.
    func loopRoundEnded(_ loop: ServiceLoop)
    /// Accepting stopped: the process is out of descriptors (or the kernel of socket memory), so
    /// new connections wait in the listener's backlog; `reason` says which. Once per pause.
    func loopPausedAccepting(_ loop: ServiceLoop, reason: String)
    /// Accepting works again after `loopPausedAccepting`.
    func loopResumedAccepting(_ loop: ServiceLoop)
}

extension ServiceHandler {
    package func loopWillStop(_ loop: ServiceLoop) {}
    package func loopWasNotified(_ loop: ServiceLoop) {}
    package func loopRoundEnded(_ loop: ServiceLoop) {}
    package func loopPausedAccepting(_ loop: ServiceLoop, reason: String) {}
    package func loopResumedAccepting(_ loop: ServiceLoop) {}
}
