/// The HTTP API's contract as an OpenAPI 3.1 document, served at `GET /api/openapi.json`.
///
/// It is built from values, not kept as one long literal: the core reads no files, and building it
/// lets the document take the id pattern, the task states, the controls, each error code's status,
/// the batch, log and unit limits from the code that enforces them, so those cannot drift apart.
/// The ranges that Commands.swift checks inline are written again here; OpenAPITests holds the two
/// together by sending every bound and the value just past it, and the `http` fuzz target checks
/// every answer the API gives against this document.
///
/// Its `paths` are written from the route table (Routes.swift), the router's own: each route's
/// operations say what they do, who may call them (`Access`, which brings the refusals every
/// operation of that kind shares), their body, their answer and the codes they can refuse with.
/// Adding an endpoint is adding a route there (and the schema of a new answer to `schemas()`);
/// OpenAPITests then fails until the API answers it as documented and docs/PROTOCOL.md has a
/// heading for it.
public enum OpenAPI {
    typealias Node = OpenAPINode
    typealias Answer = OpenAPIAnswer

    public static let document: JSONValue = build().json
    /// The document as served: encoded once.
    public static let encoded: [UInt8] = JSONWriter.encode(document)

    /// Error codes and when the API answers them, as docs/PROTOCOL.md lists them.
    public static let errorCodes: [(code: APIError.Code, when: String)] = [
        (.invalidJSON, "the body is not JSON, or not the JSON shape the endpoint takes"),
        (
            .invalidRequest,
            "the request line could not be read whole (a percent-encoded CR or LF in the path or query), or the body's framing is not one the server can read exactly: a Content-Length that is not one decimal number, Content-Length beside Transfer-Encoding, a coding list that does not end in chunked (before any routing; the connection is closed)"
        ),
        (.invalidID, "the task id in the path or event is not a valid id"),
        (.invalidEvent, "an event of a batch is not an object or has an unknown type"),
        (.invalidPattern, "a watch pattern is not valid"),
        (
            .unauthorized,
            "no token where one is needed (to publish, or to read what anonymousRead does not cover), or a token that does not hold: unknown, expired, not yet valid or wrongly signed"
        ),
        (
            .forbidden,
            "an Origin not in allowedOrigins, or a token whose patterns do not cover the id (or the parent or kind a task names, or every id for /metrics)"
        ),
        (.notFound, "no such task, or no such endpoint"),
        (.methodNotAllowed, "the endpoint exists but not with this method"),
        (.notATimer, "pause, resume or cancel of a task that is not a timer"),
        (.conflict, "pause, resume or cancel of a finished timer; a control request the task does not offer or cannot take in its state"),
        (.tooManyTasks, "a new task while the server holds maxTasks already (the tasks held are untouched)"),
        (.bodyTooLarge, "a body over maxMessageBytes, a batch over \(API.maxBatchEvents) events, or a log over \(LogTail.maxLinesPerRequest) lines"),
        (.misdirected, "the Host header names no host of this server (before any routing)"),
        (.invalidField, "a field of the wrong type or range (a query parameter's too: format, width)"),
        (.unknownField, "a field the endpoint does not take"),
        (.missingField, "a field the endpoint needs is missing"),
        (.rateLimited, "this connection published past maxPublishRate events a second"),
        (.storageFailed, "the change was applied in memory but storage could not keep it; send it again"),
        (.lengthRequired, "a request with neither Content-Length nor Transfer-Encoding to an endpoint whose body is required"),
        (.notImplemented, "a Transfer-Encoding with a coding other than chunked (before any routing; the connection is closed)"),
        (.uriTooLong, "the path, or one query argument, is 8 KiB or more (before any routing; the connection is closed)"),
        (.headerTooLarge, "a header is 8 KiB or more (before any routing; the connection is closed)"),
    ]

    /// What an event of a batch can fail with when it is applied: the answer lists it in `errors`,
    /// and the other events still apply. TaskStore.apply throws no other code.
    public static let applyErrors: [APIError.Code] = [.notFound, .notATimer, .conflict, .tooManyTasks]

    /// The path template and operation the document names for a request, or nil when it names none
    /// (the route table's match). Methods are case-sensitive, as in HTTP: `post` is not `POST`.
    public static func operation(method: String, path: String) -> (template: String, operation: JSONValue)? {
        guard let route = Routes.match(path)?.route, route.isDocumented, route.methods.contains(method),
            let operation = document["paths"]?[route.path]?[method.lowercased()]
        else { return nil }
        return (route.path, operation)
    }

    /// What a 405 answer's `Allow` header says (`Routes.allowedMethods`).
    public static func allowedMethods(path: String) -> String? { Routes.allowedMethods(path: path) }

    /// Limits the parsers in Commands.swift enforce, written once here for the document.
    static let seconds = (min: 0.001, max: 31_536_000.0)
    static let interval = (min: 0.01, max: 86_400.0)
    static let maxStartAt = UnixTime.latest

    private static func build() -> Node {
        [
            "openapi": "3.1.0",
            "info": [
                "title": "Ringcast HTTP API",
                "version": .string("\(ProtocolInfo.version)"),
                "description": """
                Services publish progress here; browsers watch it on the WebSocket at /ws (not an HTTP \
                operation, so not described here). docs/PROTOCOL.md is the whole contract, with the merge \
                rules, events and examples. Every answer carries cache-control: no-store, except a badge's \
                (max-age=10). Every error body is {"error", "message", "field"}. A request whose Host header \
                names no host of this server is answered 421 misdirected_request before anything else; one \
                whose path or query holds a percent-encoded CR or LF, 400 invalid_request (a NUL, %00, \
                closes the connection unanswered: libwebsockets drops it). A request that carries an Origin \
                header may change state only when the origin is the server's own or is in allowedOrigins \
                (else 403). An unknown path under /api answers 404 not_found; a method an endpoint does not \
                take, 405 method_not_allowed with an Allow header naming the methods it takes (after the \
                Origin and token checks of a change). HTTP/1.1 pipelining is refused: a connection that \
                sends a request before the answer to the one before has left is closed. The /auth/ paths \
                are the browser's sign-in at an identity provider (oidc in config.json): the server's \
                sign-in answers them, ahead of the API, and without oidc every one but /auth/providers \
                is 404 not_found.
                """,
            ],
            "paths": paths(),
            "components": [
                "schemas": schemas(),
                "securitySchemes": [
                    "bearer": [
                        "type": "http", "scheme": "bearer",
                        "description": """
                        A publisher's or reader's token from config.json ("publishers", "readers"), or a \
                        signed token (HS256 JWT) minted with the key "tokenSecretEnv" names. Needed for every \
                        change, except from loopback while "anonymousLocalPublish" is true (the shipped \
                        default), and for every read that "anonymousRead" does not cover (by default: any \
                        read from another machine). A token that is sent is always checked.
                        """,
                    ],
                    "signInCookie": [
                        "type": "apiKey", "in": "cookie", "name": .string(AccessPolicy.cookieName),
                        "description": "The same token, as POST /api/session set it for a browser (HttpOnly, SameSite=Strict).",
                    ],
                ],
            ],
        ]
    }

    // MARK: Operations

    /// The path parameters a template may name, by name.
    private static let pathParameters: [String: Node] = [
        "id": ["name": "id", "in": "path", "required": true, "schema": ref("TaskID"), "description": "The task id, e.g. ci.build-42."]
    ]
    /// A badge's `{id}` is any file name before `.svg`: an id that is not valid gets the unknown badge.
    private static let badgeID: Node = [
        "name": "id", "in": "path", "required": true, "schema": ["type": "string", "minLength": 1, "pattern": "^[^/\\r\\n\\x00]+$"],
        "description":
            "The task id, e.g. ci.build-42; anything else gets the unknown badge (but a /, a CR, LF or NUL: no badge path, or a URL the transport refuses).",
    ]

    /// The routes the document describes, each path with the parameters its template names.
    private static func paths() -> Node {
        var items: [(String, JSONValue)] = []
        for route in Routes.table where route.isDocumented {
            let names = route.path.split(separator: "{").dropFirst().map { String($0.prefix { $0 != "}" }) }
            let parameters = names.map { name -> JSONValue in
                if route.handler == .badge { return badgeID.json }
                guard let parameter = pathParameters[name] else { preconditionFailure("\(route.path): no path parameter \(name)") }
                return parameter.json
            }
            var members: [(String, JSONValue)] = parameters.isEmpty ? [] : [("parameters", .array(parameters))]
            members += route.operations.map { ($0.method.lowercased(), $0.node.json) }
            items.append((route.path, .object(members)))
        }
        return Node(.object(items))
    }

    /// POST with no fields: no body, an empty one, or `{}`.
    static let noFields = body(ref("NoFields"), required: false, examples: ["empty": "{}"])
    static let noFieldsErrors: [APIError.Code] = [.invalidJSON, .invalidID, .unknownField]
    static let timerErrors: [APIError.Code] = [.notFound, .notATimer, .conflict]

    /// A log's lines: `{"lines": […]}`, or text/plain, one line a line.
    static let logBody = body(
        ref("LogLines"), required: true,
        examples: [
            "lines": #"{"lines": ["compiling a.c", "compiling b.c"]}"#
        ],
        plainText: [
            "schema": [
                "type": "string", "minLength": 1,
                "description": .string(
                    """
                    One line a line; a last line break ends the last line. At most \(LogTail.maxLinesPerRequest) lines \
                    (else 413); a line longer than \(LogTail.maxLineCharacters) characters is cut, ending in …
                    """),
            ],
            "examples": ["lines": ["value": "linking\nwarning: unused x\n"]],
        ])

    /// A JSON request body with its examples (and, where the endpoint also reads text, its text/plain form).
    static func body(_ schema: Node, required: Bool, examples: KeyValuePairs<String, String>, plainText: Node? = nil) -> Node {
        var named: [(String, JSONValue)] = []
        for (name, text) in examples {
            // The examples are literals of this file: OpenAPITests parses and sends each one.
            let example: Node = ["value": Node((try? JSONParser.parse(text)) ?? .null)]
            named.append((name, example.json))
        }
        var content: Node = ["application/json": ["schema": schema, "examples": Node(.object(named))]]
        if let plainText { content = content.with("text/plain", plainText) }
        return ["required": .bool(required), "content": content]
    }

    /// The answers of an operation: the 200 answer, any other it gives, and one answer per error
    /// status, each naming exactly the codes it can carry.
    fileprivate static func responses(_ answers: [(status: Int, answer: Answer)], errors: [APIError.Code]) -> Node {
        var members = answers.map { (String($0.status), $0.answer.node.json) }
        var statuses: [Int] = []
        for code in errors where !statuses.contains(code.status) { statuses.append(code.status) }
        for status in statuses.sorted() {
            precondition(!answers.contains { $0.status == status }, "status \(status) is both an answer and an error")
            let codes = errorCodes.filter { entry in errors.contains(entry.code) && entry.code.status == status }
            precondition(Set(codes.map(\.code)) == Set(errors.filter { $0.status == status }), "an error code missing from errorCodes")
            let description = codes.map { "\($0.code.rawValue): \($0.when)" }.joined(separator: "; ")
            let answer: Node = [
                "description": .string(description),
                "content": ["application/json": ["schema": errorSchema(codes.map(\.code))]],
            ]
            members.append((String(status), answer.json))
        }
        return Node(.object(members))
    }

    // MARK: Schemas

    /// `ci.*,deploy.web` as `?watch=` takes it: comma-separated globs, empty parts skipped.
    static let watchListPattern: String = {
        let glob = "[A-Za-z0-9*?][A-Za-z0-9._*?-]{0,127}"
        return "^,*(?:\(glob)(?:,+\(glob))*)?,*$"
    }()

    static let epochPattern = "^[a-z0-9]{12}$"
    /// Text that may stand in a URL's path or query: no CR or LF (the transport answers 400
    /// invalid_request) and no NUL (libwebsockets drops the connection).
    static let urlText = "^[^\\r\\n\\x00]*$"

    private static func schemas() -> Node {
        let seconds: Node = ["type": "number", "minimum": .number(OpenAPI.seconds.min), "maximum": .number(OpenAPI.seconds.max)]
        let nullableSeconds = seconds.with("type", ["number", "null"])
        let control: Node = ["enum": Node(.array(TaskControl.allCases.map { .string($0.rawValue) }))]
        let lines: Node = [
            "type": "array", "items": ["type": "string"], "minItems": 1, "maxItems": .number(Double(LogTail.maxLinesPerRequest)),
            "description": .string(
                """
                The lines, oldest first. A line break inside an element starts another line; at most \(LogTail.maxLinesPerRequest) \
                lines in all (else 413); a line longer than \(LogTail.maxLineCharacters) characters is cut, ending in …
                """),
        ]
        let state: Node = ["enum": Node(.array(TaskState.allCases.map { .string($0.rawValue) }))]
        let settableState: Node = ["enum": Node(.array(TaskState.settable.map { .string($0.rawValue) }))]
        let millis: Node = ["type": "integer", "description": "Unix milliseconds."]
        let patchFields: Node = [
            "title": ["type": "string", "maxLength": 200, "description": "A new task's title defaults to its id."],
            "detail": ["type": ["string", "null"], "maxLength": 1000, "description": "null clears it."],
            "progress": [
                "type": ["number", "null"], "minimum": 0, "maximum": 1,
                "description": "0 to 1; null makes the task indeterminate (a spinner).",
            ],
            "completed": [
                "type": ["number", "null"], "minimum": 0, "maximum": .number(TaskPatch.maxUnits),
                "description": "Units done; with total and no progress, progress = completed / total.",
            ],
            "total": ["type": ["number", "null"], "exclusiveMinimum": 0, "maximum": .number(TaskPatch.maxUnits)],
            "state": settableState.with("description", "done also sets progress to 1; stalled is the server's own."),
            "visible": ["type": "boolean", "description": "false hides the task and clears hideAt and modal."],
            "hideAfter": nullableSeconds.with("description", "Seconds until the server hides the task by itself; null cancels."),
            "modal": ["type": "boolean", "description": "A modal task covers the dashboard until it is hidden."],
            "parent": [
                "type": ["string", "null"], "pattern": .string(TaskID.pattern),
                "description": "Groups the task under another, which must exist; null ungroups.",
            ],
            "staleAfter": nullableSeconds.with("description", "A lease: no update for that long turns a running task stalled."),
            "controls": [
                "type": ["array", "null"], "items": control,
                "description": "What watchers may ask of the publisher (POST /api/tasks/{id}/cancel …); [] or null offers none.",
            ],
            "abandonAfter": nullableSeconds.with("description", "A task stalled that long ends failed; null: the server's abandonAfterSeconds."),
            "kind": [
                "type": ["string", "null"], "pattern": .string(TaskID.pattern),
                "description": "The kind whose past runs give its ETA, spelled like an id; null: the id without its trailing number.",
            ],
            "url": [
                "type": ["string", "null"], "maxLength": .number(Double(TaskURL.maxLength)), "pattern": .string(TaskURL.pattern),
                "description": "(v4) A link to show with the task (a CI run, a pull request): http or https only; null clears it.",
            ],
        ]
        let showFields: Node = [
            "hideAfter": seconds.with("description", "Seconds until the server hides the task by itself; a later show restarts the clock."),
            "modal": ["type": "boolean", "description": "Default false."],
            "detail": ["type": "string", "maxLength": 1000],
        ]
        let timerFields: Node = [
            "seconds": seconds.with("description", "The countdown's length."),
            "interval": [
                "type": "number", "minimum": .number(interval.min), "maximum": .number(interval.max),
                "description": "Seconds between ticks; default 1.",
            ],
            "title": ["type": "string", "maxLength": 200],
            "hideAfter": seconds.with("description", "Hide that long after the countdown ends or is cancelled."),
            "startAt": [
                "type": "number", "minimum": 0, "maximum": .number(maxStartAt),
                "description": "Unix ms; timers given the same value share a phase. Default: when the request arrives.",
            ],
        ]
        let error = errorSchema(errorCodes.map(\.code))
        return [
            "TaskID": [
                "type": "string", "pattern": .string(TaskID.pattern),
                "description": "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit; dots group ids.",
            ],
            "Task": object(
                [
                    "id": ref("TaskID"),
                    "title": ["type": "string", "maxLength": 200],
                    "detail": ["type": "string", "maxLength": 1000],
                    "progress": ["type": ["number", "null"], "minimum": 0, "maximum": 1],
                    "completed": ["type": "number", "minimum": 0],
                    "total": ["type": "number", "exclusiveMinimum": 0],
                    "state": state,
                    "visible": ["type": "boolean"],
                    "modal": ["type": "boolean"],
                    "hideAt": millis,
                    "rate": ["type": "number", "minimum": 0, "description": "Progress per second (smoothed); running determinate tasks only."],
                    "eta": [
                        "type": "number", "minimum": 0,
                        "description":
                            "Seconds left at the current rate; until that rate has settled, what its kind's past runs say (an indeterminate task's too).",
                    ],
                    "updatedAt": millis,
                    "seq": ["type": "integer", "minimum": 1, "description": "The seq of the task's last change."],
                    "parent": ref("TaskID"),
                    "staleAfter": seconds,
                    "controls": [
                        "type": "array", "items": control, "minItems": 1, "maxItems": .number(Double(TaskControl.allCases.count)),
                        "description": "What the publisher lets watchers ask of it; left out when none.",
                    ],
                    "cancelRequested": ["const": true, "description": "A cancel request waits for the publisher's answer."],
                    "pauseRequested": ["const": true, "description": "A pause request waits for the publisher's answer."],
                    "requestWaiting": [
                        "const": true,
                        "description":
                            "(v5) The request waiting (cancelRequested or pauseRequested) has reached no publisher: none was connected over a WebSocket when it was asked; left out once one takes it.",
                    ],
                    "abandonAfter": seconds.with("description", "The task's own abandonAfter, when it set one."),
                    "logCount": ["type": "integer", "minimum": 1, "description": "Lines its log has received; left out while none."],
                    "kind": ref("TaskID").with("description", "The kind the publisher named; left out when it named none."),
                    "expectedSeconds": [
                        "type": "number", "minimum": 0,
                        "description": "The median length of its kind's last runs, taken when the run began; left out when the kind has none.",
                    ],
                    "slow": ["const": true, "description": "Running past its kind's 90th percentile; left out otherwise."],
                    "by": [
                        "type": "string", "minLength": 1,
                        "description": "Who made its last state change or request: a publisher's or reader's name, a signed token's sub, or local.",
                    ],
                    "url": [
                        "type": "string", "maxLength": .number(Double(TaskURL.maxLength)), "pattern": .string(TaskURL.pattern),
                        "description": "(v4) The link its publisher gave; left out when none.",
                    ],
                    "startedAt": millis.with("description", "(v4) When the current run began: its creation, or its return from a finished state."),
                    "timer": ref("Timer"),
                ], required: ["id", "title", "progress", "state", "visible", "modal", "updatedAt", "seq"]),
            "Timer": object(
                [
                    "seconds": seconds,
                    "interval": ["type": "number", "minimum": .number(interval.min), "maximum": .number(interval.max)],
                    "startedAt": millis.with("description", "Unix ms; moves forward by the length of every pause."),
                    "endsAt": millis,
                    "pausedAt": millis,
                    "remaining": ["type": "number", "minimum": 0],
                    "elapsed": ["type": "number", "minimum": 0],
                ], required: ["seconds", "interval", "startedAt", "endsAt", "remaining", "elapsed"]),
            "TaskPatch": object(patchFields, required: [], description: "Fields to merge; unknown fields are refused."),
            "ShowOptions": object(showFields, required: []),
            "TimerStart": object(timerFields, required: ["seconds"]),
            "NoFields": object([:], required: [], description: "Takes no fields."),
            "LogLines": object(["lines": lines], required: ["lines"]),
            "Event": [
                "oneOf": [
                    event(["update", "progress", "state"], patchFields),
                    event(["show"], showFields),
                    event(["timer"], timerFields, required: ["seconds"]),
                    event(["log"], ["lines": lines], required: ["lines"]),
                    event(["hide", "pause", "resume", "cancel", "remove"], [:]),
                ]
            ],
            "Batch": [
                "oneOf": [
                    ["type": "array", "items": ref("Event"), "maxItems": .number(Double(API.maxBatchEvents))],
                    ref("Event"),
                ]
            ],
            "Change": object(
                [
                    "seq": ["type": "integer", "minimum": 1],
                    "task": ref("Task").with(
                        "description",
                        "Left out when the caller may publish the task but not read it (a loopback publisher under anonymousRead false)."),
                ], required: ["seq"]),
            "ControlAnswer": object(
                [
                    "seq": ["type": "integer", "minimum": 1],
                    "task": ref("Task").with("description", "Left out when the caller may change the task but not read it."),
                    "delivered": ["type": "integer", "minimum": 0, "description": "The publisher sockets told now; 0: the request waits for one."],
                ], required: ["seq", "delivered"]),
            "LogTail": object(
                [
                    "id": ref("TaskID"),
                    "logCount": ["type": "integer", "minimum": 0, "description": "Lines the log has received in all."],
                    "from": ["type": "integer", "minimum": 0, "description": "The number of the first line given: logCount minus the lines kept."],
                    "lines": [
                        "type": "array", "items": ["type": "string", "maxLength": .number(Double(LogTail.maxLineCharacters))],
                        "maxItems": .number(Double(ServerConfig.logLinesRange.upperBound)),
                        "description":
                            "The last lines, oldest first: at most logLines and logBytes (config), fewer once maxLogBytes took the oldest of all tasks'.",
                    ],
                ], required: ["id", "logCount", "from", "lines"]),
            "Timeline": object(
                [
                    "id": ref("TaskID"),
                    "entries": [
                        "type": "array", "maxItems": .number(Double(ServerConfig.timelineEntriesRange.upperBound)),
                        "description": "Oldest first; past timelineEntries (config) the oldest after created are dropped.",
                        "items": object(
                            [
                                "at": millis,
                                "event": ["enum": ["created", "state", "shown", "hidden", "requested", "abandoned"]],
                                "state": state.with("description", "The state entered (created, state, abandoned)."),
                                "action": control.with("description", "What was asked (requested)."),
                                "by": [
                                    "type": "string", "minLength": 1,
                                    "description": "Who did it; left out for the server's own changes (ticks, leases, abandonment).",
                                ],
                            ], required: ["at", "event"]),
                    ],
                ], required: ["id", "entries"]),
            "Removed": object(["seq": ["type": "integer", "minimum": 1], "removed": ref("TaskID")], required: ["seq", "removed"]),
            "SignIn": object(
                ["token": ["type": "string", "minLength": 1, "maxLength": .number(Double(API.maxSignInTokenBytes))]], required: [],
                description:
                    "The token to sign in with (a cookie holds at most \(API.maxSignInTokenBytes) bytes of it; a longer one that holds is 400); or send it as Authorization: Bearer and no body."
            ),
            "Session": object(
                [
                    "signedIn": ["type": "boolean", "description": "false: no token, what anonymousRead and anonymousLocalPublish allow."],
                    "name": ["type": "string", "minLength": 1],
                    "kind": ["enum": ["publisher", "reader", "signed", "anonymous", "person"]],
                    "read": ["type": "array", "items": ["type": "string"], "description": "Patterns it may read; [\"*\"] every id, [] none."],
                    "publish": ["type": "array", "items": ["type": "string"], "description": "Patterns it may publish; [] none."],
                    "expiresAt": ["type": "integer", "description": "A signed token's exp, in Unix ms."],
                ], required: ["signedIn", "name", "kind", "read", "publish"]),
            "SignedOut": object(["signedIn": ["const": false]], required: ["signedIn"]),
            "TaskList": object(
                [
                    "epoch": ["type": "string", "pattern": .string(epochPattern)],
                    "seq": ["type": "integer", "minimum": 0],
                    "tasks": ["type": "array", "items": ref("Task")],
                ], required: ["epoch", "seq", "tasks"]),
            "BatchAnswer": object(
                [
                    "seq": ["type": "integer", "minimum": 0],
                    "applied": ["type": "integer", "minimum": 0],
                    "errors": [
                        "type": "array",
                        "items": object(
                            [
                                "index": ["type": "integer", "minimum": 0],
                                "error": ["enum": Node(.array(applyErrors.map { .string($0.rawValue) }))],
                                "message": ["type": "string", "minLength": 1],
                                "field": ["type": ["string", "null"]],
                            ], required: ["index", "error", "message", "field"]),
                    ],
                ], required: ["seq", "applied", "errors"]),
            "Health": object(
                [
                    "ok": ["const": true],
                    "protocol": ["const": .number(Double(ProtocolInfo.version))],
                    "server": ["type": "string", "minLength": 1, "description": "The release, like 0.2.0."],
                    "epoch": ["type": "string", "pattern": .string(epochPattern)],
                    "seq": ["type": "integer", "minimum": 0],
                    "tasks": ["type": "integer", "minimum": 0],
                    "watchers": ["type": "integer", "minimum": 0],
                    "redis": [
                        "type": "string", "pattern": "^(connected|unavailable since [0-9]+)$",
                        "description": "In a cluster (storage redis://…): whether this node reaches Redis.",
                    ],
                ], required: ["ok", "protocol", "server", "epoch", "seq", "tasks", "watchers"]),
            "Ready": object(
                [
                    "ready": ["const": true],
                    "server": ["type": "string", "minLength": 1],
                    "checks": ref("ReadinessChecks"),
                    "webhooks": ref("WebhookHooks"),
                    "config": ref("ConfigGeneration"),
                ], required: ["ready", "server", "checks"]),
            "NotReady": object(
                [
                    "ready": ["const": false],
                    "reason": ["type": "string", "minLength": 1, "description": "Why, for each dependency not ready, joined with '; '."],
                    "server": ["type": "string", "minLength": 1],
                    "checks": ref("ReadinessChecks"),
                    "webhooks": ref("WebhookHooks"),
                    "config": ref("ConfigGeneration"),
                ], required: ["ready", "reason", "server", "checks"]),
            "WebhookHooks": [
                "type": "array",
                "description": "With webhooks configured: each hook, by its index in config.json, and how its receiver stands (never changes ready).",
                "items": object(
                    [
                        "hook": ["type": "integer", "minimum": 0],
                        "url": ["type": "string", "minLength": 1],
                        "circuit": ["enum": ["closed", "open", "half-open"]],
                        "failuresInARow": ["type": "integer", "minimum": 0],
                        "owed": [
                            "type": "integer", "minimum": 0, "description": "Deliveries its sender holds, in flight included (at most maxOutbox).",
                        ],
                        "inFlight": ["type": "integer", "minimum": 0],
                        "probeAt": [
                            "type": "integer", "minimum": 0, "description": "Unix ms, while open: when one delivery may probe the receiver.",
                        ],
                    ], required: ["hook", "url", "circuit", "failuresInARow", "owed", "inFlight"]),
            ],
            "ConfigGeneration": object(
                [
                    "generation": ["type": "integer", "minimum": 1, "description": "1 at start, one more at each reload (SIGHUP) applied."],
                    "hash": ["type": "string", "pattern": "^[0-9a-f]{16}$", "description": "FNV-1a (64 bits) of the file's bytes as loaded."],
                    "loadedAt": ["type": "integer", "minimum": 0, "description": "Unix ms: when it was loaded."],
                ], required: ["generation", "hash", "loadedAt"], description: "Which configuration runs."),
            "ReadinessChecks": object(
                [
                    "storage": ref("ReadinessCheck"),
                    "redis": ref("ReadinessCheck"),
                ], required: [], description: "Each dependency the server asks, by name."),
            "ReadinessCheck": object(
                [
                    "ready": ["type": "boolean"],
                    "reason": ["type": "string", "minLength": 1, "description": "Only when not ready."],
                ], required: ["ready"]),
            "KindList": object(
                [
                    "kinds": [
                        "type": "array", "maxItems": .number(Double(KindHistory.maxKinds)),
                        "items": object(
                            [
                                "kind": ref("TaskID"),
                                "runs": [
                                    "type": "integer", "minimum": 0, "maximum": .number(Double(KindHistory.runsKept)),
                                    "description": "Finished runs kept.",
                                ],
                                "median": ["type": "number", "minimum": 0, "description": "Seconds: the middle run (the mean of the middle two)."],
                                "p90": ["type": "number", "minimum": 0, "description": "Seconds: the 90th percentile, nearest rank."],
                                "last": ["type": "number", "minimum": 0, "description": "Seconds the newest run took."],
                                "durations": [
                                    "type": "array", "items": ["type": "number", "minimum": 0],
                                    "maxItems": .number(Double(KindHistory.runsKept)),
                                    "description": "(v4) Seconds each run kept took, oldest first.",
                                ],
                                "lastFinishedAt": millis,
                            ], required: ["kind", "runs", "lastFinishedAt"]),
                    ]
                ], required: ["kinds"]),
            "ProviderList": object(
                [
                    "providers": [
                        "type": "array",
                        "items": object(
                            [
                                "name": ["type": "string", "minLength": 1, "description": "What the form says: Sign in with NAME."],
                                "login": [
                                    "type": "string", "pattern": "^auth/login(\\?provider=[0-9]+)?$",
                                    "description": "Where the form sends the browser, relative to the dashboard's page.",
                                ],
                            ], required: ["name", "login"]),
                    ]
                ], required: ["providers"]),
            "Error": error,
        ]
    }

    /// One event type of a batch: `type`, `id` and the fields of the matching endpoint.
    private static func event(_ types: [String], _ fields: Node, required: [String] = []) -> Node {
        let head: Node = ["type": ["enum": Node(.array(types.map(JSONValue.string)))], "id": ref("TaskID")]
        return object(head.merging(fields), required: ["type", "id"] + required)
    }

    private static func errorSchema(_ codes: [APIError.Code]) -> Node {
        object(
            [
                "error": ["enum": Node(.array(codes.map { .string($0.rawValue) }))],
                "message": ["type": "string", "minLength": 1, "description": "What was wrong, and what to send instead."],
                "field": ["type": ["string", "null"], "description": "The offending field (in a batch: events[2].progress), or null."],
            ], required: ["error", "message", "field"])
    }

    private static func object(_ properties: Node, required: [String], description: String? = nil) -> Node {
        var schema: Node = ["type": "object", "properties": properties, "additionalProperties": false]
        if !required.isEmpty { schema = schema.with("required", Node(.array(required.map(JSONValue.string)))) }
        if let description { schema = schema.with("description", .string(description)) }
        return schema
    }

    static func ref(_ name: String) -> Node { ["$ref": .string("#/components/schemas/\(name)")] }
}

/// One method of a route as the document describes it (`Routes.table`).
struct OpenAPIOperation {
    /// Who may call an operation, and so the refusals it shares with every operation of its kind.
    enum Access {
        /// Open to everyone; a body the transport stopped collecting at maxMessageBytes gets 413.
        case read
        /// A change: it needs a token (or loopback with anonymousLocalPublish), passes the Origin check
        /// and the connection's publish rate, and is answered once storage has kept it.
        case change
        /// Answered before the body is looked at (`/metrics`): only the transport's checks of the
        /// request line and the Host come first.
        case probe
        /// A read held to what the request's token (or anonymousRead) may see.
        case scoped
        /// Signing in and out: no token needed, but the Origin check of a change applies.
        case session
        /// A browser's navigation through the sign-in at an identity provider: the server answers
        /// it before the API (no token, no Origin check, no body read).
        case provider

        var errors: [APIError.Code] {
            switch self {
            case .read: return [.invalidRequest, .bodyTooLarge, .misdirected] + OpenAPIOperation.headErrors
            case .scoped: return [.invalidRequest, .unauthorized, .forbidden, .bodyTooLarge, .misdirected] + OpenAPIOperation.headErrors
            case .session:
                return [.invalidRequest, .unauthorized, .forbidden, .bodyTooLarge, .misdirected, .notImplemented] + OpenAPIOperation.headErrors
            case .change:
                return [.invalidRequest, .unauthorized, .forbidden, .bodyTooLarge, .misdirected, .rateLimited, .storageFailed, .notImplemented]
                    + OpenAPIOperation.headErrors
            case .probe, .provider: return [.invalidRequest, .misdirected] + OpenAPIOperation.headErrors
            }
        }
    }

    /// What the transport refuses in any request's head, whatever it asks.
    static let headErrors: [APIError.Code] = [.uriTooLong, .headerTooLarge]

    let method: String
    let id: String
    let summary: String
    let access: Access
    let parameters: [OpenAPINode]
    let body: OpenAPINode?
    /// The answer that means it worked (200, or a sign-in's 302), then any other an operation gives
    /// besides its errors (a readiness probe's 503).
    let answers: [(status: Int, answer: OpenAPIAnswer)]
    /// The codes it can refuse with besides those of its access.
    let errors: [APIError.Code]

    init(
        _ method: String, _ id: String, _ summary: String, _ access: Access, parameters: [OpenAPINode] = [],
        body: OpenAPINode? = nil, ok: OpenAPIAnswer, status: Int = 200, also: [(status: Int, answer: OpenAPIAnswer)] = [],
        errors: [APIError.Code]
    ) {
        self.method = method
        self.id = id
        self.summary = summary
        self.access = access
        self.parameters = parameters
        self.body = body
        answers = [(status, ok)] + also
        self.errors = errors
    }

    var node: OpenAPINode {
        var operation: OpenAPINode = ["operationId": .string(id), "summary": .string(summary)]
        switch access {
        case .change: operation = operation.with("security", [["bearer": []], ["signInCookie": []]])
        case .scoped, .probe: operation = operation.with("security", [[:], ["bearer": []], ["signInCookie": []]])
        case .read, .session, .provider: break
        }
        if !parameters.isEmpty { operation = operation.with("parameters", OpenAPINode(.array(parameters.map(\.json)))) }
        if let body { operation = operation.with("requestBody", body) }
        return operation.with("responses", OpenAPI.responses(answers, errors: errors + access.errors))
    }
}

/// One answer of an operation: what it means, its media types with their schemas (none for an
/// answer without a body), and the headers it always carries besides the ones every answer has.
struct OpenAPIAnswer {
    let description: String
    private(set) var contents: [(type: String, schema: OpenAPINode)]
    let headers: [(name: String, description: String, schema: OpenAPINode)]

    init(_ description: String, _ type: String, _ schema: OpenAPINode, headers: [(String, String, OpenAPINode)] = []) {
        self.description = description
        contents = [(type, schema)]
        self.headers = headers.map { (name: $0.0, description: $0.1, schema: $0.2) }
    }

    /// An answer without a body (a 304).
    init(_ description: String, headers: [(String, String, OpenAPINode)] = []) {
        self.description = description
        contents = []
        self.headers = headers.map { (name: $0.0, description: $0.1, schema: $0.2) }
    }

    /// A JSON answer whose schema is a component of the document.
    static func json(_ description: String, _ schema: String) -> OpenAPIAnswer { OpenAPIAnswer(description, "application/json", OpenAPI.ref(schema)) }

    /// The same answer, which the request may also ask for as `type`.
    func or(_ type: String, _ schema: OpenAPINode) -> OpenAPIAnswer {
        var answer = self
        answer.contents.append((type, schema))
        return answer
    }

    var node: OpenAPINode {
        var answer: OpenAPINode = ["description": .string(description)]
        if !headers.isEmpty {
            answer = answer.with(
                "headers",
                OpenAPINode(
                    .object(
                        headers.map { header in
                            let node: OpenAPINode = ["description": .string(header.description), "required": true, "schema": header.schema]
                            return (header.name, node.json)
                        })))
        }
        guard !contents.isEmpty else { return answer }
        return answer.with("content", OpenAPINode(.object(contents.map { ($0.type, (["schema": $0.schema] as OpenAPINode).json) })))
    }
}

/// A JSON value written as a Swift literal; only this file uses it, to write the document.
struct OpenAPINode: ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByStringLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral
{
    var json: JSONValue

    init(_ json: JSONValue) { self.json = json }
    init(dictionaryLiteral elements: (String, OpenAPINode)...) { json = .object(elements.map { ($0.0, $0.1.json) }) }
    init(arrayLiteral elements: OpenAPINode...) { json = .array(elements.map(\.json)) }
    init(stringLiteral value: String) { json = .string(value) }
    init(integerLiteral value: Int) { json = .number(Double(value)) }
    init(floatLiteral value: Double) { json = .number(value) }
    init(booleanLiteral value: Bool) { json = .bool(value) }

    static func string(_ value: String) -> OpenAPINode { OpenAPINode(.string(value)) }
    static func number(_ value: Double) -> OpenAPINode { OpenAPINode(.number(value)) }
    static func bool(_ value: Bool) -> OpenAPINode { OpenAPINode(.bool(value)) }

    /// The object with `key` set (replaced where it was, appended where it was not).
    func with(_ key: String, _ value: OpenAPINode) -> OpenAPINode {
        guard case .object(var members) = json else { return self }
        if let index = members.firstIndex(where: { $0.0 == key }) {
            members[index].1 = value.json
        } else {
            members.append((key, value.json))
        }
        return OpenAPINode(.object(members))
    }

    /// Both objects' members, `other`'s last.
    func merging(_ other: OpenAPINode) -> OpenAPINode {
        guard case .object(let mine) = json, case .object(let theirs) = other.json else { return self }
        return OpenAPINode(.object(mine + theirs))
    }
}
