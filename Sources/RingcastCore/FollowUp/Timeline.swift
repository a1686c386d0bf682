/// A task's short history, for its page: when it was created, each state it entered, when it was
/// shown and hidden, each cancel, pause or resume asked of it and who asked, and when the server
/// stalled or abandoned it. The store records an entry in `commit` by comparing the task before and
/// after, so every path that changes a task (HTTP, WebSocket, the server's own deadlines, a
/// cluster's log) records the same entries with the command's time. Kept with the task (in its
/// stored form, so a restart keeps it) and bounded by `timelineEntries` (config); past that the
/// oldest entries after `created` go, so the page always knows when the task began.
/// Served by `GET /api/tasks/{id}/timeline`; never part of a snapshot or an event.
public struct TimelineEntry: Equatable, Sendable {
    public enum Event: String, Sendable {
        /// The task was made; `state` is the one it began in.
        case created
        /// It entered `state` (a publisher's answer, a timer's end, a lease running out: `stalled`).
        case state
        case shown, hidden
        /// Someone asked its publisher to `action` (cancel, pause, resume).
        case requested
        /// It stayed stalled past `abandonAfter` and the server ended it `failed`.
        case abandoned
    }

    /// Unix ms, the command's time.
    public var at: Double
    public var event: Event
    /// The state entered (`created`, `state`, `abandoned`).
    public var state: TaskState?
    /// What was asked (`requested`).
    public var action: TaskControl?
    /// Who did it; nil for the server's own changes.
    public var by: String?

    public init(at: Double, event: Event, state: TaskState? = nil, action: TaskControl? = nil, by: String? = nil) {
        self.at = at
        self.event = event
        self.state = state
        self.action = action
        self.by = by
    }

    func write(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("at")
        writer.number(at.rounded())
        writer.key("event")
        writer.string(event.rawValue)
        if let state {
            writer.key("state")
            writer.string(state.rawValue)
        }
        if let action {
            writer.key("action")
            writer.string(action.rawValue)
        }
        if let by {
            writer.key("by")
            writer.string(by)
        }
        writer.endObject()
    }

    /// An entry as `write` wrote it; nil when it is not one.
    init?(_ json: JSONValue) {
        guard let at = json.number("at"), case .string(let name)? = json["event"], let event = Event(rawValue: name) else { return nil }
        self.init(at: at, event: event)
        if case .string(let state)? = json["state"] { self.state = TaskState(rawValue: state) }
        if case .string(let action)? = json["action"] { self.action = TaskControl(rawValue: action) }
        if case .string(let by)? = json["by"] { self.by = by }
    }
}

extension TaskStore {
    /// The name a timeline entry records: whoever the command being applied is for.
    private var timelineBy: String? { principal == .server ? nil : principal.name }

    /// Adds the entries what changed from `old` to `task` makes (called by `commit`). The timeline
    /// is always the one held: a caller that commits the same copy twice (a timer's last tick, then
    /// its state) must not put back a timeline without the first commit's entry.
    func recordTimeline(_ task: inout TaskRecord, from old: TaskRecord?, now: Double) {
        task.timeline = old?.timeline ?? []
        if let action = requestBeingRecorded {
            requestBeingRecorded = nil
            appendTimeline(&task, TimelineEntry(at: now, event: .requested, action: action, by: timelineBy))
        }
        if let old {
            if old.state != task.state {
                let abandoned = old.state == .stalled && task.state == .failed && principal == .server
                appendTimeline(&task, TimelineEntry(at: now, event: abandoned ? .abandoned : .state, state: task.state, by: timelineBy))
            }
        } else {
            appendTimeline(&task, TimelineEntry(at: now, event: .created, state: task.state, by: timelineBy))
        }
        if (old?.visible ?? true) != task.visible {
            appendTimeline(&task, TimelineEntry(at: now, event: task.visible ? .shown : .hidden, by: timelineBy))
        }
    }

    private func appendTimeline(_ task: inout TaskRecord, _ entry: TimelineEntry) {
        task.timeline.append(entry)
        if task.timeline.count > timelineEntries {
            // The first entry (created) stays: the page reads when the task began from it.
            let keepFirst = task.timeline.first?.event == .created && timelineEntries > 1
            task.timeline.removeSubrange((keepFirst ? 1 : 0)..<(keepFirst ? 1 : 0) + task.timeline.count - timelineEntries)
        }
    }

    /// `GET /api/tasks/{id}/timeline`: `{"id", "entries": [{"at", "event", "state"?, "action"?, "by"?}, …]}`, oldest first.
    public func encodeTimeline(of id: String) throws(APIError) -> [UInt8] {
        guard let task = tasks[id] else { throw APIError(.notFound, "no task '\(id)'", field: "id") }
        var writer = JSONWriter(capacity: 64 + task.timeline.count * 64)
        writer.beginObject()
        writer.key("id")
        writer.string(id)
        writer.key("entries")
        writer.beginArray()
        for entry in task.timeline { entry.write(into: &writer) }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }
}

extension TaskRecord {
    /// The timeline in the task's stored form (`stored.timeline`).
    func writeTimelineStorage(into writer: inout JSONWriter) {
        guard !timeline.isEmpty else { return }
        writer.key("timeline")
        writer.beginArray()
        for entry in timeline { entry.write(into: &writer) }
        writer.endArray()
    }

    mutating func readTimelineStorage(_ stored: JSONValue) {
        guard case .array(let items)? = stored["timeline"] else { return }
        timeline = items.compactMap(TimelineEntry.init)
    }
}

/// A task's optional link (`url`): a CI run, a pull request. Only http and https, so a dashboard
/// that shows it as a link never runs a `javascript:` URL; no spaces or control characters, no
/// C1 controls or bidirectional overrides (which make a link read as another in the page that
/// shows it whole), and no `user@` before the host (which makes `https://ci.example.com@evil.test`
/// read as a link to the first host).
public enum TaskURL {
    public static let maxLength = 2000
    /// The same rule as `isValid`, for the OpenAPI document (schemathesis generates from it).
    public static let pattern =
        "^[Hh][Tt][Tt][Pp][Ss]?://[^\\x00-\\x20\\x7f-\\x9f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069/?#@]+([/?#][^\\x00-\\x20\\x7f-\\x9f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069]*)?$"

    /// Characters that change how text around them is shown without showing themselves: C0 and C1
    /// controls, and the bidirectional marks, embeddings, overrides and isolates.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0...0x20, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    /// What is wrong with `text` as a task's link, or nil when nothing is.
    static func problem(_ text: String) -> String? {
        let scalars = Array(text.unicodeScalars)
        if scalars.count > maxLength { return "is longer than \(maxLength) characters" }
        if scalars.contains(where: { $0.value > 0x20 && isHidden($0) }) {
            return "holds a control character or a bidirectional override (U+0080–U+009F, U+202A–U+202E, U+2066–U+2069): send the link as plain text"
        }
        if scalars.contains(where: isHidden) { return "holds a space or control character: percent-encode it" }
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") {
            rest = text.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            rest = text.dropFirst(7)
        } else {
            return "is not an http or https link"
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.isEmpty { return "names no host" }
        if authority.contains("@") { return "names a user before its host ('user@host'): send the link without it" }
        return nil
    }

    public static func isValid(_ text: String) -> Bool { problem(text) == nil }

    static func parse(_ text: String?) throws(APIError) -> String? {
        guard let text else { return nil }
        if let problem = problem(text) {
            // The echo is cleaned too: an error message is shown whole by whoever reads it.
            let shown = String(String.UnicodeScalarView(text.unicodeScalars.prefix(140).map { isHidden($0) && $0 != " " ? "\u{FFFD}" : $0 }))
            throw APIError(
                .invalidField,
                "url '\(shown)' \(problem); send one like \"https://ci.example.com/runs/42\"",
                field: "url")
        }
        return text
    }
}
