import RingcastCore

/// The follow-up features' share of the SQLite file: each task's kept log lines, and the webhook outbox (the
/// deliveries still owed). Both are written in the transactions of `SQLitePersistence`, so an
/// outbox row is kept in the same commit as the state change that made it. Used where
/// SQLitePersistence uses its own statements: by the caller of `init`/`load`, then the writer thread.
struct FollowUpStatements {
    /// The tables, created if missing: schema version 2 (SQLiteSchema.swift).
    static let schema = """
        -- Log tails and the webhook outbox.
        CREATE TABLE IF NOT EXISTS task_logs (id TEXT PRIMARY KEY, lines BLOB NOT NULL);
        CREATE TABLE IF NOT EXISTS webhook_outbox (delivery TEXT PRIMARY KEY, hook INTEGER NOT NULL, url TEXT NOT NULL,
            body BLOB NOT NULL, attempts INTEGER NOT NULL, due INTEGER NOT NULL);
        """

    private let database: SQLiteDatabase
    private let upsertLog: SQLiteStatement
    private let deleteLog: SQLiteStatement
    private let upsertDelivery: SQLiteStatement
    private let deleteDelivery: SQLiteStatement

    init(_ database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        upsertLog = try database.prepare("INSERT INTO task_logs (id, lines) VALUES (?1, ?2) ON CONFLICT(id) DO UPDATE SET lines = excluded.lines")
        deleteLog = try database.prepare("DELETE FROM task_logs WHERE id = ?1")
        upsertDelivery = try database.prepare(
            """
            INSERT INTO webhook_outbox (delivery, hook, url, body, attempts, due) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT(delivery) DO UPDATE SET attempts = excluded.attempts, due = excluded.due
            """)
        deleteDelivery = try database.prepare("DELETE FROM webhook_outbox WHERE delivery = ?1")
    }

    /// Inside the caller's transaction: nil removes.
    func write(logs: [String: [String]?], deliveries: [String: WebhookDelivery?]) throws(SQLiteError) {
        for (id, lines) in logs {
            if let lines {
                try upsertLog.bind(1, id)
                try upsertLog.bind(2, blob: JSONWriter.encode(.array(lines.map(JSONValue.string))))
                try upsertLog.run()
            } else {
                try deleteLog.bind(1, id)
                try deleteLog.run()
            }
        }
        for (id, delivery) in deliveries {
            if let delivery {
                try upsertDelivery.bind(1, delivery.id)
                try upsertDelivery.bind(2, Int64(delivery.hook))
                try upsertDelivery.bind(3, delivery.url)
                try upsertDelivery.bind(4, blob: delivery.body)
                try upsertDelivery.bind(5, Int64(delivery.attempts))
                try upsertDelivery.bind(6, Int64(delivery.due.rounded()))
                try upsertDelivery.run()
            } else {
                try deleteDelivery.bind(1, id)
                try deleteDelivery.run()
            }
        }
    }

    func load() throws(SQLiteError) -> (logs: [String: [String]], deliveries: [WebhookDelivery]) {
        var logs: [String: [String]] = [:]
        try database.prepare("SELECT id, lines FROM task_logs").forEachRow { row in
            guard let id = row.text(0), case .array(let items)? = try? JSONParser.parse(row.blob(1)) else { return }
            logs[id] = items.compactMap {
                if case .string(let line) = $0 { return line }
                return nil
            }
        }
        var deliveries: [WebhookDelivery] = []
        try database.prepare("SELECT delivery, hook, url, body, attempts, due FROM webhook_outbox ORDER BY due").forEachRow { row in
            guard let id = row.text(0), let url = row.text(2) else { return }
            deliveries.append(
                WebhookDelivery(
                    id: id, hook: Int(row.int64(1)), url: url, body: row.blob(3),
                    attempts: Int(row.int64(4)), due: Double(row.int64(5))))
        }
        return (logs, deliveries)
    }
}
