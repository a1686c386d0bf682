/// The request headers the API reads; the transport copies them out of its connection.
public struct RequestHeaders: Sendable, Equatable {
    public var host: String?
    public var origin: String?
    public var authorization: String?
    /// `text/plain` makes `POST /api/tasks/{id}/log` read the body as lines.
    public var contentType: String?
    /// `text/plain` makes `GET /api/tasks` answer a table for terminals (TextTable.swift).
    public var accept: String?
    /// A badge's ETag the client has: a 304 when it is still the badge (Badge.swift).
    public var ifNoneMatch: String?
    /// The browser's cookies: the sign-in's `ringcast_token` among them (`POST /api/session`).
    public var cookie: String?
    /// What an auth proxy's headers said of the person (config `proxyAuth`): set by the transport
    /// only when the peer is one of `trustedProxies`.
    public var proxied: ProxiedIdentity?

    public init(
        host: String? = nil, origin: String? = nil, authorization: String? = nil, contentType: String? = nil,
        accept: String? = nil, ifNoneMatch: String? = nil, cookie: String? = nil, proxied: ProxiedIdentity? = nil
    ) {
        self.proxied = proxied
        self.host = host
        self.origin = origin
        self.authorization = authorization
        self.contentType = contentType
        self.accept = accept
        self.ifNoneMatch = ifNoneMatch
        self.cookie = cookie
    }
}

/// An HTTP request as the API sees it: transport details already stripped.
public struct APIRequest: Sendable {
    public var method: String
    /// The full path, e.g. `/api/tasks/ci.build-42/show`, without the query.
    public var path: String
    public var query: [String: String]
    public var body: [UInt8]
    public var headers: RequestHeaders
    /// Whether the client is on this machine (behind a trusted proxy: the address it forwarded
    /// for): loopback may read, and publish, without a token when allowed.
    public var fromLoopback: Bool
    /// The transport stopped collecting the body at `maxMessageBytes`.
    public var bodyTooLarge: Bool
    /// The request came with neither `Content-Length` nor `Transfer-Encoding` (`RequestFraming.absent`):
    /// it has no body, and an endpoint whose body is required answers 411.
    public var bodyIsAbsent: Bool
    /// Why the transport could not read the body it announced (a chunked body that broke off or
    /// lied): the answer, before any routing.
    public var bodyRefusal: APIError?

    public init(
        method: String, path: String, query: [String: String] = [:], body: [UInt8] = [],
        headers: RequestHeaders = RequestHeaders(), fromLoopback: Bool = true, bodyTooLarge: Bool = false, bodyIsAbsent: Bool = false,
        bodyRefusal: APIError? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.headers = headers
        self.fromLoopback = fromLoopback
        self.bodyTooLarge = bodyTooLarge
        self.bodyIsAbsent = bodyIsAbsent
        self.bodyRefusal = bodyRefusal
    }
}

public struct APIResponse: Sendable {
    public var status: Int
    public var body: [UInt8]
    public var contentType: String
    /// What the request changed, for the fan-out.
    public var events: [OutboundEvent]
    /// Control frames for the publishers of the task a request asked to cancel, pause or resume.
    public var controls: [ControlDelivery] = []
    /// How long caches may keep the answer: a badge's is short, everything else's `no-store`.
    public var cacheControl = "no-store"
    /// Other headers, as lws writes them (`("etag:", "\"…\"")`, `("allow:", "GET, POST")` on a 405).
    public var headers: [(String, String)] = []

    public init(status: Int = 200, body: [UInt8], contentType: String = "application/json", events: [OutboundEvent] = []) {
        self.status = status
        self.body = body
        self.contentType = contentType
        self.events = events
    }

    public init(_ error: APIError) { self.init(status: error.status, body: error.encodedBody) }
}

/// What a request must pass before anything else, whatever it asks: our own host names (421), and
/// for a change or a WebSocket, an origin we allow (403). Needs no state.
/// A class, immutable: every request and upgrade reads it from its holder, and a struct of four
/// arrays would be copied (retained field by field) for each.
public final class RequestGate: Sendable {
    public let hosts: HostPolicy
    public let allowedOrigins: [String]
    /// Config's `trustedProxies`, each read once (Config.swift has checked every entry).
    public let trustedProxies: [AddressRange]
    public let forwardedHeader: ForwardedFor.Header

    public init(config: ServerConfig) {
        hosts = HostPolicy(config: config)
        allowedOrigins = config.allowedOrigins
        trustedProxies = config.trustedProxies.compactMap(AddressRange.init)
        forwardedHeader = config.forwardedHeader
    }

    /// Whether a request, HTTP or WebSocket upgrade alike, comes from this machine: its peer's
    /// address, or, when the peer is a trusted proxy, the address `forwardedHeader` names; a client
    /// the proxy cannot name is remote (ForwardedFor.swift). `forwardedValue` is that header's value.
    /// Whether the peer itself (never an address it forwarded for) is one of `trustedProxies`:
    /// the only peer whose `proxyAuth` headers are believed.
    public func isTrustedProxy(peer: String) -> Bool {
        guard let address = IPAddress(entry: Substring(peer)) else { return false }
        return trustedProxies.contains { $0.contains(address) }
    }

    public func clientIsLoopback(peer: String, peerIsLoopback: Bool, forwardedValue: String?) -> Bool {
        guard !trustedProxies.isEmpty else { return peerIsLoopback }
        // A peer lws could not name (a Unix socket) is no trusted proxy.
        guard let peerAddress = IPAddress(entry: Substring(peer)) else { return peerIsLoopback }
        let client = ForwardedFor.clientAddress(peer: peerAddress, header: forwardedValue, form: forwardedHeader, trusted: trustedProxies)
        return client?.isLoopback ?? false
    }

    /// The CORS headers of an API answer: a page of a listed origin may read it (the origin echoed,
    /// with `Vary: Origin` so no cache hands it to another); any other origin gets none, so its
    /// `fetch()` cannot read the answer. Never `*`. Static files are the widget's, and keep `*`.
    public func corsHeaders(_ headers: RequestHeaders) -> [(String, String)] {
        guard let origin = headers.origin, allowedOrigins.contains(origin) else { return [("vary:", "Origin")] }
        return [("access-control-allow-origin:", origin), ("vary:", "Origin")]
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`): what a
    /// listed origin may send; 403 for any other, with no CORS header, so its browser sends nothing.
    public func preflight(_ headers: RequestHeaders) -> APIResponse {
        guard let origin = headers.origin, allowedOrigins.contains(origin) else {
            var refused = APIResponse(
                APIError(
                    .forbidden, "origin \(headers.origin ?? "(none)") is not allowed: add it to \"allowedOrigins\" in config.json", field: "Origin"))
            refused.headers = [("vary:", "Origin")]
            return refused
        }
        var response = APIResponse(status: 204, body: [])
        response.headers = [
            ("access-control-allow-origin:", origin), ("vary:", "Origin"),
            ("access-control-allow-methods:", "GET, POST, PUT, PATCH, DELETE"),
            ("access-control-allow-headers:", "authorization, content-type"), ("access-control-max-age:", "600"),
        ]
        return response
    }

    /// Only our own names reach us: anything else is refused (421) before any routing.
    public func checkHost(_ header: String?) throws(APIError) {
        guard let header, !hosts.allows(header) else { return }
        throw hosts.refusal(header)
    }

    /// A browser page from a site not in `allowedOrigins` may not change or watch anything. A page
    /// of the server's own origin (the Origin names the Host it was sent to) always may.
    public func checkOrigin(_ headers: RequestHeaders) throws(APIError) {
        guard let origin = headers.origin else { return }
        let host = headers.host ?? ""
        if origin == "http://\(host)" || origin == "https://\(host)" { return }
        if allowedOrigins.contains(origin) { return }
        throw APIError(.forbidden, "origin \(origin) is not allowed: add it to \"allowedOrigins\" in config.json", field: "Origin")
    }
}

/// What a request asks for (`API.plan`): an answer now, or commands to apply — here, or through a
/// cluster's shared log — and the shape of the answer once they are (`API.execute`).
public enum RequestPlan: Sendable {
    /// One task's `{"seq", "task"}`; a batch's `{"seq", "applied", "errors"}`; a control request's
    /// `{"seq", "task", "delivered"}` with a frame for each publisher socket of the task. A
    /// `receipt` is a task's answer for a caller that may change the task but not read it (a
    /// loopback publisher under `anonymousRead: false`): `{"seq"}` alone (or `{"seq", "removed"}`);
    /// a `controlReceipt`, `{"seq", "delivered"}`.
    public enum Answer: Sendable { case task, receipt, batch, control, controlReceipt }
    case answer(APIResponse)
    /// The commands, the answer's shape, and whom they are applied for.
    case apply([Command], Answer, Principal)
}

/// The outcome of a batch of events: how many were applied, and why each of the others was not.
public struct BatchResult {
    public var applied = 0
    public var errors: [(index: Int, error: APIError)] = []
    public var events: [OutboundEvent] = []
}

/// What the transport knows that `/healthz` and `/metrics` report (summed over service threads).
public struct TransportStatus: Sendable {
    public var watchers = 0
    public var resyncs = 0
    public var patternSets = 0
    public var framesSent = 0
    public var eventsSent = 0
    public var socketsOpened = 0
    /// Events a later event of the same task replaced in a coalescing window (summed over service threads).
    public var eventsCoalesced = 0
    public var threads = 1
    /// In a cluster: whether Redis answers (`connected`, or since when it has not).
    public var redis: String?
    /// Every service thread's counts of its sockets and frames, summed.
    public var metrics = TransportMetrics()
    /// Clients refused or closed, by reason (`RefusalReason`).
    public var refusals = LabeledCounts()
    /// Sockets open now (HTTP and WebSocket), when the transport counts them.
    public var openSockets = 0
    /// When the server started, in Unix seconds.
    public var startTime = 0.0
    /// The last answer of each readiness probe (storage, Redis), for /readyz.
    public var readiness: [ReadinessStatus] = []
    /// What storage reports about its commits, when it keeps count.
    public var storage: StorageMetrics?

    public init(watchers: Int = 0, resyncs: Int = 0, patternSets: Int = 0) {
        self.watchers = watchers
        self.resyncs = resyncs
        self.patternSets = patternSets
    }
}

/// Both halves of the protocol over one TaskStore: the HTTP API (with `/healthz` and `/metrics`) and
/// the WebSocket's messages (SocketProtocol.swift). Whatever carries a published event, it takes one
/// path: a plan (parsed, checked against the publisher's patterns) of commands, which `execute`
/// applies to the store with its merge rules — at once, or, in a cluster, when the shared log says.
/// Not thread-safe: the service thread owns it, as it owns the store.
public final class API {
    public let store: TaskStore
    /// Replaced by a reload (`reconfigure`); the settings that cannot change live stay as they started.
    /// This and the two below are read on every connect and request and replaced only by a reload,
    /// all under the state's lock: the runtime's exclusivity check would only count them again.
    @exclusivity(unchecked) public private(set) var config: ServerConfig
    /// The checks that need no state: they also run outside the state's lock, on any service thread.
    @exclusivity(unchecked) public private(set) var gate: RequestGate
    /// Which configuration runs, for `/readyz` (set by the server at start and by each reload).
    public var configGeneration: ConfigGeneration?
    /// Who may read and publish what, as every request is checked: kept, not made per request
    /// (each connect and request reads it several times), and made anew when the configuration
    /// or the identity providers change.
    @exclusivity(unchecked) public private(set) var policy: AccessPolicy
    /// config.json's `oidc` as the server checks it (keys fetched over https, signatures by
    /// libcrypto); nil when none is configured. Set once the server has built it, and set anew
    /// when the configuration is reloaded (the key cache is kept across).
    public var identityProviders: IdentityProviders? {
        didSet { policy = API.policy(config, signedOut: signedOut, providers: identityProviders) }
    }
    /// Signed tokens signed out before their `exp` (SignIn.swift).
    public let signedOut: SignedOutTokens
    public var metrics = ServerMetrics()
    public static let maxBatchEvents = 10_000
    /// Which sockets of this node published which tasks (Controls.swift).
    public let publisherSockets = PublisherSockets()
    /// Counters of webhooks and control requests, after the others at /metrics.
    public var followUpMetrics = FollowUpMetrics()
    /// The task page (`publicDir/task.html`), served at `/tasks/{id}` so a task's page has a URL
    /// that survives a reload; nil when the folder has none (the path is then a 404).
    public var taskPage: [UInt8]?

    public init(store: TaskStore, config: ServerConfig = ServerConfig()) {
        self.store = store
        self.config = config
        gate = RequestGate(config: config)
        let signedOut = SignedOutTokens()
        self.signedOut = signedOut
        policy = API.policy(config, signedOut: signedOut, providers: nil)
        configureFollowUp()
    }

    private static func policy(_ config: ServerConfig, signedOut: SignedOutTokens, providers: IdentityProviders?) -> AccessPolicy {
        var policy = config.effectiveAccess
        if config.tls != nil { policy.signInCookie = AccessPolicy.securedCookieName }
        policy.signedOut = signedOut
        policy.providers = providers
        return policy
    }

    /// A reload's configuration (`ServerConfig.reloaded`): who may read and publish, origins and
    /// the rest of what the API reads of it apply to the next request. Webhooks are the server's
    /// to swap (`reloadWebhooks`).
    public func reconfigure(_ config: ServerConfig) {
        self.config = config
        gate = RequestGate(config: config)
        policy = API.policy(config, signedOut: signedOut, providers: identityProviders)
    }

    /// Answers one request. Each read and each change is checked against the request's credential.
    /// `status` is asked only by `/healthz` and `/metrics`.
    public func handle(_ request: APIRequest, now: Double, status: () -> TransportStatus = { TransportStatus() }) -> APIResponse {
        switch plan(request, now: now, status: status) {
        case .answer(let response): return response
        case .apply(let commands, let answer, let principal): return execute(commands, answer: answer, by: principal, now: now)
        }
    }

    /// What a request asks for, decided before anything changes: the answer, or the commands to
    /// apply (checked and authorized already) and the shape of the answer once they are. Counts
    /// the request; an answer given here is counted whole.
    public func plan(_ request: APIRequest, now: Double, status: () -> TransportStatus = { TransportStatus() }) -> RequestPlan {
        metrics.httpRequests += 1
        var response: APIResponse
        let matched = Routes.match(request.path)
        let probe = matched?.route.handler.isProbe == true ? matched?.route : nil
        if let host = request.headers.host, !gate.hosts.allows(host) {
            response = APIResponse(gate.hosts.refusal(host))
        } else if let probe, !probe.methods.contains(request.method) {
            response = APIResponse(methodNotAllowed(request, probe.allow))
        } else if probe?.handler == .metrics {
            do throws(APIError) {
                let credential = identify(request, now: now)
                try policy.authorizeReadingEverything(credential, fromLoopback: request.fromLoopback, what: "/metrics")
                response = APIResponse(body: metricsSnapshot(transport: status()).render(), contentType: "text/plain; version=0.0.4")
            } catch {
                response = APIResponse(error)
            }
        } else if request.method == "OPTIONS", request.headers.origin != nil, request.path.hasPrefix("/api/") || request.path.hasPrefix("/badge/") {
            response = gate.preflight(request.headers)
        } else if request.bodyTooLarge {
            response = APIResponse(
                APIError(.bodyTooLarge, "the body is larger than \(config.maxMessageBytes) bytes (maxMessageBytes); send less, or split a batch"))
        } else if let refusal = request.bodyRefusal {
            response = APIResponse(refusal)
        } else if probe?.handler == .health {
            let transport = status()
            response = APIResponse(body: healthBody(watchers: transport.watchers, redis: transport.redis))
        } else if probe?.handler == .ready {
            response = readinessResponse(status().readiness)
        } else {
            do {
                if request.method != "GET" { try checkOrigin(request.headers) }
                let plan = try route(request, matched, now: now, credential: identify(request, now: now))
                guard case .answer(let answer) = plan else { return plan }
                response = answer
            } catch {
                response = APIResponse(error)
            }
        }
        if response.status >= 400 { metrics.httpErrors += 1 }
        // The methods the endpoint takes, as the HTTP spec asks of a 405: the route table's.
        if response.status == 405, let route = matched?.route, route.isDocumented { response.headers.append(("allow:", route.allow)) }
        return .answer(response)
    }

    /// Applies what `plan` decided (authorized already) and answers: one task's
    /// `{"seq", "task"}` (or `{"seq", "removed"}`), or a batch's `{"seq", "applied", "errors"}`.
    public func execute(_ commands: [Command], answer: RequestPlan.Answer, by principal: Principal = .server, now: Double) -> APIResponse {
        let response: APIResponse
        switch answer {
        case .task, .receipt:
            do throws(APIError) {
                guard let command = commands.first else { throw APIError(.invalidEvent, "nothing to apply") }
                response = try self.answer(command, by: principal, showingTask: answer == .task, now: now)
            } catch {
                response = APIResponse(error)
            }
        case .batch:
            let result = applyBatch(commands, by: principal, now: now)
            response = APIResponse(body: encodeBatchAnswer(result), events: result.events)
        case .control, .controlReceipt:
            do throws(APIError) {
                guard case .requestControl(let id, let action)? = commands.first else { throw APIError(.invalidEvent, "nothing to apply") }
                response = try answerControl(id, action, by: principal, showingTask: answer == .control, now: now)
            } catch {
                response = APIResponse(error)
            }
        }
        if response.status >= 400 { metrics.httpErrors += 1 }
        return response
    }

    /// The request's token (its `Authorization`, else the sign-in cookie) as the policy sees it.
    public func identify(_ request: APIRequest, now: Double) -> Credential {
        policy.identify(
            authorization: request.headers.authorization, cookie: request.headers.cookie, proxied: request.headers.proxied,
            fromLoopback: request.fromLoopback, now: now)
    }

    public func checkHost(_ header: String?) throws(APIError) { try gate.checkHost(header) }
    public func checkOrigin(_ headers: RequestHeaders) throws(APIError) { try gate.checkOrigin(headers) }

    /// Hands a request to the handler of the route it matched (`Routes.table`), after the checks
    /// every route shares: the token, then the route's id, then its methods.
    private func route(_ request: APIRequest, _ matched: RouteMatch?, now: Double, credential: Credential) throws(APIError) -> RequestPlan {
        // A token that does not hold, or no token where publishing needs one, hears so before
        // anything about the request's body.
        // Signing in again (or out) with an expired cookie still in the browser must work.
        let signsInOrOut = matched?.route.handler == .session && request.method != "GET"
        if case .refused(let error) = credential, !signsInOrOut { throw error }
        if request.method != "GET", credential.grant?.publish.isNothing == true, credential.grant?.kind == .anonymous, !signsInOrOut {
            try policy.authorizePublish(credential, id: "")
        }
        let principal = credential.grant?.principal ?? .server
        // Publishing is not reading: an answer carries the task only to one who may read it.
        func mayRead(_ id: String) -> Bool { (try? policy.authorizeRead(credential, id: id)) != nil }
        func apply(_ command: Command, now: Double) throws(APIError) -> RequestPlan {
            let authorized = try authorize(command, for: credential)
            return .apply([authorized], mayRead(command.id) ? .task : .receipt, principal)
        }
        func read(_ id: String) throws(APIError) { try policy.authorizeRead(credential, id: id) }
        guard let matched else { throw routeNotFound(request.path) }
        let route = matched.route
        let id = matched.id
        // What each route checks before the method: the id a path names (a bad one is refused
        // whatever the method), a badge's read; then a method the route does not take is a 405.
        switch route.handler {
        case .badge: if TaskID.isValid(id) { try read(id) }
        case .taskPage: guard taskPage != nil else { throw routeNotFound(request.path) }
        // Answered before routing (`plan`), or by the server's transport (the sign-in).
        case .health, .ready, .metrics, .signIn: throw routeNotFound(request.path)
        default: if route.parameterIndex != nil { try Command.validateID(id) }
        }
        guard route.methods.contains(request.method) else { throw methodNotAllowed(request, route.allow) }
        switch route.handler {
        case .badge: return .answer(Badge.answer(request, file: "\(id).svg", store: store))
        case .taskPage:
            var response = APIResponse(body: taskPage ?? [], contentType: "text/html; charset=utf-8")
            response.cacheControl = "no-cache"
            return .answer(response)
        case .taskList:
            let watch = try WatchSet.parse(request.query["watch"]).get()
            let scope = try policy.readScope(credential)
            if try TextTable.wanted(request) { return .answer(try textAnswer(request, watch: watch, within: scope, now: now)) }
            return .answer(APIResponse(body: store.encodeTaskList(matching: watch, within: scope, now: now)))
        case .task:
            switch request.method {
            case "GET":
                try read(id)
                if try TextTable.wanted(request) {
                    return .answer(try textAnswer(request, under: id, within: try policy.readScope(credential), now: now))
                }
                guard let task = store.task(id) else { throw APIError(.notFound, "no task '\(id)'", field: "id") }
                return .answer(APIResponse(body: task.encodedObject(now: now)))
            case "DELETE": return try apply(.remove(id: id), now: now)
            default: return try apply(.update(id: id, patch: TaskPatch.parse(try body(request))), now: now)
            }
        case .timeline:
            try read(id)
            return .answer(APIResponse(body: try store.encodeTimeline(of: id)))
        case .log:
            if request.method == "GET" {
                try read(id)
                return .answer(APIResponse(body: try store.encodeLog(of: id)))
            }
            try requireBody(request)
            return try apply(.appendLog(id: id, lines: LogTail.parseBody(request.body, contentType: request.headers.contentType)), now: now)
        case .showTask: return try apply(.show(id: id, options: ShowOptions.parse(try body(request))), now: now)
        case .hideTask:
            try Command.expectNoFields(try body(request), for: "hide")
            return try apply(.hide(id: id), now: now)
        case .control(let action):
            try Command.expectNoFields(try body(request), for: action.rawValue)
            let control = Command.requestControl(id: id, action: action)
            return .apply([try authorize(control, for: credential)], mayRead(id) ? .control : .controlReceipt, principal)
        case .startTimer:
            try requireBody(request)
            return try apply(.startTimer(id: id, spec: TimerStart.parse(try body(request))), now: now)
        case .pauseTimer:
            try Command.expectNoFields(try body(request), for: "pause")
            return try apply(.pauseTimer(id: id), now: now)
        case .resumeTimer:
            try Command.expectNoFields(try body(request), for: "resume")
            return try apply(.resumeTimer(id: id), now: now)
        case .cancelTimer:
            try Command.expectNoFields(try body(request), for: "cancel")
            return try apply(.cancelTimer(id: id), now: now)
        case .kinds:
            return .answer(APIResponse(body: kindsAnswer(within: try policy.readScope(credential))))
        case .session:
            return .answer(try sessionAnswer(request, credential: credential, now: now))
        case .stream:
            // The transport serves a stream itself (it never ends); answered here, it is the stream's
            // first messages, refused for the same reasons, so the route's rules live in one place.
            let stream = try StreamRequest.parse(request.query, accept: request.headers.accept, lastEventID: nil).get()
            let watch = try readableWatch(stream.socket.watch, for: credential)
            var body = StreamEncoder.opening(stream.framing)
            for frame in [
                store.encodeHello(now: now, heartbeatSeconds: config.heartbeatSeconds),
                store.encodeSnapshot(matching: watch, since: stream.socket.resumeSeq(in: store.epoch), now: now),
            ] {
                StreamEncoder.append(
                    frame, epoch: Array(store.epoch.utf8), seq: store.seq, framing: stream.framing, heartbeatEvents: stream.heartbeatEvents, to: &body
                )
            }
            return .answer(APIResponse(body: body, contentType: stream.framing.contentType))
        case .openAPI:
            return .answer(APIResponse(body: OpenAPI.encoded))
        case .events:
            try requireBody(request)
            // A malformed batch, or one with an event this credential may not send, changes nothing.
            var commands = try parseBatch(try JSONParser.parseForAPI(request.body))
            for index in commands.indices {
                do {
                    commands[index] = try authorize(commands[index], for: credential)
                } catch {
                    throw error.within("events[\(index)]")
                }
            }
            return .apply(commands, .batch, principal)
        case .health, .ready, .metrics, .signIn:
            throw routeNotFound(request.path)
        }
    }

    /// A command as `credential` may send it, or the 401/403 that says why not: its id, and
    /// wherever it names another task — its `parent` and its `kind` — must be inside the
    /// publisher's patterns. A task whose default kind (its id without the trailing number) lies
    /// outside them is remembered under its own id instead, so a kind's history is fed only by
    /// tasks whose publisher may publish the kind.
    public func authorize(_ command: Command, for credential: Credential) throws(APIError) -> Command {
        try policy.authorizePublish(credential, id: command.id)
        guard case .update(let id, var patch) = command, let publish = credential.grant?.publish, !publish.isEverything else { return command }
        if case .some(.some(let parent)) = patch.parent { try policy.authorizePublish(credential, id: parent, field: "parent") }
        let defaultKindIsOutside = !publish.allows(TaskKind.defaultKind(of: id))
        switch patch.kind {
        case .some(.some(let kind)):
            try policy.authorizePublish(credential, id: kind, field: "kind")
        case .some(.none):
            guard defaultKindIsOutside else { return command }
            patch.kind = .some(id)
        case .none:
            guard defaultKindIsOutside, store.task(id)?.kind == nil else { return command }
            patch.kind = .some(id)
        }
        return .update(id: id, patch: patch)
    }

    private func answer(_ command: Command, by principal: Principal, showingTask: Bool, now: Double) throws(APIError) -> APIResponse {
        let change = try apply(command, by: principal, now: now)
        var writer = JSONWriter(capacity: 384)
        writer.beginObject()
        writeAnswerFields(change, id: command.id, into: &writer, showingTask: showingTask, now: now)
        writer.endObject()
        return APIResponse(body: writer.bytes, events: change.events)
    }

    /// Every command, whatever carried it, is applied here: the store's merge rules, and what this
    /// node remembers of who published a task forgotten with the task.
    func apply(_ command: Command, by principal: Principal, now: Double) throws(APIError) -> Change {
        let change = try store.apply(command, by: principal, now: now)
        if case .remove = command { publisherSockets.forget(command.id) }
        return change
    }

    /// `"seq"`, then `"task"` (or `"removed"` when the change removed task `id`): an answer's fields.
    /// Without `showingTask`, no `"task"`: the caller may not read it.
    func writeAnswerFields(_ change: Change, id: String, into writer: inout JSONWriter, showingTask: Bool = true, now: Double) {
        writer.key("seq")
        writer.number(Int(store.seq))
        if let task = change.task {
            guard showingTask else { return }
            writer.key("task")
            writer.beginObject()
            task.writeFields(into: &writer, now: now)
            writer.endObject()
        } else {
            writer.key("removed")
            writer.string(id)
        }
    }

    /// Parses a batch (an array of events, or one event object) in full before anything is applied:
    /// a malformed batch changes nothing.
    public func parseBatch(_ json: JSONValue) throws(APIError) -> [Command] {
        let items: [JSONValue]
        switch json {
        case .array(let elements): items = elements
        case .object: items = [json]
        default: throw APIError(.invalidJSON, "expected an array of events or one event object, not \(json.typeName)")
        }
        guard items.count <= API.maxBatchEvents else {
            throw APIError(.bodyTooLarge, "a batch holds at most \(API.maxBatchEvents) events; send \(items.count) in several")
        }
        var commands: [Command] = []
        commands.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            do {
                commands.append(try Command.parse(event: item))
            } catch {
                throw error.within("events[\(index)]")
            }
        }
        return commands
    }

    /// Applies commands (authorized already) in order; one that fails (an unknown task, a finished
    /// timer) does not stop the rest.
    public func applyBatch(_ commands: [Command], by principal: Principal = .server, now: Double) -> BatchResult {
        var result = BatchResult()
        for (index, command) in commands.enumerated() {
            do {
                result.events += try apply(command, by: principal, now: now).events
                result.applied += 1
            } catch {
                result.errors.append((index, error))
            }
        }
        return result
    }

    private func encodeBatchAnswer(_ result: BatchResult) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("seq")
        writer.number(Int(store.seq))
        writer.key("applied")
        writer.number(result.applied)
        writer.key("errors")
        writer.beginArray()
        for (index, error) in result.errors {
            writer.beginObject()
            writer.key("index")
            writer.number(index)
            error.writeFields(into: &writer)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    func healthBody(watchers: Int, redis: String? = nil) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("ok")
        writer.bool(true)
        writer.key("protocol")
        writer.number(ProtocolInfo.version)
        writer.key("server")
        writer.string(RingcastVersion.version)
        writer.key("epoch")
        writer.string(store.epoch)
        writer.key("seq")
        writer.number(Int(store.seq))
        writer.key("tasks")
        writer.number(store.tasks.count)
        writer.key("watchers")
        writer.number(watchers)
        if let redis {
            writer.key("redis")
            writer.string(redis)
        }
        writer.endObject()
        return writer.bytes
    }

    private func body(_ request: APIRequest) throws(APIError) -> JSONValue {
        if request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .object([]) }
        return try JSONParser.parseForAPI(request.body)
    }

    /// An endpoint whose body the document marks required takes no request without one: a client
    /// that sent neither a length nor chunks may have meant a body the server cannot see (RFC 9110 §15.5.12).
    private func requireBody(_ request: APIRequest) throws(APIError) {
        guard request.bodyIsAbsent else { return }
        throw APIError(
            .lengthRequired,
            "\(request.method) \(request.path) takes a body, and this request sent neither Content-Length nor Transfer-Encoding: send the body with its length (curl -d '…'), or chunked"
        )
    }

    private func methodNotAllowed(_ request: APIRequest, _ allowed: String) -> APIError {
        APIError(.methodNotAllowed, "\(request.method) is not allowed on \(request.path); use \(allowed)")
    }

    private func routeNotFound(_ path: String) -> APIError {
        if path == "/badge" || path.hasPrefix("/badge/") { return APIError(.notFound, "no endpoint \(path); a badge is /badge/{id}.svg") }
        return APIError(.notFound, "no endpoint \(path); see docs/PROTOCOL.md for the API")
    }
}

extension JSONParser {
    /// Parses a request body, reporting a syntax error as the API's `invalid_json`.
    public static func parseForAPI(_ bytes: [UInt8]) throws(APIError) -> JSONValue {
        do {
            return try parse(bytes)
        } catch {
            throw APIError(.invalidJSON, "the body is not valid JSON: \(error.reason) at byte \(error.offset)")
        }
    }
}
