import CRingcastShims
import Glibc

/// A TCP listening socket of our own, opened with SO_REUSEPORT so that each service loop can have
/// one on the same address and port, and the kernel spreads new connections over them (lws 4.1.6
/// does not set SO_REUSEPORT: see LWS-NOTES.md). Non-blocking; a loop adopts it with `adoptListener`.
package final class ListeningSocket: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is set once; `adopted` and accepting belong to the loop
    // that adopted it, after the thread that made it handed it over.
    package let descriptor: Int32
    package let port: Int
    package let host: String
    /// Once a loop adopted it, its context closes it.
    var adopted = false

    /// Binds exactly `host` (an IPv4 or IPv6 address, or a name that resolves to one) and `port`
    /// (0: a free one; the others of a group then take the port the first got).
    ///
    /// The backlog asks for as much as the kernel allows (it caps it at net.core.somaxconn, 4096 on
    /// Debian 12): when thousands of dashboards come back at once, a connection the queue has no
    /// room for is dropped, and the browser tries again only after a second (Benchmarks/NOTES.md).
    package init(host: String, port: Int, backlog: Int32 = 65535) throws(LWSError) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &found)
        guard resolved == 0, let address = found else {
            throw LWSError(
                "getaddrinfo", "'\(host)' is not an address of this machine: \(String(cString: gai_strerror(resolved))); pick another \"host\"")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LWSError("socket", String(cString: strerror(errno))) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        if address.pointee.ai_family == AF_INET6 {
            // The address asked for, and only it: no IPv4 through an IPv6 socket.
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        guard bind(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0, listen(fd, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw LWSError(
                "bind",
                "could not listen on \(host):\(port): \(reason); the port is in use or the address is not on this machine; pick another \"port\" or \"host\""
            )
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
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
    private func keepCheckingThePeer(_ fd: Int32) {
        let size = socklen_t(MemoryLayout<Int32>.size)
        var on: Int32 = 1
        var idleSeconds: Int32 = 300
        var probeSeconds: Int32 = 10
        var probes: Int32 = 1
        var unacknowledgedMilliseconds: Int32 = 310_000
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE, &idleSeconds, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL, &probeSeconds, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT, &probes, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &unacknowledgedMilliseconds, size)
    }

    /// Accepts one waiting connection: its descriptor (non-blocking, TCP_NODELAY) and the peer's
    /// address, or nil when none waits.
    func accept() -> (descriptor: Int32, address: PeerAddress)? {
        var peer = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let fd = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { rc_accept_nonblocking(descriptor, $0, &length) }
            }
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return nil  // EAGAIN, or out of descriptors (EMFILE): the next readable tries again
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            keepCheckingThePeer(fd)
            return (fd, PeerAddress(&peer))
        }
    }
}
