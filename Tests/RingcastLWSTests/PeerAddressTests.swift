import Foundation
import RingcastCore
import XCTest

@testable import RingcastLWS

/// The accepted address answers "is it this machine?" from its bytes, as `isLoopbackAddress` does
/// from text, and reads back as inet_ntop writes it.
final class PeerAddressTests: XCTestCase {
    private func accepted(_ text: String) throws -> PeerAddress {
        var storage = sockaddr_storage()
        let parsed: Int32 = withUnsafeMutablePointer(to: &storage) { pointer in
            if text.contains(":") {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { inet6 in
                    inet6.pointee.sin6_family = sa_family_t(AF_INET6)
                    return inet_pton(AF_INET6, text, &inet6.pointee.sin6_addr)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet in
                inet.pointee.sin_family = sa_family_t(AF_INET)
                return inet_pton(AF_INET, text, &inet.pointee.sin_addr)
            }
        }
        XCTAssertEqual(parsed, 1, "inet_pton could not read \(text)")
        return PeerAddress(&storage)
    }

    func testLoopbackIsKnownFromTheBytesAndAgreesWithTheText() throws {
        let cases = [
            "127.0.0.1": true, "127.200.3.4": true, "10.0.0.2": false, "128.0.0.1": false, "0.0.0.0": false,
            "::1": true, "::2": false, "::": false, "::ffff:127.0.0.1": true, "::ffff:10.1.2.3": false,
            "2001:db8::1": false, "fe80::1": false,
        ]
        for (text, loopback) in cases {
            let address = try accepted(text)
            XCTAssertEqual(address.isLoopback, loopback, text)
            XCTAssertEqual(address.text, text)
            XCTAssertEqual(isLoopbackAddress(address.text), loopback, text)
            XCTAssertEqual(PeerAddress(text: text).isLoopback, loopback, text)
        }
    }

    /// An IPv4 address is written without inet_ntop (the accept path's cost): the same text for
    /// every width of each byte, and for addresses spread over the whole range.
    func testAnIPv4AddressReadsAsInetNtopWritesIt() throws {
        var samples = ["255.255.255.255", "192.168.100.9", "1.20.100.0", "9.99.199.255", "100.10.1.0"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1000 {
            let value = UInt32.random(in: 0...UInt32.max, using: &generator)
            var address = in_addr(s_addr: value.bigEndian)
            var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            XCTAssertNotNil(inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)))
            samples.append(String(cString: buffer))
        }
        for text in samples { XCTAssertEqual(try accepted(text).text, text) }
    }
}
