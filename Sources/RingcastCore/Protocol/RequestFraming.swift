/// How a request's body is delimited, decided from its headers as RFC 9112 §6 says, before any of
/// it is read. A framing the server cannot read exactly is refused, never guessed: a body is
/// decoded or refused, never dropped.
public enum RequestFraming: Equatable, Sendable {
    /// Neither `Content-Length` nor `Transfer-Encoding`: no body (RFC 9112 §6.3). An endpoint that
    /// takes one answers 411 (`APIRequest.bodyIsAbsent`).
    case absent
    /// `Content-Length`: exactly so many bytes.
    case length(Int)
    /// `Transfer-Encoding: chunked`: chunks until the last (`ChunkedBodyDecoder`).
    case chunked

    /// The methods whose body the transport reads when it has no length; any other method's body is
    /// read only by its `Content-Length`.
    public static let methodsWithBodies: Set<String> = ["POST", "PUT", "PATCH"]

    /// The framing of a request, or the error its answer is: 400 for a `Content-Length` that is
    /// not one decimal number, for both headers at once (a smuggling attempt, §6.1), for a coding
    /// list that does not end in `chunked` or applies it twice, and for a `Transfer-Encoding` on an
    /// HTTP/1.0 request or on a method whose body is not read; 501 for a coding the server does not
    /// decode. Each of these answers closes the connection, as §6.1 and §6.3 ask.
    public static func decide(method: String, contentLength: String?, transferEncoding: String?, version: String?) throws(APIError)
        -> RequestFraming
    {
        if let transferEncoding {
            let codings = transferEncoding.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingBlanks.lowercased()
            }
            guard contentLength == nil else {
                throw APIError(
                    .invalidRequest,
                    "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 §6.1): send one of them",
                    field: "Content-Length")
            }
            guard version != "HTTP/1.0" else {
                throw APIError(.invalidRequest, "HTTP/1.0 has no Transfer-Encoding: send the body with a Content-Length", field: "Transfer-Encoding")
            }
            guard methodsWithBodies.contains(method) else {
                throw APIError(
                    .invalidRequest, "a \(method) request takes no body here: send it without Transfer-Encoding", field: "Transfer-Encoding")
            }
            let shown = String(transferEncoding.prefix(60))
            guard codings.last == "chunked" else {
                throw APIError(
                    .invalidRequest,
                    "Transfer-Encoding \"\(shown)\" does not end in chunked, so the body's end cannot be known (RFC 9112 §6.3): send \"Transfer-Encoding: chunked\" or a Content-Length",
                    field: "Transfer-Encoding")
            }
            let others = codings.dropLast()
            guard !others.contains("chunked") else {
                throw APIError(.invalidRequest, "Transfer-Encoding \"\(shown)\" applies chunked twice: send it once", field: "Transfer-Encoding")
            }
            if let other = others.first {
                throw APIError(
                    .notImplemented,
                    "the transfer coding \"\(other.prefix(40))\" is not decoded here: send the body as it is, with a Content-Length or \"Transfer-Encoding: chunked\" alone",
                    field: "Transfer-Encoding")
            }
            return .chunked
        }
        if let contentLength {
            let digits = contentLength.trimmingBlanks
            guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                throw APIError(
                    .invalidRequest,
                    "Content-Length \"\(contentLength.prefix(40))\" is not one length in decimal digits (RFC 9112 §6.3): send the body's size in bytes",
                    field: "Content-Length")
            }
            // lws reads the length itself and cannot read more than 19 digits (leading zeros
            // counted): past that it would disagree with us about where the body ends.
            guard digits.utf8.count <= 19 else {
                throw APIError(
                    .invalidRequest,
                    "Content-Length has \(digits.utf8.count) digits; at most 19 are read (leading zeros count): send the body's size in bytes",
                    field: "Content-Length")
            }
            // Past what any body may hold, every length is as refused as the largest.
            return .length(HTTPAnswerDecoder.bounded(digits.utf8, radix: 10, limit: Int.max) ?? Int.max)
        }
        return .absent
    }
}

extension APIRequest {
    /// A chunked body that could not be read: past the cap it is too large (413), anything else a
    /// refusal of its framing (400).
    public mutating func refuseChunkedBody(_ error: ChunkedBodyError) {
        guard !error.tooLarge else {
            bodyTooLarge = true
            return
        }
        bodyRefusal = APIError(
            .invalidRequest,
            "the chunked body could not be read: \(error.description); send it as chunks of hex size, CRLF, data, CRLF, ending with a 0 chunk (RFC 9112 §7.1)",
            field: "Transfer-Encoding")
    }
}

extension StringProtocol {
    /// Without the spaces and tabs HTTP allows around a header's value.
    fileprivate var trimmingBlanks: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
