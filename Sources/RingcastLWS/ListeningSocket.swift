import CRingcastShims
import Glibc
import RingcastPlatform

/// A TCP listening socket of our own, opened with SO_REUSEPORT so that each service loop can have
/// one on the same address and port, and the kernel spreads new connections over them (lws 4.1.6
/// does not set SO_REUSEPORT, even with LWS_SERVER_OPTION_ALLOW_LISTEN_SHARE); the kernel lets
/// any process of the same user join such a group, so a server claims its address first
/// (`AddressClaim`). Non-blocking; a loop adopts it with `adoptListener`.
package final class ListeningSocket: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is set once; `adopted` and accepting belong to the loop
    // that adopted it, after the thread that made it handed it over.
    package let descriptor: Int32
    package let port: Int
    package let host: String
    /// Once a loop adopted it, its context closes it.
    var adopted = false
    /// What the kernel may hold unsent for each accepted socket (SO_SNDBUF; 0: the kernel's own,
    /// which autotunes up to megabytes for a peer that reads nothing). Set before a loop adopts it.
    package var sendBufferBytes = 0

    /// Binds exactly `host` (an IPv4 or IPv6 address, or a name that resolves to one) and `port`
    /// (0: a free one; the others of a group then take the port the first got).
    ///
    /// The backlog asks for as much as the kernel allows (it caps it at net.core.somaxconn, 4096 on
    /// Debian 12): when thousands of dashboards come back at once, a connection the queue has no
    /// room for is dropped, and the browser tries again only after a second (Benchmarks/NOTES.md).
    /// `sharesPort`: SO_REUSEPORT, so that more listeners may bind the same address.
    package init(host: String, port: Int, backlog: Int32 = 65535, sharesPort: Bool = true) throws(CCallError) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        try checked(
            getaddrinfo(host, String(port), &hints, &found), "getaddrinfo", failsWhen: { $0 != 0 },
            detail: { status, code in
                let reason = status == EAI_SYSTEM ? CCallError.errnoText(code) : String(cString: gai_strerror(status))
                return "'\(host)' is not an address of this machine: \(reason); pick another \"host\""
            })
        defer { freeaddrinfo(found) }
        guard let address = found else { throw CCallError("getaddrinfo", "'\(host)' resolved to no address; pick another \"host\"") }
        let fd = try checked(
            socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0),
            "socket")
        do throws(CCallError) {
            let one: Int32 = 1
            try setSocketOption(fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", one)
            if sharesPort { try setSocketOption(fd, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", one) }
            if address.pointee.ai_family == AF_INET6 {
                // The address asked for, and only it: no IPv4 through an IPv6 socket.
                try setSocketOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, "IPV6_V6ONLY", one)
            }
            let advice = "the port is in use or the address is not on this machine; pick another \"port\" or \"host\""
            try checked(
                bind(fd, address.pointee.ai_addr, address.pointee.ai_addrlen), "bind",
                detail: { _, code in
                    "could not listen on \(host):\(port): \(CCallError.errnoText(code)); \(advice)"
                })
            try checked(
                listen(fd, backlog), "listen", detail: { _, code in "could not listen on \(host):\(port): \(CCallError.errnoText(code)); \(advice)" })
        } catch {
            close(fd)
            throw error
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        do throws(CCallError) {
            try checked(named, "getsockname")
        } catch {
            close(fd)
            throw error
        }
        let family = bound.ss_family
        let boundPort: UInt16 = withUnsafePointer(to: &bound) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        descriptor = fd
        self.port = Int(boundPort)
        self.host = host
    }

    deinit { if !adopted { close(descriptor) } }

    /// What lws's validity check did, which the server turns off (`retryPolicyWithoutValidityChecks`),
    /// done by the kernel at no cost per connection to the loop: a silent peer is probed after 300 s
    /// and dropped when the probe goes unanswered for 10 s, and one that stops acknowledging what
    /// is sent (heartbeats) is dropped after 310 s.
    private func keepCheckingThePeer(_ fd: Int32) throws(CCallError) {
        try setSocketOption(fd, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", Int32(1))
        try setSocketOption(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE, "TCP_KEEPIDLE", Int32(300))
        try setSocketOption(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL, "TCP_KEEPINTVL", Int32(10))
        try setSocketOption(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT, "TCP_KEEPCNT", Int32(1))
        try setSocketOption(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT", Int32(310_000))
    }

    /// What one `accept` found.
    enum Accepted {
        case connection(descriptor: Int32, address: PeerAddress)
        /// Nothing waits (EAGAIN).
        case none
        /// The process or the system is out of descriptors (EMFILE, ENFILE), or the kernel of
        /// memory for a socket (ENOBUFS, ENOMEM): the connection waits in the backlog, and asking
        /// again before something is freed only fails again.
        case outOfResources(errno: Int32)
    }

    /// Accepts one waiting connection: its descriptor (non-blocking, TCP_NODELAY) and the peer's
    /// address. A socket whose TCP_NODELAY or keep-alive cannot be set is closed and the
    /// next one taken: it would answer every frame a delayed-ACK late.
    func accept() -> Accepted {
        var peer = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let fd = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { rc_accept_nonblocking(descriptor, $0, &length) }
            }
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM { return .outOfResources(errno: code) }
                return .none
            }
            do throws(CCallError) {
                try setSocketOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, "TCP_NODELAY", Int32(1))
                try keepCheckingThePeer(fd)
                if sendBufferBytes > 0 { try setSocketOption(fd, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF", Int32(sendBufferBytes / 2)) }
            } catch {
                close(fd)
                continue
            }
            return .connection(descriptor: fd, address: PeerAddress(&peer))
        }
    }
}

/// Checks that a client socket can be bound to `address` (an IPv4 or IPv6 literal) on this machine,
/// as lws binds a connection's `iface` before connecting: binding port 0 there and closing at once.
/// getaddrinfo builds the socket address, so IPv4 and IPv6 take one path.
package func checkBindableLocalAddress(_ address: String) throws(CCallError) {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV
    var found: UnsafeMutablePointer<addrinfo>?
    try checked(
        getaddrinfo(address, "0", &hints, &found), "getaddrinfo", failsWhen: { $0 != 0 },
        detail: { status, code in
            "'\(address)' is not an IP address: \(status == EAI_SYSTEM ? CCallError.errnoText(code) : String(cString: gai_strerror(status)))"
        })
    defer { freeaddrinfo(found) }
    guard let local = found else { throw CCallError("getaddrinfo", "'\(address)' gave no address") }
    let fd = try checked(socket(local.pointee.ai_family, local.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0), "socket")
    defer { close(fd) }
    try checked(bind(fd, local.pointee.ai_addr, local.pointee.ai_addrlen), "bind")
}

/// One process's claim on a listening address: the listeners of a server share their port
/// through SO_REUSEPORT, which the kernel grants any process of the same user, so a second server
/// started on the same address would silently take half of its connections. The claim is an
/// abstract Unix socket named after the address (no file; the kernel frees it when the process
/// exits, kill -9 included): a second claim fails, and asks the first's pid of the kernel
/// (SO_PEERCRED) to name it.
package final class AddressClaim: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is set once and closed once, in deinit.
    private let descriptor: Int32

    /// Claims `host`:`port` for this process, or throws a `CCallError` naming the holder.
    package init(host: String, port: Int) throws(CCallError) {
        let name = "ringcast-listen \(host) \(port)"
        let fd = try checked(socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0), "socket(AF_UNIX)")
        var address = AddressClaim.abstractAddress(name)
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.utf8.count)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        if bound != 0 {
            let code = errno
            close(fd)
            guard code == EADDRINUSE else {
                throw CCallError("bind", "could not claim \(host):\(port) for this process: \(CCallError.errnoText(code))", errno: code)
            }
            let holder = AddressClaim.holder(of: &address, length: length).map { "Ringcast server (pid \($0))" } ?? "Ringcast server"
            throw CCallError(
                "bind",
                "another \(holder) already listens on \(host):\(port): stop it first, or pick another \"port\" (two servers on one port would each get part of the clients)",
                errno: code)
        }
        // Listening, so that a second claim can connect and read the pid; nothing is ever accepted.
        listen(fd, 8)
        descriptor = fd
    }

    deinit { close(descriptor) }

    private static func abstractAddress(_ name: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            // The leading NUL makes the name abstract.
            path[0] = 0
            for (index, byte) in name.utf8.prefix(path.count - 1).enumerated() { path[index + 1] = byte }
        }
        return address
    }

    /// The pid of the process listening on the claim, when it can be asked without waiting.
    private static func holder(of address: inout sockaddr_un, length: socklen_t) -> Int32? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) } }
        guard connected == 0 else { return nil }
        // struct ucred (pid, uid, gid), which Glibc hides behind _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var size = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0, credentials.pid > 0 else { return nil }
        return credentials.pid
    }

}
