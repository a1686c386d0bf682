/// How `GET /api/stream` frames the watch a WebSocket watcher gets on `/ws`: the same frames from
/// the same fan-out, written as Server-Sent Events or as JSON lines over one chunked HTTP answer.
public enum StreamFraming: String, Sendable {
    /// `text/event-stream`: `id:` (EPOCH:SEQ), `event:` (the message's type), `data:` (its JSON).
    case eventStream = "sse"
    /// `application/x-ndjson`: one message a line, for `curl -N … | jq`.
    case jsonLines = "jsonl"

    public var contentType: String {
        switch self {
        case .eventStream: return "text/event-stream; charset=utf-8"
        case .jsonLines: return "application/x-ndjson"
        }
    }
}

/// What `GET /api/stream` asked for: the watch (`watch=`, and `since=` or the `Last-Event-ID` an
/// EventSource sends when it reconnects), and the framing (`format=sse|jsonl`, else `Accept`).
public struct StreamRequest: Equatable, Sendable {
    public var socket: SocketRequest
    public var framing: StreamFraming
    /// `heartbeat=event`: heartbeats as `heartbeat` events a page's EventSource can see, rather
    /// than the comments that only keep proxies from closing an idle stream.
    public var heartbeatEvents: Bool

    public static func parse(_ query: [String: String], accept: String?, lastEventID: String?) -> Result<StreamRequest, APIError> {
        let framing: StreamFraming
        switch query["format"] {
        case nil:
            framing = accept?.contains("application/x-ndjson") == true ? .jsonLines : .eventStream
        case let name?:
            guard let named = StreamFraming(rawValue: name) else {
                return .failure(APIError(.invalidField, "format '\(name)' is not one of sse, jsonl", field: "format"))
            }
            framing = named
        }
        let heartbeatEvents: Bool
        switch query["heartbeat"] {
        case nil, "comment": heartbeatEvents = false
        case "event": heartbeatEvents = true
        case let other?: return .failure(APIError(.invalidField, "heartbeat '\(other)' is not one of comment, event", field: "heartbeat"))
        }
        if let mode = query["mode"], mode != "watch" {
            return .failure(APIError(.invalidField, "a stream only watches: publish over /ws or POST /api/events", field: "mode"))
        }
        return WatchSet.parse(query["watch"]).map { watch in
            // An EventSource's reconnection names the last event it saw, which is newer than the
            // `since` its URL was opened with.
            let since = lastEventID.flatMap { $0.isEmpty ? nil : $0 } ?? query["since"]
            return StreamRequest(socket: SocketRequest(mode: .watch, watch: watch, since: since), framing: framing, heartbeatEvents: heartbeatEvents)
        }
    }
}

/// Frames messages (the fan-out's shared JSON bytes, one object each) for a stream.
public enum StreamEncoder {
    /// The `retry:` hint a stream opens with: how long an EventSource waits before reconnecting.
    public static let retryMilliseconds = 2000

    /// What a stream starts with: for Server-Sent Events, the reconnection hint.
    public static func opening(_ framing: StreamFraming) -> [UInt8] {
        framing == .eventStream ? Array("retry: \(retryMilliseconds)\n\n".utf8) : []
    }

    /// Appends one message. Its id, `epoch`:`seq` (where a reconnection resumes), goes on every
    /// Server-Sent Event but heartbeats, which are comments unless `heartbeatEvents`. Runs once per
    /// event per watcher: it appends bytes, and makes no string.
    public static func append(
        _ message: [UInt8], epoch: [UInt8], seq: UInt64, framing: StreamFraming, heartbeatEvents: Bool, to out: inout [UInt8]
    ) {
        switch framing {
        case .jsonLines:
            out.append(contentsOf: message)
            out.append(UInt8(ascii: "\n"))
        case .eventStream:
            let type = messageType(message)
            let isHeartbeat = type.elementsEqual(heartbeatType)
            if isHeartbeat, !heartbeatEvents {
                out.append(contentsOf: ": heartbeat\n\n".utf8)
                return
            }
            if !isHeartbeat {
                out.append(contentsOf: "id: ".utf8)
                out.append(contentsOf: epoch)
                out.append(UInt8(ascii: ":"))
                appendDecimal(seq, to: &out)
                out.append(UInt8(ascii: "\n"))
            }
            out.append(contentsOf: "event: ".utf8)
            out.append(contentsOf: type)
            // JSON as the server writes it holds no raw line break, so one `data:` line carries it.
            out.append(contentsOf: "\ndata: ".utf8)
            out.append(contentsOf: message)
            out.append(contentsOf: "\n\n".utf8)
        }
    }

    /// The `type` of a message as the server encodes it (`{"type":"…"` first); `message` for one
    /// that does not start so.
    static func messageType(_ message: [UInt8]) -> ArraySlice<UInt8> {
        guard message.count > prefix.count, message[..<prefix.count].elementsEqual(prefix),
            let end = message[prefix.count...].firstIndex(of: UInt8(ascii: "\""))
        else { return ArraySlice("message".utf8) }
        return message[prefix.count..<end]
    }

    private static let prefix = Array(#"{"type":""#.utf8)
    private static let heartbeatType = Array("heartbeat".utf8)

    static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
        guard value >= 10 else {
            out.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        appendDecimal(value / 10, to: &out)
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    /// `payload` as one HTTP/1.1 chunk.
    public static func chunk(_ payload: ArraySlice<UInt8>) -> [UInt8] {
        var out = Array(String(payload.count, radix: 16).utf8)
        out.reserveCapacity(out.count + payload.count + 4)
        out.append(contentsOf: [13, 10])
        out.append(contentsOf: payload)
        out.append(contentsOf: [13, 10])
        return out
    }

    /// The chunk that ends a chunked answer.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
}
