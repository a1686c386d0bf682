/// A change a publisher asks for, parsed and validated, not yet applied.
public enum Command: Equatable, Sendable {
    case update(id: String, patch: TaskPatch)
    case show(id: String, options: ShowOptions)
    case hide(id: String)
    case startTimer(id: String, spec: TimerStart)
    case pauseTimer(id: String)
    case resumeTimer(id: String)
    case cancelTimer(id: String)
    case remove(id: String)
    /// Lines for the task's log tail (`POST /api/tasks/{id}/log`).
    case appendLog(id: String, lines: [String])
    /// A watcher asks the task's publisher to cancel, pause or resume (`POST /api/tasks/{id}/cancel` …).
    case requestControl(id: String, action: TaskControl)

    public var id: String {
        switch self {
        case .update(let id, _), .show(let id, _), .hide(let id), .startTimer(let id, _),
            .pauseTimer(let id), .resumeTimer(let id), .cancelTimer(let id), .remove(let id),
            .appendLog(let id, _), .requestControl(let id, _):
            return id
        }
    }

    /// Whether applying it to an unknown id creates a task (the others need one that exists).
    public var createsTask: Bool {
        switch self {
        case .update, .show, .startTimer: return true
        case .hide, .pauseTimer, .resumeTimer, .cancelTimer, .remove, .appendLog, .requestControl: return false
        }
    }

    /// Event types accepted by `POST /api/events` and on a publishing WebSocket.
    public static let eventTypes = ["update", "progress", "state", "show", "hide", "timer", "pause", "resume", "cancel", "remove", "log"]

    /// Parses one event of a batch: `{"type": "update", "id": "ci.build", "progress": 0.4}`.
    public static func parse(event: JSONValue) throws(APIError) -> Command {
        guard case .object(let members) = event else {
            throw APIError(.invalidEvent, "an event must be a JSON object, not \(event.typeName)")
        }
        guard case .string(let type)? = event["type"] else {
            throw APIError(.missingField, "an event needs \"type\", one of: \(eventTypes.joined(separator: ", "))", field: "type")
        }
        guard case .string(let id)? = event["id"] else {
            throw APIError(.missingField, "an event needs \"id\", the task id", field: "id")
        }
        try validateID(id)
        let fields = JSONValue.object(members.filter { $0.0 != "type" && $0.0 != "id" })
        switch type {
        case "update", "progress", "state": return .update(id: id, patch: try TaskPatch.parse(fields))
        case "show": return .show(id: id, options: try ShowOptions.parse(fields))
        case "hide":
            try expectNoFields(fields, for: "hide")
            return .hide(id: id)
        case "timer": return .startTimer(id: id, spec: try TimerStart.parse(fields))
        case "pause":
            try expectNoFields(fields, for: "pause")
            return .pauseTimer(id: id)
        case "resume":
            try expectNoFields(fields, for: "resume")
            return .resumeTimer(id: id)
        case "cancel":
            try expectNoFields(fields, for: "cancel")
            return .cancelTimer(id: id)
        case "remove":
            try expectNoFields(fields, for: "remove")
            return .remove(id: id)
        case "log": return .appendLog(id: id, lines: try LogTail.parseLines(fields))
        default:
            throw APIError(.invalidEvent, "unknown event type '\(type)': use one of \(eventTypes.joined(separator: ", "))", field: "type")
        }
    }

    public static func validateID(_ id: String) throws(APIError) {
        guard TaskID.isValid(id) else {
            throw APIError(
                .invalidID, "task id '\(id.prefix(140))' is not valid: 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit",
                field: "id")
        }
    }

    static func expectNoFields(_ fields: JSONValue, for type: String) throws(APIError) {
        guard case .object(let members) = fields else {
            throw APIError(.invalidJSON, "'\(type)' takes no fields: send no body or {}, not \(fields.typeName)")
        }
        if let first = members.first {
            throw APIError(.unknownField, "'\(type)' takes no field '\(first.0)'", field: first.0)
        }
    }
}

/// Fields of an update; `.some(nil)` clears a field, `nil` leaves it as it is.
public struct TaskPatch: Equatable, Sendable {
    public var title: String?
    public var detail: String??
    public var progress: Double??
    public var completed: Double??
    public var total: Double??
    public var state: TaskState?
    public var visible: Bool?
    public var hideAfter: Double??
    public var modal: Bool?
    public var parent: String??
    public var staleAfter: Double??
    /// The controls the publisher offers; `[]` (or null) offers none.
    public var controls: [TaskControl]?
    /// Seconds a stalled task may stay stalled before it ends failed; null: the server's default.
    public var abandonAfter: Double??
    /// The kind its runs are remembered under (History.swift); null: the id without its trailing number.
    public var kind: String??
    /// A link to show with the task (http or https); null clears it.
    public var url: String??

    public init() {}

    public static let fields = [
        "title", "detail", "progress", "completed", "total", "state", "visible", "hideAfter", "modal", "parent", "staleAfter",
        "controls", "abandonAfter", "kind", "url",
    ]
    /// The largest `completed` or `total`: 2^53, the largest unit count a browser holds exactly, and
    /// small enough that a parent's sum over its children stays finite.
    public static let maxUnits = 9_007_199_254_740_992.0

    public static func parse(_ body: JSONValue) throws(APIError) -> TaskPatch {
        let object = try FieldReader(body, allowed: fields)
        var patch = TaskPatch()
        patch.title = try object.string("title", maxLength: 200)
        patch.detail = try object.nullable("detail") { () throws(APIError) in try object.string("detail", maxLength: 1000) }
        patch.progress = try object.nullable("progress") { () throws(APIError) in try object.number("progress", in: 0...1, hint: "send 0.42 for 42%")
        }
        patch.completed = try object.nullable("completed") { () throws(APIError) in
            try object.number("completed", in: 0...maxUnits, hint: "at most 2^53")
        }
        patch.total = try object.nullable("total") { () throws(APIError) in
            try object.number("total", in: Double.leastNonzeroMagnitude...maxUnits, hint: "above 0, at most 2^53")
        }
        if let state = try object.string("state", maxLength: 20) {
            guard let parsed = TaskState(rawValue: state), TaskState.settable.contains(parsed) else {
                throw APIError(
                    .invalidField, "state '\(state)' is not one of \(TaskState.settable.map(\.rawValue).joined(separator: ", "))", field: "state")
            }
            patch.state = parsed
        }
        patch.visible = try object.bool("visible")
        patch.hideAfter = try object.nullable("hideAfter") { () throws(APIError) in
            try object.number("hideAfter", in: 0.001...31_536_000, hint: "seconds, above 0")
        }
        patch.modal = try object.bool("modal")
        patch.parent = try object.nullable("parent") { () throws(APIError) in
            guard let parent = try object.string("parent", maxLength: 128) else { return nil }
            guard TaskID.isValid(parent) else { throw APIError(.invalidField, "parent '\(parent)' is not a valid task id", field: "parent") }
            return parent
        }
        patch.staleAfter = try object.nullable("staleAfter") { () throws(APIError) in
            try object.number("staleAfter", in: 0.001...31_536_000, hint: "seconds, above 0")
        }
        patch.controls = try TaskControl.parseList(object.members["controls"])
        patch.abandonAfter = try object.nullable("abandonAfter") { () throws(APIError) in
            try object.number("abandonAfter", in: 0.001...31_536_000, hint: "seconds, above 0")
        }
        patch.kind = try object.nullable("kind") { () throws(APIError) in try TaskKind.parse(object.string("kind", maxLength: 128)) }
        patch.url = try object.nullable("url") { () throws(APIError) in try TaskURL.parse(object.string("url", maxLength: TaskURL.maxLength)) }
        return patch
    }
}

/// `POST /api/tasks/{id}/show` options.
public struct ShowOptions: Equatable, Sendable {
    public var hideAfter: Double?
    public var modal: Bool?
    public var detail: String?

    public init(hideAfter: Double? = nil, modal: Bool? = nil, detail: String? = nil) {
        self.hideAfter = hideAfter
        self.modal = modal
        self.detail = detail
    }

    public static func parse(_ body: JSONValue) throws(APIError) -> ShowOptions {
        let object = try FieldReader(body, allowed: ["hideAfter", "modal", "detail"])
        return ShowOptions(
            hideAfter: try object.number("hideAfter", in: 0.001...31_536_000, hint: "seconds, above 0"),
            modal: try object.bool("modal"),
            detail: try object.string("detail", maxLength: 1000)
        )
    }
}

/// `POST /api/timers/{id}`: a countdown of `seconds`, ticking every `interval`.
public struct TimerStart: Equatable, Sendable {
    public var seconds: Double
    public var interval: Double = 1
    public var title: String?
    public var hideAfter: Double?
    /// Unix ms to start at; timers given the same value share a phase. Default: when the request arrives.
    public var startAt: Double?

    public init(seconds: Double, interval: Double = 1, title: String? = nil, hideAfter: Double? = nil, startAt: Double? = nil) {
        self.seconds = seconds
        self.interval = interval
        self.title = title
        self.hideAfter = hideAfter
        self.startAt = startAt
    }

    public static func parse(_ body: JSONValue) throws(APIError) -> TimerStart {
        let object = try FieldReader(body, allowed: ["seconds", "interval", "title", "hideAfter", "startAt"])
        guard let seconds = try object.number("seconds", in: 0.001...31_536_000, hint: "the countdown's length in seconds") else {
            throw APIError(.missingField, "a timer needs \"seconds\", its length (e.g. {\"seconds\": 180})", field: "seconds")
        }
        let interval = try object.number("interval", in: 0.01...86_400, hint: "seconds between ticks, at least 0.01") ?? 1
        return TimerStart(
            seconds: seconds, interval: interval,
            title: try object.string("title", maxLength: 200),
            hideAfter: try object.number("hideAfter", in: 0.001...31_536_000, hint: "seconds, above 0"),
            startAt: try object.number("startAt", in: UnixTime.range, hint: "Unix milliseconds, 1970 through 9999")
        )
    }
}

/// Typed access to a JSON object's members, with errors that name the field and the expected type.
struct FieldReader {
    let members: [String: JSONValue]

    init(_ value: JSONValue, allowed: [String]) throws(APIError) {
        guard case .object(let pairs) = value else {
            throw APIError(.invalidJSON, "the body must be a JSON object, not \(value.typeName)")
        }
        var members: [String: JSONValue] = [:]
        for (key, member) in pairs {
            guard allowed.contains(key) else {
                throw APIError(.unknownField, "unknown field '\(key)': expected one of \(allowed.joined(separator: ", "))", field: key)
            }
            members[key] = member
        }
        self.members = members
    }

    /// Present-and-null becomes `.some(nil)`; absent stays `nil`.
    func nullable<T>(_ key: String, _ read: () throws(APIError) -> T?) throws(APIError) -> T?? {
        if members[key] == .null { return .some(nil) }
        guard let value = try read() else { return nil }
        return .some(value)
    }

    func string(_ key: String, maxLength: Int) throws(APIError) -> String? {
        guard let value = members[key] else { return nil }
        guard case .string(let text) = value else {
            throw APIError(.invalidField, "\(key) must be a string, not \(value.typeName)", field: key)
        }
        // Counted in Unicode scalars, as JSON Schema's maxLength counts (OpenAPI.swift documents it so).
        guard text.unicodeScalars.count <= maxLength else {
            throw APIError(.invalidField, "\(key) is longer than \(maxLength) characters", field: key)
        }
        return text
    }

    func number(_ key: String, in range: ClosedRange<Double>, hint: String? = nil) throws(APIError) -> Double? {
        guard let value = members[key] else { return nil }
        guard case .number(let number) = value else {
            throw APIError(.invalidField, "\(key) must be a number, not \(value.typeName)" + (hint.map { " (\($0))" } ?? ""), field: key)
        }
        guard range.contains(number) else {
            throw APIError(.invalidField, "\(key) \(number) is out of range" + (hint.map { ": \($0)" } ?? ""), field: key)
        }
        return number
    }

    func bool(_ key: String) throws(APIError) -> Bool? {
        guard let value = members[key] else { return nil }
        guard case .bool(let flag) = value else {
            throw APIError(.invalidField, "\(key) must be true or false, not \(value.typeName)", field: key)
        }
        return flag
    }
}

extension Command {
    /// The command as the event `parse(event:)` reads back: what a cluster writes to its shared log.
    public var encodedEvent: JSONValue {
        var fields: [(String, JSONValue)] = []
        func add(_ key: String, _ value: JSONValue?) { if let value { fields.append((key, value)) } }
        func add(_ key: String, _ value: Double?) { add(key, value.map(JSONValue.number)) }
        func add(_ key: String, _ value: String?) { add(key, value.map(JSONValue.string)) }
        func add(_ key: String, _ value: Bool?) { add(key, value.map(JSONValue.bool)) }
        /// `.some(nil)` clears the field: it is sent as null.
        func add<T>(_ key: String, _ value: T??, _ encode: (T) -> JSONValue) {
            guard let value else { return }
            fields.append((key, value.map(encode) ?? .null))
        }
        let type: String
        switch self {
        case .update(_, let patch):
            type = "update"
            add("title", patch.title)
            add("detail", patch.detail, JSONValue.string)
            add("progress", patch.progress, JSONValue.number)
            add("completed", patch.completed, JSONValue.number)
            add("total", patch.total, JSONValue.number)
            add("state", patch.state?.rawValue)
            add("visible", patch.visible)
            add("hideAfter", patch.hideAfter, JSONValue.number)
            add("modal", patch.modal)
            add("parent", patch.parent, JSONValue.string)
            add("staleAfter", patch.staleAfter, JSONValue.number)
            add("controls", patch.controls.map { JSONValue.array($0.map { .string($0.rawValue) }) })
            add("abandonAfter", patch.abandonAfter, JSONValue.number)
            add("kind", patch.kind, JSONValue.string)
            add("url", patch.url, JSONValue.string)
        case .show(_, let options):
            type = "show"
            add("hideAfter", options.hideAfter)
            add("modal", options.modal)
            add("detail", options.detail)
        case .hide: type = "hide"
        case .startTimer(_, let spec):
            type = "timer"
            add("seconds", spec.seconds)
            add("interval", spec.interval)
            add("title", spec.title)
            add("hideAfter", spec.hideAfter)
            add("startAt", spec.startAt)
        case .pauseTimer: type = "pause"
        case .resumeTimer: type = "resume"
        case .cancelTimer: type = "cancel"
        case .remove: type = "remove"
        case .appendLog(_, let lines):
            type = "log"
            add("lines", JSONValue.array(lines.map(JSONValue.string)))
        case .requestControl(_, let action):
            // Not an event a publisher may send: only a cluster's log carries it (`LogEntry`).
            type = Command.controlRequestType
            add("action", action.rawValue)
        }
        return .object([("type", .string(type)), ("id", .string(id))] + fields)
    }

    /// The type a control request has in a cluster's log.
    static let controlRequestType = "control-request"

    /// A command as a cluster's log holds it: an event `parse(event:)` takes, or a control request.
    public static func parse(logged event: JSONValue) throws(APIError) -> Command {
        guard event["type"] == .string(controlRequestType) else { return try parse(event: event) }
        guard case .string(let id)? = event["id"], case .string(let name)? = event["action"], let action = TaskControl(rawValue: name) else {
            throw APIError(.invalidEvent, "a logged control request needs an id and an action")
        }
        return .requestControl(id: id, action: action)
    }
}
