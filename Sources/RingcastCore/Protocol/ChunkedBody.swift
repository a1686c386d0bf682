/// A body in HTTP/1.1's chunked transfer coding (RFC 9112 §7.1), from a peer that may lie: what
/// the HTTP client reads of an answer (`HTTPAnswerDecoder`) and what the server reads of a request.
/// Chunk sizes are taken only as bounded hex digits; a chunk-size or trailer line is at most
/// `maxLineBytes`; the body it holds is at most `maxBodyBytes` and nothing past that is kept. It is
/// fed bytes as they arrive; what follows the body's end stays in `pending`.
public struct ChunkedBodyDecoder: Sendable {
    /// The longest chunk-size line (size, extensions) and trailer line taken.
    public static let maxLineBytes = 1024

    public let maxBodyBytes: Int
    /// Bytes received; those before `start` are decoded. Reading moves `start` and `append` drops
    /// what is behind it, so a body of many small chunks costs one shift a receive, not one a chunk.
    private var buffer: [UInt8] = []
    private var start = 0
    private var unread: ArraySlice<UInt8> { buffer[start...] }
    /// Bytes received past the body's end (or not yet decoded).
    public var pending: [UInt8] { Array(buffer[start...]) }

    private enum Stage: Sendable {
        case size
        case data(Int)
        case trailers
        case done
    }

    private var stage = Stage.size
    private var body: [UInt8] = []

    public init(maxBodyBytes: Int) { self.maxBodyBytes = max(0, maxBodyBytes) }

    public mutating func append(_ bytes: some Collection<UInt8>) {
        buffer.removeFirst(start)
        start = 0
        buffer.append(contentsOf: bytes)
    }

    /// The whole body once its last chunk and trailers are in; nil while more are needed (or once
    /// it has been returned). `closed`: the peer has closed, so nothing more will come.
    public mutating func next(closed: Bool) throws(ChunkedBodyError) -> [UInt8]? {
        while true {
            switch stage {
            case .size:
                guard let line = try takeLine(what: "chunk-size", closed: closed) else { return nil }
                let size = line.split(separator: UInt8(ascii: ";"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
                // Leading zeros say nothing of the size: any number of them (up to the line's
                // maxLineBytes) is read as the digits after them, as RFC 9112's 1*HEXDIG allows.
                let trimmed = ChunkedBodyDecoder.trimmed(size)
                let significant = trimmed.drop { $0 == UInt8(ascii: "0") }
                let digits = significant.isEmpty && !trimmed.isEmpty ? trimmed.suffix(1) : significant
                let room = maxBodyBytes - body.count
                guard let value = HTTPAnswerDecoder.bounded(digits, radix: 16, limit: room) else {
                    // Hex digits that are too many are a body over the cap; anything else is not a size.
                    if !digits.isEmpty, digits.allSatisfy(ChunkedBodyDecoder.isHexDigit) {
                        throw ChunkedBodyError(
                            "chunk size \"\(ChunkedBodyDecoder.quoted(digits))\" takes the body past \(maxBodyBytes) bytes", tooLarge: true)
                    }
                    throw ChunkedBodyError("chunk size \"\(ChunkedBodyDecoder.quoted(size))\" is not a size in hex digits")
                }
                stage = value == 0 ? .trailers : .data(value)
            case .data(let size):
                guard unread.count >= size + 2 else {
                    if closed { throw ChunkedBodyError("the connection closed inside a chunk") }
                    return nil
                }
                guard buffer[start + size] == 13, buffer[start + size + 1] == 10 else {
                    throw ChunkedBodyError("a chunk of \(size) bytes is not followed by CRLF")
                }
                body.append(contentsOf: unread.prefix(size))
                start += size + 2
                stage = .size
            case .trailers:
                guard let line = try takeLine(what: "trailer", closed: closed) else { return nil }
                if line.isEmpty {
                    stage = .done
                    defer { body = [] }
                    return body
                }
            case .done:
                return nil
            }
        }
    }

    /// The next CRLF-ended line, without it; nil while it has not all come.
    private mutating func takeLine(what: String, closed: Bool) throws(ChunkedBodyError) -> ArraySlice<UInt8>? {
        // A line ended by LF alone is refused rather than waited on: its CRLF would never come, and
        // reading it as a line end would frame the body differently from a proxy that does not.
        if let lineFeed = unread.firstIndex(of: 10), lineFeed == start || buffer[lineFeed - 1] != 13 {
            throw ChunkedBodyError("a \(what) line ended by LF alone, not CRLF")
        }
        guard let range = unread.firstRange(of: [13, 10]) else {
            if unread.count > ChunkedBodyDecoder.maxLineBytes {
                throw ChunkedBodyError("a \(what) line over \(ChunkedBodyDecoder.maxLineBytes) bytes")
            }
            if closed { throw ChunkedBodyError("the connection closed inside a \(what) line") }
            return nil
        }
        let end = range.lowerBound - start
        guard end <= ChunkedBodyDecoder.maxLineBytes else { throw ChunkedBodyError("a \(what) line over \(ChunkedBodyDecoder.maxLineBytes) bytes") }
        let line = Array(unread.prefix(end))[...]
        start += end + 2
        return line
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 32 || first == 9 { slice.removeFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice.removeLast() }
        return slice
    }

    /// A piece of what the peer sent, for a message: at most 40 bytes, controls shown as `?`.
    static func quoted(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix(40).map { $0 < 32 || $0 >= 127 ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
    }
}

/// Why a chunked body could not be read; `tooLarge` when it is only that it holds more than the cap.
public struct ChunkedBodyError: Error, Equatable, CustomStringConvertible, Sendable {
    public let description: String
    public let tooLarge: Bool
    public init(_ description: String, tooLarge: Bool = false) {
        self.description = description
        self.tooLarge = tooLarge
    }
}
