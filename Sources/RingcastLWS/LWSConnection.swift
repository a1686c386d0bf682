import CLibWebSockets
import CRingcastShims
import Glibc
import RingcastCore

/// The request headers the server and client read, named in Swift so that only this layer sees lws's tokens.
package enum HTTPHeader: Sendable {
    case host, origin, authorization, contentLength, transferEncoding, contentType, accept, upgrade, ifNoneMatch, cookie, xForwardedFor
    /// `Sec-WebSocket-Extensions`: what a WebSocket client offers.
    case webSocketExtensions
    /// The request line's `HTTP/1.1`.
    case version

    var token: lws_token_indexes {
        switch self {
        case .host: return WSI_TOKEN_HOST
        case .origin: return WSI_TOKEN_ORIGIN
        case .authorization: return WSI_TOKEN_HTTP_AUTHORIZATION
        case .contentLength: return WSI_TOKEN_HTTP_CONTENT_LENGTH
        case .transferEncoding: return WSI_TOKEN_HTTP_TRANSFER_ENCODING
        case .contentType: return WSI_TOKEN_HTTP_CONTENT_TYPE
        case .accept: return WSI_TOKEN_HTTP_ACCEPT
        case .upgrade: return WSI_TOKEN_UPGRADE
        case .ifNoneMatch: return WSI_TOKEN_HTTP_IF_NONE_MATCH
        case .cookie: return WSI_TOKEN_HTTP_COOKIE
        case .xForwardedFor: return WSI_TOKEN_X_FORWARDED_FOR
        case .webSocketExtensions: return WSI_TOKEN_EXTENSIONS
        case .version: return WSI_TOKEN_HTTP
        }
    }
}

/// WebSocket close codes (RFC 6455 §7.4) the server and client send: the protocol's own, and
/// the application's (4000–4999) that docs/PROTOCOL.md names.
package struct CloseStatus: Equatable, Sendable {
    package let code: UInt16

    package init(code: UInt16) { self.code = code }

    package static let normal = CloseStatus(code: 1000)
    package static let goingAway = CloseStatus(code: 1001)
    package static let invalidPayload = CloseStatus(code: 1007)
    package static let policyViolation = CloseStatus(code: 1008)
    package static let messageTooBig = CloseStatus(code: 1009)
    package static let unexpectedCondition = CloseStatus(code: 1011)

    var lws: lws_close_status { lws_close_status(rawValue: UInt32(code)) }
}

/// One lws connection: the wsi, the per-session memory lws keeps for it, and the loop that services
/// it. Valid until the connection's `closed` event; service thread only.
///
/// Per-session memory (`ContextSettings.sessionBytes` must be `LWSConnection.sessionBytes`) holds, in
/// word 0, one retain of the object `attach` stored, and in word 1 what is known of the peer
/// (0 unknown, 1 loopback, 2 elsewhere), so getpeername runs once per socket. lws zeroes it per
/// socket and keeps it across the requests of a kept-alive connection and its WebSocket upgrade.
package struct LWSConnection {
    package static let sessionBytes = 2 * MemoryLayout<Int>.size

    let wsi: OpaquePointer
    let session: UnsafeMutableRawPointer?
    /// Unretained and unchecked: a loop outlives every connection of its context, and this value is
    /// made for every callback, where reference counting would be pure cost.
    unowned(unsafe) let loop: ServiceLoop
    /// The loop's write buffer, unretained for the same reason.
    unowned(unsafe) let writeBuffer: WriteBuffer

    init(wsi: OpaquePointer, session: UnsafeMutableRawPointer?, loop: ServiceLoop) {
        self.wsi = wsi
        self.session = session
        self.loop = loop
        writeBuffer = loop.writeBuffer
    }

    /// Identity of the underlying socket, for logs and maps; stable while the connection lives.
    package var identifier: Int { Int(bitPattern: UnsafeRawPointer(wsi)) }

    // MARK: The Swift object a connection carries

    /// Stores `object` (retained) in the session memory, replacing and returning what was there.
    @discardableResult
    package func attach(_ object: AnyObject) -> AnyObject? {
        loop.assertOnLoopThread()
        guard let session else { return nil }
        let previous = detach()
        session.storeBytes(of: Unmanaged.passRetained(object).toOpaque(), as: UnsafeMutableRawPointer?.self)
        return previous
    }

    /// The object `attach` stored. A context attaches objects of one type only, `T`: the pointer is
    /// not checked (this runs in every callback, the delivery path included).
    package func attachment<T: AnyObject>(as type: T.Type) -> T? {
        guard let session, let pointer = session.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        return Unmanaged<T>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs `body` with the object `attach` stored, borrowed (no retain): for the delivery path.
    /// nil when nothing is attached. The same one-type rule as `attachment(as:)`.
    @inline(__always)
    package func withAttachment<T: AnyObject, R>(as type: T.Type, _ body: (T) -> R) -> R? {
        guard let session, let pointer = session.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        return Unmanaged<T>.fromOpaque(pointer)._withUnsafeGuaranteedRef(body)
    }

    /// Gives back the session's retain and returns the object; safe to call twice.
    @discardableResult
    package func detach() -> AnyObject? {
        guard let session, let pointer = session.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        session.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
        return Unmanaged<AnyObject>.fromOpaque(pointer).takeRetainedValue()
    }

    // MARK: The request

    package func header(_ header: HTTPHeader) -> String? {
        let length = lws_hdr_total_length(wsi, header.token)
        guard length > 0 else { return nil }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(length) + 1) { buffer -> String? in
            guard lws_hdr_copy(wsi, buffer.baseAddress, Int32(buffer.count), header.token) >= 0 else { return nil }
            return String(cString: buffer.baseAddress!)
        }
    }

    package func hasHeader(_ header: HTTPHeader) -> Bool { lws_hdr_total_length(wsi, header.token) > 0 }

    /// A header lws has no token for (`forwarded:`, lowercase, with its colon, as lws keeps the
    /// names of the headers it does not know).
    package func customHeader(_ name: String) -> String? {
        let length = lws_hdr_custom_length(wsi, name, Int32(name.utf8.count))
        guard length > 0 else { return nil }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(length) + 1) { buffer -> String? in
            guard lws_hdr_custom_copy(wsi, buffer.baseAddress, Int32(buffer.count), name, Int32(name.utf8.count)) >= 0 else { return nil }
            return String(cString: buffer.baseAddress!)
        }
    }

    /// The request's method and path (without the query), from whichever method token lws filled in.
    package func requestLine() -> (method: String, path: String)? {
        for (method, token) in LWSConnection.methods where lws_hdr_total_length(wsi, token) > 0 {
            let length = Int(lws_hdr_total_length(wsi, token))
            let path = withUnsafeTemporaryAllocation(of: CChar.self, capacity: length + 1) { buffer -> String? in
                guard lws_hdr_copy(wsi, buffer.baseAddress, Int32(buffer.count), token) >= 0 else { return nil }
                return String(cString: buffer.baseAddress!)
            }
            if let path { return (method, path) }
        }
        return nil
    }

    private static let methods: [(String, lws_token_indexes)] = [
        ("GET", WSI_TOKEN_GET_URI), ("POST", WSI_TOKEN_POST_URI), ("PUT", WSI_TOKEN_PUT_URI),
        ("PATCH", WSI_TOKEN_PATCH_URI), ("DELETE", WSI_TOKEN_DELETE_URI),
        ("OPTIONS", WSI_TOKEN_OPTIONS_URI), ("HEAD", WSI_TOKEN_HEAD_URI),
    ]

    /// `?a=b&c=d`, as lws split (and URL-decoded) it; a repeated name keeps its last value. Split
    /// at the first `=` byte: as Characters, `=` and a combining mark after it are one.
    package func queryArguments() -> [String: String] {
        var arguments: [String: String] = [:]
        // As long as any argument lws can hold (HeaderLimit), so none is dropped for its length.
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(UInt16.max) + 1) { buffer in
            var index: Int32 = 0
            while true {
                let length = lws_hdr_copy_fragment(wsi, buffer.baseAddress, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, index)
                guard length >= 0 else { break }
                let bytes = UnsafeRawBufferPointer(start: buffer.baseAddress, count: Int(length)).bindMemory(to: UInt8.self)
                if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                    arguments[String(decoding: bytes[..<equals], as: UTF8.self)] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
                } else {
                    arguments[String(decoding: bytes, as: UTF8.self)] = ""
                }
                index += 1
            }
        }
        return arguments
    }

    /// False when lws lost the request line's version: a percent-encoded CR or LF in the path or
    /// query ends the line there for its parser, and what is left of the path is not what was sent.
    package var hasWholeRequestLine: Bool { hasHeader(.version) }

    package var peerAddress: String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            guard lws_get_peer_simple(wsi, buffer.baseAddress, buffer.count) != nil else { return "" }
            return String(cString: buffer.baseAddress!)
        }
    }

    /// Whether the peer is on this machine (127.0.0.0/8, ::1), asked of the socket once.
    package var isLoopbackPeer: Bool {
        guard let session else { return isLoopbackAddress(peerAddress) }
        let slot = session.advanced(by: MemoryLayout<Int>.size)
        switch slot.load(as: Int.self) {
        case 1: return true
        case 2: return false
        default:
            let loopback = isLoopbackAddress(peerAddress)
            slot.storeBytes(of: loopback ? 1 : 2, as: Int.self)
            return loopback
        }
    }

    // MARK: Writing

    /// Asks lws for a writeable callback on this connection.
    package func requestWrite() {
        loop.assertOnLoopThread()
        lws_callback_on_writable(wsi)
    }

    /// Whether a WebSocket frame may be written now, on the service thread between two rounds of
    /// the loop rather than in this connection's writeable callback: lws holds none of its output.
    ///
    /// lws's rule is to write only when writeable; what the rule protects is kept anyway in 4.1.6
    /// for a WebSocket over HTTP/1: a write the socket does not take whole is kept by lws and sent
    /// before anything else on its POLLOUT (and its back-to-back write check is compiled out). Writing
    /// this way saves each delivery the POLLOUT round: asking for POLLOUT and dropping it again (an
    /// epoll_ctl each), a wake-up, and the callback's dispatch.
    package var mayWriteOutsideCallback: Bool { lws_partial_buffered(wsi) == 0 }

    /// Closes the connection from outside its callbacks, at the loop's next turn (its `closed` follows then).
    package func closeSoon() {
        loop.assertOnLoopThread()
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    }

    /// The bytes of this connection's output its peer has acknowledged so far (TCP), nil when the
    /// kernel does not say: what moves while a peer takes what is written to it, however full the
    /// buffers on the way stay.
    package var bytesAcknowledged: Int64? {
        let acked = rc_bytes_acked(lws_get_socket_fd(wsi))
        return acked < 0 ? nil : acked
    }

    /// Closes the connection at the loop's next turn with `status` as its reason: for a peer that
    /// takes nothing, whose close frame could only wait behind everything it did not take.
    package func closeSoon(_ status: CloseStatus, _ text: String) {
        setCloseReason(status, text)
        closeSoon()
    }

    /// Whether the kernel's send buffer is full, so another write now would be buffered by lws.
    package var isChoked: Bool { lws_send_pipe_choked(wsi) != 0 }

    /// What became of a WebSocket write.
    package enum SocketWrite {
        /// The kernel took it all.
        case sent
        /// lws holds what the kernel did not take, to send before the next writeable callback; the
        /// connection reads nothing meanwhile (`stopReadingWhileOutputIsHeld`).
        case held
        /// The connection should close.
        case failed
    }

    /// Writes one WebSocket text frame.
    package func writeText(_ bytes: [UInt8]) -> SocketWrite {
        loop.assertOnLoopThread()
        guard writeBuffer.writeText(bytes, to: wsi) else { return .failed }
        return stopReadingWhileOutputIsHeld() ? .held : .sent
    }

    /// Writes bytes as they are on a raw client socket; false when the connection should close.
    package func writeRaw(_ bytes: [UInt8]) -> Bool {
        loop.assertOnLoopThread()
        return writeBuffer.writeRaw(bytes, to: wsi)
    }

    /// Writes `bytes[range]` as one fragment of a text message.
    package func writeTextFragment(_ bytes: [UInt8], _ range: Range<Int>, first: Bool, last: Bool) -> SocketWrite {
        loop.assertOnLoopThread()
        guard writeBuffer.writeTextFragment(bytes, range, first: first, last: last, to: wsi) else { return .failed }
        return stopReadingWhileOutputIsHeld() ? .held : .sent
    }

    /// Writes a whole small HTTP answer, headers and body in one send; false when the connection should close.
    package func writeHTTP(status: Int, contentType: String, body: [UInt8], headers: [(String, String)]) -> Bool {
        loop.assertOnLoopThread()
        return writeBuffer.writeHTTP(status: status, contentType: contentType, body: body, extraHeaders: headers, to: wsi)
    }

    /// Writes the head of an answer whose body is a stream, and its first bytes; the rest follows
    /// in `writeHTTPBody`. False when the connection should close.
    package func writeStreamHead(status: Int, contentType: String, body: [UInt8], headers: [(String, String)]) -> Bool {
        loop.assertOnLoopThread()
        guard writeBuffer.writeHTTP(status: status, contentType: contentType, body: body, knownLength: false, extraHeaders: headers, to: wsi) else {
            return false
        }
        // An open stream is idle between events by design: lws's HTTP timeouts do not apply to it.
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        return true
    }

    /// Writes `bytes[range]` as one chunk of a streamed answer (not empty: an empty chunk ends it).
    package func writeHTTPChunk(_ bytes: [UInt8], _ range: Range<Int>) -> Bool {
        loop.assertOnLoopThread()
        return writeBuffer.writeHTTPChunk(bytes, range, to: wsi)
    }

    /// Writes more of a streamed answer's body; false when the connection should close.
    package func writeHTTPBody(_ bytes: [UInt8]) -> Bool {
        loop.assertOnLoopThread()
        return writeBuffer.writeHTTPBody(bytes, to: wsi)
    }

    // MARK: Not reading while lws holds WebSocket output
    //
    // libwebsockets 4.1.6 spins inside one lws_service call, never polling again, when a peer
    // half-closes a WebSocket whose output lws still holds (what the socket did not take): the FIN
    // makes recv return 0, the close waits for the held output, and the service loop retries the
    // same descriptor at once, so the output never gets the POLLOUT it waits for and every other
    // connection starves. (Its HTTP role stops polling for input on that read, so HTTP is immune;
    // upstream fixed the retry in 4.2, commit 3ca8625.) On the libev loop the context now runs on,
    // the same read comes back every round instead, level-triggered, and the loop spins a core for
    // as long as the peer leaves the output unread. Until the output has gone, then, the WebSocket
    // does not read: the FIN waits in the kernel, and a reset still ends the connection.

    /// After a frame is written: stop reading while lws holds output. Whether it holds some.
    private func stopReadingWhileOutputIsHeld() -> Bool {
        guard lws_partial_buffered(wsi) != 0 else { return false }
        if loop.readingStopped.insert(identifier).inserted { _ = lws_rx_flow_control(wsi, 0) }
        return true
    }

    /// In a writeable callback, which lws makes only once it holds no output: read again.
    func resumeReading() {
        guard loop.readingStopped.remove(identifier) != nil else { return }
        _ = lws_rx_flow_control(wsi, 1)
    }

    /// Ends an HTTP exchange so a kept-alive connection can take the next request; false: close it.
    /// lws may free the session memory in here: nothing may touch it (or `attachment`) afterwards.
    package func completeHTTPTransaction() -> Bool {
        loop.assertOnLoopThread()
        return lws_http_transaction_completed(wsi) == 0
    }

    /// Sets the close frame a WebSocket sends when its callback next returns false.
    package func setCloseReason(_ status: CloseStatus, _ text: String) {
        var bytes = Array(text.utf8.prefix(123))
        bytes.withUnsafeMutableBufferPointer { lws_close_reason(wsi, status.lws, $0.baseAddress, $0.count) }
    }
}
