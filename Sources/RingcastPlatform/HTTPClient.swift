import Foundation

package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [String: String]
    package var body: [UInt8]

    package var text: String { String(decoding: body, as: UTF8.self) }
}

/// A small blocking HTTP/1.1 client over one keep-alive TCP connection (plain http only): the
/// producer commands, the load tester's HTTP publisher and the tests all speak through it.
/// One caller at a time.
package final class HTTPClient {
    package let host: String
    package let port: Int
    package let timeoutSeconds: Double
    private var socket: Int32 = -1
    private var buffered: [UInt8] = []

    package init(host: String, port: Int, timeoutSeconds: Double = 10) {
        self.host = host
        self.port = port
        self.timeoutSeconds = timeoutSeconds
    }

    package convenience init(url: ServerURL, timeoutSeconds: Double = 10) throws {
        guard !url.secure else {
            throw ClientError("\(url.host): https is not supported by this client; use http:// (for example behind a local TLS proxy)")
        }
        self.init(host: url.host, port: url.port, timeoutSeconds: timeoutSeconds)
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
                var timeout = timeval(tv_sec: Int(timeoutSeconds), tv_usec: Int((timeoutSeconds - timeoutSeconds.rounded(.down)) * 1_000_000))
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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

    private func writeAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
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
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffered.append(contentsOf: chunk[..<count])
                return
            }
            if count < 0, errno == EINTR { continue }
            if count == 0 { throw ClientError("\(host):\(port) closed the connection") }
            throw ClientError("no answer from \(host):\(port) within \(timeoutSeconds) s")
        }
    }

    private func readResponse() throws -> HTTPResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while headerEnd == nil {
            if let found = buffered.firstRange(of: separator) { headerEnd = found.lowerBound } else { try fill() }
        }
        let headText = String(decoding: buffered[..<headerEnd!], as: UTF8.self)
        buffered.removeFirst(headerEnd! + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw ClientError("malformed answer from \(host):\(port)") }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if let lengthText = headers["content-length"], let length = Int(lengthText) {
            while buffered.count < length { try fill() }
            body = Array(buffered[..<length])
            buffered.removeFirst(length)
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            body = try readChunked()
        } else {
            while (try? fill()) != nil {}
            body = buffered
            buffered = []
            disconnect()
        }
        if headers["connection"]?.lowercased() == "close" { disconnect() }
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    private func readChunked() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            var lineEnd: Int?
            while lineEnd == nil {
                if let found = buffered.firstRange(of: [13, 10]) { lineEnd = found.lowerBound } else { try fill() }
            }
            let sizeText = String(decoding: buffered[..<lineEnd!], as: UTF8.self).split(separator: ";").first ?? ""
            buffered.removeFirst(lineEnd! + 2)
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw ClientError("malformed chunked answer from \(host):\(port)")
            }
            while buffered.count < size + 2 { try fill() }
            body.append(contentsOf: buffered[..<size])
            buffered.removeFirst(size + 2)
            if size == 0 { return body }
        }
    }
}

package struct ClientError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
