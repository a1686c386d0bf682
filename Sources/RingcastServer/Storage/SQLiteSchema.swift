import CSQLite
import Glibc
import RingcastCore

/// The storage file's layout and its versions, in one place. The version is SQLite's
/// `PRAGMA user_version`; each migration takes a file from the version before it to its own, in its
/// own transaction, so a file written by any earlier release opens in this one, and a file written
/// by a later release is refused rather than misread.
enum SQLiteSchema {
    struct Migration {
        let version: Int32
        let sql: String
    }

    /// Oldest first. A new release that changes the layout appends one; none is ever edited.
    static let migrations = [
        // 1: the tables Ringcast 0.1 wrote. 0.1 stamped no version, so its files read 0 and become
        // version 1 unchanged; an empty file gets the tables.
        Migration(
            version: 1,
            sql: """
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, body BLOB NOT NULL);
                """),
        // 2: log tails and the webhook outbox (FollowUpStorage.swift).
        Migration(version: 2, sql: FollowUpStatements.schema),
    ]

    /// The version this release writes.
    static var current: Int32 { migrations.last!.version }

    /// A file from a release newer than this one.
    struct TooNew: Error {
        let found: Int32
    }

    /// Brings the file to `current`. Returns the version a file that held tables had before, when
    /// it was older (nil for a new file, or one already current).
    static func migrate(_ database: SQLiteDatabase) throws -> Int32? {
        let found = try version(of: database)
        guard found <= current else { throw TooNew(found: found) }
        guard found < current else { return nil }
        var tables = 0
        try database.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'").forEachRow { row in tables = Int(row.text(0) ?? "") ?? 0 }
        for migration in migrations where migration.version > found {
            try database.transaction { () throws(SQLiteError) in
                try database.execute(migration.sql)
                try database.execute("PRAGMA user_version = \(migration.version)")
            }
        }
        return tables > 0 ? found : nil
    }

    /// What is wrong with the storage file at `path`, found by reading it only, before anything
    /// writes to it; nil for a file this release can open (or no file yet: it will be made).
    /// Ringcast never repairs or replaces a file it cannot read: its tasks may still be recovered.
    static func problem(withFileAt path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, status.st_size > 0 else { return nil }
        do {
            let database = try SQLiteDatabase(path: path, inspectOnly: true)
            // quick_check reads every page: a file cut short, or pages overwritten, fail here.
            var findings: [String] = []
            try database.prepare("PRAGMA quick_check(3)").forEachRow { row in findings.append(row.text(0) ?? "") }
            guard findings == ["ok"] else {
                // quick_check answers in lines, a heading first: one line of the first findings.
                let lines = findings.flatMap { $0.split(separator: "\n") }.filter { !$0.hasPrefix("***") }
                return "is damaged: \(lines.joined(separator: "; ").prefix(200))"
            }
            let found = try version(of: database)
            if found > current {
                return
                    "was written by a newer release of Ringcast (schema version \(found); Ringcast \(RingcastVersion.version) reads versions up to \(current)): run that release or a later one"
            }
            var tables: [String] = []
            try database.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").forEachRow { row in
                tables.append(row.text(0) ?? "")
            }
            if !tables.isEmpty, !(tables.contains("meta") && tables.contains("tasks")) {
                return "is another program's SQLite database (its tables: \(tables.prefix(5).joined(separator: ", "))), not Ringcast's"
            }
            return nil
        } catch {
            switch error.status & 0xFF {
            case SQLITE_NOTADB: return "is not an SQLite database (\(error.detail))"
            case SQLITE_CORRUPT: return "is damaged: \(error.detail)"
            default: return "cannot be read: \(error.detail) (\(error.call))"
            }
        }
    }

    static func version(of database: SQLiteDatabase) throws(SQLiteError) -> Int32 {
        var version: Int32 = 0
        try database.prepare("PRAGMA user_version").forEachRow { row in version = Int32(row.text(0) ?? "") ?? 0 }
        return version
    }

    /// The SQLite library this process runs, for `ringcast version`.
    static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}

/// What `ringcast version` reports of storage.
public enum StorageInfo {
    public static var schemaVersion: Int { Int(SQLiteSchema.current) }
    public static var sqliteVersion: String { SQLiteSchema.libraryVersion }
}
