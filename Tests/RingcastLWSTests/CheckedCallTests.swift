import Foundation
import RingcastPlatform
import XCTest

@testable import RingcastLWS

/// Every C call the product makes is checked by one helper, whose error names the call, its status
/// and errno, in words a user can act on.
final class CheckedCallTests: XCTestCase {
    func testAFailedCallNamesItselfAndItsErrno() throws {
        XCTAssertEqual(try checked(Int32(3), "read"), 3, "a success returns its status")
        errno = 0
        XCTAssertThrowsError(try checked(close(-1), "close")) { error in
            guard let error = error as? CCallError else { return XCTFail("not a CCallError: \(error)") }
            XCTAssertEqual(error.call, "close")
            XCTAssertEqual(error.status, -1)
            XCTAssertEqual(error.errno, EBADF, "errno as the call left it")
            XCTAssertEqual("\(error)", "close failed: Bad file descriptor (errno \(EBADF))")
        }
        // A library with a convention of its own: what fails, and what the message says.
        XCTAssertThrowsError(try checked(Int32(5), "sqlite3_step", failsWhen: { $0 != 0 }, detail: { status, _ in "database is locked (\(status))" }))
        {
            XCTAssertEqual("\($0)", "sqlite3_step failed: database is locked (5)")
        }
        let none: OpaquePointer? = nil
        XCTAssertThrowsError(try checkedNotNil(none, "rc_timer_new", detail: { _, _ in "out of memory for a timer" })) {
            XCTAssertEqual(($0 as? CCallError)?.status, -1)
            XCTAssertEqual("\($0)", "rc_timer_new failed: out of memory for a timer")
        }
    }

    func testASocketOptionThatFailsIsAnErrorNamingTheOption() {
        XCTAssertThrowsError(try setSocketOption(-1, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", Int32(1))) { error in
            XCTAssertEqual((error as? CCallError)?.call, "setsockopt(SO_REUSEPORT)")
            XCTAssertEqual((error as? CCallError)?.errno, EBADF)
        }
    }

    /// `ListeningSocket` opens, binds and listens through the helper: a port another socket holds
    /// without SO_REUSEPORT, and an address that is not this machine's, each name the failed call.
    func testAListenerThatCannotListenSaysWhichCallFailedAndWhatToChange() throws {
        let first = try ListeningSocket(host: "127.0.0.1", port: 0)
        XCTAssertGreaterThan(first.port, 0)
        XCTAssertNoThrow(try ListeningSocket(host: "127.0.0.1", port: first.port), "SO_REUSEPORT lets a second listener share the port")

        let plain = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(plain) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(plain, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(plain, 1), 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(plain, $0, &length) } }
        let taken = Int(UInt16(bigEndian: address.sin_port))
        XCTAssertThrowsError(try ListeningSocket(host: "127.0.0.1", port: taken)) { error in
            guard let error = error as? CCallError else { return XCTFail("not a CCallError: \(error)") }
            XCTAssertEqual(error.call, "bind")
            XCTAssertEqual(error.errno, EADDRINUSE)
            XCTAssertTrue(error.detail.hasPrefix("could not listen on 127.0.0.1:\(taken): Address already in use"), error.detail)
            XCTAssertTrue(error.detail.contains("pick another \"port\""), error.detail)
        }
        XCTAssertThrowsError(try ListeningSocket(host: "192.0.2.1", port: 0)) { error in
            XCTAssertEqual((error as? CCallError)?.call, "bind")
            XCTAssertEqual((error as? CCallError)?.errno, EADDRNOTAVAIL, "\(error)")
        }
        XCTAssertThrowsError(try ListeningSocket(host: "no such host.invalid", port: 0)) { error in
            XCTAssertEqual((error as? CCallError)?.call, "getaddrinfo")
            XCTAssertTrue("\(error)".contains("pick another \"host\""), "\(error)")
        }
    }
}
