import CLibWebSockets
import CRingcastShims
import Foundation
import RingcastLWS

/// Receives one connection's events, on the client context's service thread.
package protocol WebSocketDelegate: AnyObject {
    func webSocketDidOpen(_ connection: WebSocketConnection)
    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8])
    /// `error` is nil for a clean close; the connection is finished either way.
    func webSocketDidClose(_ connection: WebSocketConnection, error: String?)
    /// Asked when the socket can take a message and nothing queued with `send` is waiting: the next
    /// message to write, or nil. A sender that builds its frame here, at the last moment, can merge
    /// whatever piled up while the socket was busy. Asked again after each message it returns.
    func webSocketNextMessage(_ connection: WebSocketConnection) -> [UInt8]?
    /// A whole message that arrived in one piece, lent for the duration of the call (no copy).
    /// The default copies it and calls `webSocket(_:didReceive:)`; the load tester scans it in place.
    func webSocket(_ connection: WebSocketConnection, didReceiveBytes message: UnsafeRawBufferPointer)
}

extension WebSocketDelegate {
    package func webSocketNextMessage(_ connection: WebSocketConnection) -> [UInt8]? { nil }

    package func webSocket(_ connection: WebSocketConnection, didReceiveBytes message: UnsafeRawBufferPointer) {
        webSocket(connection, didReceive: Array(message))
    }
}

/// A parsed `ws://host:port/path?query` (or `http://`, taken to mean the same server).
package struct ServerURL: Sendable, Equatable {
    package var host: String
    package var port: Int
    package var path: String
    package var secure: Bool

    package init?(_ text: String, defaultPath: String = "/") {
        var rest = Substring(text)
        if rest.hasPrefix("ws://") || rest.hasPrefix("http://") {
            secure = false
        } else if rest.hasPrefix("wss://") || rest.hasPrefix("https://") {
            secure = true
        } else {
            return nil
        }
        rest = rest[rest.index(after: rest.firstIndex(of: "/")!)...].dropFirst()
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        let remainder = rest[authority.endIndex...]
        path = remainder.isEmpty ? defaultPath : (remainder.hasPrefix("?") ? defaultPath + remainder : String(remainder))
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            port = after.hasPrefix(":") ? Int(after.dropFirst()) ?? -1 : (secure ? 443 : 80)
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = Int(authority[authority.index(after: colon)...]) ?? -1
        } else {
            host = String(authority)
            port = secure ? 443 : 80
        }
        guard !host.isEmpty, (1...65535).contains(port) else { return nil }
    }

    package var hostHeader: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// One WebSocket. `send` and `close` may be called from any thread; the rest happens on the
/// context's service thread.
/// @unchecked Sendable: `outbox` and `closeRequested` are touched under the context's lock, the rest only on its service thread.
package final class WebSocketConnection: @unchecked Sendable {
    package let url: ServerURL
    let headers: [(String, String)]
    weak var context: WebSocketClientContext?
    let delegate: WebSocketDelegate
    /// Guarded by the context's lock.
    var outbox: [[UInt8]] = []
    var closeRequested = false
    /// Service thread only.
    var wsi: OpaquePointer?
    var incoming: [UInt8] = []
    package private(set) var isOpen = false
    /// The status code of the close frame the server sent, if it sent one (1001: going away).
    package private(set) var peerCloseCode: Int?
    /// Free for the owner's bookkeeping (the load tester keeps its per-watcher counters here).
    package var tag = 0

    init(url: ServerURL, headers: [(String, String)], delegate: WebSocketDelegate, context: WebSocketClientContext) {
        self.url = url
        self.headers = headers
        self.delegate = delegate
        self.context = context
    }

    /// Queues a text message; it leaves when the socket is writeable (after it opens).
    package func send(_ text: [UInt8]) {
        context?.enqueue(self) { $0.outbox.append(text) }
    }

    package func send(_ text: String) { send(Array(text.utf8)) }

    /// Asks for a writeable callback, in which the delegate's `webSocketNextMessage` is asked for a message.
    package func requestWrite() {
        context?.enqueue(self) { _ in }
    }

    package func close() {
        context?.enqueue(self) { $0.closeRequested = true }
    }

    /// Messages queued by `send` that have not been written yet (a publisher's back-pressure).
    package var queuedMessages: Int { context?.queuedCount(self) ?? 0 }

    fileprivate func opened() { isOpen = true }
    fileprivate func closed() { isOpen = false }
    fileprivate func peerClosed(code: Int) { peerCloseCode = code }
}

/// One libwebsockets client context and its service thread, holding any number of WebSockets.
/// @unchecked Sendable: the queues and `context` are guarded by `lock`; lws state is touched only on the service thread.
package final class WebSocketClientContext: @unchecked Sendable {
    private let lock = NSLock()
    private var context: OpaquePointer?
    private var pendingConnects: [WebSocketConnection] = []
    private var touched: [WebSocketConnection] = []
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)
    private let writeBuffer = WriteBuffer(capacity: 16 * 1024)
    /// Strings and the protocol list lws points at while the context lives.
    private var resources = CResources()
    private let protocolName: UnsafePointer<CChar>
    /// The per-connection pointers lws holds (each one retain), service thread only. lws calls back
    /// with a pointer also after the connection has finished (e.g. on destroy): it is checked here
    /// before it is turned back into an object.
    private var liveConnections = Set<UnsafeMutableRawPointer>()

    /// - Parameter connectTimeoutSeconds: how long a connection may take to connect and finish its
    ///   handshake before it fails with an error.
    package init(connectTimeoutSeconds: Int = 10) throws {
        protocolName = resources.string("ringcast-client")
        var info = lws_context_creation_info()
        info.port = -1 // CONTEXT_PORT_NO_LISTEN: a client-only context
        // wss:// needs the TLS library set up once per context.
        info.options = UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        info.protocols = resources.protocols(name: "ringcast-client", callback: clientCallback, sessionSize: 0, rxBufferSize: 64 * 1024)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.timeout_secs = UInt32(max(1, connectTimeoutSeconds))
        info.connect_timeout_secs = UInt32(max(1, connectTimeoutSeconds))
        info.fd_limit_per_thread = 0
        lws_set_log_level(Int32(LLL_ERR), nil)
        LWS.raiseOpenFileLimit()
        guard let created = lws_create_context(&info) else {
            resources.release()
            throw ClientError("could not create a libwebsockets client context")
        }
        context = created
        let thread = Thread { [self] in serviceLoop() }
        thread.name = "ringcast-client"
        thread.start()
    }

    deinit { resources.release() }

    /// Opens a WebSocket to `url`; the delegate hears of it on the service thread.
    @discardableResult
    package func connect(_ url: ServerURL, headers: [(String, String)] = [], delegate: WebSocketDelegate) -> WebSocketConnection {
        let connection = WebSocketConnection(url: url, headers: headers, delegate: delegate, context: self)
        lock.withLock {
            pendingConnects.append(connection)
            if let context { lws_cancel_service(context) }
        }
        return connection
    }

    /// Closes every connection and stops the service thread. Call once, from any other thread.
    package func shutdown() {
        let wasRunning: Bool = lock.withLock {
            guard !stopping, let context else { return false }
            stopping = true
            lws_cancel_service(context)
            return true
        }
        if wasRunning { finished.wait() }
    }

    func enqueue(_ connection: WebSocketConnection, _ change: (WebSocketConnection) -> Void) {
        lock.withLock {
            change(connection)
            touched.append(connection)
            if let context { lws_cancel_service(context) }
        }
    }

    func queuedCount(_ connection: WebSocketConnection) -> Int {
        lock.withLock { connection.outbox.count }
    }

    private func serviceLoop() {
        guard let context = lock.withLock({ self.context }) else { return }
        while lock.withLock({ !stopping }) {
            if lws_service(context, 0) < 0 { break }
        }
        lock.withLock { self.context = nil }
        lws_context_destroy(context)
        finished.signal()
    }

    /// Runs on the service thread when another thread has queued work.
    fileprivate func drainQueued() {
        let (connects, changed) = lock.withLock { () -> ([WebSocketConnection], [WebSocketConnection]) in
            defer { pendingConnects = []; touched = [] }
            return (pendingConnects, touched)
        }
        for connection in connects { open(connection) }
        for connection in changed where connection.wsi != nil {
            lws_callback_on_writable(connection.wsi)
        }
    }

    private func open(_ connection: WebSocketConnection) {
        guard let context = lock.withLock({ self.context }) else { return }
        var info = lws_client_connect_info()
        let url = connection.url
        let texts: [String] = [url.host, url.path, url.hostHeader]
        let strings = texts.map { strdup($0)! }
        defer { strings.forEach { free($0) } }
        info.context = context
        info.address = UnsafePointer(strings[0])
        info.port = Int32(url.port)
        info.path = UnsafePointer(strings[1])
        info.host = UnsafePointer(strings[2])
        // No Origin: this is not a browser, and lws would prefix whatever it was given with http://.
        info.ssl_connection = url.secure ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        info.ietf_version_or_minus_one = -1
        info.local_protocol_name = UnsafePointer(protocolName)
        let retained = Unmanaged.passRetained(connection)
        info.userdata = retained.toOpaque()
        liveConnections.insert(retained.toOpaque())
        if lws_client_connect_via_info(&info) == nil {
            // lws reports most failures through CLIENT_CONNECTION_ERROR; a nil here may already have.
            if liveConnections.remove(retained.toOpaque()) != nil {
                retained.release()
                connection.delegate.webSocketDidClose(connection, error: "could not start connecting to \(url.hostHeader)")
            }
        }
    }

    fileprivate func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                            _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
            drainQueued()
            return 0
        }
        guard let user, liveConnections.contains(user) else { return 0 }
        let connection = Unmanaged<WebSocketConnection>.fromOpaque(user).takeUnretainedValue()
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input, !connection.headers.isEmpty else { return 0 }
            let cursor = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
            guard let start = cursor.pointee else { return -1 }
            let end = start + length
            for (name, value) in connection.headers {
                let result = "\(name.lowercased()):".withCString { namePointer in
                    value.withCString { valuePointer in
                        lws_add_http_header_by_name(wsi, UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self),
                                                    UnsafeRawPointer(valuePointer).assumingMemoryBound(to: UInt8.self),
                                                    Int32(strlen(valuePointer)), cursor, end)
                    }
                }
                if result != 0 { return -1 }
            }
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            connection.wsi = wsi
            connection.opened()
            connection.delegate.webSocketDidOpen(connection)
            if lock.withLock({ !connection.outbox.isEmpty || connection.closeRequested }) { lws_callback_on_writable(wsi) }
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            let isWhole = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            if isWhole, connection.incoming.isEmpty {
                // The usual case: the message came in one piece; lend it without copying.
                connection.delegate.webSocket(connection, didReceiveBytes: UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length))
                return 0
            }
            if let input { connection.incoming.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length)) }
            if isWhole {
                let message = connection.incoming
                connection.incoming.removeAll(keepingCapacity: true)
                connection.delegate.webSocket(connection, didReceive: message)
            }
            return 0
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            // Several messages per callback while the socket takes them (a fast publisher).
            var more = false, closing = false, pulled = false
            for _ in 0..<16 {
                let next: [UInt8]?
                (next, more, closing) = lock.withLock { () -> ([UInt8]?, Bool, Bool) in
                    let next = connection.outbox.isEmpty ? nil : connection.outbox.removeFirst()
                    return (next, !connection.outbox.isEmpty, connection.closeRequested && connection.outbox.isEmpty)
                }
                var message = next
                pulled = false
                if message == nil, !closing, let offered = connection.delegate.webSocketNextMessage(connection) {
                    message = offered
                    pulled = true
                }
                guard let message else { break }
                guard writeBuffer.writeText(message, to: wsi) else { return -1 }
                if !(more || pulled) || lws_send_pipe_choked(wsi) != 0 { break }
            }
            if more || pulled { lws_callback_on_writable(wsi); return 0 }
            if closing {
                lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, nil, 0)
                return -1
            }
            return 0
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let input, length >= 2 {
                let bytes = input.assumingMemoryBound(to: UInt8.self)
                connection.peerClosed(code: Int(bytes[0]) << 8 | Int(bytes[1]))
            }
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
                finish(connection, user, error: message)
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            finish(connection, user, error: nil)
            return 0
        default:
            return 0
        }
    }

    private func finish(_ connection: WebSocketConnection, _ user: UnsafeMutableRawPointer, error: String?) {
        guard liveConnections.remove(user) != nil else { return }
        connection.wsi = nil
        connection.closed()
        connection.delegate.webSocketDidClose(connection, error: error)
        Unmanaged<WebSocketConnection>.fromOpaque(user).release()
    }
}

private func clientCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                            _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let owner = lws_context_user(lws_get_context(wsi)) else { return 0 }
    return Unmanaged<WebSocketClientContext>.fromOpaque(owner).takeUnretainedValue().handle(wsi, reason, user, input, length)
}

package struct ClientError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
