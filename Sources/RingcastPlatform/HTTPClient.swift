import Foundation

package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [String: String]
    package var body: [UInt8]

    package var text: String { String(decoding: body, as: UTF8.self) }
}

/// A small blocking HTTP/1.1 client over one keep-alive TCP connection (plain http only): the
/// producer commands, the load tester's HTTP publisher, the server's webhook senders and the tests
/// all speak through it. It distrusts its peer: lengths and chunk sizes are bounded numbers, the
/// head and the body have caps, and `timeoutSeconds` is a deadline for the whole exchange
/// (connect, send, receive), so whatever a peer answers is a thrown `ClientError`, never a trap
/// or an unbounded wait. One caller at a time.
package final class HTTPClient {
    package let host: String
    package let port: Int
    package let timeoutSeconds: Double
    /// The largest answer body read; a longer one fails the exchange.
    package let maxBodyBytes: Int
    /// The largest status line and headers read.
    package static let maxHeadBytes = 64 * 1024
    /// What the command line reads of an answer by default.
    package static let defaultMaxBodyBytes = 16 * 1024 * 1024
    private var socket: Int32 = -1
    private var buffered: [UInt8] = []
    private var deadline: Double = 0

    package init(host: String, port: Int, timeoutSeconds: Double = 10, maxBodyBytes: Int = HTTPClient.defaultMaxBodyBytes) {
        self.host = host
        self.port = port
        self.timeoutSeconds = timeoutSeconds
        self.maxBodyBytes = maxBodyBytes
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
        deadline = HTTPClient.monotonicSeconds() + timeoutSeconds
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
        buffered = []
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
                // On Linux SO_SNDTIMEO also bounds connect().
                try setTimeouts(fd)
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
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
        let left = deadline - HTTPClient.monotonicSeconds()
        guard left > 0 else { throw ClientError("no answer from \(host):\(port) within \(timeoutSeconds) s") }
        // A zero timeval means "never": the smallest wait is a millisecond.
        let seconds = max(left, 0.001)
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
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

    private func fill() throws {
        while true {
            try setTimeouts(socket)
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffered.append(contentsOf: chunk[..<count])
                return
            }
            if count < 0, errno == EINTR { continue }
            if count == 0 { throw ClientError("\(host):\(port) closed the connection") }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError("no answer from \(host):\(port) within \(timeoutSeconds) s") }
            throw ClientError("reading from \(host):\(port) failed: \(String(cString: strerror(errno)))")
        }
    }

    private func readResponse() throws -> HTTPResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while headerEnd == nil {
            if let found = buffered.firstRange(of: separator) {
                headerEnd = found.lowerBound
            } else if buffered.count > HTTPClient.maxHeadBytes {
                throw ClientError("\(host):\(port) answered a head over \(HTTPClient.maxHeadBytes) bytes")
            } else {
                try fill()
            }
        }
        let headText = String(decoding: buffered[..<headerEnd!], as: UTF8.self)
        buffered.removeFirst(headerEnd! + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, statusLine[1].utf8.count == 3, let status = Int(statusLine[1]), (100...999).contains(status) else {
            throw ClientError("malformed answer from \(host):\(port): no status line")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            body = try readChunked()
        } else if let lengthText = headers["content-length"] {
            let length = try AnswerFraming.contentLength(lengthText, limit: maxBodyBytes, from: "\(host):\(port)")
            while buffered.count < length { try fill() }
            body = Array(buffered[..<length])
            buffered.removeFirst(length)
        } else if headers["transfer-encoding"] != nil {
            throw ClientError("\(host):\(port) answered in a transfer coding this client does not decode: \(headers["transfer-encoding"]!)")
        } else {
            // The body runs to the connection's close.
            while true {
                do { try fill() } catch { break }
                if buffered.count > maxBodyBytes { throw bodyTooLong() }
            }
            body = buffered
            buffered = []
            disconnect()
        }
        if headers["connection"]?.lowercased() == "close" { disconnect() }
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    private func bodyTooLong() -> ClientError {
        ClientError("\(host):\(port) answered a body over \(maxBodyBytes) bytes, the most this client reads")
    }

    private func readChunked() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            var lineEnd: Int?
            while lineEnd == nil {
                if let found = buffered.firstRange(of: [13, 10]) {
                    lineEnd = found.lowerBound
                } else if buffered.count > 1024 {
                    throw ClientError("malformed chunked answer from \(host):\(port): a chunk-size line over 1024 bytes")
                } else {
                    try fill()
                }
            }
            let sizeLine = String(decoding: buffered[..<lineEnd!], as: UTF8.self)
            buffered.removeFirst(lineEnd! + 2)
            let size = try AnswerFraming.chunkSize(sizeLine, limit: maxBodyBytes - body.count, from: "\(host):\(port)")
            while buffered.count < size + 2 { try fill() }
            body.append(contentsOf: buffered[..<size])
            buffered.removeFirst(size + 2)
            if size == 0 { return body }
        }
    }
}

/// The numbers of an answer's framing, parsed as a peer may lie: only digits (hex digits for a
/// chunk size), never negative, never past `limit`, so no later slice or sum can trap.
package enum AnswerFraming {
    package static func contentLength(_ text: String, limit: Int, from peer: String) throws -> Int {
        guard let length = bounded(text.trimmingCharacters(in: .whitespaces), radix: 10, limit: limit) else {
            throw ClientError("\(peer) answered Content-Length \"\(text.prefix(40))\": not a length of 0 to \(limit) bytes")
        }
        return length
    }

    package static func chunkSize(_ line: String, limit: Int, from peer: String) throws -> Int {
        let text = (line.split(separator: ";", omittingEmptySubsequences: false).first ?? "").trimmingCharacters(in: .whitespaces)
        guard let size = bounded(text, radix: 16, limit: max(limit, 0)) else {
            throw ClientError("malformed chunked answer from \(peer): chunk size \"\(text.prefix(40))\" is not a size of 0 to \(max(limit, 0)) bytes")
        }
        return size
    }

    /// Digits of `radix` only (no sign, no blank), at most `limit`; nil otherwise.
    package static func bounded(_ text: String, radix: Int, limit: Int) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 20 else { return nil }
        var value = 0
        for byte in text.utf8 {
            let digit: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: digit = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where radix == 16: digit = Int(byte - UInt8(ascii: "A")) + 10
            default: return nil
            }
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: radix)
            let (next, overflowB) = shifted.addingReportingOverflow(digit)
            guard !overflowA, !overflowB, next <= limit else { return nil }
            value = next
        }
        return value
    }
}

package struct ClientError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
