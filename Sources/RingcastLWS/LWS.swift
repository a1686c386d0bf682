import CLibWebSockets
import CRingcastShims
import Glibc

/// The small layer through which the server and the client reach libwebsockets: header access,
/// HTTP answers, frame writes and the C memory a context keeps. Only the C-facing targets
/// (Ringcast, RingcastClient) use it; it is `package`, not public API.
package enum LWS {
    package static let pre = rc_lws_pre()

    /// Each WebSocket is a file descriptor: allow as many as the hard limit does.
    package static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    package static func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = lws_hdr_total_length(wsi, token)
        guard length > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token) >= 0 else { return nil }
        return String(cString: buffer)
    }

    package static func hasHeader(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> Bool {
        lws_hdr_total_length(wsi, token) > 0
    }

    /// The request's method and path, from whichever method token lws filled in.
    package static func requestLine(_ wsi: OpaquePointer) -> (method: String, path: String)? {
        let methods: [(String, lws_token_indexes)] = [
            ("GET", WSI_TOKEN_GET_URI), ("POST", WSI_TOKEN_POST_URI), ("PUT", WSI_TOKEN_PUT_URI),
            ("PATCH", WSI_TOKEN_PATCH_URI), ("DELETE", WSI_TOKEN_DELETE_URI),
            ("OPTIONS", WSI_TOKEN_OPTIONS_URI), ("HEAD", WSI_TOKEN_HEAD_URI),
        ]
        for (method, token) in methods {
            if let path = header(wsi, token) { return (method, path) }
        }
        return nil
    }

    /// `?a=b&c=d`, as lws split (and URL-decoded) it.
    package static func queryArguments(_ wsi: OpaquePointer) -> [String: String] {
        var arguments: [String: String] = [:]
        var buffer = [CChar](repeating: 0, count: 2048)
        var index: Int32 = 0
        while lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, index) >= 0 {
            let fragment = String(cString: buffer)
            if let equals = fragment.firstIndex(of: "=") {
                arguments[String(fragment[..<equals])] = String(fragment[fragment.index(after: equals)...])
            } else {
                arguments[fragment] = ""
            }
            index += 1
        }
        return arguments
    }

    package static func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "" }
        return String(cString: buffer)
    }
}

/// One reusable buffer with LWS_PRE bytes of headroom, for every write on one service thread.
package final class WriteBuffer {
    private(set) var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int

    package init(capacity: Int = 64 * 1024) {
        self.capacity = capacity
        storage = .allocate(capacity: LWS.pre + capacity)
    }

    deinit { storage.deallocate() }

    /// Copies `bytes` after the headroom and returns where they start.
    package func load(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        reserve(bytes.count)
        let payload = storage + LWS.pre
        bytes.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { payload.update(from: base, count: source.count) }
        }
        return payload
    }

    package func reserve(_ count: Int) {
        guard count > capacity else { return }
        storage.deallocate()
        capacity = max(count, capacity * 2)
        storage = .allocate(capacity: LWS.pre + capacity)
    }

    /// Writes one WebSocket text frame; false when the connection should close.
    package func writeText(_ bytes: [UInt8], to wsi: OpaquePointer) -> Bool {
        let payload = load(bytes)
        return lws_write(wsi, payload, bytes.count, LWS_WRITE_TEXT) >= 0
    }

    /// Writes a whole small HTTP answer: status line and headers, then the body. False: close.
    package func writeHTTP(status: Int, contentType: String, body: [UInt8], extraHeaders: [(String, String)], to wsi: OpaquePointer) -> Bool {
        let headerRoom = 1024
        reserve(headerRoom + body.count)
        let start = storage + LWS.pre
        let end = start + headerRoom
        var cursor: UnsafeMutablePointer<UInt8>? = start
        if lws_add_http_common_headers(wsi, UInt32(status), contentType, lws_filepos_t(body.count), &cursor, end) != 0 {
            return false
        }
        for (name, value) in extraHeaders {
            let added = name.withCString { namePointer in
                value.withCString { valuePointer in
                    lws_add_http_header_by_name(wsi, UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self),
                                                UnsafeRawPointer(valuePointer).assumingMemoryBound(to: UInt8.self),
                                                Int32(strlen(valuePointer)), &cursor, end)
                }
            }
            if added != 0 { return false }
        }
        if lws_finalize_http_header(wsi, &cursor, end) != 0 { return false }
        // Headers and body leave in one write: one send, one segment, for answers this small.
        guard var bodyStart = cursor else { return false }
        body.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { bodyStart.update(from: base, count: source.count) }
        }
        bodyStart += body.count
        return lws_write(wsi, start, bodyStart - start, LWS_WRITE_HTTP_HEADERS) >= 0
    }
}
