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
    /// This socket among the API's `publisherSockets`.
    public internal(set) var key: UInt64 = 0
}

/// What a message asks for (`API.planMessage`): frames earned at once, by their place in the
/// message, and commands to apply (`API.execute(_:now:)`).
public struct MessagePlan: Sendable {
    public var frames: [(index: Int, bytes: [UInt8])] = []
    public var commands: [(index: Int, command: Command)] = []
    /// Several events: errors name their place (`events[2].progress`).
    public var isBatch = false
    /// The sending socket on this node (`SocketSession.key`): executing the plan here records it
    /// as a publisher of its tasks. 0 in a cluster's log, where each node has sockets of its own.
    public var socketKey: UInt64 = 0
    /// A `flush` (with its `ref`, if any): answered once what came before is kept.
    public var flush: String??

    public init() {}
}

/// A message from a WebSocket client, as the transport assembled it.
public enum SocketMessage: Sendable {
    case text([UInt8])
    /// Longer than `maxMessageBytes`: the transport stopped collecting it.
    case tooLarge
    /// A binary frame: not part of the protocol.
    case binary
}

/// What one message led to: events for the fan-out, frames for the sender alone (which leave once
/// storage has kept what the message changed).
public struct SocketReply {
    public var events: [OutboundEvent] = []
    public var frames: [[UInt8]] = []
    /// A `flush` asked for everything before it to be kept, plain progress included, before its answer.
    public var wantsDurable = false

    public init() {}
}

extension API {
    /// A new socket's session and the frames it starts with: hello, then, for a watcher, the
    /// snapshot (or the changes since the point its `since` names).
    public func openSocket(_ request: SocketRequest, headers: RequestHeaders, fromLoopback: Bool, now: Double) -> (SocketSession, [[UInt8]]) {
        let credential = policy.identify(authorization: headers.authorization, fromLoopback: fromLoopback)
        var session = SocketSession(request: request, credential: credential, fromLoopback: fromLoopback)
        session.key = publisherSockets.newKey()
        var frames = [store.encodeHello(now: now, heartbeatSeconds: config.heartbeatSeconds)]
        if request.mode == .watch {
            frames.append(store.encodeSnapshot(matching: request.watch, since: request.resumeSeq(in: store.epoch), now: now))
        }
        return (session, frames)
    }

    /// One message from a WebSocket client: an `auth` message, a `flush`, or one event or an array
    /// of them, applied like `POST /api/events` except that each bad event gets its own `error`
    /// frame (naming its task) and the rest still apply.
    public func receive(_ message: SocketMessage, on session: inout SocketSession, now: Double) -> SocketReply {
        execute(planMessage(message, on: &session), now: now)
    }

    /// What a message asks for, decided before anything changes: the frames it earns at once
    /// (`auth`, events that do not parse or that the publisher may not send) and the commands to
    /// apply, each with its place in the message.
    public func planMessage(_ message: SocketMessage, on session: inout SocketSession) -> MessagePlan {
        metrics.clientMessages += 1
        var plan = MessagePlan()
        func refuse(_ error: APIError, at index: Int = 0, id: String? = nil) {
            metrics.clientErrors += 1
            plan.frames.append((index, error.encodedEvent(id: id)))
        }
        let bytes: [UInt8]
        switch message {
        case .tooLarge:
            refuse(APIError(.bodyTooLarge, "a message is larger than \(config.maxMessageBytes) bytes (maxMessageBytes); split it"))
            return plan
        case .binary:
            refuse(APIError(.invalidEvent, "binary frames are not part of the protocol: send each message as a text frame of JSON"))
            return plan
        case .text(let text):
            bytes = text
        }
        let json: JSONValue
        do {
            json = try JSONParser.parseForAPI(bytes)
        } catch {
            refuse(error)
            return plan
        }
        if json["type"] == .string("auth") {
            do {
                plan.frames.append((0, try authenticate(&session, json)))
            } catch {
                refuse(error)
            }
            return plan
        }
        if json["type"] == .string("flush") {
            do {
                let fields = try FieldReader(json, allowed: ["type", "ref"])
                plan.flush = .some(try fields.string("ref", maxLength: 128))
            } catch {
                refuse(error)
            }
            return plan
        }
        let items: [JSONValue]
        if case .array(let elements) = json { items = elements } else { items = [json] }
        plan.isBatch = items.count > 1
        plan.socketKey = session.key
        for (index, item) in items.enumerated() {
            do throws(APIError) {
                let command = try Command.parse(event: item)
                try policy.authorize(session.credential, id: command.id)
                plan.commands.append((index, command))
            } catch {
                var taskID: String?
                if case .string(let id)? = item["id"], TaskID.isValid(id) { taskID = id }
                refuse(plan.isBatch ? error.within("events[\(index)]") : error, at: index, id: taskID)
            }
        }
        return plan
    }

    /// Applies a message's commands (authorized already): their events, and every frame for the
    /// sender in the order of the message's events.
    public func execute(_ plan: MessagePlan, now: Double) -> SocketReply {
        var reply = SocketReply()
        var frames = plan.frames
        for (index, command) in plan.commands {
            do {
                reply.events += try apply(command, now: now).events
                if plan.socketKey != 0 { frames += notePublished([command], by: plan.socketKey).map { (index, $0) } }
            } catch {
                metrics.clientErrors += 1
                frames.append((index, (plan.isBatch ? error.within("events[\(index)]") : error).encodedEvent(id: command.id)))
            }
        }
        reply.frames = frames.enumerated().sorted { ($0.element.index, $0.offset) < ($1.element.index, $1.offset) }.map(\.element.bytes)
        if let ref = plan.flush {
            reply.frames.append(flushed(ref: ref))
            reply.wantsDurable = true
        }
        return reply
    }

    /// `{"type":"auth","token":"…"}`: for browsers, which cannot set headers on a WebSocket.
    private func authenticate(_ session: inout SocketSession, _ message: JSONValue) throws(APIError) -> [UInt8] {
        guard case .string(let token)? = message["token"] else {
            throw APIError(.missingField, "an auth message needs \"token\"", field: "token")
        }
        let credential = policy.identify(authorization: token, fromLoopback: session.fromLoopback)
        guard case .publisher(let publisher) = credential else {
            throw APIError(.unauthorized, "the token matches no publisher in config.json", field: "token")
        }
        session.credential = credential
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("type")
        writer.string("auth")
        writer.key("ok")
        writer.bool(true)
        writer.key("publisher")
        writer.string(publisher.name)
        writer.key("patterns")
        writer.string(publisher.patterns.key)
        writer.endObject()
        return writer.bytes
    }

    /// `{"type":"flush","ref":"…"}` is answered `{"type":"flushed","ref":"…","seq":N}` once
    /// everything this socket sent before it is kept by storage: a publisher's acknowledgement.
    private func flushed(ref: String?) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("type")
        writer.string("flushed")
        if let ref {
            writer.key("ref")
            writer.string(ref)
        }
        writer.key("seq")
        writer.number(Int(store.seq))
        writer.endObject()
        return writer.bytes
    }

    /// The error frame a refused upgrade query gets before its close.
    public func refusalFrame(_ error: APIError) -> [UInt8] {
        metrics.clientErrors += 1
        return error.encodedEvent()
    }
}
