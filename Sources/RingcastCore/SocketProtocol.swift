/// What a WebSocket upgrade to `/ws` asked for in its query: `?watch=ci.*,deploy.web&since=EPOCH:SEQ`
/// for a watcher, `?mode=publish` for a publisher (which hears only its own replies and heartbeats).
public struct SocketRequest: Equatable, Sendable {
    public enum Mode: String, Sendable { case watch, publish }

    public var mode: Mode
    /// What the socket receives: the patterns a watcher asked for; nothing for a publisher.
    public var watch: WatchSet
    /// `since=EPOCH:SEQ` as sent: where a reconnecting watcher left off.
    public var since: String?

    public init(mode: Mode = .watch, watch: WatchSet = WatchSet([Glob("*")]), since: String? = nil) {
        self.mode = mode
        self.watch = watch
        self.since = since
    }

    /// A pattern set that matches no task id (ids never contain a comma): what a publisher watches.
    public static let nothing = WatchSet([])

    public static func parse(_ query: [String: String]) -> Result<SocketRequest, APIError> {
        let modeName = query["mode"] ?? "watch"
        guard let mode = Mode(rawValue: modeName) else {
            return .failure(APIError(.invalidField, "mode '\(modeName)' is not one of watch, publish", field: "mode"))
        }
        switch mode {
        case .publish:
            return .success(SocketRequest(mode: .publish, watch: nothing))
        case .watch:
            return WatchSet.parse(query["watch"]).map { SocketRequest(mode: .watch, watch: $0, since: query["since"]) }
        }
    }

    /// The seq to resume after, when `since` names this epoch; anything else gets a full snapshot.
    public func resumeSeq(in epoch: String) -> UInt64? {
        guard let since, let colon = since.lastIndex(of: ":"), since[..<colon] == epoch else { return nil }
        return UInt64(since[since.index(after: colon)...])
    }
}

/// One WebSocket's side of the protocol: what it asked for and who it publishes as. The transport
/// keeps one per connection and hands it to every call; service thread only.
public struct SocketSession: Sendable {
    public let request: SocketRequest
    /// Set from the upgrade's Authorization header, or later by an `auth` message.
    public internal(set) var credential: Credential
    let fromLoopback: Bool
}

/// A message from a WebSocket client, as the transport assembled it.
public enum SocketMessage: Sendable {
    case text([UInt8])
    /// Longer than `maxMessageBytes`: the transport stopped collecting it.
    case tooLarge
}

/// What one message led to: events for the fan-out, frames for the sender alone.
public struct SocketReply {
    public var events: [OutboundEvent] = []
    public var frames: [[UInt8]] = []
}

extension API {
    /// A new socket's session and the frames it starts with: hello, then, for a watcher, the
    /// snapshot (or the changes since the point its `since` names).
    public func openSocket(_ request: SocketRequest, headers: RequestHeaders, fromLoopback: Bool, now: Double) -> (SocketSession, [[UInt8]]) {
        let credential = policy.identify(authorization: headers.authorization, fromLoopback: fromLoopback)
        let session = SocketSession(request: request, credential: credential, fromLoopback: fromLoopback)
        var frames = [store.encodeHello(now: now, heartbeatSeconds: config.heartbeatSeconds)]
        if request.mode == .watch {
            frames.append(store.encodeSnapshot(matching: request.watch, since: request.resumeSeq(in: store.epoch), now: now))
        }
        return (session, frames)
    }

    /// One message from a WebSocket client: an `auth` message, or one event or an array of them,
    /// applied like `POST /api/events` except that each bad event gets its own `error` frame (naming
    /// its task) and the rest still apply.
    public func receive(_ message: SocketMessage, on session: inout SocketSession, now: Double) -> SocketReply {
        metrics.clientMessages += 1
        var reply = SocketReply()
        func refuse(_ error: APIError, id: String? = nil) {
            metrics.clientErrors += 1
            reply.frames.append(error.encodedEvent(id: id))
        }
        let bytes: [UInt8]
        switch message {
        case .tooLarge:
            refuse(APIError(.bodyTooLarge, "a message is larger than \(config.maxMessageBytes) bytes (maxMessageBytes); split it"))
            return reply
        case let .text(text):
            bytes = text
        }
        let json: JSONValue
        do {
            json = try JSONParser.parseForAPI(bytes)
        } catch {
            refuse(error)
            return reply
        }
        if json["type"] == .string("auth") {
            do {
                reply.frames.append(try authenticate(&session, json))
            } catch {
                refuse(error)
            }
            return reply
        }
        let items: [JSONValue]
        if case let .array(elements) = json { items = elements } else { items = [json] }
        for (index, item) in items.enumerated() {
            do {
                let command = try Command.parse(event: item)
                reply.events += try publish(command, as: session.credential, now: now).events
            } catch {
                var taskID: String?
                if case let .string(id)? = item["id"], TaskID.isValid(id) { taskID = id }
                refuse(items.count > 1 ? error.within("events[\(index)]") : error, id: taskID)
            }
        }
        return reply
    }

    /// `{"type":"auth","token":"…"}`: for browsers, which cannot set headers on a WebSocket.
    private func authenticate(_ session: inout SocketSession, _ message: JSONValue) throws(APIError) -> [UInt8] {
        guard case let .string(token)? = message["token"] else {
            throw APIError(.missingField, "an auth message needs \"token\"", field: "token")
        }
        let credential = policy.identify(authorization: token, fromLoopback: session.fromLoopback)
        guard case let .publisher(publisher) = credential else {
            throw APIError(.unauthorized, "the token matches no publisher in config.json", field: "token")
        }
        session.credential = credential
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("type"); writer.string("auth")
        writer.key("ok"); writer.bool(true)
        writer.key("publisher"); writer.string(publisher.name)
        writer.key("patterns"); writer.string(publisher.patterns.key)
        writer.endObject()
        return writer.bytes
    }

    /// The error frame a refused upgrade query gets before its close.
    public func refusalFrame(_ error: APIError) -> [UInt8] {
        metrics.clientErrors += 1
        return error.encodedEvent()
    }
}
