/// An HTTP request as the API sees it: transport details already stripped.
public struct APIRequest: Sendable {
    public var method: String
    /// The full path, e.g. `/api/tasks/ci.build-42/show`, without the query.
    public var path: String
    public var query: [String: String]
    public var body: [UInt8]

    public init(method: String, path: String, query: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
    }
}

public struct APIResponse {
    public var status: Int
    public var body: [UInt8]
    /// What the request changed, for the fan-out.
    public var events: [OutboundEvent]

    init(status: Int = 200, body: [UInt8], events: [OutboundEvent] = []) {
        self.status = status
        self.body = body
        self.events = events
    }

    init(_ error: APIError) { self.init(status: error.status, body: error.encodedBody) }
}

/// The outcome of a batch of events: how many were applied, and why each of the others was not.
public struct BatchResult {
    public var applied = 0
    public var errors: [(index: Int, error: APIError)] = []
    public var events: [OutboundEvent] = []
}

/// The HTTP API and the publishing half of the WebSocket protocol, over one TaskStore.
/// Not thread-safe: the service thread owns it, as it owns the store.
public final class API {
    public let store: TaskStore
    public let policy: PublishPolicy
    public static let maxBatchEvents = 10_000

    public init(store: TaskStore, policy: PublishPolicy = PublishPolicy()) {
        self.store = store
        self.policy = policy
    }

    /// Answers one request. Reads are open to all; each change is checked against `credential`.
    public func handle(_ request: APIRequest, now: Double, credential: Credential = .anonymousLocal) -> APIResponse {
        do {
            return try route(request, now: now, credential: credential)
        } catch {
            return APIResponse(error)
        }
    }

    private func route(_ request: APIRequest, now: Double, credential: Credential) throws(APIError) -> APIResponse {
        // Who may not publish at all hears so before anything about their request's body.
        if request.method != "GET", credential == .missing || credential == .invalid {
            try policy.authorize(credential, id: "")
        }
        func apply(_ command: Command, now: Double) throws(APIError) -> APIResponse {
            try policy.authorize(credential, id: command.id)
            return try self.apply(command, now: now)
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard parts.first == "api", parts.count >= 2 else { throw routeNotFound(request.path) }
        switch (parts[1], parts.count) {
        case ("tasks", 2):
            try allow(request, "GET")
            let watch = try WatchSet.parse(request.query["watch"]).get()
            return APIResponse(body: store.encodeTaskList(matching: watch, now: now))
        case ("tasks", 3):
            let id = parts[2]
            try Command.validateID(id)
            switch request.method {
            case "GET":
                guard let task = store.task(id) else { throw APIError(.notFound, "no task '\(id)'", field: "id") }
                return APIResponse(body: task.encodedObject(now: now))
            case "POST", "PUT", "PATCH":
                return try apply(.update(id: id, patch: TaskPatch.parse(try body(request))), now: now)
            case "DELETE":
                return try apply(.remove(id: id), now: now)
            default:
                throw methodNotAllowed(request, "GET, POST, DELETE")
            }
        case ("tasks", 4):
            let id = parts[2]
            try Command.validateID(id)
            try allow(request, "POST")
            switch parts[3] {
            case "show": return try apply(.show(id: id, options: ShowOptions.parse(try body(request))), now: now)
            case "hide":
                try Command.expectNoFields(try body(request), for: "hide")
                return try apply(.hide(id: id), now: now)
            default: throw routeNotFound(request.path)
            }
        case ("timers", 3):
            let id = parts[2]
            try Command.validateID(id)
            try allow(request, "POST")
            return try apply(.startTimer(id: id, spec: TimerStart.parse(try body(request))), now: now)
        case ("timers", 4):
            let id = parts[2]
            try Command.validateID(id)
            try allow(request, "POST")
            try Command.expectNoFields(try body(request), for: parts[3])
            switch parts[3] {
            case "pause": return try apply(.pauseTimer(id: id), now: now)
            case "resume": return try apply(.resumeTimer(id: id), now: now)
            case "cancel": return try apply(.cancelTimer(id: id), now: now)
            default: throw routeNotFound(request.path)
            }
        case ("events", 2):
            try allow(request, "POST")
            let commands = try parseBatch(try JSONParser.parseForAPI(request.body))
            for (index, command) in commands.enumerated() {
                do {
                    try policy.authorize(credential, id: command.id)
                } catch {
                    throw error.within("events[\(index)]")
                }
            }
            let result = applyBatch(commands, now: now)
            return APIResponse(body: encodeBatchAnswer(result), events: result.events)
        default:
            throw routeNotFound(request.path)
        }
    }

    private func apply(_ command: Command, now: Double) throws(APIError) -> APIResponse {
        let change = try store.apply(command, now: now)
        var writer = JSONWriter(capacity: 384)
        writer.beginObject()
        writer.key("seq"); writer.number(Int(store.seq))
        if let task = change.task {
            writer.key("task")
            writer.beginObject()
            task.writeFields(into: &writer, now: now)
            writer.endObject()
        } else {
            writer.key("removed"); writer.string(command.id)
        }
        writer.endObject()
        return APIResponse(body: writer.bytes, events: change.events)
    }

    /// Parses a batch (an array of events, or one event object) in full before anything is applied:
    /// a malformed batch changes nothing.
    public func parseBatch(_ json: JSONValue) throws(APIError) -> [Command] {
        let items: [JSONValue]
        switch json {
        case let .array(elements): items = elements
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

    /// Applies commands in order; one that fails (an unknown task, a finished timer) does not stop the rest.
    public func applyBatch(_ commands: [Command], now: Double) -> BatchResult {
        var result = BatchResult()
        for (index, command) in commands.enumerated() {
            do {
                result.events += try store.apply(command, now: now).events
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
        writer.key("seq"); writer.number(Int(store.seq))
        writer.key("applied"); writer.number(result.applied)
        writer.key("errors")
        writer.beginArray()
        for (index, error) in result.errors {
            writer.beginObject()
            writer.key("index"); writer.number(index)
            error.writeFields(into: &writer)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    public func healthBody(watchers: Int) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("ok"); writer.bool(true)
        writer.key("protocol"); writer.number(ProtocolInfo.version)
        writer.key("epoch"); writer.string(store.epoch)
        writer.key("seq"); writer.number(Int(store.seq))
        writer.key("tasks"); writer.number(store.tasks.count)
        writer.key("watchers"); writer.number(watchers)
        writer.endObject()
        return writer.bytes
    }

    private func body(_ request: APIRequest) throws(APIError) -> JSONValue {
        if request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .object([]) }
        return try JSONParser.parseForAPI(request.body)
    }

    private func allow(_ request: APIRequest, _ method: String) throws(APIError) {
        guard request.method == method else { throw methodNotAllowed(request, method) }
    }

    private func methodNotAllowed(_ request: APIRequest, _ allowed: String) -> APIError {
        APIError(.methodNotAllowed, "\(request.method) is not allowed on \(request.path); use \(allowed)")
    }

    private func routeNotFound(_ path: String) -> APIError {
        APIError(.notFound, "no endpoint \(path); see docs/PROTOCOL.md for the API")
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
