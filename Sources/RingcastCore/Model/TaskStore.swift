/// What an applied command changed: the task as it now is (nil once removed) and the events to push.
public struct Change {
    public let task: TaskRecord?
    public let events: [OutboundEvent]
}

/// All tasks, the sequence, removals and the server's own deadlines (auto-hide, timer ticks, leases).
/// Not thread-safe: the server touches it only on its service thread.
public final class TaskStore {
    public private(set) var epoch: String
    public private(set) var seq: UInt64
    public private(set) var tasks: [String: TaskRecord] = [:]
    /// Removed ids and the seq of their removal, so a resuming watcher learns of them.
    private var removals: [String: UInt64] = [:]
    /// Resuming from a seq below this needs a full snapshot: removals older than it were forgotten.
    public private(set) var removalHorizon: UInt64 = 0
    public let maxRemembered: Int
    /// Entries of each task's timeline kept (config `timelineEntries`).
    public var timelineEntries = ServerConfig().timelineEntries
    /// The cancel, pause or resume the next commit records on the timeline (Timeline.swift).
    var requestBeingRecorded: TaskControl?
    /// Set by the API before it applies a control request: whether a publisher's WebSocket on this
    /// node will be sent it (if not, the task says `requestWaiting`).
    var requestReachesPublisher = true
    /// Whether a request no publisher of this node will be sent is marked `requestWaiting`. Off in a
    /// cluster: each node knows only its own sockets, and every node must hold the same task.
    public var marksWaitingRequests = true
    /// Seconds after which a finished or hidden, untouched task is removed (config `retentionSeconds`).
    public let retentionSeconds: Double
    /// The most tasks held at once (config `maxTasks`).
    public let maxTasks: Int
    /// Tasks removed because their retention ran out.
    public private(set) var retiredCount = 0
    private var deadlines = DeadlineQueue()
    /// Parent id → ids of the tasks that name it.
    private var children: [String: Set<String>] = [:]
    let persistence: TaskPersistence

    // Follow-up: log tails (LogTail.swift), abandoned work (Abandonment.swift),
    // webhooks (Webhooks.swift), cancel and pause requests (Controls.swift).
    /// Every task's last lines, within `logLines`, `logBytes` and `maxLogBytes`.
    var logs = LogTails()
    /// How many lines of each task's log are kept (config `logLines`).
    public internal(set) var logLines = ServerConfig().logLines
    /// Bytes of each task's log kept (config `logBytes`).
    public internal(set) var logBytes = ServerConfig().logBytes
    /// Bytes of every task's log together (config `maxLogBytes`).
    public internal(set) var maxLogBytes = ServerConfig().maxLogBytes
    /// Seconds a stalled task stays stalled before it ends failed, unless it says `abandonAfter`
    /// (config `abandonAfterSeconds`; 0: never).
    public var abandonAfterSeconds = ServerConfig().abandonAfterSeconds {
        didSet { for (id, task) in tasks where task.state == .stalled { scheduleDeadline(for: id) } }
    }
    /// The webhooks a state change fires; nil when none are configured.
    public var webhooks: WebhookPlanner?
    /// The webhook deliveries storage still held at start: due, or being retried, when the server stopped.
    public private(set) var restoredDeliveries: [WebhookDelivery] = []

    // ETA from history (History.swift).
    /// Kind → the lengths of its last finished runs.
    public internal(set) var history = KindHistory()

    // Who did it (Ownership.swift).
    /// Whoever the command being applied is for; the server's own between commands.
    var principal = Principal.server
    /// Owner name → how many tasks it holds, for the per-entry `maxTasks`.
    var ownedCounts: [String: Int] = [:]
    /// Told of every control request, removal and state change made for someone (the log line).
    public var audit: ((AuditNote) -> Void)?

    public init(
        persistence: TaskPersistence = MemoryOnlyPersistence(), maxRemembered: Int = 10_000, epoch: String? = nil,
        retentionSeconds: Double = ServerConfig().retentionSeconds, maxTasks: Int = ServerConfig().maxTasks
    ) {
        self.persistence = persistence
        self.maxRemembered = maxRemembered
        self.retentionSeconds = retentionSeconds
        self.maxTasks = maxTasks
        if let saved = persistence.load() {
            self.epoch = saved.epoch
            seq = saved.seq
            removalHorizon = saved.seq
            for task in saved.tasks { tasks[task.id] = task }
            // Kept whole until the budgets are set (`setLogBudgets`): a larger logLines keeps more.
            restoreLogs(saved.logs, within: (.max, .max, .max))
            restoredDeliveries = saved.deliveries
            history = KindHistory(saved.history)
        } else {
            self.epoch = epoch ?? TaskStore.newEpoch()
            seq = 0
        }
        rebuildIndexes()
    }

    /// Replaces everything with `saved` (a cluster node reloading from the shared checkpoint).
    public func replace(with saved: PersistedState) {
        epoch = saved.epoch
        seq = saved.seq
        sharedSnapshots.removeAll(at: seq)
        removalHorizon = saved.seq
        removals = [:]
        tasks = [:]
        for task in saved.tasks { tasks[task.id] = task }
        logs = LogTails()
        restoreLogs(saved.logs, within: (logLines, logBytes, maxLogBytes))
        history = KindHistory(saved.history)
        deadlines = DeadlineQueue()
        children = [:]
        rebuildIndexes()
    }

    /// Task id → the lines kept of its log, for a cluster's checkpoint.
    public var logTails: [String: [String]] { logs.tails.mapValues(\.lines) }

    /// Children and deadlines from the tasks held, in id order: every node of a cluster that loads
    /// the same tasks then schedules, and later fires, the same deadlines in the same order.
    private func rebuildIndexes() {
        ownedCounts = [:]
        for task in tasks.values {
            if let parent = task.parent { children[parent, default: []].insert(task.id) }
            if let owner = task.owner { ownedCounts[owner, default: 0] += 1 }
        }
        for id in tasks.keys.sorted() { scheduleDeadline(for: id) }
    }

    public static func newEpoch() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<12).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    public func task(_ id: String) -> TaskRecord? { tasks[id] }

    // MARK: Applying commands

    /// Applies one command for `principal`: its name goes on what the command creates (`owner`) and
    /// on the state changes, requests and removals it makes (`by`), and a new task counts
    /// against its share (`maxTasks` of its entry) as well as the server's.
    public func apply(_ command: Command, by principal: Principal = .server, now: Double) throws(APIError) -> Change {
        if tasks[command.id] == nil, command.createsTask {
            try checkQuota(for: principal)
        }
        self.principal = principal
        defer { self.principal = .server }
        switch command {
        case .update(let id, let patch):
            if case .some(.some(let parent)) = patch.parent, parent != id, let ancestors = ancestorsMeeting(id, from: parent) {
                throw APIError(
                    .invalidField,
                    "parent '\(parent)' would make a cycle: '\(id)' is already an ancestor of it (\(([parent] + ancestors).joined(separator: " → "))); name a task outside '\(id)'s subtree",
                    field: "parent")
            }
            return update(id, patch, now: now)
        case .show(let id, let options): return show(id, options, now: now)
        case .hide(let id): return try hide(id, now: now)
        case .startTimer(let id, let spec): return startTimer(id, spec, now: now)
        case .pauseTimer(let id): return try changeTimer(id, now: now, verb: "pause")
        case .resumeTimer(let id): return try changeTimer(id, now: now, verb: "resume")
        case .cancelTimer(let id): return try changeTimer(id, now: now, verb: "cancel")
        case .remove(let id): return try remove(id, now: now)
        case .appendLog(let id, let lines): return try appendLog(id, lines, now: now)
        case .requestControl(let id, let action): return try requestControl(id, action, now: now)
        }
    }

    private func update(_ id: String, _ patch: TaskPatch, now: Double) -> Change {
        let existing = tasks[id]
        var task = existing ?? TaskRecord(id: id, now: now)
        let wasVisible = existing?.visible ?? false
        let oldState = existing?.state
        if let title = patch.title { task.title = title }
        if let detail = patch.detail { task.detail = detail }
        if let completed = patch.completed { task.completed = completed }
        if let total = patch.total { task.total = total }
        if patch.progress != nil || patch.completed != nil || patch.total != nil { task.hasOwnProgress = true }
        if let progress = patch.progress {
            task.progress = progress
        } else if patch.completed != nil || patch.total != nil, let completed = task.completed, let total = task.total {
            task.progress = min(1, max(0, completed / total))
        }
        if let parent = patch.parent { task.parent = parent == id ? nil : parent }
        if let staleAfter = patch.staleAfter { task.staleAfter = staleAfter }
        if let controls = patch.controls { task.controls = controls }
        if let abandonAfter = patch.abandonAfter { task.abandonAfter = abandonAfter }
        if let kind = patch.kind { setKind(&task, kind) }
        if let url = patch.url { task.url = url }
        // A state the publisher sets is its answer to whatever was asked of it.
        if patch.state != nil {
            task.cancelRequested = false
            task.pauseRequested = false
        }
        if let state = patch.state {
            if state != (existing?.state ?? .running) { noteChange(&task, .state, "set \(state.rawValue)") }
            task.state = state
        } else if task.state == .stalled {
            task.state = .running
        }
        if task.state == .done {
            task.progress = 1
            if let total = task.total { task.completed = total }
        }
        if let visible = patch.visible {
            task.visible = visible
            if !visible {
                task.hideAt = nil
                task.modal = false
            }
        }
        if let modal = patch.modal { task.modal = modal && task.visible }
        if let hideAfter = patch.hideAfter { task.hideAt = hideAfter.map { now + $0 * 1000 } }
        if task.state.isTerminal || task.state == .paused {
            task.timer?.pause(at: now)
        } else if task.state == .running {
            task.timer?.resume(at: now)
        }
        observeRate(&task, now: now)
        task.publishedAt = now

        let type: EventType
        if wasVisible != task.visible, existing != nil || !task.visible {
            type = task.visible ? .show : .hide
        } else if let oldState, oldState != task.state {
            type = .state
        } else {
            type = .progress
        }
        // What a restart must never lose, whatever event it makes: a new state (a task created
        // done or failed included), visibility, a modal or a hide deadline. Plain progress is written behind.
        let sticky: Bool
        if let existing {
            sticky =
                existing.state != task.state || existing.visible != task.visible || existing.modal != task.modal
                || existing.hideAt != task.hideAt || existing.timer != task.timer
        } else {
            sticky = task.state != .running || !task.visible || task.modal || task.hideAt != nil
        }
        return commit(task, type, now: now, urgent: sticky)
    }

    private func show(_ id: String, _ options: ShowOptions, now: Double) -> Change {
        var task = tasks[id] ?? TaskRecord(id: id, now: now)
        task.visible = true
        task.modal = options.modal ?? false
        task.hideAt = options.hideAfter.map { now + $0 * 1000 }
        if let detail = options.detail { task.detail = detail }
        task.publishedAt = now
        return commit(task, .show, now: now)
    }

    private func hide(_ id: String, now: Double) throws(APIError) -> Change {
        guard var task = tasks[id] else { throw notFound(id) }
        task.visible = false
        task.modal = false
        task.hideAt = nil
        task.publishedAt = now
        return commit(task, .hide, now: now)
    }

    private func startTimer(_ id: String, _ spec: TimerStart, now: Double) -> Change {
        var task = tasks[id] ?? TaskRecord(id: id, now: now)
        if let title = spec.title { task.title = title }
        task.hasOwnProgress = true
        var timer = TimerSpec(seconds: spec.seconds, interval: spec.interval, startedAt: spec.startAt ?? now)
        timer.hideAfter = spec.hideAfter
        task.timer = timer
        task.state = .running
        task.visible = true
        task.hideAt = nil
        task.total = spec.seconds
        task.completed = 0
        task.progress = 0
        task.rate = nil
        task.eta = nil
        task.rateEstimator = RateEstimator()
        task.publishedAt = now
        return commit(task, tasks[id] == nil ? .show : .state, now: now)
    }

    private func changeTimer(_ id: String, now: Double, verb: String) throws(APIError) -> Change {
        guard var task = tasks[id] else { throw notFound(id) }
        guard var timer = task.timer else {
            throw APIError(.notATimer, "task '\(id)' is not a timer: start one with POST /api/timers/\(id) {\"seconds\": N}", field: "id")
        }
        guard !task.state.isTerminal else {
            throw APIError(.conflict, "timer '\(id)' is already \(task.state.rawValue): start it again to \(verb) it", field: "id")
        }
        switch verb {
        case "pause":
            timer.pause(at: now)
            task.state = .paused
        case "resume":
            timer.resume(at: now)
            task.state = .running
        default:
            timer.pause(at: now)
            task.state = .cancelled
            if let hideAfter = timer.hideAfter { task.hideAt = now + hideAfter * 1000 }
        }
        noteChange(&task, .request, "\(verb == "cancel" ? "cancelled" : verb == "pause" ? "paused" : "resumed") the timer of")
        task.timer = timer
        task.publishedAt = now
        return commit(task, .state, now: now)
    }

    private func remove(_ id: String, now: Double) throws(APIError) -> Change {
        guard let removed = tasks.removeValue(forKey: id) else { throw notFound(id) }
        deadlines.scheduled.removeValue(forKey: id)
        logs.remove(id)
        seq += 1
        removals[id] = seq
        if removals.count > maxRemembered { forgetOldestRemovals() }
        persistence.remove(id: id, epoch: epoch, seq: seq)
        if let owner = removed.owner { disown(owner) }
        let by = principal == .server ? nil : principal.name
        if let by { audit?(AuditNote(kind: .removal, by: by, id: id, action: "removed")) }
        var events = [OutboundEvent.removal(id: id, seq: seq, by: by)]
        if let parent = removed.parent {
            children[parent]?.remove(id)
            if children[parent]?.isEmpty == true { children.removeValue(forKey: parent) }
            events += rollUp(parent, now: now)
            scheduleDeadline(for: parent)
        }
        return Change(task: nil, events: events)
    }

    func notFound(_ id: String) -> APIError {
        APIError(.notFound, "no task '\(id)': create it first with POST /api/tasks/\(id)", field: "id")
    }

    private func observeRate(_ task: inout TaskRecord, now: Double) {
        guard let progress = task.progress, task.timer == nil else {
            task.rate = nil
            task.eta = nil
            return
        }
        let rate = task.rateEstimator.observe(progress: progress, at: now)
        if task.state == .running {
            task.rate = rate
            task.eta = RateEstimator.eta(progress: progress, rate: rate)
        } else {
            task.rate = nil
            task.eta = nil
        }
    }

    /// Stamps the change with the next seq, stores it, and encodes its event once.
    /// `urgent` (by default: the event is sticky, or ends a timer) asks storage to commit the change
    /// before anything about it leaves.
    func commit(
        _ task: TaskRecord, _ type: EventType, now: Double, depth: Int = 0, urgent: Bool? = nil,
        extraFields: ((inout JSONWriter) -> Void)? = nil
    ) -> Change {
        var task = task
        let oldParent = tasks[task.id]?.parent
        let oldState = tasks[task.id]?.state
        if tasks[task.id] == nil { own(&task) }
        seq += 1
        task.seq = seq
        task.updatedAt = now
        settleFollowUpFields(&task, now: now)
        settleHistoryFields(&task, from: oldState, now: now)
        recordTimeline(&task, from: tasks[task.id], now: now)
        tasks[task.id] = task
        removals.removeValue(forKey: task.id)
        persistence.save(task, epoch: epoch, seq: seq, urgent: urgent ?? (type.isSticky || (type == .tick && task.state.isTerminal)))
        if oldState != task.state { stateDidChange(task, from: oldState, now: now) }
        scheduleDeadline(for: task.id)
        var events = [OutboundEvent.task(type, task, now: now, extraFields: extraFields)]
        if oldParent != task.parent, let oldParent {
            children[oldParent]?.remove(task.id)
            if children[oldParent]?.isEmpty == true { children.removeValue(forKey: oldParent) }
            events += rollUp(oldParent, now: now, depth: depth)
        }
        if let parent = task.parent {
            children[parent, default: []].insert(task.id)
            events += rollUp(parent, now: now, depth: depth)
        }
        return Change(task: task, events: events)
    }

    /// A parent without progress of its own shows its children's, weighted by their unit counts
    /// when every child has them (as Foundation's Progress does), else their mean.
    private func rollUp(_ parentID: String, now: Double, depth: Int = 0) -> [OutboundEvent] {
        guard depth < 16, var parent = tasks[parentID], !parent.hasOwnProgress else { return [] }
        // In id order: the same sums, to the last bit, on every node of a cluster.
        let kids = (children[parentID] ?? []).sorted().compactMap { tasks[$0] }
        guard !kids.isEmpty else { return [] }
        let before = (parent.progress, parent.completed, parent.total)
        if kids.allSatisfy({ $0.total != nil }) {
            let total = kids.reduce(0) { $0 + $1.total! }
            let completed = kids.reduce(0) { $0 + ($1.completed ?? ($1.progress ?? 0) * $1.total!) }
            parent.total = total
            parent.completed = completed
            parent.progress = total > 0 ? min(1, completed / total) : nil
        } else if kids.allSatisfy({ $0.progress == nil }) {
            parent.progress = nil
        } else {
            parent.completed = nil
            parent.total = nil
            parent.progress = kids.reduce(0) { $0 + ($1.progress ?? 0) } / Double(kids.count)
        }
        guard before != (parent.progress, parent.completed, parent.total) else { return [] }
        observeRate(&parent, now: now)
        return commit(parent, .progress, now: now, depth: depth + 1).events
    }

    private func forgetOldestRemovals() {
        let sorted = removals.sorted { $0.value < $1.value }
        for (id, removedAt) in sorted.prefix(removals.count - maxRemembered / 2) {
            removals.removeValue(forKey: id)
            removalHorizon = max(removalHorizon, removedAt)
        }
    }

    // MARK: The server's own deadlines

    /// The earliest moment something is due (Unix ms), for the service loop's wake-up.
    public func nextDeadline() -> Double? { deadlines.earliest() }

    /// Emits whatever has fallen due by `now`: ticks, automatic hides, leases gone stale.
    public func runDue(now: Double) -> [OutboundEvent] {
        var events: [OutboundEvent] = []
        while let id = deadlines.popDue(now: now) {
            deadlines.scheduled.removeValue(forKey: id)
            guard var task = tasks[id] else { continue }
            if var timer = task.timer, let k = timer.dueTick(at: now) {
                timer.ticksEmitted = k
                task.timer = timer
                let elapsed = timer.elapsedSeconds(tick: k)
                task.completed = roundedSeconds(elapsed)
                task.progress = min(1, elapsed / timer.seconds)
                let finished = k == timer.tickCount
                if finished {
                    task.state = .done
                    if let hideAfter = timer.hideAfter { task.hideAt = now + hideAfter * 1000 }
                }
                events += commit(task, .tick, now: now).events
                if finished { events += commit(task, .state, now: now).events }
                task = tasks[id]!
            }
            if task.visible, let hideAt = task.hideAt, hideAt <= now {
                task.visible = false
                task.modal = false
                task.hideAt = nil
                events += commit(task, .hide, now: now).events
                task = tasks[id]!
            }
            if task.state == .running, let staleAfter = task.staleAfter, task.publishedAt + staleAfter * 1000 <= now {
                task.state = .stalled
                task.rate = nil
                task.eta = nil
                events += commit(task, .state, now: now).events
                task = tasks[id]!
            }
            if task.state == .stalled, let abandonAt = abandonment(of: task), abandonAt <= now {
                events += abandon(task, now: now).events
                task = tasks[id]!
            }
            if let slowAt = slowness(of: task), slowAt <= now {
                events += commit(task, .progress, now: now).events  // settleHistoryFields flags it
                task = tasks[id]!
            }
            if let retireAt = retirement(of: task), retireAt <= now {
                retiredCount += 1
                events += (try? remove(id, now: now).events) ?? []
                continue
            }
            if deadlines.scheduled[id] == nil { scheduleDeadline(for: id) }
        }
        return events
    }

    func scheduleDeadline(for id: String) {
        guard let task = tasks[id] else { return }
        var next: Double? = nil
        func consider(_ time: Double?) {
            if let time, time < (next ?? .infinity) { next = time }
        }
        if task.visible { consider(task.hideAt) }
        if task.state == .running {
            consider(task.timer?.nextTickTime)
            if let staleAfter = task.staleAfter { consider(task.publishedAt + staleAfter * 1000) }
        }
        if task.state == .stalled { consider(abandonment(of: task)) }
        consider(slowness(of: task))
        consider(retirement(of: task))
        // An earlier entry stays: when it fires, runDue finds nothing due yet and schedules again.
        // This keeps a lease renewed 50 000 times a second from pushing 50 000 heap entries.
        if let current = deadlines.scheduled[id], current <= (next ?? .infinity) { return }
        guard let next else { return }
        deadlines.schedule(id, at: next)
    }

    /// When a task is forgotten: `retentionSeconds` after its last change once it is finished, or
    /// hidden and untouched; never while tasks name it as their parent (it goes after them) —
    /// except children that are also its ancestors: a cycle of parents (stored by a version that
    /// took them) would otherwise keep every task in it for good.
    private func retirement(of task: TaskRecord) -> Double? {
        guard task.state.isTerminal || !task.visible else { return nil }
        if let kids = children[task.id], !kids.isEmpty {
            let ancestors = Set(ancestorChain(of: task.id))
            guard kids.allSatisfy(ancestors.contains) else { return nil }
        }
        return task.updatedAt + retentionSeconds * 1000
    }

    /// `id`'s parent, its parent's parent, and so on, each once: it ends at a task with no
    /// parent, at one not held, or where the chain comes round again.
    private func ancestorChain(of id: String) -> [String] {
        var chain: [String] = []
        var seen: Set<String> = [id]
        var current = tasks[id]?.parent
        while let next = current, seen.insert(next).inserted {
            chain.append(next)
            current = tasks[next]?.parent
        }
        return chain
    }

    /// The chain up from `parent` to `id` when `id` is among `parent`'s ancestors (or `parent`
    /// itself), so that making `parent` the parent of `id` would close a cycle; nil otherwise.
    private func ancestorsMeeting(_ id: String, from parent: String) -> [String]? {
        if parent == id { return [] }
        let chain = ancestorChain(of: parent)
        guard let at = chain.firstIndex(of: id) else { return nil }
        return Array(chain[...at])
    }

    // MARK: Snapshots and resumption

    public func tasks(matching watch: WatchSet) -> [TaskRecord] {
        let all = watch.matchesAll ? Array(tasks.values) : tasks.values.filter { watch.matches($0.id) }
        return all.sorted { $0.seq < $1.seq }
    }

    /// Tasks changed after `since` and ids removed after it; nil when `since` is too old to answer.
    public func changes(since: UInt64, matching watch: WatchSet) -> (tasks: [TaskRecord], removed: [String])? {
        guard since >= removalHorizon, since <= seq else { return nil }
        let changed = tasks.values.filter { $0.seq > since && watch.matches($0.id) }.sorted { $0.seq < $1.seq }
        let removed = removals.filter { $0.value > since && watch.matches($0.key) }.sorted { $0.value < $1.value }.map(\.key)
        return (changed, removed)
    }

    /// `{"type":"snapshot",…}`: everything watched, or, with `since`, only what changed after it.
    /// A snapshot depends only on the state at this seq, so the bytes are kept and handed to every
    /// watcher that asks for the same one before the next change (`SharedSnapshots`).
    public func encodeSnapshot(matching watch: WatchSet, since: UInt64? = nil, now: Double) -> [UInt8] {
        let key = SharedSnapshots.Key(watch: watch, since: since)
        if let kept = sharedSnapshots.lookup(key, seq: seq) { return kept }
        let snapshot = encodeSnapshotAnew(matching: watch, since: since, now: now)
        sharedSnapshots.keep(snapshot, for: key, seq: seq)
        return snapshot
    }

    /// How many snapshots were handed out again rather than encoded, since the start.
    public var reusedSnapshotCount: Int { sharedSnapshots.reused }

    private func encodeSnapshotAnew(matching watch: WatchSet, since: UInt64?, now: Double) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + tasks.count * 256)
        writer.beginObject()
        writer.key("type")
        writer.string("snapshot")
        writer.key("epoch")
        writer.string(epoch)
        writer.key("seq")
        writer.number(Int(seq))
        let delta = since.flatMap { changes(since: $0, matching: watch) }
        writer.key("full")
        writer.bool(delta == nil)
        if let since, let delta {
            writer.key("since")
            writer.number(Int(since))
            writeTasks(delta.tasks, into: &writer, now: now)
            writer.key("removed")
            writer.beginArray()
            for id in delta.removed { writer.string(id) }
            writer.endArray()
        } else {
            writeTasks(tasks(matching: watch), into: &writer, now: now)
        }
        writer.endObject()
        return writer.bytes
    }

    public func encodeTaskList(matching watch: WatchSet, within scope: Scope = .everything, now: Double) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + tasks.count * 256)
        writer.beginObject()
        writer.key("epoch")
        writer.string(epoch)
        writer.key("seq")
        writer.number(Int(seq))
        writeTasks(tasks(matching: watch).filter { scope.allows($0.id) }, into: &writer, now: now)
        writer.endObject()
        return writer.bytes
    }

    private func writeTasks(_ list: [TaskRecord], into writer: inout JSONWriter, now: Double) {
        writer.key("tasks")
        writer.beginArray()
        for task in list {
            writer.beginObject()
            task.writeFields(into: &writer, now: now)
            writer.endObject()
        }
        writer.endArray()
    }

    public func encodeHello(now: Double, heartbeatSeconds: Double) -> [UInt8] {
        // Every connection gets one and only seq and now differ between them: the rest is kept.
        if helloParts?.epoch != epoch || helloParts?.heartbeatSeconds != heartbeatSeconds {
            var head = JSONWriter(capacity: 96)
            head.beginObject()
            head.key("type")
            head.string("hello")
            head.key("protocol")
            head.number(ProtocolInfo.version)
            head.key("epoch")
            head.string(epoch)
            var tail = JSONWriter(continuingObject: [], capacity: 64)
            tail.key("heartbeat")
            tail.number(heartbeatSeconds)
            tail.key("server")
            tail.string(RingcastVersion.version)
            tail.endObject()
            helloParts = (epoch, heartbeatSeconds, head.bytes, tail.bytes)
        }
        let parts = helloParts!
        var writer = JSONWriter(continuingObject: parts.head, capacity: parts.head.count + parts.tail.count + 48)
        writer.key("seq")
        writer.number(Int(seq))
        writer.key("now")
        writer.number(now.rounded())
        writer.appendEncoded(parts.tail)
        return writer.bytes
    }

    private var sharedSnapshots = SharedSnapshots()

    /// What `encodeHello` keeps: every field but seq and now, for the epoch and heartbeat it was made for.
    private var helloParts: (epoch: String, heartbeatSeconds: Double, head: [UInt8], tail: [UInt8])?
}

public enum ProtocolInfo {
    public static let version = 6
}

/// A min-heap of (time, task id), ties broken by id so the order never depends on how entries
/// arrived; at most one live entry per task, older ones are skipped when popped.
struct DeadlineQueue {
    private var heap: [(time: Double, id: String)] = []
    var scheduled: [String: Double] = [:]

    /// The earliest live deadline; entries superseded since they were pushed are dropped on the way.
    mutating func earliest() -> Double? {
        while let top = heap.first, scheduled[top.id] != top.time { removeTop() }
        return heap.first?.time
    }

    mutating func schedule(_ id: String, at time: Double) {
        if scheduled[id] == time { return }
        scheduled[id] = time
        heap.append((time, id))
        siftUp(heap.count - 1)
    }

    mutating func popDue(now: Double) -> String? {
        while let top = heap.first, top.time <= now {
            removeTop()
            if scheduled[top.id] == top.time { return top.id }
        }
        return nil
    }

    private mutating func removeTop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
    }

    private func precedes(_ a: (time: Double, id: String), _ b: (time: Double, id: String)) -> Bool {
        a.time < b.time || (a.time == b.time && a.id < b.id)
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, precedes(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, precedes(heap[right], heap[smallest]) { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
