import Foundation
import RingcastCore

package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [String: String]
    package var body: [UInt8]

    package var text: String { String(decoding: body, as: UTF8.self) }
}

/// A small blocking HTTP/1.1 client over one keep-alive TCP connection (plain http only): the
/// producer commands, the load tester's HTTP publisher, the server's webhook senders and the tests
/// all speak through it. It distrusts its peer: answers are read by the core's `HTTPAnswerDecoder`
/// (bounded head, body and numbers), and `timeoutSeconds` is a deadline for the whole exchange
/// (connect, send, receive), so whatever a peer answers is a thrown `ClientError`, never a trap
/// or an unbounded wait. One caller at a time.
package final class HTTPClient {
    package let host: String
    package let port: Int
    package let timeoutSeconds: Double
    /// The largest answer body read; a longer one fails the exchange.
    package let maxBodyBytes: Int
    /// What the command line reads of an answer by default.
    package static let defaultMaxBodyBytes = 16 * 1024 * 1024
    private var socket: Int32 = -1
    /// What the connection has received: the answer being read, and anything after it.
    private var decoder: HTTPAnswerDecoder
    private var deadline: Double = 0

    package init(host: String, port: Int, timeoutSeconds: Double = 10, maxBodyBytes: Int = HTTPClient.defaultMaxBodyBytes) {
        self.host = host
        self.port = port
        self.timeoutSeconds = timeoutSeconds
        self.maxBodyBytes = maxBodyBytes
        decoder = HTTPAnswerDecoder(maxBodyBytes: maxBodyBytes)
    }

    package convenience init(url: ServerURL, timeoutSeconds: Double = 10, maxBodyBytes: Int = HTTPClient.defaultMaxBodyBytes) throws {
        guard !url.secure else {
            throw ClientError("\(url.host): https is not supported by this client; use http:// (for example behind a local TLS proxy)")
        }
        self.init(host: url.host, port: url.port, timeoutSeconds: timeoutSeconds, maxBodyBytes: maxBodyBytes)
    }

    deinit { disconnect() }

    package func request(_ method: String, _ path: String, body: [UInt8]? = nil, headers: [(String, String)] = []) throws -> HTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body {
            head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n"
        } else if method == "POST" || method == "PUT" {
            head += "Content-Length: 0\r\n"
        }
        head += "\r\n"
        return try exchange(Array(head.utf8) + (body ?? []))
    }

    package func request(_ method: String, _ path: String, json: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request(method, path, body: Array(json.utf8), headers: headers)
    }

    /// Sends bytes exactly as given (for tests of what a browser would never send) and reads one answer.
    package func exchange(_ raw: [UInt8]) throws -> HTTPResponse {
        // A kept-alive socket the server closed meanwhile fails on first use: retry once on a fresh one.
        let reused = socket >= 0
        deadline = Clock.monotonicSeconds() + timeoutSeconds
        do {
            try ensureConnected()
            try writeAll(raw)
            return try readResponse()
        } catch  where reused {
            disconnect()
            try ensureConnected()
            try writeAll(raw)
            return try readResponse()
        }
    }

    package func disconnect() {
        if socket >= 0 { Glibc.close(socket) }
        socket = -1
        decoder = HTTPAnswerDecoder(maxBodyBytes: maxBodyBytes)
    }

    private func ensureConnected() throws {
        guard socket < 0 else { return }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &results) == 0, let first = results else {
            throw ClientError("cannot resolve \(host)")
        }
        defer { freeaddrinfo(results) }
        var lastError = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            let fd = Glibc.socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd >= 0 {
                do {
                    // On Linux SO_SNDTIMEO also bounds connect().
                    try setTimeouts(fd)
                    try setSocketOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, "TCP_NODELAY", Int32(1))
                } catch {
                    Glibc.close(fd)
                    throw error
                }
                if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                    socket = fd
                    return
                }
                lastError = String(cString: strerror(errno))
                Glibc.close(fd)
            }
            entry = info.pointee.ai_next
        }
        throw ClientError("cannot connect to \(host):\(port): \(lastError); is the server running?")
    }

    /// What is left of the exchange's deadline, as the socket's send and receive timeouts.
    private func setTimeouts(_ fd: Int32) throws {
        let left = deadline - Clock.monotonicSeconds()
        guard left > 0 else { throw ClientError("no answer from \(host):\(port) within \(timeoutSeconds) s") }
        // A zero timeval means "never": the smallest wait is a millisecond.
        let seconds = max(left, 0.001)
        let timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        try setSocketOption(fd, SOL_SOCKET, SO_RCVTIMEO, "SO_RCVTIMEO", timeout)
        try setSocketOption(fd, SOL_SOCKET, SO_SNDTIMEO, "SO_SNDTIMEO", timeout)
    }

    private func writeAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            try setTimeouts(socket)
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw ClientError("sending to \(host):\(port) failed: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Reused by every read: a fresh 64 KiB array per recv cost more than the round trip.
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    /// Receives what the peer sends next into the decoder; false once the peer has closed.
    private func fill() throws -> Bool {
        while true {
            try setTimeouts(socket)
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                decoder.append(chunk[..<count])
                return true
            }
            if count == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError("no answer from \(host):\(port) within \(timeoutSeconds) s") }
            throw ClientError("reading from \(host):\(port) failed: \(String(cString: strerror(errno)))")
        }
    }

    private func readResponse() throws -> HTTPResponse {
        var closed = false
        while true {
            let answer: HTTPAnswer?
            do {
                answer = try decoder.next(closed: closed)
            } catch {
                disconnect()
                throw ClientError("\(host):\(port) answered badly: \(error)")
            }
            if let answer {
                if closed || answer.endedByClose || answer.headers["connection"]?.lowercased() == "close" { disconnect() }
                return HTTPResponse(status: answer.status, headers: answer.headers, body: answer.body)
            }
            if closed { throw ClientError("\(host):\(port) closed the connection") }
            closed = try !fill()
        }
    }
}

package struct ClientError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
