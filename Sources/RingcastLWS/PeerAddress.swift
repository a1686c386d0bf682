import CLibWebSockets
import Foundation
import RingcastCore

/// The address a socket was accepted from, as the kernel gave it. Every connection asks whether it
/// is loopback; only a log line or a per-address count needs it as text, so the text is made then.
package struct PeerAddress: Sendable, CustomStringConvertible {
    private enum Form: Sendable {
        case ipv4(in_addr_t)
        case ipv6((UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8))
        /// What lws reported as text (its own accept path).
        case text(String)
    }
    private let form: Form

    package init(text: String) { form = .text(text) }

    /// From `accept`'s address; anything but IPv4 and IPv6 reads as an empty text.
    init(_ address: inout sockaddr_storage) {
        let family = Int32(address.ss_family)
        form = withUnsafePointer(to: &address) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { .ipv6($0.pointee.sin6_addr.__in6_u.__u6_addr8) }
            }
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { .ipv4($0.pointee.sin_addr.s_addr) }
            }
            return .text("")
        }
    }

    /// 127.0.0.0/8, ::1, or 127.0.0.0/8 mapped into IPv6 (::ffff:127.x.x.x): the peer is this machine.
    package var isLoopback: Bool {
        switch form {
        case .ipv4(let address):
            return UInt32(bigEndian: address) >> 24 == 127
        case .ipv6(let b):
            let zeroTen = b.0 == 0 && b.1 == 0 && b.2 == 0 && b.3 == 0 && b.4 == 0 && b.5 == 0 && b.6 == 0 && b.7 == 0 && b.8 == 0 && b.9 == 0
            guard zeroTen else { return false }
            if b.10 == 0xFF, b.11 == 0xFF { return b.12 == 127 }
            return b.10 == 0 && b.11 == 0 && b.12 == 0 && b.13 == 0 && b.14 == 0 && b.15 == 1
        case .text(let text):
            return isLoopbackAddress(text)
        }
    }

    /// `127.0.0.1`, `::1`, `::ffff:10.0.0.2`: as inet_ntop writes it.
    package var text: String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN) + 1) { buffer in
            let written: UnsafePointer<CChar>?
            switch form {
            case .text(let text):
                return text
            case .ipv4(let address):
                // Written here rather than by inet_ntop, whose sprintf costs more than the rest of
                // an accept's bookkeeping; the same dotted quad.
                return PeerAddress.dottedQuad(UInt32(bigEndian: address))
            case .ipv6(var address):
                written = inet_ntop(AF_INET6, &address, buffer.baseAddress, socklen_t(buffer.count))
            }
            return written.map { String(cString: $0) } ?? ""
        }
    }

    package var description: String { text }

    private static func dottedQuad(_ address: UInt32) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(15)
        for shift in stride(from: 24, through: 0, by: -8) {
            let part = UInt8(truncatingIfNeeded: address >> UInt32(shift))
            if shift != 24 { bytes.append(UInt8(ascii: ".")) }
            if part >= 100 { bytes.append(UInt8(ascii: "0") + part / 100) }
            if part >= 10 { bytes.append(UInt8(ascii: "0") + part / 10 % 10) }
            bytes.append(UInt8(ascii: "0") + part % 10)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
