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
    /// Set from the upgrade's Authorization header or sign-in cookie, or later by an `auth` message.
    public internal(set) var credential: Credential
    /// The token that credential came from (nil: none was sent), so a reload can ask the policy
    /// again what it grants (`API.review`).
    var token: String?
    let fromLoopback: Bool
    /// This socket among the API's `publisherSockets`.
    public internal(set) var key: UInt64 = 0
    /// What the socket receives: the patterns it asked for, held to what its credential may read
    /// (`Scope.narrow`); nothing for a publisher, or for a watcher that has yet to sign in.
    public internal(set) var watch: WatchSet
    /// A watcher whose upgrade carried no token that reads what it asked for: it gets no
    /// snapshot until an `auth` message, and is closed if none comes in time.
    public internal(set) var awaitingAuth = false

    /// When the socket's grant ends (a signed token's `exp`, Unix ms): it is closed then.
    public var expiresAt: Double? { credential.grant?.expiresAt }
}

/// How the server closes a WebSocket it will not serve: the code and the reason, which a browser
/// shows its page (`CloseEvent.code`, `.reason`).
public struct SocketClose: Equatable, Sendable {
    /// No token where one is needed, or one that does not hold: sign in.
    public static let unauthorized: UInt16 = 4401
    /// A token that may not read what the socket asks to watch.
    public static let forbidden: UInt16 = 4403
    /// Output was waiting and the peer took none of it for `writeTimeoutSeconds`.
    public static let writeTimeout: UInt16 = 4408
    /// The entry already holds its `maxConnections`.
    public static let tooManyConnections: UInt16 = 4429
    /// The signed token expired while the socket was open: sign in again.
    public static let tokenExpired: UInt16 = 4440
    /// A reload of the server's configuration took away what the socket was let in for (its
    /// token, or its right to read what it watches): connect again to be let in by the new rules.
    public static let accessChanged: UInt16 = 4441

    public let code: UInt16
    /// At most 123 bytes, as a close frame allows.
    public let reason: String

    public init(code: UInt16, reason: String) {
        self.code = code
        var text = reason
        while text.utf8.count > 123 { text.removeLast() }
        self.reason = text
    }

    /// The close that goes with a refused upgrade or `auth`.
    public init(refusing error: APIError) {
        self.init(code: error.code == .forbidden ? SocketClose.forbidden : SocketClose.unauthorized, reason: error.message)
    }
}

/// What a new socket starts with: its session, its first frames, and, when it may not stay, how it closes.
/// What a reload means for one open socket (`API.review`).
public enum SocketReview: Sendable {
    case unchanged
    case changed(SocketSession)
    case close(SocketClose)
}

public struct SocketOpening {
    public var session: SocketSession
    public var frames: [[UInt8]]
    public var close: SocketClose?
    /// Why it may not read what it asked for, if it may not: a stream, which cannot send `auth`,
    /// answers with it instead of opening.
    public var refusal: APIError?
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
    /// Whom the commands are applied for.
    public var principal = Principal.server

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
    /// snapshot (or the changes since the point its `since` names) of what it may read. A token
    /// that does not hold, or one that may not read what the watcher asks for, closes it (with the
    /// error event first, then a close code and reason that say why); no token where reading
    /// needs one leaves it waiting for an `auth` message, the error event telling it so.
    public func openSocket(_ request: SocketRequest, headers: RequestHeaders, fromLoopback: Bool, now: Double) -> SocketOpening {
        let credential = policy.identify(
            authorization: headers.authorization, cookie: headers.cookie, proxied: headers.proxied, fromLoopback: fromLoopback, now: now)
        var session = SocketSession(request: request, credential: credential, fromLoopback: fromLoopback, watch: SocketRequest.nothing)
        session.token = try? AccessPolicy.presentedToken(authorization: headers.authorization, cookie: headers.cookie, named: policy.signInCookie)
        session.key = publisherSockets.newKey()
        var opening = SocketOpening(session: session, frames: [store.encodeHello(now: now, heartbeatSeconds: config.heartbeatSeconds)])
        do throws(APIError) {
            if case .refused(let error) = credential { throw error }
            guard request.mode == .watch else { return opening }
            opening.session.watch = try readableWatch(request.watch, for: credential)
            opening.frames.append(store.encodeSnapshot(matching: opening.session.watch, since: request.resumeSeq(in: store.epoch), now: now))
        } catch {
            metrics.clientErrors += 1
            opening.refusal = error
            opening.frames.append(error.encodedEvent())
            if case .anonymous = credential {
                opening.session.awaitingAuth = true
            } else {
                opening.close = SocketClose(refusing: error)
            }
        }
        return opening
    }

    /// What an open socket may do under the rules in force now, after a reload: its token (or
    /// its address, without one) is identified again and a watcher's patterns held to what that
    /// may read. `nil`: nothing changed; a session: its new grant and patterns (a watcher whose
    /// patterns changed needs a full snapshot of them); a close: it may no longer do what it was
    /// let in for. A watcher still waiting for its `auth` message is left to wait.
    public func review(_ session: SocketSession, now: Double) -> SocketReview {
        guard !session.awaitingAuth else { return .unchanged }
        let credential =
            session.token.map { policy.identify(token: $0, now: now) } ?? .anonymous(policy.anonymousGrant(fromLoopback: session.fromLoopback))
        var next = session
        next.credential = credential
        do throws(APIError) {
            if case .refused(let error) = credential { throw error }
            if session.request.mode == .watch { next.watch = try readableWatch(session.request.watch, for: credential) }
        } catch {
            return .close(SocketClose(code: SocketClose.accessChanged, reason: "the server's configuration changed: \(error.message)"))
        }
        return next.credential == session.credential && next.watch == session.watch ? .unchanged : .changed(next)
    }

    /// The patterns a watcher asked for, held to what `credential` may read; 401 or 403 (field
    /// `watch`) for a pattern outside it that cannot be narrowed to it.
    public func readableWatch(_ watch: WatchSet, for credential: Credential) throws(APIError) -> WatchSet {
        let scope = try policy.readScope(credential)
        switch scope.narrow(watch) {
        case .within(let narrowed):
            return narrowed
        case .outside(let outside):
            let grant = try AccessPolicy.granted(credential)
            if grant.kind == .anonymous { throw policy.readRefusal(grant, what: "'\(outside)'", field: "watch") }
            throw APIError(
                .forbidden,
                "\(grant.described) may not watch '\(outside)': its patterns are \(grant.read); watch a pattern they cover, or one that covers them",
                field: "watch")
        }
    }

    /// One message from a WebSocket client: an `auth` message, a `flush`, or one event or an array
    /// of them, applied like `POST /api/events` except that each bad event gets its own `error`
    /// frame (naming its task) and the rest still apply.
    public func receive(_ message: SocketMessage, on session: inout SocketSession, now: Double) -> SocketReply {
        execute(planMessage(message, on: &session, now: now), now: now)
    }

    /// What a message asks for, decided before anything changes: the frames it earns at once
    /// (`auth`, events that do not parse or that the publisher may not send) and the commands to
    /// apply, each with its place in the message.
    public func planMessage(_ message: SocketMessage, on session: inout SocketSession, now: Double) -> MessagePlan {
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
                plan.frames.append((0, try authenticate(&session, json, now: now)))
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
        plan.principal = session.credential.grant?.principal ?? .server
        for (index, item) in items.enumerated() {
            do throws(APIError) {
                plan.commands.append((index, try authorize(try Command.parse(event: item), for: session.credential)))
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
                reply.events += try apply(command, by: plan.principal, now: now).events
                // A publish over a WebSocket: that socket is sent any request waiting (notePublished on
                // the node it is on), so the request no longer waits for a publisher on any node.
                if case .remove = command {} else { reply.events += store.requestTaken(command.id, now: now) }
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

    /// `{"type":"auth","token":"…"}`: for browsers, which cannot set headers on a WebSocket. A
    /// watcher's patterns are held to what the token may read, and the transport sends it a full
    /// snapshot of them when they changed (or when it was waiting for this).
    private func authenticate(_ session: inout SocketSession, _ message: JSONValue, now: Double) throws(APIError) -> [UInt8] {
        guard case .string(let token)? = message["token"], !token.isEmpty else {
            throw APIError(.missingField, "an auth message needs \"token\"", field: "token")
        }
        let credential = policy.identify(token: token, now: now)
        if case .refused(let error) = credential { throw APIError(error.code, error.message, field: "token") }
        let grant = try AccessPolicy.granted(credential)
        if session.request.mode == .watch { session.watch = try readableWatch(session.request.watch, for: credential) }
        session.credential = credential
        session.token = token
        session.awaitingAuth = false
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("type")
        writer.string("auth")
        writer.key("ok")
        writer.bool(true)
        if !grant.publish.isNothing {
            writer.key("publisher")
            writer.string(grant.name)
            writer.key("patterns")
            writer.string(grant.publish.description)
        }
        writer.key("name")
        writer.string(grant.name)
        writer.key("kind")
        writer.string(grant.kind.rawValue)
        writer.key("read")
        writer.string(grant.read.description)
        if let expiresAt = grant.expiresAt {
            writer.key("expiresAt")
            writer.number(expiresAt.rounded())
        }
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
