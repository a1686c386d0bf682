import CLibWebSockets
import CRingcastShims
import Glibc

/// Facts of this libwebsockets build that the layer's users need.
package enum LWS {
    /// LWS_PRE: the headroom lws needs in front of every buffer passed to lws_write.
    package static let pre = rc_lws_pre()

    /// Each WebSocket is a file descriptor: allow as many as the hard limit does.
    package static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// What lws's tables for one context take: an fd table and a poll table, each one 8-byte slot
    /// per descriptor the open-file limit allows, zeroed at creation, so resident whether used or
    /// not. nil without a finite limit.
    package static var contextTableBytes: Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur) * 16
    }

    /// How many of `asked` contexts fit `budgetBytes` of those tables, `perContext` each; at least one.
    package static func contexts(_ asked: Int, tablesWithin budgetBytes: Int, perContext: Int? = contextTableBytes) -> Int {
        guard asked > 1, let perContext, perContext > 0 else { return max(1, asked) }
        return min(asked, max(1, budgetBytes / perContext))
    }
}

/// One reusable buffer with LWS_PRE bytes of headroom, for every write on one service thread.
package final class WriteBuffer {
    @exclusivity(unchecked) private(set) var storage: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var capacity: Int

    package init(capacity: Int = 64 * 1024) {
        self.capacity = capacity
        storage = .allocate(capacity: LWS.pre + capacity)
    }

    deinit { storage.deallocate() }

    /// Copies `bytes` after the headroom and returns where they start.
    func load(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        reserve(bytes.count)
        let payload = storage + LWS.pre
        bytes.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { payload.update(from: base, count: source.count) }
        }
        return payload
    }

    func reserve(_ count: Int) {
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
    func writeHTTP(status: Int, contentType: String, body: [UInt8], extraHeaders: [(String, String)], to wsi: OpaquePointer) -> Bool {
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
                    lws_add_http_header_by_name(
                        wsi, UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self),
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
