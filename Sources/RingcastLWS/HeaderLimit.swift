import CLibWebSockets

/// The longest request head the server reads, and how a longer one is told apart. lws 4.1.6 keeps
/// every header and the request line in one table of `max_http_header_data` bytes; a request that
/// overflows it is closed with no answer at all (lws logs "Ran out of header data space"). With
/// `token_limits`, lws instead cuts any one header, and each piece of the request line (the path,
/// each query argument), at `eachBytes` and reads on, so the request completes and can be answered:
/// a piece cut there is as long as the limit, which is how `exceeded(on:)` knows it was cut.
/// What still overflows the table (a header lws has no token for, or many headers together past
/// `totalBytes`) is closed without an answer, as before.
package struct HeaderLimit: Sendable {
    package let totalBytes: Int
    package let eachBytes: Int

    /// `eachBytes` below `totalBytes`, so that one header cut at it leaves room for the others.
    package init(totalBytes: Int, eachBytes: Int) {
        precondition(eachBytes < totalBytes && totalBytes <= Int(UInt16.max), "a header limit lws cannot hold")
        self.totalBytes = totalBytes
        self.eachBytes = eachBytes
    }

    package enum Exceeded: Equatable, Sendable {
        /// The path, or one query argument: 414.
        case requestLine
        /// A header (its name, for the message): 431.
        case header(String)
    }

    private static let requestLineTokens: Set<UInt32> = Set(
        [
            WSI_TOKEN_GET_URI, WSI_TOKEN_POST_URI, WSI_TOKEN_PUT_URI, WSI_TOKEN_PATCH_URI, WSI_TOKEN_DELETE_URI, WSI_TOKEN_OPTIONS_URI,
            WSI_TOKEN_HEAD_URI, WSI_TOKEN_CONNECT, WSI_TOKEN_HTTP_URI_ARGS,
        ].map(\.rawValue))

    /// Which part of `link`'s request lws cut at the limit, if one was.
    package func exceeded(on link: LWSConnection) -> Exceeded? {
        var header: Exceeded?
        for raw in 0..<WSI_TOKEN_COUNT.rawValue {
            let token = lws_token_indexes(rawValue: raw)
            // A fragment as long as the limit makes the whole at least as long.
            guard lws_hdr_total_length(link.wsi, token) >= Int32(eachBytes) else { continue }
            var index: Int32 = 0
            while index < 256 {
                let length = lws_hdr_fragment_length(link.wsi, token, index)
                guard length > 0 else { break }
                if length >= Int32(eachBytes) {
                    if HeaderLimit.requestLineTokens.contains(raw) { return .requestLine }
                    if header == nil { header = .header(HeaderLimit.name(of: token)) }
                }
                index += 1
            }
        }
        return header
    }

    private static func name(of token: lws_token_indexes) -> String {
        guard let name = lws_token_to_string(token) else { return "a header" }
        return String(cString: name).filter { $0 != ":" }
    }
}
