/// The HTTP endpoints, once: each route's path, the handler `API` hands a request that matches it
/// to, and for each method it takes what the OpenAPI document says of it. The router
/// (`API.route`) matches requests against this table and answers a method it does not list with
/// 405 and the `Allow` it computes here; `OpenAPI` writes the document's `paths` from it; so the two
/// cannot name different endpoints. RouteTableTests holds them together.
public struct Route: Sendable {
    /// Where the router hands a request that matched.
    public enum Handler: Sendable, Equatable {
        case taskList, task, showTask, hideTask
        case control(TaskControl)
        case log, timeline
        case startTimer, pauseTimer, resumeTimer, cancelTimer
        case events, stream, openAPI, kinds, badge, session
        /// Probes `API.plan` answers itself, without the token and Origin checks the router makes.
        case health, ready, metrics
        /// The task page (`publicDir/task.html`): a page for browsers, which the document does not describe.
        case taskPage
        /// A step of the sign-in at an identity provider: the server's transport answers it
        /// (ProviderSignIn in RingcastServer) before `API` sees the request.
        case signIn(SignInStep)

        var isProbe: Bool {
            switch self {
            case .health, .ready, .metrics: return true
            default: return false
            }
        }

        public var isSignIn: Bool {
            guard case .signIn = self else { return false }
            return true
        }
    }

    /// The sign-in's steps, one route each under `/auth/`.
    public enum SignInStep: Sendable, Equatable {
        case providers, login, callback, logout
    }

    /// One segment of a path template: a literal, or `{name}` followed by a literal suffix (`{id}.svg`).
    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(suffix: String)

        func matches(_ segment: Substring) -> Bool {
            switch self {
            case .literal(let text): return segment == text
            // `{id}` is any segment, the empty one too (the handler then refuses the id); `{id}.svg`
            // any that ends in `.svg` after at least one byte of id.
            case .parameter(let suffix):
                return suffix.isEmpty || (segment.utf8.count > suffix.utf8.count && segment.utf8.reversed().starts(with: suffix.utf8.reversed()))
            }
        }
    }

    /// The template, like `/api/tasks/{id}/log`.
    public let path: String
    public let handler: Handler
    /// The methods it takes, in the order a 405's `Allow` names them.
    public let methods: [String]
    /// What the document says of each method; empty for a route it does not describe.
    let operations: [OpenAPIOperation]
    let segments: [Segment]
    /// Which segment is the `{…}` parameter, or nil when the template has none.
    let parameterIndex: Int?

    /// A route the document describes, one operation a method.
    init(_ path: String, _ handler: Handler, _ operations: [OpenAPIOperation]) {
        self.init(path, handler, methods: operations.map(\.method), operations: operations)
    }

    /// A route the document leaves out (a page, not the API).
    static func undocumented(_ path: String, _ handler: Handler, methods: [String]) -> Route {
        Route(path, handler, methods: methods, operations: [])
    }

    private init(_ path: String, _ handler: Handler, methods: [String], operations: [OpenAPIOperation]) {
        self.path = path
        self.handler = handler
        self.methods = methods
        self.operations = operations
        segments = path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            guard part.hasPrefix("{"), let close = part.firstIndex(of: "}") else { return .literal(String(part)) }
            return .parameter(suffix: String(part[part.index(after: close)...]))
        }
        parameterIndex = segments.firstIndex {
            guard case .parameter = $0 else { return false }
            return true
        }
    }

    public var isDocumented: Bool { !operations.isEmpty }
    /// What a 405 answers in `Allow`, and its message after "use".
    public var allow: String { methods.joined(separator: ", ") }
}

/// A request's path matched to its route, with the `{id}` it names.
public struct RouteMatch: Sendable {
    public let route: Route
    /// The `{id}` segment without its suffix (`ci` of `/badge/ci.svg`); empty when the template names none.
    public let id: String
}

/// The route table (`table`, below) and what the router and the 405s ask of it. Any thread: it never changes.
public enum Routes {
    /// The route a path names, or nil: no such endpoint (a 404). Methods are not looked at: a route
    /// that does not take the request's method is a 405, not a 404.
    public static func match(_ path: String) -> RouteMatch? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        // Runs for every request: the templates alone, walked by index, copy no route.
        let templates = Routes.templates
        candidates: for index in templates.indices where templates[index].count == parts.count {
            let segments = templates[index]
            for position in segments.indices where !segments[position].matches(parts[position]) { continue candidates }
            let route = table[index]
            guard let parameter = route.parameterIndex, case .parameter(let suffix) = segments[parameter] else {
                return RouteMatch(route: route, id: "")
            }
            return RouteMatch(route: route, id: String(parts[parameter].dropLast(suffix.utf8.count)))
        }
        return nil
    }

    /// Each route's segments, in the table's order.
    private static let templates: [[Route.Segment]] = table.map(\.segments)

    /// What a 405 answer's `Allow` header says: the methods the route of `path` takes, or nil when
    /// no route the document describes has that path.
    public static func allowedMethods(path: String) -> String? {
        guard let route = match(path)?.route, route.isDocumented else { return nil }
        return route.allow
    }
}

extension Routes {
    private typealias Node = OpenAPINode
    private typealias Answer = OpenAPIAnswer
    private typealias Operation = OpenAPIOperation

    /// Every route, in the document's order.
    public static let table: [Route] = {
        let watch: Node = [
            "name": "watch", "in": "query", "required": false,
            "description":
                .string(
                    "Comma-separated id patterns (* any run of characters, ? one), at most \(WatchSet.maxPatterns) of \(WatchSet.maxPatternBytes) bytes in all; empty or absent: every task."
                ),
            "schema": ["type": "string", "pattern": .string(OpenAPI.watchListPattern)],
            "examples": ["ci": ["value": "ci.*,deploy.web"]],
        ]
        // Text for terminals: ?format=text, or an Accept header that ranks text/plain above
        // application/json (OpenAPI names no Accept parameter: the answers list both media types).
        let format: Node = [
            "name": "format", "in": "query", "required": false,
            "description":
                "text: a table for terminals (text/plain), as an Accept header that ranks text/plain above application/json also asks; json (the default): JSON, whatever Accept says.",
            "schema": ["type": "string", "enum": ["text", "json"]],
        ]
        let width: Node = [
            "name": "width", "in": "query", "required": false,
            "description": .string(
                "The text table's width in columns (default \(TextTable.defaultWidth)); refused out of range even when JSON is answered."),
            "schema": [
                "type": "integer", "minimum": .number(Double(TextTable.widths.lowerBound)), "maximum": .number(Double(TextTable.widths.upperBound)),
            ],
        ]
        let text: (Answer) -> Answer = {
            $0.or(
                "text/plain",
                [
                    "type": "string", "minLength": 1,
                    "description": .string(
                        """
                        With format=text or Accept: text/plain (charset utf-8): a header line, a row a task (a bar, \
                        the percentage, title · detail, state, time left), a line that counts them; no line wider than width.
                        """),
                ])
        }
        let label: Node = [
            "name": "label", "in": "query", "required": false,
            "description": .string(
                "The badge's left text instead of the task's title; the first \(Badge.maxLabel) characters are shown. (No CR, LF or NUL: the transport refuses those in a URL.)"
            ),
            "schema": ["type": "string", "pattern": .string(OpenAPI.urlText)],
        ]
        let ifNoneMatch: Node = [
            "name": "If-None-Match", "in": "header", "required": false,
            "description": "ETags the client has (\"…\", W/\"…\", or *): 304 when one is the badge's.",
            "schema": ["type": "string"],
        ]
        let badgeHeaders: [(String, String, Node)] = [
            ("ETag", "The badge's strong tag.", ["type": "string", "pattern": "^\"[0-9a-f]{32}\"$"]),
            ("Cache-Control", "Badges are short-lived.", ["const": .string(Badge.cacheControl)]),
        ]
        let update = OpenAPI.body(
            OpenAPI.ref("TaskPatch"), required: false,
            examples: [
                "progress": #"{"title": "Build 42", "progress": 0.42, "detail": "compiling"}"#,
                "units": #"{"completed": 84, "total": 200}"#,
                "done": #"{"state": "done"}"#,
                "child": #"{"title": "Unit tests", "parent": "ci", "progress": 0.5, "staleAfter": 30}"#,
                "controls": #"{"controls": ["cancel", "pause", "resume"], "staleAfter": 30, "abandonAfter": 600}"#,
                "kind": #"{"title": "Build 43", "kind": "ci.build", "progress": 0}"#,
            ])
        let updated: Answer = .json("The task as it now is, and the seq of the change.", "Change")
        let updateErrors: [APIError.Code] = [.invalidJSON, .invalidID, .invalidField, .unknownField, .tooManyTasks]
        let asIs: Answer = .json("The task as it now is.", "Change")
        let location: (String) -> (String, String, Node) = { ("Location", $0, ["type": "string", "minLength": 1]) }
        let asked: Answer = .json(
            "The task with the request marked, and how many of the task's publisher sockets were told (0: none is connected; the request waits).",
            "ControlAnswer")
        return [
            Route(
                "/api/tasks", .taskList,
                [
                    Operation(
                        "GET", "listTasks",
                        "List the tasks the token may read (a snapshot), optionally only those a watch list matches; as text for terminals.",
                        .scoped, parameters: [watch, format, width], ok: text(.json("The tasks, oldest change first.", "TaskList")),
                        errors: [.invalidPattern, .invalidField])
                ]),
            Route(
                "/api/tasks/{id}", .task,
                [
                    Operation(
                        "GET", "getTask", "One task; as text for terminals, with every task under it the token may read.", .scoped,
                        parameters: [format, width], ok: text(.json("The task.", "Task")), errors: [.invalidID, .notFound, .invalidField]),
                    Operation(
                        "POST", "updateTask", "Create or update a task: merges the fields given (docs/PROTOCOL.md, Merge rules).",
                        .change, body: update, ok: updated, errors: updateErrors),
                    Operation(
                        "PUT", "putTask", "Create or update a task, as POST does.", .change, body: update, ok: updated,
                        errors: updateErrors),
                    Operation(
                        "PATCH", "patchTask", "Create or update a task, as POST does.", .change, body: update, ok: updated,
                        errors: updateErrors),
                    Operation(
                        "DELETE", "removeTask", "Remove a task: watchers get a remove event.",
                        .change, ok: .json("The id removed, and the seq of the removal.", "Removed"), errors: [.invalidID, .notFound]),
                ]),
            Route(
                "/api/tasks/{id}/show", .showTask,
                [
                    Operation(
                        "POST", "showTask",
                        "Show a task (creating it if new), optionally for a while: the server hides it by itself after hideAfter seconds.",
                        .change,
                        body: OpenAPI.body(
                            OpenAPI.ref("ShowOptions"), required: false,
                            examples: ["saving": #"{"hideAfter": 3, "modal": true, "detail": "Saving…"}"#]),
                        ok: asIs, errors: [.invalidJSON, .invalidID, .invalidField, .unknownField, .tooManyTasks])
                ]),
            Route(
                "/api/tasks/{id}/hide", .hideTask,
                [
                    Operation(
                        "POST", "hideTask", "Hide a task.", .change, body: OpenAPI.noFields, ok: asIs,
                        errors: OpenAPI.noFieldsErrors + [.notFound])
                ]),
            Route(
                "/api/tasks/{id}/cancel", .control(.cancel),
                [
                    Operation(
                        "POST", "cancelTask",
                        "Ask the task's publisher to cancel it: marks cancelRequested and sends a control frame to every WebSocket that published it. The task must offer cancel in its controls.",
                        .change, body: OpenAPI.noFields, ok: asked, errors: OpenAPI.noFieldsErrors + [.notFound, .conflict])
                ]),
            Route(
                "/api/tasks/{id}/pause", .control(.pause),
                [
                    Operation(
                        "POST", "pauseTask",
                        "Ask the task's publisher to pause it: marks pauseRequested. The task must offer pause and not be paused already.",
                        .change, body: OpenAPI.noFields, ok: asked, errors: OpenAPI.noFieldsErrors + [.notFound, .conflict])
                ]),
            Route(
                "/api/tasks/{id}/resume", .control(.resume),
                [
                    Operation(
                        "POST", "resumeTask",
                        "Ask the publisher of a paused task (or one with a pause request waiting) to go on: clears pauseRequested. The task must offer resume.",
                        .change, body: OpenAPI.noFields, ok: asked, errors: OpenAPI.noFieldsErrors + [.notFound, .conflict])
                ]),
            Route(
                "/api/tasks/{id}/log", .log,
                [
                    Operation(
                        "GET", "readLog",
                        "The lines kept of a task's log: the last it received, within logLines, logBytes and maxLogBytes (config).",
                        .scoped, ok: .json("The tail of the log, and how many lines it has received in all.", "LogTail"),
                        errors: [.invalidID, .notFound]),
                    Operation(
                        "POST", "appendLog",
                        "Append lines to the log of a task that exists. A log line renews the task's lease, and a stalled task runs again. Watchers receive a log event.",
                        .change, body: OpenAPI.logBody, ok: asIs,
                        errors: [.invalidJSON, .invalidID, .invalidField, .unknownField, .missingField, .notFound, .lengthRequired]),
                ]),
            Route(
                "/api/tasks/{id}/timeline", .timeline,
                [
                    Operation(
                        "GET", "readTimeline",
                        "(v4) The task's short history: created, each state it entered, shown and hidden, each cancel, pause or resume asked and who asked, abandonment.",
                        .scoped, ok: .json("The timeline, oldest first.", "Timeline"), errors: [.invalidID, .notFound])
                ]),
            Route(
                "/api/timers/{id}", .startTimer,
                [
                    Operation(
                        "POST", "startTimer",
                        "Start (or restart) a countdown timer: the server ticks it every interval, derived from its start, never counted.",
                        .change,
                        body: OpenAPI.body(
                            OpenAPI.ref("TimerStart"), required: true,
                            examples: [
                                "tea": #"{"seconds": 180, "interval": 1, "title": "Tea"}"#,
                                "shared phase": #"{"seconds": 60, "startAt": 1764489600000, "hideAfter": 5}"#,
                            ]),
                        ok: .json("The timer's task.", "Change"),
                        errors: [.invalidJSON, .invalidID, .invalidField, .unknownField, .missingField, .tooManyTasks, .lengthRequired])
                ]),
            Route(
                "/api/timers/{id}/pause", .pauseTimer,
                [
                    Operation(
                        "POST", "pauseTimer", "Pause a timer: its ticks stop (state paused).",
                        .change, body: OpenAPI.noFields, ok: asIs, errors: OpenAPI.noFieldsErrors + OpenAPI.timerErrors)
                ]),
            Route(
                "/api/timers/{id}/resume", .resumeTimer,
                [
                    Operation(
                        "POST", "resumeTimer", "Resume a paused timer: every remaining tick shifts by the pause's length.",
                        .change, body: OpenAPI.noFields, ok: asIs, errors: OpenAPI.noFieldsErrors + OpenAPI.timerErrors)
                ]),
            Route(
                "/api/timers/{id}/cancel", .cancelTimer,
                [
                    Operation(
                        "POST", "cancelTimer", "Cancel a timer (state cancelled).",
                        .change, body: OpenAPI.noFields, ok: asIs, errors: OpenAPI.noFieldsErrors + OpenAPI.timerErrors)
                ]),
            Route(
                "/api/events", .events,
                [
                    Operation(
                        "POST", "publishEvents",
                        """
                        A batch: an array of events (or one event object), applied in order. The whole batch is \
                        validated first: a malformed event, or one the token may not send, refuses all of it \
                        (its field is named like events[3].progress). Events that fail only when applied (an \
                        unknown task, a finished timer, a new task past maxTasks) are listed in errors; the rest still apply.
                        """,
                        .change,
                        body: OpenAPI.body(
                            OpenAPI.ref("Batch"), required: true,
                            examples: [
                                "batch":
                                    #"[{"type": "update", "id": "ci.test", "progress": 0.5}, {"type": "show", "id": "ci.test", "hideAfter": 10}, {"type": "hide", "id": "nope"}]"#,
                                "one event": #"{"type": "timer", "id": "tea", "seconds": 180}"#,
                                "log":
                                    #"[{"type": "update", "id": "ci.log", "title": "Log"}, {"type": "log", "id": "ci.log", "lines": ["compiling a.c"]}]"#,
                            ]),
                        ok: .json("How many events applied, and why each of the others did not.", "BatchAnswer"),
                        errors: [.invalidJSON, .invalidEvent, .invalidID, .invalidField, .unknownField, .missingField, .lengthRequired])
                ]),
            Route(
                "/api/stream", .stream,
                [
                    Operation(
                        "GET", "stream",
                        """
                        (v6) The watch of a /ws watcher as a stream that does not end, over one chunked answer: Server-Sent \
                        Events (id EPOCH:SEQ, event = the message's type, data = its JSON; resumed by Last-Event-ID as by \
                        since) or JSON lines (format=jsonl, or Accept: application/x-ndjson). Same snapshot, events, reader \
                        rules, caps and conflation as /ws.
                        """,
                        .scoped,
                        parameters: [
                            watch,
                            [
                                "name": "since", "in": "query", "required": false,
                                "description": "EPOCH:SEQ: the changes since that point rather than a full snapshot, within the epoch.",
                                "schema": ["type": "string"],
                            ],
                            [
                                "name": "format", "in": "query", "required": false,
                                "description": "sse (the default, unless Accept names application/x-ndjson) or jsonl.",
                                "schema": ["type": "string", "enum": ["sse", "jsonl"]],
                            ],
                            [
                                "name": "heartbeat", "in": "query", "required": false,
                                "description": "comment (the default): heartbeats as SSE comments; event: as heartbeat events.",
                                "schema": ["type": "string", "enum": ["comment", "event"]],
                            ],
                            [
                                "name": "Last-Event-ID", "in": "header", "required": false,
                                "description": "EPOCH:SEQ, as an EventSource sends it when it reconnects: wins over since.",
                                "schema": ["type": "string"],
                            ],
                        ],
                        ok: Answer("The stream.", "text/event-stream", ["type": "string"]).or("application/x-ndjson", ["type": "string"]),
                        errors: [.invalidPattern, .invalidField, .rateLimited])
                ]),
            Route(
                "/api/openapi.json", .openAPI,
                [
                    Operation(
                        "GET", "openAPI", "This document.", .read,
                        ok: Answer(
                            "The OpenAPI 3.1 document of this API.", "application/json", ["type": "object", "required": ["openapi", "paths"]]),
                        errors: [])
                ]),
            Route(
                "/api/kinds", .kinds,
                [
                    Operation(
                        "GET", "listKinds",
                        "The kinds that have finished runs (those the token may see: its patterns cover the kind, or a task of it it may read): how many are kept, their median, 90th percentile and last length.",
                        .scoped, ok: .json("Every kind with runs, by name.", "KindList"), errors: [])
                ]),
            Route(
                "/badge/{id}.svg", .badge,
                [
                    Operation(
                        "GET", "badge",
                        """
                        An SVG badge of the task for a README: its title (or label) on grey, then the percentage of \
                        a running task over a bar of it, or its state word, in the state's colour. A task that does not \
                        exist, or an id that is not valid, gets a grey "unknown" badge (200), so an image never breaks; \
                        a task the request may not read is refused (401, 403), as every read is.
                        """,
                        .scoped, parameters: [label, ifNoneMatch],
                        ok: Answer(
                            "The badge: no script, no style attribute.", Badge.contentType, ["type": "string", "minLength": 1], headers: badgeHeaders),
                        also: [(304, Answer("If-None-Match names the badge's ETag: no body.", headers: badgeHeaders))],
                        errors: [.notFound])
                ]),
            Route(
                "/healthz", .health,
                [
                    Operation("GET", "health", "Liveness and a few counts.", .read, ok: .json("The server is serving.", "Health"), errors: [])
                ]),
            Route(
                "/readyz", .ready,
                [
                    Operation(
                        "GET", "ready",
                        """
                        Readiness: whether what the server depends on (storage; Redis when a node uses it) answered \
                        its last question. The server asks every 2 s and answers from the last answers.
                        """,
                        .read, ok: .json("Every dependency answers.", "Ready"),
                        also: [
                            (503, .json("A dependency failed, has not answered for 10 s, or has not answered yet (just after start).", "NotReady"))
                        ],
                        errors: [])
                ]),
            Route(
                "/metrics", .metrics,
                [
                    Operation(
                        "GET", "metrics",
                        "Counters and gauges in Prometheus' text format (version 0.0.4). From loopback, or with a token whose patterns cover every id.",
                        .probe, ok: Answer("One HELP, TYPE and sample line per metric.", "text/plain", ["type": "string", "minLength": 1]),
                        errors: [.unauthorized, .forbidden])
                ]),
            Route(
                "/api/session", .session,
                [
                    Operation(
                        "GET", "session", "Who the request is signed in as (its token, else anonymous) and what it may read and publish.",
                        .scoped, ok: .json("The grant: its name, kind and patterns.", "Session"), errors: []),
                    Operation(
                        "POST", "signIn",
                        """
                        Sign a browser in: trades a token (in the body, or Authorization) for an HttpOnly, SameSite=Strict \
                        cookie (Secure over TLS) that /ws and the API accept. A token that does not hold is refused, with the reason.
                        """,
                        .session,
                        body: OpenAPI.body(OpenAPI.ref("SignIn"), required: false, examples: ["token": #"{"token": "reader-token-0123456789"}"#]),
                        ok: .json("Signed in: the grant the cookie carries.", "Session"),
                        errors: [.invalidJSON, .unknownField, .missingField, .invalidField]),
                    Operation(
                        "DELETE", "signOut", "Sign out: clears the cookie.", .session,
                        ok: .json("Signed out.", "SignedOut"), errors: []),
                ]),
            Route(
                "/auth/providers", .signIn(.providers),
                [
                    Operation(
                        "GET", "signInProviders",
                        "(v6) The identity providers the dashboard's sign-in form offers: an empty list without oidc. Answered by the server's sign-in, as every /auth/ path, not by the API.",
                        .provider, ok: .json("Each provider's name and where its sign-in begins.", "ProviderList"), errors: [])
                ]),
            Route(
                "/auth/login", .signIn(.login),
                [
                    Operation(
                        "GET", "signInAtProvider",
                        "(v6) Begin signing in at an identity provider: the authorization code flow with PKCE (S256), a random state and nonce; sets the ringcast_signin cookie (the state, Path=/auth, SameSite=Lax) for ten minutes.",
                        .provider,
                        parameters: [
                            [
                                "name": "provider", "in": "query", "required": false,
                                "description": "Which of several providers (oidc's order, from 0); the first when absent.",
                                "schema": ["type": "integer", "minimum": 0],
                            ]
                        ],
                        ok: Answer(
                            "To the provider's authorization endpoint.",
                            headers: [location("The provider's authorization_endpoint with the flow's parameters.")]),
                        status: 302,
                        also: [(502, .json("The provider's discovery document could not be had: no redirect.", "Error"))],
                        errors: [.invalidRequest, .notFound])
                ]),
            Route(
                "/auth/callback", .signIn(.callback),
                [
                    Operation(
                        "GET", "signInCallback",
                        "(v6) Where the provider sends the browser back: the state must be this browser's and pending, the code is traded for an ID token, which is checked as every provider token is, and its nonce must be the one sent.",
                        .provider,
                        parameters: ["code", "state", "error", "error_description"].map { name in
                            ["name": .string(name), "in": "query", "required": false, "schema": ["type": "string"]]
                        },
                        ok: Answer(
                            "Signed in: a small page that moves on to /, and the sign-in cookie (as POST /api/session sets it) holding the ID token.",
                            "text/html", ["type": "string", "minLength": 1]),
                        errors: [.invalidRequest, .unauthorized, .forbidden, .notFound])
                ]),
            Route(
                "/auth/logout", .signIn(.logout),
                [
                    Operation(
                        "GET", "signOutOfProvider",
                        "(v6) Sign out as DELETE /api/session does: the cookie is cleared and its token refused from then on.",
                        .provider, ok: Answer("Back to the dashboard.", headers: [location("The dashboard: /.")]), status: 302, errors: [.notFound])
                ]),
            Route.undocumented("/tasks/{id}", .taskPage, methods: ["GET"]),
        ]
    }()
}
