import Foundation
import RingcastCore

/// The embedded store: every task in one SQLite file (WAL, synchronous=NORMAL), so a restart — after
/// a crash or kill -9 too — brings back every task, its epoch and its sequence. Changes a restart must
/// never lose (terminal states, show, hide, timers starting, pausing or ending, removals) are
/// committed before the event leaves; plain progress is written behind, at most `writeBehind`
/// seconds later. Service thread only.
public final class SQLitePersistence: TaskPersistence {
    public static let writeBehindSeconds = 0.25
    private let database: SQLiteDatabase
    private let path: String
    private let logger: Logger
    private let upsertTask: SQLiteStatement
    private let deleteTask: SQLiteStatement
    private let setMeta: SQLiteStatement
    private var pendingSaves: [String: TaskRecord] = [:]
    private var pendingRemovals: [String: UInt64] = [:]
    private var epoch: String?
    private var seq: UInt64 = 0

    public init(path: String, logger: Logger) throws {
        self.path = path
        self.logger = logger
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        do {
            database = try SQLiteDatabase(path: path)
            try database.execute("""
                PRAGMA journal_mode = WAL;
                PRAGMA synchronous = NORMAL;
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, body BLOB NOT NULL);
                """)
            upsertTask = try database.prepare("INSERT INTO tasks (id, seq, body) VALUES (?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, body = excluded.body")
            deleteTask = try database.prepare("DELETE FROM tasks WHERE id = ?1")
            setMeta = try database.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
        } catch {
            throw ServerError("cannot open the storage file '\(path)': \(error.message) (\(error.call)); point \"storage\" in config.json at a writable path, or set it to \"memory\"")
        }
    }

    deinit { flush() }

    public func load() -> PersistedState? {
        do {
            guard let epoch = try meta("epoch"), let seqText = try meta("seq"), let seq = UInt64(seqText) else { return nil }
            var tasks: [TaskRecord] = []
            var skipped = 0
            try database.prepare("SELECT body FROM tasks ORDER BY seq").forEachRow { row in
                if let task = TaskRecord(stored: row.blob(0)) { tasks.append(task) } else { skipped += 1 }
            }
            if skipped > 0 { logger.warning("storage: \(skipped) stored tasks could not be read and were left out") }
            self.epoch = epoch
            self.seq = seq
            logger.info("storage: \(tasks.count) tasks of epoch \(epoch) restored from \(path)")
            return PersistedState(epoch: epoch, seq: seq, tasks: tasks)
        } catch {
            logger.error("storage: reading \(path) failed, starting empty: \(error)")
            return nil
        }
    }

    public func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) {
        pendingSaves[task.id] = task
        pendingRemovals.removeValue(forKey: task.id)
        note(epoch: epoch, seq: seq)
        if urgent { flush() }
    }

    public func remove(id: String, epoch: String, seq: UInt64) {
        pendingSaves.removeValue(forKey: id)
        pendingRemovals[id] = seq
        note(epoch: epoch, seq: seq)
        flush()
    }

    public var hasPendingWrites: Bool { !pendingSaves.isEmpty || !pendingRemovals.isEmpty }

    /// Writes everything pending in one transaction; on failure it stays pending for the next flush.
    public func flush() {
        guard hasPendingWrites, let epoch else { return }
        do {
            try database.transaction { () throws(SQLiteError) in
                for task in pendingSaves.values {
                    try upsertTask.bind(1, task.id)
                    try upsertTask.bind(2, Int64(task.seq))
                    try upsertTask.bind(3, blob: task.encodedForStorage())
                    try upsertTask.run()
                }
                for id in pendingRemovals.keys {
                    try deleteTask.bind(1, id)
                    try deleteTask.run()
                }
                for (key, value) in [("epoch", epoch), ("seq", String(seq))] {
                    try setMeta.bind(1, key)
                    try setMeta.bind(2, value)
                    try setMeta.run()
                }
            }
            pendingSaves.removeAll(keepingCapacity: true)
            pendingRemovals.removeAll(keepingCapacity: true)
        } catch {
            logger.error("storage: writing to \(path) failed, will retry: \(error)")
        }
    }

    private func note(epoch: String, seq: UInt64) {
        self.epoch = epoch
        self.seq = max(self.seq, seq)
    }

    private func meta(_ key: String) throws(SQLiteError) -> String? {
        let select = try database.prepare("SELECT value FROM meta WHERE key = ?1")
        try select.bind(1, key)
        var found: String?
        try select.forEachRow { row in found = row.text(0) }
        return found
    }
}
