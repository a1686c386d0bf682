import CSQLite
import Foundation
import RingcastCore

/// The embedded store: every task in one SQLite file (WAL, synchronous=NORMAL), so a restart — after
/// a crash or kill -9 too — brings back every task, its epoch and its sequence. Changes a restart must
/// never lose (terminal states, show, hide, timers starting, pausing or ending, removals) are
/// committed before the event leaves; plain progress is written behind, at most `writeBehind`
/// seconds later. Service thread only.
public final class SQLitePersistence: TaskPersistence {
    public static let writeBehindSeconds = 0.25
    private var database: OpaquePointer?
    private let path: String
    private let logger: Logger
    private var pendingSaves: [String: TaskRecord] = [:]
    private var pendingRemovals: [String: UInt64] = [:]
    private var epoch: String?
    private var seq: UInt64 = 0

    public init(path: String, logger: Logger) throws {
        self.path = path
        self.logger = logger
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        guard sqlite3_open_v2(path, &database, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else {
            let reason = database.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(database)
            throw ServerError("cannot open the storage file '\(path)': \(reason); point \"storage\" in config.json at a writable path, or set it to \"memory\"")
        }
        try execute("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = NORMAL;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, body BLOB NOT NULL);
            """)
    }

    deinit {
        flush()
        sqlite3_close(database)
    }

    public func load() -> PersistedState? {
        guard let epoch = try? value(forMeta: "epoch"), let seqText = try? value(forMeta: "seq"), let seq = UInt64(seqText) else { return nil }
        var tasks: [TaskRecord] = []
        var skipped = 0
        try? query("SELECT body FROM tasks ORDER BY seq") { statement in
            let count = Int(sqlite3_column_bytes(statement, 0))
            let bytes = sqlite3_column_blob(statement, 0).map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
            if let task = TaskRecord(stored: bytes) { tasks.append(task) } else { skipped += 1 }
        }
        if skipped > 0 { logger.warning("storage: \(skipped) stored tasks could not be read and were left out") }
        self.epoch = epoch
        self.seq = seq
        logger.info("storage: \(tasks.count) tasks of epoch \(epoch) restored from \(path)")
        return PersistedState(epoch: epoch, seq: seq, tasks: tasks)
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

    /// Writes everything pending in one transaction.
    public func flush() {
        guard hasPendingWrites, let epoch else { return }
        do {
            try execute("BEGIN")
            try withStatement("INSERT INTO tasks (id, seq, body) VALUES (?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, body = excluded.body") { statement in
                for task in pendingSaves.values {
                    let body = task.encodedForStorage()
                    sqlite3_bind_text(statement, 1, task.id, -1, rc_sqlite_transient())
                    sqlite3_bind_int64(statement, 2, Int64(task.seq))
                    _ = body.withUnsafeBytes { sqlite3_bind_blob(statement, 3, $0.baseAddress, Int32($0.count), rc_sqlite_transient()) }
                    try step(statement)
                }
            }
            try withStatement("DELETE FROM tasks WHERE id = ?1") { statement in
                for id in pendingRemovals.keys {
                    sqlite3_bind_text(statement, 1, id, -1, rc_sqlite_transient())
                    try step(statement)
                }
            }
            try withStatement("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)") { statement in
                for (key, value) in [("epoch", epoch), ("seq", String(seq))] {
                    sqlite3_bind_text(statement, 1, key, -1, rc_sqlite_transient())
                    sqlite3_bind_text(statement, 2, value, -1, rc_sqlite_transient())
                    try step(statement)
                }
            }
            try execute("COMMIT")
            pendingSaves.removeAll(keepingCapacity: true)
            pendingRemovals.removeAll(keepingCapacity: true)
        } catch {
            try? execute("ROLLBACK")
            logger.error("storage: writing to \(path) failed, will retry: \(error)")
        }
    }

    private func note(epoch: String, seq: UInt64) {
        self.epoch = epoch
        self.seq = max(self.seq, seq)
    }

    // MARK: SQLite, every return code checked here

    private func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(database, sql, nil, nil, &message) == SQLITE_OK else {
            let reason = message.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(message)
            throw ServerError("sqlite: \(reason)")
        }
    }

    private func withStatement(_ sql: String, _ body: (OpaquePointer) throws -> Void) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(database, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw ServerError("sqlite: \(String(cString: sqlite3_errmsg(database)))")
        }
        defer { sqlite3_finalize(statement) }
        try body(statement)
    }

    private func step(_ statement: OpaquePointer) throws {
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else {
            throw ServerError("sqlite: \(String(cString: sqlite3_errmsg(database)))")
        }
    }

    private func query(_ sql: String, row: (OpaquePointer) -> Void) throws {
        try withStatement(sql) { statement in
            while sqlite3_step(statement) == SQLITE_ROW { row(statement) }
        }
    }

    private func value(forMeta key: String) throws -> String? {
        var found: String?
        try withStatement("SELECT value FROM meta WHERE key = ?1") { statement in
            sqlite3_bind_text(statement, 1, key, -1, rc_sqlite_transient())
            if sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) {
                found = String(cString: text)
            }
        }
        return found
    }
}
