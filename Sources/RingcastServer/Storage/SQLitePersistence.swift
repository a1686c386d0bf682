import Foundation
import RingcastCore
import RingcastPlatform

/// The embedded store: every task in one SQLite file (WAL, synchronous=NORMAL), so a restart — after
/// a crash or kill -9 too — brings back every task, its epoch and its sequence.
///
/// Writes leave the service thread: once `startWriting` is called, `commit` hands the pending
/// changes to a writer thread of their own, which takes every batch waiting, writes them in one
/// transaction (group commit) and reports each batch's ticket. So neither a transaction nor a WAL
/// checkpoint's fsync ever stalls the service loop. Plain progress is written behind, at most
/// `writeBehindSeconds` later.
///
/// `@unchecked Sendable`: the pending changes, `epoch`, `seq` and `issued` belong to the service
/// thread; `queue`, `writerState`, `report`, `probes` and `instruments` are guarded by `condition`;
/// the database and its statements belong to the writer thread while it runs, and to the caller of
/// `init`/`load`, `flush` and `checkReadiness` when it does not.
public final class SQLitePersistence: TaskPersistence, @unchecked Sendable {
    public static let writeBehindSeconds = 0.25
    /// How often a failed transaction is tried again before its batch is reported lost.
    static let attempts = 3

    private let database: SQLiteDatabase
    private let path: String
    private let logger: Logger
    private let upsertTask: SQLiteStatement
    private let deleteTask: SQLiteStatement
    private let setMeta: SQLiteStatement
    private let followUp: FollowUpStatements
    private let history: HistoryStatements
    /// The file's lock for this process (`exclusive`), held for the persistence's life.
    private let ownerLock: OwnerLock?

    // Service thread.
    private var pendingSaves: [String: TaskRecord] = [:]
    private var pendingRemovals: Set<String> = []
    private var urgentPending = false
    /// Log tails (nil: removed with their task) and webhook deliveries (nil: finished).
    private var pendingLogs: [String: [String]?] = [:]
    private var pendingDeliveries: [String: WebhookDelivery?] = [:]
    /// Each kind's runs (nil: the kind was forgotten).
    private var pendingHistory: [String: KindRuns?] = [:]
    private var epoch: String?
    private var seq: UInt64 = 0
    private var issued: UInt64 = 0

    // Under `condition`.
    private enum WriterState { case none, running, stopping, stopped }
    private let condition = NSCondition()
    private var queue: [Batch] = []
    private var writerState = WriterState.none
    private var writerBusy = false
    private var report: (@Sendable (UInt64, Bool) -> Void)?
    /// Readiness questions waiting for the writer (`checkReadiness`), and what it counted of its commits.
    private var probes: [@Sendable (String?) -> Void] = []
    private var instruments = StorageMetrics()

    /// What one commit hands over: the changes pending at the time, and where the sequence stood.
    private struct Batch: Sendable {
        var saves: [TaskRecord]
        var removals: [String]
        var logs: [String: [String]?] = [:]
        var deliveries: [String: WebhookDelivery?] = [:]
        var history: [String: KindRuns?] = [:]
        var epoch: String
        var seq: UInt64
        var ticket: UInt64
    }

    /// `busyTimeoutMilliseconds`: how long a commit waits for another process's lock on the file
    /// before it counts as failed (tests that hold the lock on purpose shorten it).
    /// `exclusive`: the file is this process's alone (`PATH.lock`, `OwnerLock`), as `serve` needs:
    /// two servers writing one file would each number their own events under their own epoch.
    public init(path: String, logger: Logger, busyTimeoutMilliseconds: Int32 = 5000, exclusive: Bool = false) throws {
        self.path = path
        self.logger = logger
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        do {
            ownerLock = exclusive ? try OwnerLock(path: path + ".lock") : nil
        } catch let held as OwnerLock.Held {
            let holder = held.pid.map { "process \($0)" } ?? "another process"
            throw ServerError(
                "the storage file '\(path)' is in use by \(holder) (it holds \(held.path)): stop that server first, or point \"storage\" at another file"
            )
        } catch let error as CCallError {
            throw ServerError("cannot lock the storage file '\(path)': \(error.detail); point \"storage\" in config.json at a writable folder")
        }
        if let problem = SQLiteSchema.problem(withFileAt: path) { throw StorageFileError(path: path, problem: problem) }
        do {
            database = try SQLiteDatabase(path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
            try database.execute(
                """
                PRAGMA journal_mode = WAL;
                PRAGMA synchronous = NORMAL;
                """)
            if let upgraded = try SQLiteSchema.migrate(database) {
                logger.info("storage: \(path) upgraded from schema version \(upgraded) to \(SQLiteSchema.current)")
            }
            followUp = try FollowUpStatements(database)
            try database.execute(HistoryStatements.schema)
            history = try HistoryStatements(database)
            upsertTask = try database.prepare(
                "INSERT INTO tasks (id, seq, body) VALUES (?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, body = excluded.body")
            deleteTask = try database.prepare("DELETE FROM tasks WHERE id = ?1")
            setMeta = try database.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
        } catch let error as SQLiteSchema.TooNew {
            throw ServerError(
                "the storage file '\(path)' was written by a newer release of Ringcast (schema version \(error.found); Ringcast \(RingcastVersion.version) reads versions up to \(SQLiteSchema.current)): run that release or a later one, or point \"storage\" at another file"
            )
        } catch let error as SQLiteError {
            throw ServerError(
                "cannot open the storage file '\(path)': \(error.detail) (\(error.call)); point \"storage\" in config.json at a writable path, or set it to \"memory\""
            )
        }
    }

    deinit { flush() }

    /// The most rows `load` names one by one when it skips them; the rest are counted.
    static let skippedRowsNamed = 20

    /// What the file holds. Its `meta` rows (epoch, seq) and its task rows are checked, not
    /// believed: meta rows gone or garbage beside stored tasks is said in a warning, and the tasks
    /// are served under a new epoch (every watcher gets a full snapshot) from the highest stored
    /// seq on, never dropped for an empty start; a task row that fails the API's own checks
    /// (TaskRecord.restoring) is skipped with a line that names it, and counted.
    public func load() -> PersistedState? {
        do {
            let epochText = try meta("epoch")
            let seqText = try meta("seq")
            var rows = (count: 0, maxSeq: Int64(0))
            try database.prepare("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM tasks").forEachRow { row in
                rows = (Int(row.int64(0)), row.int64(1))
            }
            var epoch = epochText.flatMap { SQLitePersistence.isEpoch($0) ? $0 : nil }
            var seq = seqText.flatMap(UInt64.init).flatMap { Double($0) <= JSONWriter.maxExactInteger ? $0 : nil }
            if epoch == nil || seq == nil {
                // A new file: nothing in it yet, nothing to say.
                guard rows.count > 0 || epochText != nil || seqText != nil else { return nil }
                func shown(_ text: String?) -> String { text.map { "'\($0.prefix(40))'" } ?? "missing" }
                let highest = UInt64(clamping: min(max(0, rows.maxSeq), Int64(JSONWriter.maxExactInteger)))
                let kept = max(seq ?? 0, highest)
                logger.warning(
                    "storage: \(path)'s meta rows are missing or unreadable (epoch \(shown(epochText)), seq \(shown(seqText))): its \(rows.count) stored tasks are served under a new epoch from seq \(kept), so every watcher gets a full snapshot; if this file was edited by hand, stop the server and restore it from a backup"
                )
                epoch = TaskStore.newEpoch()
                seq = kept
            }
            guard let epoch, let seq else { return nil }
            var tasks: [TaskRecord] = []
            var skipped = 0
            try database.prepare("SELECT id, body FROM tasks ORDER BY seq").forEachRow { row in
                switch TaskRecord.restoring(row.blob(1)) {
                case .success(let task):
                    tasks.append(task)
                case .failure(let error):
                    skipped += 1
                    if skipped <= SQLitePersistence.skippedRowsNamed {
                        let id = String((error.id ?? row.text(0) ?? "?").prefix(128))
                        logger.warning("storage: the stored task '\(id)' in \(path) was left out: \(error.reason)")
                    }
                }
            }
            if skipped > 0 {
                logger.warning(
                    "storage: \(skipped) stored tasks in \(path) failed the checks an update passes and were left out"
                        + (skipped > SQLitePersistence.skippedRowsNamed ? " (the first \(SQLitePersistence.skippedRowsNamed) are named above)" : "")
                        + "; they stay in the file until their ids are written again")
            }
            self.epoch = epoch
            self.seq = seq
            let (logs, deliveries) = try followUp.load()
            logger.info(
                "storage: \(tasks.count) tasks of epoch \(epoch) restored from \(path)"
                    + (deliveries.isEmpty ? "" : ", with \(deliveries.count) webhook deliveries still owed"))
            return PersistedState(epoch: epoch, seq: seq, tasks: tasks, logs: logs, deliveries: deliveries, history: try history.load())
        } catch {
            logger.error("storage: reading \(path) failed, starting empty: \(error)")
            return nil
        }
    }

    /// An epoch as TaskStore.newEpoch writes them (letters and digits, a few to 64): anything else
    /// in the meta row is garbage, never carried into `hello` events and resume tokens.
    static func isEpoch(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) || (0x41...0x5A).contains($0) }
    }

    public func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) {
        pendingSaves[task.id] = task
        pendingRemovals.remove(task.id)
        note(epoch: epoch, seq: seq)
        if urgent { urgentPending = true }
    }

    public func remove(id: String, epoch: String, seq: UInt64) {
        pendingSaves.removeValue(forKey: id)
        pendingRemovals.insert(id)
        pendingLogs[id] = .some(nil)
        note(epoch: epoch, seq: seq)
        urgentPending = true
    }

    public func saveLog(id: String, lines: [String]) { pendingLogs[id] = .some(lines) }

    public func saveDelivery(_ delivery: WebhookDelivery, urgent: Bool) {
        pendingDeliveries[delivery.id] = .some(delivery)
        if urgent { urgentPending = true }
    }

    public func removeDelivery(id: String) { pendingDeliveries[id] = .some(nil) }

    public func saveHistory(kind: String, runs: KindRuns?) { pendingHistory[kind] = .some(runs) }

    public var hasPendingWrites: Bool {
        !pendingSaves.isEmpty || !pendingRemovals.isEmpty || !pendingLogs.isEmpty || !pendingDeliveries.isEmpty || !pendingHistory.isEmpty
    }
    public var hasUrgentWrites: Bool { urgentPending }

    public func startWriting(report: @escaping @Sendable (UInt64, Bool) -> Void) {
        let start: Bool = condition.withLock {
            self.report = report
            guard writerState == .none || writerState == .stopped else { return false }
            writerState = .running
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            Thread.current.name = "ringcast-storage"
            writerLoop()
        }
        thread.start()
    }

    public func commit() -> UInt64 {
        issued += 1
        let batch = Batch(
            saves: Array(pendingSaves.values), removals: Array(pendingRemovals), logs: pendingLogs, deliveries: pendingDeliveries,
            history: pendingHistory, epoch: epoch ?? "", seq: seq, ticket: issued)
        pendingSaves.removeAll(keepingCapacity: true)
        pendingRemovals.removeAll(keepingCapacity: true)
        pendingLogs.removeAll(keepingCapacity: true)
        pendingDeliveries.removeAll(keepingCapacity: true)
        pendingHistory.removeAll(keepingCapacity: true)
        urgentPending = false
        let (queued, report): (Bool, (@Sendable (UInt64, Bool) -> Void)?) = condition.withLock {
            guard writerState == .running else { return (false, self.report) }
            queue.append(batch)
            condition.broadcast()
            return (true, nil)
        }
        if !queued {
            // No writer (not started yet, or stopped at shutdown): written here, and reported as the writer would.
            let kept = epoch == nil || timedWrite([batch])
            report?(batch.ticket, kept)
        }
        return batch.ticket
    }

    /// Hands over what is pending, waits until the writer has written everything, and stops it.
    public func flush() {
        if hasPendingWrites { _ = commit() }
        condition.withLock {
            guard writerState == .running else { return }
            writerState = .stopping
            condition.broadcast()
            while writerState != .stopped { condition.wait() }
        }
    }

    private func note(epoch: String, seq: UInt64) {
        self.epoch = epoch
        self.seq = max(self.seq, seq)
    }

    // MARK: The writer thread

    private func writerLoop() {
        while true {
            let (batches, probes, report): ([Batch], [@Sendable (String?) -> Void], (@Sendable (UInt64, Bool) -> Void)?) = condition.withLock {
                while queue.isEmpty, self.probes.isEmpty, writerState == .running { condition.wait() }
                defer {
                    queue.removeAll(keepingCapacity: true)
                    self.probes.removeAll()
                }
                return (queue, self.probes, self.report)
            }
            if batches.isEmpty, probes.isEmpty {
                condition.withLock {
                    writerState = .stopped
                    condition.broadcast()
                }
                return
            }
            if !batches.isEmpty {
                let kept = timedWrite(batches)
                for batch in batches { report?(batch.ticket, kept) }
            }
            if !probes.isEmpty { answer(probes) }
        }
    }

    /// Writes batches, oldest first, in one transaction; tries again a few times before giving up.
    private func write(_ batches: [Batch]) -> Bool {
        // The newest word on each task wins: a save after a removal brings it back, and the reverse.
        var latest: [String: TaskRecord?] = [:]
        var logs: [String: [String]?] = [:]
        var deliveries: [String: WebhookDelivery?] = [:]
        var kinds: [String: KindRuns?] = [:]
        for batch in batches {
            for id in batch.removals { latest[id] = .some(nil) }
            for task in batch.saves { latest[task.id] = .some(task) }
            logs.merge(batch.logs) { $1 }
            deliveries.merge(batch.deliveries) { $1 }
            kinds.merge(batch.history) { $1 }
        }
        guard let last = batches.last, !last.epoch.isEmpty else { return true }
        for attempt in 1...SQLitePersistence.attempts {
            do {
                try database.transaction { () throws(SQLiteError) in
                    for (id, task) in latest {
                        if let task {
                            try upsertTask.bind(1, task.id)
                            try upsertTask.bind(2, Int64(task.seq))
                            try upsertTask.bind(3, blob: task.encodedForStorage())
                            try upsertTask.run()
                        } else {
                            try deleteTask.bind(1, id)
                            try deleteTask.run()
                        }
                    }
                    try followUp.write(logs: logs, deliveries: deliveries)
                    try history.write(kinds)
                    for (key, value) in [("epoch", last.epoch), ("seq", String(last.seq))] {
                        try setMeta.bind(1, key)
                        try setMeta.bind(2, value)
                        try setMeta.run()
                    }
                }
                if attempt > 1 { logger.info("storage: writing to \(path) works again") }
                return true
            } catch {
                logger.error(
                    "storage: writing \(latest.count) changes to \(path) failed (attempt \(attempt) of \(SQLitePersistence.attempts)): \(error)")
                if attempt < SQLitePersistence.attempts { usleep(UInt32(20_000 * attempt)) }
            }
        }
        return false
    }

    private func meta(_ key: String) throws(SQLiteError) -> String? {
        let select = try database.prepare("SELECT value FROM meta WHERE key = ?1")
        try select.bind(1, key)
        var found: String?
        try select.forEachRow { row in found = row.text(0) }
        return found
    }
}

// MARK: What operators see: readiness and commit times

extension SQLitePersistence: ReadinessProbe, StorageMetricsSource {
    public var readinessName: String { "storage" }

    /// The writer takes a trivial commit (`BEGIN IMMEDIATE; COMMIT`: the write lock, nothing written)
    /// after whatever it is writing; before the writer starts or after it stops, the caller does.
    public func checkReadiness(_ answer: @escaping @Sendable (String?) -> Void) {
        let queued: Bool = condition.withLock {
            guard writerState == .running else { return false }
            probes.append(answer)
            condition.broadcast()
            return true
        }
        if !queued { self.answer([answer]) }
    }

    public var storageMetrics: StorageMetrics { condition.withLock { instruments } }

    private func answer(_ probes: [@Sendable (String?) -> Void]) {
        var failure: String?
        do {
            try database.execute("BEGIN IMMEDIATE; COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            failure = "a trivial commit to \(path) failed: \(error)"
        }
        for probe in probes { probe(failure) }
    }

    /// `write`, timed for `ringcast_storage_commit_seconds` when it reached the file.
    private func timedWrite(_ batches: [Batch]) -> Bool {
        let started = DispatchTime.now().uptimeNanoseconds
        let kept = write(batches)
        guard let last = batches.last, !last.epoch.isEmpty else { return kept }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        condition.withLock {
            instruments.commitSeconds.observe(seconds)
            if !kept { instruments.commitFailures += 1 }
        }
        return kept
    }
}

/// A storage file that exists but that this release cannot open as its own: damaged, not SQLite,
/// another program's, or from a newer release. It is left exactly as it was; `ringcast serve`
/// exits 2 with this one line.
public struct StorageFileError: Error, CustomStringConvertible {
    public let path: String
    public let problem: String

    public var description: String {
        "the storage file '\(path)' \(problem); it was left as it is: move it aside (to keep what it holds) or point \"storage\" at another file"
    }
}
