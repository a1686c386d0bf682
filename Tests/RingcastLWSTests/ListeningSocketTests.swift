import Glibc
import RingcastPlatform
import XCTest

@testable import RingcastLWS

/// What the server's own accept sets on a socket: the kernel watches the peer, since lws's
/// per-connection validity check is turned off (CResources.retryPolicyWithoutValidityChecks).
final class ListeningSocketTests: XCTestCase {
    private func option(_ fd: Int32, _ level: Int32, _ name: Int32) -> Int32 {
        var value: Int32 = -1
        var size = socklen_t(MemoryLayout<Int32>.size)
        XCTAssertEqual(getsockopt(fd, level, name, &value, &size), 0, "getsockopt \(name): \(String(cString: strerror(errno)))")
        return value
    }

    func testAnAcceptedSocketHasTheKernelCheckOnItsPeer() throws {
        let listener = try ListeningSocket(host: "127.0.0.1", port: 0)
        listener.sendBufferBytes = 64 * 1024
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(client, 0)
        defer { close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(listener.port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(connected, 0)
        var accepted: Int32?
        for _ in 0..<200 where accepted == nil {
            if case .connection(let descriptor, _) = listener.accept() { accepted = descriptor } else { usleep(5000) }
        }
        let fd = try XCTUnwrap(accepted, "the connection was not accepted within a second")
        defer { close(fd) }
        XCTAssertEqual(option(fd, SOL_SOCKET, SO_KEEPALIVE), 1)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE), 300)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL), 10)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT), 1)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT), 310_000)
        XCTAssertEqual(option(fd, Int32(IPPROTO_TCP), TCP_NODELAY), 1)
        XCTAssertEqual(option(fd, SOL_SOCKET, SO_SNDBUF), 64 * 1024, "what the kernel may hold unsent is capped")
    }

    func testALocalAddressIsBindableOnlyWhenThisMachineHasIt() throws {
        // Any 127/8 address is loopback's; ::1 is IPv6's own: both families take the one path.
        XCTAssertNoThrow(try checkBindableLocalAddress("127.0.0.2"))
        XCTAssertNoThrow(try checkBindableLocalAddress("::1"))
        XCTAssertThrowsError(try checkBindableLocalAddress("192.0.2.1"), "TEST-NET-1 is on no interface here") { error in
            XCTAssertEqual((error as? CCallError)?.call, "bind", "\(error)")
            XCTAssertEqual((error as? CCallError)?.errno, EADDRNOTAVAIL, "\(error)")
        }
        XCTAssertThrowsError(try checkBindableLocalAddress("localhost"), "a name is not looked up") { error in
            XCTAssertEqual((error as? CCallError)?.call, "getaddrinfo", "\(error)")
        }
    }
}
