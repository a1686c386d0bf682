import Foundation

/// A TCP peer on loopback that answers every request it is sent with a lie chosen by the test: a
/// bad length or chunk size, a body that never ends, one byte at a time, nothing, or a reset
/// halfway. For the clients that must survive such peers (the webhook senders, the command line).
/// @unchecked Sendable: `attempts` and `stopped` are guarded by `lock`; the socket is set up once in init.
package final class HostileReceiver: @unchecked Sendable {
    package enum Lie: Sendable {
        /// These bytes after the request, then close.
        case raw(String)
        /// A 200 head with no length, then 64 KiB writes until the peer stops reading (at most 256 MiB).
        case endlessBody
        /// A 200 head, then one body byte every `interval` seconds (at most 200).
        case drip(interval: Double)
        /// Reads the request and never answers.
        case hang
        /// Half an answer, then a TCP reset.
        case resetMidAnswer
        /// Hangs on the first request it is sent (as `hang`), and answers each later one with these bytes.
        case hangFirst(thenAnswer: String)
        /// Reads a TLS ClientHello and never answers it.
        case stallHandshake
        /// Answers a TLS ClientHello with a ServerHello, then a certificate chain that never ends
        /// (16 KiB records until the peer stops reading, at most 256 MiB).
        case endlessCertificateChain

        var speaksTLS: Bool {
            switch self {
            case .stallHandshake, .endlessCertificateChain: true
            default: false
            }
        }
    }

    package let port: Int
    private let listener: Int32
    private let lie: Lie
    private let lock = NSLock()
    private var attemptCount = 0
    private var stopped = false

    package init(_ lie: Lie) throws {
        self.lie = lie
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else {
            throw RawSocketError("the hostile receiver cannot listen: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    package var url: String { "\(lie.speaksTLS ? "https" : "http")://127.0.0.1:\(port)/hook" }

    /// How many requests it was sent.
    package var attempts: Int { lock.withLock { attemptCount } }

    package func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        if first { shutdown(listener, Int32(SHUT_RDWR)) }
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    private func acceptLoop() {
        while !isStopped {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { break }
            Thread.detachNewThread { [self] in serve(connection) }
        }
        close(listener)
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        // A request's head, or a whole TLS record (the ClientHello): its length is in bytes 3 and 4.
        func complete() -> Bool {
            guard lie.speaksTLS else { return request.firstRange(of: [13, 10, 13, 10]) != nil }
            return request.count >= 5 && request.count >= 5 + Int(request[3]) << 8 + Int(request[4])
        }
        while !complete() {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            request.append(contentsOf: buffer[..<count])
        }
        let attempt = lock.withLock {
            attemptCount += 1
            return attemptCount
        }
        func send(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        }
        func hang() {
            while !isStopped {
                var probe: UInt8 = 0
                var poller = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
                if poll(&poller, 1, 100) > 0, recv(connection, &probe, 1, Int32(MSG_PEEK)) == 0 { return }
            }
        }
        switch lie {
        case .raw(let text):
            _ = send(text)
        case .hangFirst(let answer):
            if attempt == 1 { hang() } else { _ = send(answer) }
        case .endlessBody:
            guard send("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n") else { return }
            let block = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
            for _ in 0..<4096 where !isStopped {
                let written = block.withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { return }
            }
        case .drip(let interval):
            guard send("HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n") else { return }
            for _ in 0..<200 where !isStopped {
                guard send("x") else { return }
                Thread.sleep(forTimeInterval: interval)
            }
        case .hang, .stallHandshake:
            hang()
        case .endlessCertificateChain:
            // A TLS 1.2 ServerHello choosing ECDHE-RSA-AES128-GCM-SHA256 with renegotiation_info (OpenSSL 3
            // refuses a server without it), then a Certificate message whose records keep coming.
            let random = (0..<32).map { _ in UInt8.random(in: 0...255) }
            let hello: [UInt8] = [0x03, 0x03] + random + [0x00, 0xC0, 0x2F, 0x00, 0x00, 0x05, 0xFF, 0x01, 0x00, 0x01, 0x00]
            let handshake: [UInt8] = [0x02, 0x00, 0x00, UInt8(hello.count)] + hello
            var first: [UInt8] = [0x16, 0x03, 0x03, 0x00, UInt8(handshake.count)] + handshake
            // Certificate, length 0xFFFFF0; its list is as long again.
            first += [0x16, 0x03, 0x03, 0x40, 0x00, 0x0B, 0xFF, 0xFF, 0xF0, 0xFF, 0xFF, 0xED] + [UInt8](repeating: 0x30, count: 0x4000 - 7)
            var record: [UInt8] = [0x16, 0x03, 0x03, 0x40, 0x00] + [UInt8](repeating: 0x30, count: 0x4000)
            guard first.withUnsafeBytes({ Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == first.count else { return }
            for _ in 0..<16384 where !isStopped {
                let written = record.withUnsafeMutableBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { return }
            }
        case .resetMidAnswer:
            _ = send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf")
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
    }
}
