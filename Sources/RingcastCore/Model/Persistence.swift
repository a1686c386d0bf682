/// Where state goes so a restart can bring it back. Called on the service thread only, except
/// `report`, which storage calls from wherever it writes.
///
/// The rule users rely on: an answer means it is kept. A change a restart must never lose is saved
/// `urgent`; the server then asks for a `commit` and holds the change's answer and events until
/// storage reports that commit kept (many changes, one transaction: group commit). Plain progress
/// is written behind, on the server's write-behind timer.
public protocol TaskPersistence: AnyObject {
    /// The state saved before, if any: the store resumes its epoch and sequence from it.
    func load() -> PersistedState?
    /// `urgent` marks a change a restart must never lose (a state, show, hide, a timer's start,
    /// pause or end); others may be written behind.
    func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool)
    /// A removal is always urgent.
    func remove(id: String, epoch: String, seq: UInt64)
    var hasPendingWrites: Bool { get }
    /// Whether an urgent change waits: nothing about it may leave before a commit reports it kept.
    var hasUrgentWrites: Bool { get }
    /// From now on, write off the caller's thread; `report(ticket, kept)` follows each `commit`, in order.
    func startWriting(report: @escaping @Sendable (_ ticket: UInt64, _ kept: Bool) -> Void)
    /// Hands everything pending to storage and returns the ticket its report will carry.
    func commit() -> UInt64
    /// Writes everything pending and returns once it is kept (at shutdown); stops the writer.
    func flush()

    // Log tails and the webhook outbox, committed with the task changes around them.
    /// The lines kept of a task's log (written behind, like progress); a task's removal removes them.
    func saveLog(id: String, lines: [String])
    /// A webhook delivery owed (urgent when made with a state change), or its retry's new schedule.
    func saveDelivery(_ delivery: WebhookDelivery, urgent: Bool)
    /// A delivery answered with a 2xx, or given up.
    func removeDelivery(id: String)

    // ETA from history: each kind's runs.
    /// The runs kept of a kind (saved with the change that finished one); nil: the kind was forgotten.
    func saveHistory(kind: String, runs: KindRuns?)
}

extension TaskPersistence {
    public var hasUrgentWrites: Bool { false }
    public func startWriting(report: @escaping @Sendable (_ ticket: UInt64, _ kept: Bool) -> Void) {}
    /// Storage that writes where it is called keeps a change as soon as it is handed over.
    public func commit() -> UInt64 {
        flush()
        return 0
    }
    public func saveLog(id: String, lines: [String]) {}
    public func saveDelivery(_ delivery: WebhookDelivery, urgent: Bool) {}
    public func removeDelivery(id: String) {}
    public func saveHistory(kind: String, runs: KindRuns?) {}
}

public struct PersistedState: Sendable {
    public var epoch: String
    public var seq: UInt64
    public var tasks: [TaskRecord]
    /// Task id → the lines kept of its log.
    public var logs: [String: [String]]
    /// Webhook deliveries not yet answered with a 2xx nor given up.
    public var deliveries: [WebhookDelivery]
    /// In a cluster's checkpoint: the time of the last log entry applied.
    public var appliedNow: Double
    /// Kind → the lengths of its last finished runs (ETA from history).
    public var history: [String: KindRuns]

    public init(
        epoch: String, seq: UInt64, tasks: [TaskRecord], logs: [String: [String]] = [:], deliveries: [WebhookDelivery] = [],
        appliedNow: Double = 0, history: [String: KindRuns] = [:]
    ) {
        self.epoch = epoch
        self.seq = seq
        self.tasks = tasks
        self.logs = logs
        self.deliveries = deliveries
        self.appliedNow = appliedNow
        self.history = history
    }
}

/// Keeps state in memory only: every start is a new epoch, unless it starts from a state read
/// elsewhere (a cluster node's, from the cluster's checkpoint).
public final class MemoryOnlyPersistence: TaskPersistence {
    private let starting: PersistedState?

    public init(starting: PersistedState? = nil) { self.starting = starting }
    public func load() -> PersistedState? { starting }
    public func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) {}
    public func remove(id: String, epoch: String, seq: UInt64) {}
    public var hasPendingWrites: Bool { false }
    public func flush() {}
}
