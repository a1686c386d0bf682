/// Who did it, and whose share a task counts against. Every command is applied for an `Principal`
/// (Access.swift): a new task's `owner` is its name, and counts against its `maxTasks`; a state
/// change, a control request or a removal it makes records its name as `by`, and is told to
/// `audit` for the server's log line. The server's own changes (ticks, leases, retention) have
/// no principal and record nothing. Service thread only (the store's).

/// One change made for someone, for the server's log: `alice asked to cancel ci.build-42`.
public struct AuditNote: Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// A state set by a publisher (`set done`): routine, logged at debug.
        case state
        /// A control request or a timer's pause, resume or cancel: logged at info.
        case request
        case removal
    }

    public let kind: Kind
    public let by: String
    public let id: String
    /// `asked to cancel`, `set done`, `removed`, `cancelled the timer of`.
    public let action: String

    public var description: String { "\(by) \(action) \(id)" }
}

extension TaskStore {
    /// Tasks `name` holds now.
    public func tasksOwned(by name: String) -> Int { ownedCounts[name] ?? 0 }

    /// Refuses a new task past the server's `maxTasks`, or past the share of whoever asks.
    func checkQuota(for principal: Principal) throws(APIError) {
        if tasks.count >= maxTasks {
            throw APIError(
                .tooManyTasks, "the server already holds \(maxTasks) tasks (maxTasks): remove finished ones, or raise \"maxTasks\" in config.json",
                field: "id")
        }
        if let share = principal.maxTasks, tasksOwned(by: principal.name) >= share {
            let whose = principal.name == AccessPolicy.localName ? "anonymous loopback publishing" : "'\(principal.name)'"
            let setting = principal.name == AccessPolicy.localName ? "\"anonymousLocalMaxTasks\"" : "its \"maxTasks\""
            throw APIError(
                .tooManyTasks,
                "\(whose) already holds \(share) tasks, its share (\(setting)): remove finished ones, or raise \(setting) in config.json"
                    + (principal.name == AccessPolicy.localName ? "" : " (for a signed token: its ringcast.maxTasks, or \"tokenMaxTasks\")"),
                field: "id")
        }
    }

    /// A new task belongs to whoever created it.
    func own(_ task: inout TaskRecord) {
        guard principal != .server else { return }
        task.owner = principal.name
        ownedCounts[principal.name, default: 0] += 1
    }

    func disown(_ owner: String) {
        guard let count = ownedCounts[owner] else { return }
        if count <= 1 { ownedCounts.removeValue(forKey: owner) } else { ownedCounts[owner] = count - 1 }
    }

    /// Records who made a change worth an answer to "who did this?".
    func noteChange(_ task: inout TaskRecord, _ kind: AuditNote.Kind, _ action: String) {
        guard principal != .server else { return }
        task.by = principal.name
        audit?(AuditNote(kind: kind, by: principal.name, id: task.id, action: action))
    }
}
