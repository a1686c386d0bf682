/// Abandoned work ends. A running task whose lease (`staleAfter`) runs out turns `stalled`;
/// one that stays stalled for `abandonAfter` seconds (the task's, else config
/// `abandonAfterSeconds`) ends `failed` with the detail "abandoned: no update for N s", which fires
/// webhooks like any failure. A WebSocket publisher that disconnects stalls its leased tasks at
/// once (API.socketClosed). Service thread only (the store's).
extension TaskStore {
    /// When a stalled task is given up (Unix ms); nil when it is not stalled or never given up.
    func abandonment(of task: TaskRecord) -> Double? {
        guard task.state == .stalled, let stalledAt = task.stalledAt else { return nil }
        let seconds = task.abandonAfter ?? abandonAfterSeconds
        guard seconds > 0 else { return nil }
        return stalledAt + seconds * 1000
    }

    func abandon(_ task: TaskRecord, now: Double) -> Change {
        var task = task
        task.state = .failed
        task.detail = "abandoned: no update for \(UnixTime.seconds(until: now, now: task.publishedAt)) s"
        task.rate = nil
        task.eta = nil
        task.timer?.pause(at: now)
        return commit(task, .state, now: now)
    }

    /// Its publisher is gone: a running task with a lease turns stalled now, not when the lease ends.
    func stallAtOnce(_ id: String, now: Double) -> [OutboundEvent] {
        guard var task = tasks[id], task.state == .running, task.staleAfter != nil else { return [] }
        task.state = .stalled
        task.rate = nil
        task.eta = nil
        return commit(task, .state, now: now).events
    }
}
