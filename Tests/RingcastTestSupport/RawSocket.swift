import Foundation
import RingcastCore
import RingcastPlatform

/// A plain TCP socket to a loopback port, for sending what no well-behaved client would: partial
/// requests, floods of headers, hand-made WebSocket frames, and abrupt resets.
package final class RawSocket {
    package let descriptor: Int32

    /// `receiveBufferBytes` is set before connecting, so the window the peer sees is that small
    /// from the start (set later, the buffer shrinks but the window already agreed does not).
    /// `source`: the loopback address it connects from (another 127.x is another client to the server).
    package init(port: Int, timeoutSeconds: Double = 5, receiveBufferBytes: Int32? = nil, source: String? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw RawSocketError("socket: \(String(cString: strerror(errno)))") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw RawSocketError("bind to \(source): \(reason)")
            }
        }
        if var bytes = receiveBufferBytes {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &bytes, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: Int(timeoutSeconds), tv_usec: Int((timeoutSeconds.truncatingRemainder(dividingBy: 1)) * 1_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw RawSocketError("connect to 127.0.0.1:\(port): \(reason)")
        }
    }

    deinit { close(descriptor) }

    /// Sends everything, or throws when the peer is gone.
    package func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { throw RawSocketError("send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    package func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// What arrives until the peer closes, `limit` bytes have come, or the read times out.
    package func receive(limit: Int = 1 << 20) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while received.count < limit {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[..<count]
                continue
            }
            if count < 0, errno == EINTR { continue }
            return (received, count == 0 || (count < 0 && errno == ECONNRESET))
        }
        return (received, false)
    }

    /// Sends a request exactly as given (what a well-behaved client would never send) and reads
    /// one answer with the core's bounded decoder.
    package func exchange(_ raw: [UInt8]) throws -> HTTPResponse {
        try send(raw)
        var decoder = HTTPAnswerDecoder(maxBodyBytes: 16 << 20)
        var closed = false
        while true {
            if let answer = try decoder.next(closed: closed) {
                return HTTPResponse(status: answer.status, headers: answer.headers, body: answer.body)
            }
            if closed { throw RawSocketError("the server closed the connection before its answer ended") }
            let (bytes, ended) = receiveSome()
            if bytes.isEmpty && !ended { throw RawSocketError("no answer within the socket's timeout") }
            decoder.append(bytes)
            closed = ended
        }
    }

    /// What one read returns (waiting at most the socket's timeout); empty when nothing came.
    package func receiveSome() -> (bytes: [UInt8], closed: Bool) {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { return (Array(chunk[..<count]), false) }
            if count < 0, errno == EINTR { continue }
            return ([], count == 0 || (count < 0 && errno == ECONNRESET))
        }
    }

    /// Reads until `bytes` holds `marker` (or the peer closes, or the read times out).
    package func receive(until marker: [UInt8]) -> [UInt8] {
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while received.firstRange(of: marker) == nil {
            let count = recv(descriptor, &byte, 1, 0)
            if count == 1 { received.append(byte) } else if count < 0, errno == EINTR { continue } else { break }
        }
        return received
    }

    /// Reads until the server's close frame has arrived (or the peer closes, or the read times
    /// out) and returns its status code.
    package func receiveCloseCode() -> Int? {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while RawSocket.closeCode(in: received) == nil {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += chunk[..<count] } else if count < 0, errno == EINTR { continue } else { break }
        }
        return RawSocket.closeCode(in: received)
    }

    /// Bytes that arrived and wait in this socket's receive buffer, unread.
    package var unreadBytes: Int {
        var count: Int32 = 0
        return ioctl(descriptor, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
    }

    /// Bytes the other end has written to its socket that its kernel still holds, unsent or not yet
    /// acknowledged: on loopback, what this socket's full window keeps back. From the kernel's row
    /// whose local port is the peer's and whose remote port is ours.
    package var bytesHeldByPeer: Int {
        var local = sockaddr_in()
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) } }
        let ours = Int(UInt16(bigEndian: local.sin_port))
        let theirs = Int(UInt16(bigEndian: peer.sin_port))
        for fields in kernelTCPRows(["/proc/net/tcp"]) {
            guard fields.count > 4, Int(fields[1].split(separator: ":").last ?? "", radix: 16) == theirs,
                Int(fields[2].split(separator: ":").last ?? "", radix: 16) == ours
            else { continue }
            return Int(fields[4].split(separator: ":").first ?? "", radix: 16) ?? 0
        }
        return 0
    }

    /// Closes with a reset (SO_LINGER 0) instead of a goodbye: a client that vanished.
    package func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    // MARK: WebSocket by hand

    /// Sends an upgrade for `path` and reads the server's 101 answer's head.
    package func upgrade(_ path: String = "/ws", host: String = "127.0.0.1") throws -> String {
        try send(
            "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        return String(decoding: receive(until: Array("\r\n\r\n".utf8)), as: UTF8.self)
    }

    /// One client frame (masked, as RFC 6455 demands of clients): opcode 1 text, 2 binary, 0 continuation.
    package static func frame(_ payload: [UInt8], opcode: UInt8 = 1, final: Bool = true) -> [UInt8] {
        var frame: [UInt8] = [(final ? 0x80 : 0) | opcode]
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        switch payload.count {
        case 0..<126: frame.append(0x80 | UInt8(payload.count))
        case 126..<65536: frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default:
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return frame
    }

    /// The frames the server sent, parsed from `bytes` (servers do not mask): (opcode, payload).
    package static func frames(in bytes: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] { completeFrames(in: bytes).frames }

    /// The header of the frame at `index` of `bytes`: whether it ends its message, its opcode, and
    /// where its payload lies; nil while the frame is not all there.
    private static func frame(in bytes: [UInt8], at index: Int) -> (final: Bool, opcode: UInt8, payload: Range<Int>)? {
        guard index + 2 <= bytes.count else { return nil }
        var length = Int(bytes[index + 1] & 0x7F)
        var start = index + 2
        if length == 126 {
            guard start + 2 <= bytes.count else { return nil }
            length = Int(bytes[start]) << 8 | Int(bytes[start + 1])
            start += 2
        } else if length == 127 {
            guard start + 8 <= bytes.count else { return nil }
            length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[start + $1]) }
            start += 8
        }
        guard start + length <= bytes.count else { return nil }
        return (bytes[index] & 0x80 != 0, bytes[index] & 0x0F, start..<(start + length))
    }

    /// The whole frames at the start of `bytes`, and how many bytes they took (a partial frame at
    /// the end waits for more).
    package static func completeFrames(in bytes: [UInt8]) -> (frames: [(opcode: UInt8, payload: [UInt8])], consumed: Int) {
        var frames: [(UInt8, [UInt8])] = []
        var index = 0
        while let frame = frame(in: bytes, at: index) {
            frames.append((frame.opcode, Array(bytes[frame.payload])))
            index = frame.payload.upperBound
        }
        return (frames, index)
    }

    /// The whole messages at the start of `bytes`, fragments joined (a message of the server's
    /// larger than 64 KiB comes in several), and how many bytes they took.
    package static func completeMessages(in bytes: [UInt8]) -> (messages: [(opcode: UInt8, payload: [UInt8])], consumed: Int) {
        var messages: [(UInt8, [UInt8])] = []
        var open: (opcode: UInt8, payload: [UInt8])?
        var index = 0
        var consumed = 0
        while let frame = frame(in: bytes, at: index) {
            let payload = bytes[frame.payload]
            index = frame.payload.upperBound
            if frame.opcode >= 8 {
                messages.append((frame.opcode, Array(payload)))
            } else if frame.opcode == 0 {
                open?.payload += payload
            } else {
                open = (frame.opcode, Array(payload))
            }
            if frame.final, frame.opcode < 8, let message = open {
                messages.append(message)
                open = nil
            }
            if open == nil { consumed = index }
        }
        return (messages, consumed)
    }

    /// The status code of the first close frame in `bytes`, if the server sent one.
    package static func closeCode(in bytes: [UInt8]) -> Int? {
        guard let close = frames(in: bytes).first(where: { $0.opcode == 8 }), close.payload.count >= 2 else { return nil }
        return Int(close.payload[0]) << 8 | Int(close.payload[1])
    }
}

package struct RawSocketError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// The CPU time a process has used so far, user and system, in seconds (/proc/PID/stat).
package func cpuSeconds(of pid: pid_t) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
    // After the command name: state is field 3, utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A process's resident memory, in KiB: by default this one's (the in-process test server's included).
package func residentKiB(of pid: pid_t = getpid()) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}
