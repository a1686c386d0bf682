import RingcastCore

/// ETA from history's share of the SQLite file: each kind's last finished runs (ETA from history). Written
/// in the transactions of `SQLitePersistence`, so a run's length is kept in the same commit as the
/// `done` that finished it. Used where SQLitePersistence uses its own statements: by the caller of
/// `init`/`load`, then the writer thread.
struct HistoryStatements {
    /// The table, created if missing.
    static let schema = """
        -- ETA from history: seconds is a JSON array of run lengths, oldest first.
        CREATE TABLE IF NOT EXISTS kind_history (kind TEXT PRIMARY KEY, seconds BLOB NOT NULL, last_finished_at INTEGER NOT NULL);
        """

    private let database: SQLiteDatabase
    private let upsert: SQLiteStatement
    private let delete: SQLiteStatement

    init(_ database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        upsert = try database.prepare(
            """
            INSERT INTO kind_history (kind, seconds, last_finished_at) VALUES (?1, ?2, ?3)
            ON CONFLICT(kind) DO UPDATE SET seconds = excluded.seconds, last_finished_at = excluded.last_finished_at
            """)
        delete = try database.prepare("DELETE FROM kind_history WHERE kind = ?1")
    }

    /// Inside the caller's transaction: nil removes.
    func write(_ kinds: [String: KindRuns?]) throws(SQLiteError) {
        for (kind, runs) in kinds {
            if let runs {
                try upsert.bind(1, kind)
                try upsert.bind(2, blob: JSONWriter.encode(.array(runs.seconds.map(JSONValue.number))))
                try upsert.bind(3, Int64(runs.lastFinishedAt.rounded()))
                try upsert.run()
            } else {
                try delete.bind(1, kind)
                try delete.run()
            }
        }
    }

    func load() throws(SQLiteError) -> [String: KindRuns] {
        var kinds: [String: KindRuns] = [:]
        try database.prepare("SELECT kind, seconds, last_finished_at FROM kind_history").forEachRow { row in
            guard let kind = row.text(0), case .array(let items)? = try? JSONParser.parse(row.blob(1)) else { return }
            kinds[kind] = KindRuns.restored(items, lastFinishedAt: Double(row.int64(2)))
        }
        return kinds
    }
}

/// The history in a cluster's checkpoint (RedisCluster.swift): one line per kind, in kind order,
/// so every node writes the same bytes for the same state.
extension KindHistory {
    static func checkpointLines(_ kinds: [String: KindRuns]) -> [UInt8] {
        var body: [UInt8] = []
        for (kind, runs) in kinds.sorted(by: { $0.key < $1.key }) {
            body.append(UInt8(ascii: "\n"))
            body += JSONWriter.encode(
                .object([
                    ("history", .string(kind)), ("seconds", .array(runs.seconds.map(JSONValue.number))),
                    ("lastFinishedAt", .number(runs.lastFinishedAt)),
                ]))
        }
        return body
    }

    /// The kinds among a checkpoint's lines; the task lines are not theirs.
    static func fromCheckpoint(_ lines: [[UInt8]]) -> [String: KindRuns] {
        var kinds: [String: KindRuns] = [:]
        for line in lines where line.starts(with: Array(#"{"history":"#.utf8)) {
            guard let json = try? JSONParser.parse(line), case .string(let kind)? = json["history"], case .array(let items)? = json["seconds"],
                case .number(let last)? = json["lastFinishedAt"]
            else { continue }
            kinds[kind] = KindRuns.restored(items, lastFinishedAt: last)
        }
        return kinds
    }
}
