import CLibWebSockets
import CRingcastShims
import Foundation
import Glibc

/// Facts of this libwebsockets build that the layer's users need.
package enum LWS {
    /// LWS_PRE: the headroom lws needs in front of every buffer passed to lws_write.
    package static let pre = rc_lws_pre()

    /// Each WebSocket is a file descriptor: allow as many as the hard limit does. A process-wide
    /// effect, so the executables that hold many connections (`ringcast serve`, `ringcast load`)
    /// call it at start; a library loop, a client's inside a user's program, never does.
    package static func raiseOpenFileLimit() {
        guard var limit = fileLimits, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setFileLimits(limit)
    }

    /// The open-file limit now (the soft one), nil when unlimited or unknown.
    package static var openFileLimit: Int? {
        guard let limit = fileLimits, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// The process's soft and hard open-file limits.
    private static var fileLimits: rlimit? {
        var limit = rlimit()
        return getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? limit : nil
    }

    @discardableResult private static func setFileLimits(_ limit: rlimit) -> Bool {
        var limit = limit
        return setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0
    }

    /// Every lws context is made under this lock: `withDescriptorTable` lowers the process's
    /// open-file limit while one is made, and no other may read it meanwhile.
    private static let contextCreation = NSLock()

    /// Makes a context (`create`) whose fd table has room for descriptors below `slots`, not the
    /// whole open-file limit. lws 4.1.6 sizes a context's fd table (and its poll table) from the
    /// open-file limit it reads while being made, and Debian's build walks that whole table on
    /// every close (`sanity_assert_no_sockfd_traces`), so a context that will only ever hold low
    /// descriptors gets a short table by having the limit lowered while it is made. The limit is
    /// never lowered below the lowest free descriptor plus `headroom` (other threads keep opening
    /// files meanwhile), and is put back before this returns; lws refuses a descriptor beyond its
    /// table ("too high") rather than overrun it. nil `slots`: the whole limit.
    package static func withDescriptorTable<T>(_ slots: Int?, headroom: Int = 1024, _ create: () throws -> T) rethrows -> (T, tableSlots: Int?) {
        contextCreation.lock()
        defer { contextCreation.unlock() }
        guard let slots, let limit = fileLimits, limit.rlim_cur != rlim_t.max else { return (try create(), openFileLimit) }
        let current = Int(clamping: limit.rlim_cur)
        let lowered = max(slots, lowestFreeDescriptor + headroom)
        var shorter = limit
        shorter.rlim_cur = rlim_t(lowered)
        guard lowered < current, setFileLimits(shorter) else { return (try create(), current) }
        defer { setFileLimits(limit) }
        return (try create(), lowered)
    }

    /// The descriptor the next open would get (the kernel hands out the lowest free one).
    package static var lowestFreeDescriptor: Int {
        let probe = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard probe >= 0 else { return Int.max / 2 }
        close(probe)
        return Int(probe)
    }

    /// How many of `asked` contexts to make at an open-file limit of `descriptors` (nil: unlimited)
    /// so that their tables fit `budgetBytes`. Context k of n serves descriptors below (k + 1) of
    /// n parts of the limit (`ServiceLoop.context(for:)`), and lws's fd and poll tables take
    /// 16 bytes a slot, so n contexts take (n + 1) / 2 whole-limit tables. At least one.
    package static func contexts(_ asked: Int, tablesWithin budgetBytes: Int, descriptors: Int? = openFileLimit) -> Int {
        guard asked > 1, let descriptors, descriptors > 0 else { return max(1, asked) }
        let wholeTables = budgetBytes / (descriptors * 16)
        return min(asked, max(1, 2 * wholeTables - 1))
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

    /// Writes bytes as they are, on a raw socket; false when the connection should close.
    package func writeRaw(_ bytes: [UInt8], to wsi: OpaquePointer) -> Bool {
        let payload = load(bytes)
        return lws_write(wsi, payload, bytes.count, LWS_WRITE_HTTP) >= 0
    }

    /// Writes `bytes[range]` as one fragment of a WebSocket text message (the first opens it, the
    /// last ends it); false when the connection should close.
    package func writeTextFragment(_ bytes: [UInt8], _ range: Range<Int>, first: Bool, last: Bool, to wsi: OpaquePointer) -> Bool {
        reserve(range.count)
        let payload = storage + LWS.pre
        bytes.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { payload.update(from: base + range.lowerBound, count: range.count) }
        }
        var flags = (first ? LWS_WRITE_TEXT : LWS_WRITE_CONTINUATION).rawValue
        if !last { flags |= LWS_WRITE_NO_FIN.rawValue }
        return lws_write(wsi, payload, range.count, lws_write_protocol(rawValue: flags)) >= 0
    }

    /// Writes a whole small HTTP answer: status line and headers, then the body. False: close.
    /// `knownLength` false: an answer of unknown length (a stream), whose body follows in `writeHTTPBody`s.
    func writeHTTP(
        status: Int, contentType: String, body: [UInt8], knownLength: Bool = true, extraHeaders: [(String, String)], to wsi: OpaquePointer
    ) -> Bool {
        // lws's own headers (its Content-Security-Policy and friends) take about 600 bytes; ours,
        // a sign-in cookie with its token among them, whatever they take.
        let headerRoom = 1024 + extraHeaders.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
        reserve(headerRoom + body.count)
        let start = storage + LWS.pre
        let end = start + headerRoom
        var cursor: UnsafeMutablePointer<UInt8>? = start
        if lws_add_http_common_headers(
            wsi, UInt32(status), contentType, !knownLength ? lws_filepos_t.max : lws_filepos_t(body.count), &cursor, end) != 0
        {
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

    /// Writes `bytes[range]` as one HTTP/1.1 chunk of a streamed answer (its size line, the bytes,
    /// CRLF) in one write; false when the connection should close.
    func writeHTTPChunk(_ bytes: [UInt8], _ range: Range<Int>, to wsi: OpaquePointer) -> Bool {
        reserve(range.count + 24)
        let start = storage + LWS.pre
        var cursor = start
        var digits = 0
        while range.count >> (4 * digits) > 0 { digits += 1 }
        for shift in stride(from: digits - 1, through: 0, by: -1) {
            let digit = UInt8((range.count >> (4 * shift)) & 15)
            cursor.pointee = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
            cursor += 1
        }
        cursor[0] = 13
        cursor[1] = 10
        cursor += 2
        bytes.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { cursor.update(from: base + range.lowerBound, count: range.count) }
        }
        cursor += range.count
        cursor[0] = 13
        cursor[1] = 10
        cursor += 2
        return lws_write(wsi, start, cursor - start, LWS_WRITE_HTTP) >= 0
    }

    /// Writes more of an answer's body after its headers; false when the connection should close.
    func writeHTTPBody(_ bytes: [UInt8], to wsi: OpaquePointer) -> Bool {
        let payload = load(bytes)
        return lws_write(wsi, payload, bytes.count, LWS_WRITE_HTTP) >= 0
    }
}
