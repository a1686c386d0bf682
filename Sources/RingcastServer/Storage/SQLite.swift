import CSQLite
import RingcastPlatform

/// A failed SQLite call: the call, SQLite's result code as its status, and SQLite's message.
typealias SQLiteError = CCallError

/// One SQLite connection. Every call's result is checked in one place (`check`), and a failure
/// throws an error naming the call. One thread at a time (opened with SQLITE_OPEN_NOMUTEX).
final class SQLiteDatabase {
    private let handle: OpaquePointer

    /// `busyTimeoutMilliseconds`: how long a statement waits for another connection's lock.
    /// `inspectOnly`: the file must exist, and nothing is written to it or beside it (SQLite's
    /// `immutable` open makes no -wal or -shm file, and reads the main file alone).
    init(path: String, busyTimeoutMilliseconds: Int32 = 5000, inspectOnly: Bool = false) throws(SQLiteError) {
        var opened: OpaquePointer?
        let status =
            inspectOnly
            ? sqlite3_open_v2(SQLiteDatabase.immutableURI(path), &opened, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nil)
            : sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(opened)
            throw SQLiteError("sqlite3_open_v2", SQLiteDatabase.describe(status, message), status: status)
        }
        handle = opened
        // Another connection writing (a server shutting down while the next one opens the file)
        // makes SQLite wait, not fail at once.
        sqlite3_busy_timeout(opened, busyTimeoutMilliseconds)
    }

    deinit { sqlite3_close(handle) }

    /// `file:PATH?immutable=1`, the path percent-encoded where a URI needs it.
    private static func immutableURI(_ path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "%"), UInt8(ascii: "?"), UInt8(ascii: "#"), 0..<0x21, 0x7F...:
                encoded += (byte < 16 ? "%0" : "%") + String(byte, radix: 16, uppercase: true)
            default: encoded.append(Character(UnicodeScalar(byte)))
            }
        }
        return "file:\(encoded)?immutable=1"
    }

    /// Throws unless `status` is one of `accepted` (SQLITE_OK by default).
    fileprivate func check(_ status: Int32, _ call: String, accepting accepted: Set<Int32> = [SQLITE_OK]) throws(SQLiteError) {
        try checked(
            status, call, failsWhen: { !accepted.contains($0) },
            detail: { status, _ in SQLiteDatabase.describe(status, String(cString: sqlite3_errmsg(handle))) })
    }

    /// SQLite's message and its result code, as a `CCallError`'s detail.
    fileprivate static func describe(_ status: Int32, _ message: String) -> String { "\(message) (SQLite result \(status))" }

    /// Runs statements that return no rows.
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        try checked(
            status, "sqlite3_exec", failsWhen: { $0 != SQLITE_OK },
            detail: { status, _ in SQLiteDatabase.describe(status, message.map { String(cString: $0) } ?? "unknown error") })
    }

    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v2(handle, sql, -1, &statement, nil), "sqlite3_prepare_v2")
        guard let statement else { throw SQLiteError("sqlite3_prepare_v2", "empty statement: \(sql)", status: SQLITE_MISUSE) }
        return SQLiteStatement(statement, database: self)
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction(_ body: () throws(SQLiteError) -> Void) throws(SQLiteError) {
        try execute("BEGIN")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

/// A prepared statement of one database; its bindings and steps are checked like every other call.
final class SQLiteStatement {
    private let statement: OpaquePointer
    private let database: SQLiteDatabase

    fileprivate init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit { sqlite3_finalize(statement) }

    func bind(_ index: Int32, _ text: String) throws(SQLiteError) {
        try database.check(sqlite3_bind_text(statement, index, text, -1, rc_sqlite_transient()), "sqlite3_bind_text")
    }

    func bind(_ index: Int32, _ number: Int64) throws(SQLiteError) {
        try database.check(sqlite3_bind_int64(statement, index, number), "sqlite3_bind_int64")
    }

    func bind(_ index: Int32, blob: [UInt8]) throws(SQLiteError) {
        let status = blob.withUnsafeBytes { sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), rc_sqlite_transient()) }
        try database.check(status, "sqlite3_bind_blob")
    }

    /// Runs a statement that returns no rows, then makes it ready for the next bindings.
    func run() throws(SQLiteError) {
        defer { reset() }
        try database.check(sqlite3_step(statement), "sqlite3_step", accepting: [SQLITE_DONE])
    }

    /// Steps through the rows, then makes the statement ready for the next bindings.
    func forEachRow(_ row: (SQLiteStatement) -> Void) throws(SQLiteError) {
        defer { reset() }
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            try database.check(status, "sqlite3_step", accepting: [SQLITE_ROW])
            row(self)
        }
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func text(_ column: Int32) -> String? {
        sqlite3_column_text(statement, column).map { String(cString: $0) }
    }

    private func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }
}
