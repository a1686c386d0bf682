/// What a watcher may ask of a task's publisher: `POST /api/tasks/{id}/cancel`, `/pause`,
/// `/resume`. The task offers them in `controls`; the request is carried to every WebSocket that
/// published the task as `{"type":"control","id":…,"action":…,"seq":…}`, and the publisher answers
/// by publishing a state (cancelled, paused, running), which clears the request.
public enum TaskControl: String, Sendable, CaseIterable {
    case cancel, pause, resume

    /// `"controls": ["cancel", "pause"]` (duplicates dropped); null or `[]` offers none.
    static func parseList(_ value: JSONValue?) throws(APIError) -> [TaskControl]? {
        guard let value else { return nil }
        if value == .null { return [] }
        guard case .array(let items) = value else {
            throw APIError(.invalidField, "controls must be a list like [\"cancel\", \"pause\"], not \(value.typeName)", field: "controls")
        }
        var controls: [TaskControl] = []
        for (index, item) in items.enumerated() {
            guard case .string(let name) = item, let control = TaskControl(rawValue: name) else {
                throw APIError(
                    .invalidField, "controls[\(index)] is not one of \(allCases.map(\.rawValue).joined(separator: ", "))", field: "controls")
            }
            if !controls.contains(control) { controls.append(control) }
        }
        return controls
    }
}

/// The follow-up fields in a task's encoding (controls, requests, abandonment, log count): each left out while unset, so a task that uses
/// none of them is encoded as before.
extension TaskRecord {
    func writeFollowUpFields(into writer: inout JSONWriter) {
        if !controls.isEmpty {
            writer.key("controls")
            writer.beginArray()
            for control in controls { writer.string(control.rawValue) }
            writer.endArray()
        }
        if cancelRequested {
            writer.key("cancelRequested")
            writer.bool(true)
        }
        if pauseRequested {
            writer.key("pauseRequested")
            writer.bool(true)
        }
        if requestWaiting {
            writer.key("requestWaiting")
            writer.bool(true)
        }
        if let abandonAfter {
            writer.key("abandonAfter")
            writer.number(abandonAfter)
        }
        if logCount > 0 {
            writer.key("logCount")
            writer.number(logCount)
        }
    }

    /// The same fields as `encodedForStorage` wrote them (`stalledAt` in its `stored` part).
    mutating func readFollowUpFields(_ json: JSONValue, stored: JSONValue) {
        if case .array(let names)? = json["controls"] {
            controls = names.compactMap {
                if case .string(let name) = $0 { return TaskControl(rawValue: name) }
                return nil
            }
        }
        if case .bool(true)? = json["cancelRequested"] { cancelRequested = true }
        if case .bool(true)? = json["pauseRequested"] { pauseRequested = true }
        if case .bool(true)? = json["requestWaiting"] { requestWaiting = true }
        abandonAfter = json.number("abandonAfter")
        logCount = json.number("logCount").flatMap(Int.init(exactly:)) ?? 0
        stalledAt = stored.number("stalledAt")
    }
}

extension TaskStore {
    /// Marks the request on the task (the event tells dashboards "cancelling…"); refused with 409
    /// when the task does not offer the control or cannot take it in its state.
    func requestControl(_ id: String, _ action: TaskControl, now: Double) throws(APIError) -> Change {
        guard var task = tasks[id] else { throw notFound(id) }
        guard task.controls.contains(action) else {
            let offered = task.controls.isEmpty ? "offers no controls" : "offers only \(task.controls.map(\.rawValue).joined(separator: ", "))"
            throw APIError(
                .conflict, "task '\(id)' does not offer \(action.rawValue): its publisher \(offered) (the task's \"controls\")", field: "id")
        }
        guard !task.state.isTerminal else {
            throw APIError(.conflict, "task '\(id)' is already \(task.state.rawValue): there is nothing to \(action.rawValue)", field: "id")
        }
        switch action {
        case .cancel:
            task.cancelRequested = true
        case .pause:
            guard task.state != .paused else {
                throw APIError(.conflict, "task '\(id)' is already paused: resume it with POST /api/tasks/\(id)/resume", field: "id")
            }
            task.pauseRequested = true
        case .resume:
            guard task.state == .paused || task.pauseRequested else {
                throw APIError(.conflict, "task '\(id)' is not paused (it is \(task.state.rawValue)): there is nothing to resume", field: "id")
            }
            task.pauseRequested = false
        }
        task.requestWaiting = marksWaitingRequests && !requestReachesPublisher
        noteChange(&task, .request, "asked to \(action.rawValue)")
        requestBeingRecorded = action
        return commit(task, .state, now: now)
    }

    /// A publisher's WebSocket took the request that waited on task `id` (it published the task,
    /// and was sent the request then): every viewer stops saying it waits.
    func requestTaken(_ id: String, now: Double) -> [OutboundEvent] {
        guard var task = tasks[id], task.requestWaiting else { return [] }
        task.requestWaiting = false
        return commit(task, .state, now: now).events
    }

    /// What every commit keeps true of the follow-up fields: a finished task has nothing left to
    /// cancel or pause, and `stalledAt` says since when a stalled task has been stalled.
    func settleFollowUpFields(_ task: inout TaskRecord, now: Double) {
        if task.state.isTerminal {
            task.cancelRequested = false
            task.pauseRequested = false
        }
        if !task.cancelRequested && !task.pauseRequested { task.requestWaiting = false }
        if task.state == .stalled {
            if task.stalledAt == nil { task.stalledAt = now }
        } else {
            task.stalledAt = nil
        }
    }
}

/// Where a control frame for one publisher socket goes: the transport's, which carries the frame
/// to the socket's own service thread. Any thread may call `send`.
public protocol ControlSink: AnyObject, Sendable {
    func send(_ frame: [UInt8])
}

/// A control frame on its way to one publisher's socket; it is sent with the answer it belongs to
/// (once storage has kept the request).
public struct ControlDelivery: Sendable {
    let sink: ControlSink
    let frame: [UInt8]

    public func send() { sink.send(frame) }
}

/// Which open WebSockets of this node published which tasks: where a control request goes, and
/// whose leased tasks stall when a publisher's socket closes. Touched only by the API's owner.
public final class PublisherSockets: @unchecked Sendable {
    // @unchecked Sendable: lives in the API, touched only under the state's lock.
    private var sinks: [UInt64: ControlSink] = [:]
    private var tasksBySocket: [UInt64: Set<String>] = [:]
    private var socketsByTask: [String: Set<UInt64>] = [:]
    private var lastKey: UInt64 = 0

    public init() {}

    func newKey() -> UInt64 {
        lastKey += 1
        return lastKey
    }

    func opened(_ key: UInt64, sink: ControlSink) { sinks[key] = sink }

    /// Records that socket `key` published task `id`; true the first time it does.
    func published(_ id: String, by key: UInt64) -> Bool {
        let first = tasksBySocket[key, default: []].insert(id).inserted
        if first { socketsByTask[id, default: []].insert(key) }
        return first
    }

    func taskCount(of key: UInt64) -> Int { tasksBySocket[key]?.count ?? 0 }

    /// Drops what socket `key` remembers of tasks that no longer exist.
    func prune(_ key: UInt64, keeping exists: (String) -> Bool) {
        for id in tasksBySocket[key] ?? [] where !exists(id) { forget(id) }
    }

    /// The socket is gone: the tasks it published that no other open socket published too.
    func closed(_ key: UInt64) -> [String] {
        sinks.removeValue(forKey: key)
        let ids = tasksBySocket.removeValue(forKey: key) ?? []
        var orphans: [String] = []
        for id in ids.sorted() {
            socketsByTask[id]?.remove(key)
            if socketsByTask[id]?.isEmpty ?? true {
                socketsByTask.removeValue(forKey: id)
                orphans.append(id)
            }
        }
        return orphans
    }

    func forget(_ id: String) {
        for key in socketsByTask.removeValue(forKey: id) ?? [] { tasksBySocket[key]?.remove(id) }
    }

    /// The open sockets that published `id`, oldest first.
    func sinks(for id: String) -> [ControlSink] {
        (socketsByTask[id] ?? []).sorted().compactMap { sinks[$0] }
    }

    public var openCount: Int { sinks.count }
}

extension API {
    /// The frame a publisher receives: `{"type":"control","id":…,"action":…,"seq":…}`.
    static func controlFrame(id: String, action: TaskControl, seq: UInt64, by: String? = nil) -> [UInt8] {
        var writer = JSONWriter(capacity: 96)
        writer.beginObject()
        writer.key("type")
        writer.string("control")
        writer.key("id")
        writer.string(id)
        writer.key("action")
        writer.string(action.rawValue)
        writer.key("seq")
        writer.number(Int(seq))
        if let by {
            writer.key("by")
            writer.string(by)
        }
        writer.endObject()
        return writer.bytes
    }

    /// `POST /api/tasks/{id}/cancel` (or pause, resume): the request is marked on the task, and
    /// the answer — `{"seq", "task", "delivered"}`, without `task` for a caller that may not read
    /// it — carries a control frame for every open socket
    /// of this node that published the task (in a cluster, every node delivers to its own).
    func answerControl(_ id: String, _ action: TaskControl, by principal: Principal, showingTask: Bool = true, now: Double) throws(APIError)
        -> APIResponse
    {
        // Known on this node only, so a cluster leaves it unmarked (`marksWaitingRequests`).
        store.requestReachesPublisher = !publisherSockets.sinks(for: id).isEmpty
        let change = try apply(.requestControl(id: id, action: action), by: principal, now: now)
        let frame = API.controlFrame(id: id, action: action, seq: store.seq, by: change.task?.by)
        let deliveries = publisherSockets.sinks(for: id).map { ControlDelivery(sink: $0, frame: frame) }
        followUpMetrics.controlRequests += 1
        var writer = JSONWriter(capacity: 384)
        writer.beginObject()
        writeAnswerFields(change, id: id, into: &writer, showingTask: showingTask, now: now)
        writer.key("delivered")
        writer.number(deliveries.count)
        writer.endObject()
        var response = APIResponse(body: writer.bytes, events: change.events)
        response.controls = deliveries
        return response
    }

    /// A socket opened: control requests for the tasks it publishes reach it through `sink`.
    public func socketOpened(_ session: SocketSession, sink: ControlSink) {
        publisherSockets.opened(session.key, sink: sink)
    }

    /// A socket closed. The running tasks with a lease (`staleAfter`) that it alone published turn
    /// `stalled` at once: their publisher is gone. A stopping server passes `stallTasks: false`.
    public func socketClosed(_ session: SocketSession, now: Double, stallTasks: Bool = true) -> [OutboundEvent] {
        let orphans = publisherSockets.closed(session.key)
        guard stallTasks else { return [] }
        return orphans.flatMap { store.stallAtOnce($0, now: now) }
    }

    /// After socket `key` of this node published `commands`: the first time it publishes a task
    /// that has a request waiting (asked before this socket was there), the request's frame, for
    /// it alone.
    public func notePublished(_ commands: [Command], by key: UInt64) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        for command in commands {
            if case .remove = command { continue }
            guard publisherSockets.published(command.id, by: key) else { continue }
            if publisherSockets.taskCount(of: key) > 2 * store.tasks.count + 1024 {
                publisherSockets.prune(key) { store.task($0) != nil }
            }
            guard let task = store.task(command.id) else { continue }
            if task.cancelRequested { frames.append(API.controlFrame(id: task.id, action: .cancel, seq: task.seq)) }
            if task.pauseRequested { frames.append(API.controlFrame(id: task.id, action: .pause, seq: task.seq)) }
        }
        return frames
    }
}
