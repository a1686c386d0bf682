/// An HTTP/1.1 answer read from a peer that may lie: a webhook receiver, or whatever a command-line
/// user points `RINGCAST_URL` at. The decoder holds at most `maxHeadBytes` of head and `maxBodyBytes`
/// of body, takes lengths and chunk sizes only as bounded digits, and says what was wrong in an
/// `HTTPAnswerError` instead of trapping. It is fed bytes as they arrive; what follows a complete
/// answer stays for the next one (a kept-alive connection).
public struct HTTPAnswer: Equatable, Sendable {
    public var status: Int
    /// Header names in lower case; a repeated header keeps its last value.
    public var headers: [String: String]
    public var body: [UInt8]
    /// Whether the body ran to the connection's close, so the connection is done.
    public var endedByClose: Bool
}

public struct HTTPAnswerError: Error, Equatable, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public struct HTTPAnswerDecoder: Sendable {
    public static let maxHeadBytes = 64 * 1024

    public let maxBodyBytes: Int
    /// Bytes received; those before `start` are decoded. Reading moves `start` and `append` drops
    /// what is behind it, so a body of many small chunks costs one shift a receive, not one a chunk.
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes received and not yet decoded.
    public var pending: [UInt8] { chunks?.pending ?? Array(buffer[start...]) }
    private var unread: ArraySlice<UInt8> { buffer[start...] }

    private enum Stage: Sendable {
        case head
        case length(Int)
        /// The body is the chunked decoder's, which holds the bytes received until it ends.
        case chunked
        case untilClose
    }

    private var stage = Stage.head
    private var status = 0
    private var headers: [String: String] = [:]
    private var body: [UInt8] = []
    private var chunks: ChunkedBodyDecoder?

    public init(maxBodyBytes: Int) { self.maxBodyBytes = max(0, maxBodyBytes) }

    public mutating func append(_ bytes: some Collection<UInt8>) {
        if chunks != nil {
            chunks!.append(bytes)
            return
        }
        buffer.removeFirst(start)
        start = 0
        buffer.append(contentsOf: bytes)
    }

    /// The answer once its bytes are all in; nil while more are needed. `closed`: the peer has
    /// closed the connection, so nothing more will come.
    public mutating func next(closed: Bool) throws(HTTPAnswerError) -> HTTPAnswer? {
        while true {
            switch stage {
            case .head:
                guard let end = find([13, 10, 13, 10]) else {
                    if unread.count > HTTPAnswerDecoder.maxHeadBytes { throw HTTPAnswerError("a head over \(HTTPAnswerDecoder.maxHeadBytes) bytes") }
                    if closed { throw HTTPAnswerError("the connection closed before the answer's head ended") }
                    return nil
                }
                guard end <= HTTPAnswerDecoder.maxHeadBytes else { throw HTTPAnswerError("a head over \(HTTPAnswerDecoder.maxHeadBytes) bytes") }
                try readHead(unread.prefix(end))
                start += end + 4
                if chunks != nil {
                    // The chunked decoder holds the body's bytes from here to its end.
                    chunks!.append(unread)
                    start = buffer.count
                }
            case .length(let length):
                guard unread.count >= length else {
                    if closed { throw HTTPAnswerError("the connection closed \(length - unread.count) bytes before the body's end") }
                    return nil
                }
                body = Array(unread.prefix(length))
                start += length
                return finish(endedByClose: false)
            case .chunked:
                let decoded: [UInt8]?
                do throws(ChunkedBodyError) {
                    decoded = try chunks!.next(closed: closed)
                } catch {
                    throw HTTPAnswerError(error.tooLarge ? "\(error.description) (the body's cap)" : error.description)
                }
                guard let decoded else { return nil }
                // What follows the body is the next answer's.
                buffer = chunks!.pending
                start = 0
                chunks = nil
                body = decoded
                return finish(endedByClose: false)
            case .untilClose:
                body.append(contentsOf: unread)
                start = buffer.count
                guard body.count <= maxBodyBytes else { throw HTTPAnswerError("a body over \(maxBodyBytes) bytes, the most read") }
                return closed ? finish(endedByClose: true) : nil
            }
        }
    }

    private mutating func readHead(_ head: ArraySlice<UInt8>) throws(HTTPAnswerError) {
        var lines = HTTPAnswerDecoder.split(head)
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].starts(with: Array("HTTP/1.".utf8)), parts[1].count == 3,
            let code = HTTPAnswerDecoder.bounded(parts[1], radix: 10, limit: 999), code >= 100
        else {
            throw HTTPAnswerError("not an HTTP/1.x status line: \"\(ChunkedBodyDecoder.quoted(statusLine))\"")
        }
        status = code
        headers = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            headers[name] = String(decoding: ChunkedBodyDecoder.trimmed(line[(colon + 1)...]), as: UTF8.self)
        }
        body = []
        let coding = headers["transfer-encoding"]?.lowercased()
        if let coding, coding != "chunked" { throw HTTPAnswerError("a transfer coding this client does not decode: \(coding.prefix(40))") }
        // 1xx, 204 and 304 have no body whatever they say (RFC 9112 §6.3).
        if status < 200 || status == 204 || status == 304 {
            stage = .length(0)
        } else if coding == "chunked" {
            // RFC 9112 §6.1: a Content-Length beside chunked is an attack or a mistake; refuse both.
            guard headers["content-length"] == nil else { throw HTTPAnswerError("Content-Length beside Transfer-Encoding: chunked") }
            chunks = ChunkedBodyDecoder(maxBodyBytes: maxBodyBytes)
            stage = .chunked
        } else if let text = headers["content-length"] {
            guard let length = HTTPAnswerDecoder.bounded(ChunkedBodyDecoder.trimmed(Array(text.utf8)[...]), radix: 10, limit: maxBodyBytes) else {
                throw HTTPAnswerError("Content-Length \"\(text.prefix(40))\" is not a length of 0 to \(maxBodyBytes) bytes (the body's cap)")
            }
            stage = .length(length)
        } else {
            stage = .untilClose
        }
    }

    private mutating func finish(endedByClose: Bool) -> HTTPAnswer {
        defer {
            stage = .head
            body = []
            headers = [:]
        }
        return HTTPAnswer(status: status, headers: headers, body: body, endedByClose: endedByClose)
    }

    /// Digits of `radix` only (no sign, no blank, no `0x`), at most `limit`; nil otherwise.
    public static func bounded(_ digits: some Collection<UInt8>, radix: Int, limit: Int) -> Int? {
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var value = 0
        for byte in digits {
            let digit: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: digit = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where radix == 16: digit = Int(byte - UInt8(ascii: "A")) + 10
            default: return nil
            }
            let (shifted, overflowed) = value.multipliedReportingOverflow(by: radix)
            let (next, carried) = shifted.addingReportingOverflow(digit)
            guard !overflowed, !carried, next <= limit else { return nil }
            value = next
        }
        return value
    }

    /// Where `needle` starts in what is unread, counted from `start`.
    private func find(_ needle: [UInt8]) -> Int? { unread.firstRange(of: needle).map { $0.lowerBound - start } }

    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == 13, index + 1 < head.endIndex, head[index + 1] == 10 {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        return lines
    }
}
