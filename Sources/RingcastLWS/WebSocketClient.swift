import CLibWebSockets
import Foundation
import RingcastCore
import RingcastPlatform

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

/// One WebSocket. `send` and `close` may be called from any thread; the rest happens on the
/// context's service thread.
/// @unchecked Sendable: `outbox` and `closeRequested` are touched under the context's lock, the rest only on its service thread.
package final class WebSocketConnection: @unchecked Sendable {
    package let url: ServerURL
    let headers: [(String, String)]
    /// The local address the socket is bound to before it connects (nil: the kernel's choice).
    let sourceAddress: String?
    weak var context: WebSocketClientContext?
    /// Held from `connect` until the connection is finished (closed or failed), then let go: a
    /// delegate that keeps its connection (most do) would otherwise keep both alive for good.
    /// Service thread only once connecting.
    @exclusivity(unchecked) fileprivate(set) var delegate: WebSocketDelegate?
    /// Guarded by the context's lock.
    var outbox: [[UInt8]] = []
    var closeRequested = false
    /// Service thread only: the open connection, and a message arriving in pieces.
    var link: LWSConnection?
    var incoming: [UInt8] = []
    package private(set) var isOpen = false
    /// The status code of the close frame the server sent, if it sent one (1001: going away).
    package private(set) var peerCloseCode: Int?
    /// The reason the server's close frame gave ("" when none).
    package private(set) var peerCloseReason = ""
    /// On a context that reads frames itself, a ws:// connection's own handshake and frame reader.
    /// Service thread only.
    var raw: RawFrames?

    init(url: ServerURL, headers: [(String, String)], sourceAddress: String? = nil, delegate: WebSocketDelegate, context: WebSocketClientContext) {
        self.url = url
        self.headers = headers
        self.sourceAddress = sourceAddress
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
    fileprivate func peerClosed(code: Int?, reason: String) {
        peerCloseCode = code
        peerCloseReason = reason
    }
}

/// One libwebsockets client context on its own `ServiceLoop`, holding any number of WebSockets.
/// Calls from any thread queue their change under `lock` and post one drain to the loop.
/// @unchecked Sendable: the queues are guarded by `lock`; connections and lws state are touched only
/// on the loop's service thread.
package final class WebSocketClientContext: ServiceHandler, @unchecked Sendable {
    private let loop: ServiceLoop
    private let lock = NSLock()
    private var pendingConnects: [WebSocketConnection] = []
    private var touched: [WebSocketConnection] = []
    private var drainPosted = false
    /// The per-connection pointers lws holds (each one retain), service thread only. lws calls back
    /// with a pointer also after the connection has finished (e.g. on destroy): it is checked here
    /// before it is turned back into an object.
    private var liveConnections = Set<UnsafeMutableRawPointer>()
    private static let protocolName = "ringcast-client"
    private let insecure: Bool
    private let readsFramesItself: Bool

    /// - Parameters:
    ///   - connectTimeoutSeconds: how long a connection may take to connect and finish its handshake
    ///     before it fails with an error.
    ///   - trustedCertificates: a PEM file of the certificates wss:// servers may present (a private
    ///     CA, or a self-signed server's own); nil trusts the system's.
    ///   - insecure: no check of a wss:// server's certificate (its CA, its name, its dates).
    ///   - offersCompression: offer permessage-deflate to the servers it connects to.
    ///   - readsFramesItself: ws:// connections are raw sockets whose handshake and frames this
    ///     context writes and reads itself, a whole read at a time: lws 4.1.6's client parser takes
    ///     a frame's payload byte by byte, which costs a load generator's watchers more than the
    ///     server's sending does. wss:// (and compression) stay with lws. They send no pong: a
    ///     Ringcast server pings no watcher.
    package init(
        connectTimeoutSeconds: Int = 10, trustedCertificates: String? = nil, insecure: Bool = false, offersCompression: Bool = false,
        readsFramesItself: Bool = false, logger: Logger = .silent
    ) throws {
        self.insecure = insecure
        self.readsFramesItself = readsFramesItself && !offersCompression
        loop = ServiceLoop(name: WebSocketClientContext.protocolName, logger: logger)
        var settings = ContextSettings(name: WebSocketClientContext.protocolName)
        settings.receiveBufferBytes = 64 * 1024
        settings.timeoutSeconds = connectTimeoutSeconds
        settings.connectTimeoutSeconds = connectTimeoutSeconds
        // wss:// needs the TLS library set up once per context.
        settings.initializeTLS = true
        settings.trustedCertificates = trustedCertificates
        settings.offersCompression = offersCompression
        LWSLog.routeUnlessRouted(to: logger)
        try loop.start(settings, handler: self)
    }

    /// Opens a WebSocket to `url`; the delegate hears of it on the service thread. With
    /// `sourceAddress` (an IP address of this machine), the socket is bound to it first: one address
    /// has about 28 000 ephemeral ports towards one server port, so many connections need several.
    @discardableResult
    package func connect(
        _ url: ServerURL, headers: [(String, String)] = [], sourceAddress: String? = nil, delegate: WebSocketDelegate
    ) -> WebSocketConnection {
        let connection = WebSocketConnection(url: url, headers: headers, sourceAddress: sourceAddress, delegate: delegate, context: self)
        lock.withLock { pendingConnects.append(connection) }
        wake()
        return connection
    }

    /// Closes every connection and stops the service thread. Call once, from any other thread.
    package func shutdown() { loop.stop() }

    func enqueue(_ connection: WebSocketConnection, _ change: (WebSocketConnection) -> Void) {
        lock.withLock {
            change(connection)
            touched.append(connection)
        }
        wake()
    }

    func queuedCount(_ connection: WebSocketConnection) -> Int {
        lock.withLock { connection.outbox.count }
    }

    /// One drain on order at a time, however many calls queued something.
    private func wake() {
        let post: Bool = lock.withLock {
            defer { drainPosted = true }
            return !drainPosted
        }
        if post { loop.post { [self] in drainQueued() } }
    }

    /// Runs on the service thread when another thread has queued work.
    private func drainQueued() {
        let (connects, changed) = lock.withLock { () -> ([WebSocketConnection], [WebSocketConnection]) in
            defer {
                pendingConnects = []
                touched = []
                drainPosted = false
            }
            return (pendingConnects, touched)
        }
        for connection in connects { open(connection) }
        for connection in changed { connection.link?.requestWrite() }
    }

    private func open(_ connection: WebSocketConnection) {
        guard let context = loop.serviceContext else { return }
        var info = lws_client_connect_info()
        let url = connection.url
        let texts: [String] = [url.host, url.path, url.hostHeader, WebSocketClientContext.protocolName]
        let strings = texts.map { strdup($0)! }
        defer { strings.forEach { free($0) } }
        info.context = context
        info.address = UnsafePointer(strings[0])
        info.port = Int32(url.port)
        info.path = UnsafePointer(strings[1])
        info.host = UnsafePointer(strings[2])
        // No Origin: this is not a browser, and lws would prefix whatever it was given with http://.
        var tlsFlags = LCCSCF_USE_SSL.rawValue
        if insecure {
            tlsFlags |=
                LCCSCF_ALLOW_SELFSIGNED.rawValue | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue | LCCSCF_ALLOW_EXPIRED.rawValue
                | LCCSCF_ALLOW_INSECURE.rawValue
        }
        info.ssl_connection = url.secure ? Int32(tlsFlags) : 0
        info.ietf_version_or_minus_one = -1
        info.local_protocol_name = UnsafePointer(strings[3])
        // A raw socket: lws connects it (binding `iface` as for any other) and hands over its bytes.
        let rawMethod = readsFramesItself && !url.secure ? strdup("RAW") : nil
        defer { free(rawMethod) }
        if let rawMethod {
            connection.raw = RawFrames()
            info.method = UnsafePointer(rawMethod)
        }
        // lws binds the client socket to `iface` (an interface name or, as here, an IP address)
        // before connect(); it reads the string during this call only.
        let source = connection.sourceAddress.map { strdup($0)! }
        defer { free(source) }
        info.iface = UnsafePointer(source)
        let retained = Unmanaged.passRetained(connection)
        info.userdata = retained.toOpaque()
        liveConnections.insert(retained.toOpaque())
        if lws_client_connect_via_info(&info) == nil {
            // lws reports most failures through CLIENT_CONNECTION_ERROR; a nil here may already have.
            if liveConnections.remove(retained.toOpaque()) != nil {
                retained.release()
                connection.delegate?.webSocketDidClose(connection, error: "could not start connecting to \(url.hostHeader)")
                connection.delegate = nil
            }
        }
    }

    package func handle(_ event: ServiceEvent, on link: LWSConnection) -> Bool {
        loop.assertOnLoopThread()
        guard let user = link.session, liveConnections.contains(user) else { return true }
        let connection = Unmanaged<WebSocketConnection>.fromOpaque(user).takeUnretainedValue()
        switch event {
        case .appendHandshakeHeaders(let handshake):
            for (name, value) in connection.headers where !handshake.add(name, value) { return false }
            return true
        case .opened where connection.raw != nil:
            // Connected: the upgrade request goes when the socket is writeable.
            connection.link = link
            link.requestWrite()
            return true
        case .rawReceived(let bytes):
            guard let raw = connection.raw else { return false }
            return raw.read(bytes, connection, link)
        case .writeable where connection.raw?.requestSent == false:
            connection.raw?.requestSent = true
            return link.writeRaw(RawFrames.upgradeRequest(connection.url, connection.headers))
        case .opened:
            connection.link = link
            connection.opened()
            connection.delegate?.webSocketDidOpen(connection)
            if lock.withLock({ !connection.outbox.isEmpty || connection.closeRequested }) { link.requestWrite() }
            return true
        case .received(let piece, let isLast, _):
            if isLast, connection.incoming.isEmpty {
                // The usual case: the message came in one piece; lend it without copying.
                connection.delegate?.webSocket(connection, didReceiveBytes: piece)
                return true
            }
            connection.incoming.append(contentsOf: piece)
            if isLast {
                let message = connection.incoming
                connection.incoming.removeAll(keepingCapacity: true)
                connection.delegate?.webSocket(connection, didReceive: message)
            }
            return true
        case .writeable:
            return write(connection, on: link)
        case .peerClosing(let code, let reason):
            connection.peerClosed(code: code, reason: reason)
            return true
        case .connectFailed(let message):
            finish(connection, user, error: WebSocketClientContext.namingVerification(message))
            return true
        case .closed:
            finish(connection, user, error: connection.raw?.failure)
            return true
        case .httpFilter, .httpRequest, .httpBody, .httpBodyComplete, .httpWriteable, .httpClosed, .upgradeRequested,
            .accepted, .created, .destroyed:
            return true
        }
    }

    /// Several messages per callback while the socket takes them (a fast publisher).
    private func write(_ connection: WebSocketConnection, on link: LWSConnection) -> Bool {
        var more = false
        var closing = false
        var pulled = false
        for _ in 0..<16 {
            let next: [UInt8]?
            (next, more, closing) = lock.withLock { () -> ([UInt8]?, Bool, Bool) in
                let next = connection.outbox.isEmpty ? nil : connection.outbox.removeFirst()
                return (next, !connection.outbox.isEmpty, connection.closeRequested && connection.outbox.isEmpty)
            }
            var message = next
            pulled = false
            if message == nil, !closing, let offered = connection.delegate?.webSocketNextMessage(connection) {
                message = offered
                pulled = true
            }
            guard let message else { break }
            if connection.raw != nil {
                guard link.writeRaw(RawFrames.maskedText(message)) else { return false }
            } else {
                guard link.writeText(message) != .failed else { return false }
            }
            if !(more || pulled) || link.isChoked { break }
        }
        if more || pulled {
            link.requestWrite()
            return true
        }
        if closing {
            if connection.raw == nil { link.setCloseReason(.normal, "") }
            return false
        }
        return true
    }

    private func finish(_ connection: WebSocketConnection, _ user: UnsafeMutableRawPointer, error: String?) {
        guard liveConnections.remove(user) != nil else { return }
        connection.link = nil
        connection.closed()
        connection.delegate?.webSocketDidClose(connection, error: error)
        connection.delegate = nil
        Unmanaged<WebSocketConnection>.fromOpaque(user).release()
    }

    /// lws says why a certificate did not verify as OpenSSL's number (`X509_V_ERR = 20`): put first
    /// the name a user can act on, as the HTTP client names it (unknown CA, wrong host, expired).
    static func namingVerification(_ message: String) -> String {
        guard let range = message.range(of: "X509_V_ERR = ") else { return message }
        let code = Int(message[range.upperBound...].prefix { $0.isNumber }) ?? -1
        let name: String
        switch code {
        case 2, 18, 19, 20, 21: name = "is signed by an unknown CA"
        case 9, 10: name = "has expired or is not valid yet"
        case 62, 64: name = "is for another host (wrong host)"
        default: return message
        }
        return "the server's TLS certificate \(name) (\(message.trimmingCharacters(in: .whitespacesAndNewlines)))"
    }
}

/// A raw client socket's WebSocket: the upgrade request, the server's 101, then its frames, read
/// from whole reads with no copy unless a frame spans reads (RFC 6455 §5; a server's frames are not
/// masked, a client's are). The 101's status line is checked, not its Sec-WebSocket-Accept: a load
/// tester's own servers are the peers. Service thread only.
final class RawFrames {
    var requestSent = false
    private var upgraded = false
    /// Bytes of a frame (or of the answer's headers) that the next read completes.
    private var pending: [UInt8] = []
    /// A fragmented message's pieces so far.
    private var message: [UInt8] = []
    private var inMessage = false
    /// Why the connection ended, when it was not a close (a refused upgrade, a broken frame).
    private(set) var failure: String?

    static func upgradeRequest(_ url: ServerURL, _ headers: [(String, String)]) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: 16)
        for index in key.indices { key[index] = UInt8.random(in: 0...255) }
        var text = "GET \(url.path) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(Data(key).base64EncodedString())\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// A client's text frame: masked, as RFC 6455 requires of every frame a client sends.
    static func maskedText(_ payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [0x81]
        let count = payload.count
        if count < 126 {
            frame.append(0x80 | UInt8(count))
        } else if count < 65536 {
            frame += [0x80 | 126, UInt8(count >> 8), UInt8(count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((count >> shift) & 0xFF)) }
        }
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame.reserveCapacity(frame.count + count)
        for (index, byte) in payload.enumerated() { frame.append(byte ^ mask[index & 3]) }
        return frame
    }

    /// One read: false closes the connection (`failure` says why, unless the server closed).
    func read(_ bytes: UnsafeRawBufferPointer, _ connection: WebSocketConnection, _ link: LWSConnection) -> Bool {
        if pending.isEmpty { return consume(bytes, connection, link) }
        pending.append(contentsOf: bytes)
        let joined = pending
        pending = []
        return joined.withUnsafeBytes { consume($0, connection, link) }
    }

    private func consume(_ bytes: UnsafeRawBufferPointer, _ connection: WebSocketConnection, _ link: LWSConnection) -> Bool {
        var at = 0
        if !upgraded {
            guard let end = RawFrames.headersEnd(bytes) else {
                guard bytes.count < 16_384 else { return fail("the server's answer to the upgrade has no end") }
                pending = Array(bytes)
                return true
            }
            let status = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<min(end, 200)]), as: UTF8.self)
            guard status.hasPrefix("HTTP/1.1 101") else {
                return fail("the server refused the WebSocket upgrade: \(status.prefix { $0 != "\r" })")
            }
            upgraded = true
            at = end
            connection.link = link
            connection.opened()
            connection.delegate?.webSocketDidOpen(connection)
        }
        while at < bytes.count {
            let available = bytes.count - at
            guard available >= 2 else { break }
            let first = bytes[at]
            let second = bytes[at + 1]
            guard second & 0x80 == 0 else { return fail("the server sent a masked frame") }
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 {
                guard available >= 4 else { break }
                length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
                header = 4
            } else if length == 127 {
                guard available >= 10 else { break }
                length = 0
                for index in 2..<10 { length = length << 8 | Int(bytes[at + index]) }
                header = 10
                guard length >= 0, length < 1 << 32 else { return fail("the server sent a frame of \(length) bytes") }
            }
            guard available >= header + length else { break }
            let payload = UnsafeRawBufferPointer(rebasing: bytes[(at + header)..<(at + header + length)])
            at += header + length
            let final = first & 0x80 != 0
            switch first & 0x0F {
            case 0x1, 0x2:
                if final && !inMessage {
                    connection.delegate?.webSocket(connection, didReceiveBytes: payload)
                } else {
                    message = Array(payload)
                    inMessage = !final
                    if final { deliverMessage(connection) }
                }
            case 0x0:
                guard inMessage else { return fail("the server sent a continuation outside a message") }
                message.append(contentsOf: payload)
                if final {
                    inMessage = false
                    deliverMessage(connection)
                }
            case 0x8:
                let code = payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : nil
                let reason = payload.count > 2 ? String(decoding: UnsafeRawBufferPointer(rebasing: payload[2...]), as: UTF8.self) : ""
                connection.peerClosed(code: code, reason: reason)
                return false
            default:
                // Ping and pong: a Ringcast server sends neither to a watcher.
                break
            }
        }
        if at < bytes.count { pending = Array(UnsafeRawBufferPointer(rebasing: bytes[at...])) }
        return true
    }

    private func deliverMessage(_ connection: WebSocketConnection) {
        let whole = message
        message = []
        connection.delegate?.webSocket(connection, didReceive: whole)
    }

    private func fail(_ reason: String) -> Bool {
        failure = reason
        return false
    }

    /// Where an HTTP answer's headers end (after their blank line), or nil.
    private static func headersEnd(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count
        where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
            return index + 1
        }
        return nil
    }
}
