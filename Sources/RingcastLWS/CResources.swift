import CLibWebSockets
import Glibc

/// The C signature of a protocol's callback.
package typealias LWSCallback =
    @convention(c) (OpaquePointer?, lws_callback_reasons, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int) -> Int32

/// C memory that lws keeps pointers to for the whole life of a context: strings, the protocol list,
/// mounts and header lists. Allocated before the context, released after it is destroyed.
package struct CResources {
    private var strings: [UnsafeMutablePointer<CChar>] = []
    package init() {}
    private var releases: [() -> Void] = []

    package mutating func string(_ text: String) -> UnsafePointer<CChar> {
        let copy = strdup(text)!
        strings.append(copy)
        return UnsafePointer(copy)
    }

    package mutating func protocols(name: String, callback: LWSCallback, sessionSize: Int, rxBufferSize: Int) -> UnsafePointer<lws_protocols> {
        // A context of one protocol: an upgrade that names no subprotocol (what browsers send) gets it.
        // lws allocates rx_buffer_size (0: 4096) for every WebSocket, idle or not; bigger messages
        // arrive in fragments, which the server joins.
        let list = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        list.initialize(repeating: lws_protocols(), count: 2)
        list[0].name = string(name)
        list[0].callback = callback
        list[0].per_session_data_size = sessionSize
        list[0].rx_buffer_size = rxBufferSize
        // lws 4.1.6 hands the kernel at most tx_packet_size (0: rx_buffer_size) bytes a send and
        // keeps the rest for the next POLLOUT, again that much a time (lws_issue_raw): a 2 MB
        // snapshot left in 4 KiB pieces, one wake-up each. With no practical limit, one send
        // gives the kernel the whole frame and it takes what its buffer holds.
        list[0].tx_packet_size = CResources.unlimitedSend
        releases.append { list.deallocate() }
        return UnsafePointer(list)
    }

    /// `/` serves the public directory (and nothing outside it); each of `callbackPaths` goes to the
    /// protocol named `protocolName` instead.
    /// A retry and idle policy without lws's validity check (a PING after 300 s without proof the
    /// peer is there, a hang-up at 310 s). lws 4.1.6 keeps that check as an entry per connection in
    /// one sorted list per service thread, and inserts by walking it from the head (__lws_sul_insert,
    /// lws_dll2_add_sorted): every new connection's entry, due last, walked past every held one's,
    /// which made a connection's cost grow with the connections held (Benchmarks/NOTES.md). For a
    /// context that serves the sockets `ListeningSocket.accept` hands it, where the kernel checks
    /// the same thing.
    package mutating func retryPolicyWithoutValidityChecks() -> UnsafePointer<lws_retry_bo_t> {
        let policy = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        policy.initialize(to: lws_retry_bo_t())
        releases.append { policy.deallocate() }
        return UnsafePointer(policy)
    }

    /// The extension list that offers permessage-deflate (lws's own), ended by a zeroed entry.
    package mutating func permessageDeflate() -> UnsafePointer<lws_extension> {
        let list = UnsafeMutablePointer<lws_extension>.allocate(capacity: 2)
        list.initialize(repeating: lws_extension(), count: 2)
        list[0].name = string("permessage-deflate")
        list[0].callback = lws_extension_callback_pm_deflate
        list[0].client_offer = string("permessage-deflate; client_max_window_bits")
        releases.append { list.deallocate() }
        return UnsafePointer(list)
    }

    /// A send size no frame reaches; lws adds its headroom to it in an `unsigned int`, so not `Int.max`.
    static let unlimitedSend = 1 << 30

    package mutating func mounts(publicDirectory: String, maxAge: Int, callbackPaths: [String], protocolName: String) -> UnsafePointer<lws_http_mount>
    {
        let mimeTypes = mimeTypeList([
            (".js", "text/javascript"), (".mjs", "text/javascript"), (".svg", "image/svg+xml"),
            (".json", "application/json"), (".webmanifest", "application/manifest+json"),
            (".woff2", "font/woff2"), (".map", "application/json"), (".txt", "text/plain; charset=utf-8"),
        ])
        let mounts = UnsafeMutablePointer<lws_http_mount>.allocate(capacity: 1 + callbackPaths.count)
        mounts.initialize(repeating: lws_http_mount(), count: 1 + callbackPaths.count)
        mounts[0].mountpoint = string("/")
        mounts[0].mountpoint_len = 1
        mounts[0].origin = string(publicDirectory)
        mounts[0].def = string("index.html")
        mounts[0].origin_protocol = UInt8(LWSMPRO_FILE.rawValue)
        mounts[0].extra_mimetypes = mimeTypes
        mounts[0].cache_max_age = Int32(maxAge)
        mounts[0].cache_reusable = 1
        mounts[0].cache_revalidate = 1
        mounts[0].cache_intermediaries = 0
        // lws 4.1.6 asks a mount's protocol for extra headers (LWS_CALLBACK_ADD_HEADERS) before
        // it serves a file, and only when the mount names one (lib/roles/http/server/server.c).
        mounts[0].protocol = string(protocolName)
        for (index, point) in callbackPaths.enumerated() {
            let mount = mounts + index + 1
            mount.pointee.mountpoint = string(point)
            mount.pointee.mountpoint_len = UInt8(point.utf8.count)
            mount.pointee.origin = string(protocolName)
            mount.pointee.origin_protocol = UInt8(LWSMPRO_CALLBACK.rawValue)
            mounts[index].mount_next = UnsafePointer(mount)
        }
        releases.append { mounts.deallocate() }
        return UnsafePointer(mounts)
    }

    /// Headers lws adds to every HTTP answer, as a linked list of name/value options.
    package mutating func headers(_ pairs: [(String, String)]) -> UnsafePointer<lws_protocol_vhost_options>? {
        optionList(pairs)
    }

    private mutating func mimeTypeList(_ pairs: [(String, String)]) -> UnsafePointer<lws_protocol_vhost_options>? {
        optionList(pairs)
    }

    private mutating func optionList(_ pairs: [(String, String)]) -> UnsafePointer<lws_protocol_vhost_options>? {
        guard !pairs.isEmpty else { return nil }
        let list = UnsafeMutablePointer<lws_protocol_vhost_options>.allocate(capacity: pairs.count)
        list.initialize(repeating: lws_protocol_vhost_options(), count: pairs.count)
        for (index, (name, value)) in pairs.enumerated() {
            list[index].name = string(name)
            list[index].value = string(value)
            if index + 1 < pairs.count { list[index].next = UnsafePointer(list + index + 1) }
        }
        releases.append { list.deallocate() }
        return UnsafePointer(list)
    }

    /// lws's per-header length limits, every header (and piece of the request line) the same.
    package mutating func tokenLimits(each: UInt16) -> UnsafePointer<lws_token_limits> {
        let limits = UnsafeMutablePointer<lws_token_limits>.allocate(capacity: 1)
        UnsafeMutableRawPointer(limits).initializeMemory(
            as: UInt16.self, repeating: each, count: MemoryLayout<lws_token_limits>.size / MemoryLayout<UInt16>.size)
        releases.append { limits.deallocate() }
        return UnsafePointer(limits)
    }

    package mutating func release() {
        for release in releases { release() }
        for string in strings { free(string) }
        releases = []
        strings = []
    }
}
