import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

@testable import RingcastServer

/// A storage file is read back as outside input, on a real SQLite file edited between two runs:
/// its `meta` rows gone or garbage beside stored tasks is a warning, and the tasks are served under
/// a new epoch; a stored task that fails an update's checks is left out, named and counted.
final class StoredStateTests: XCTestCase {
    private var folder: TemporaryFolder!
    private var path: String { folder.file("state/ringcast.db").path }

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-stored-state") }
    override func tearDown() { folder?.remove() }

    /// A server on the file; what it logs at warning and above goes to `lines`.
    private func server(logging lines: Locked<[String]>? = nil) throws -> TestServer {
        let logger = lines.map { lines in Logger(level: .warning) { line in lines.withLock { $0.append(line) } } } ?? .silent
        return try TestServer(persistence: try SQLitePersistence(path: path, logger: logger), logger: logger)
    }

    private func listed(_ server: TestServer) throws -> (epoch: String, seq: Double, ids: Set<String>, tasks: [String: JSONValue]) {
        let answer = try JSONParser.parse(try server.http().request("GET", "/api/tasks").body)
        guard case .string(let epoch)? = answer["epoch"], case .number(let seq)? = answer["seq"], case .array(let tasks)? = answer["tasks"] else {
            throw XCTSkip("no task list")
        }
        var byID: [String: JSONValue] = [:]
        for task in tasks { if let id = task["id"]?.stringValue { byID[id] = task } }
        return (epoch, seq, Set(byID.keys), byID)
    }

    /// Runs `sql` on the file while no server holds it.
    private func edit(_ sql: String) throws { try SQLiteDatabase(path: path).execute(sql) }

    func testMetaRowsGoneOrGarbageAreAWarningAndTheStoredTasksAreServedUnderANewEpoch() throws {
        var first: TestServer? = try server()
        for id in ["keep.a", "keep.b", "keep.c"] { try first!.post("/api/tasks/\(id)", #"{"progress":0.5}"#) }
        let before = try listed(first!)
        first = nil

        for (name, sql, shown) in [
            ("gone", "DELETE FROM meta WHERE key IN ('epoch', 'seq');", "(epoch missing, seq missing)"),
            (
                "garbage", "INSERT OR REPLACE INTO meta (key, value) VALUES ('epoch', 'not an epoch!'), ('seq', '-5');",
                "(epoch 'not an epoch!', seq '-5')"
            ),
            ("seq past 2^53", "INSERT OR REPLACE INTO meta (key, value) VALUES ('seq', '18446744073709551615');", "seq '18446744073709551615'"),
        ] {
            try edit(sql)
            let lines = Locked<[String]>([])
            var second: TestServer? = try server(logging: lines)
            let after = try listed(second!)
            XCTAssertEqual(after.ids, before.ids, "\(name): the stored tasks are served, not dropped")
            XCTAssertNotEqual(after.epoch, before.epoch, "\(name): a new epoch, so every watcher gets a full snapshot")
            XCTAssertGreaterThanOrEqual(after.seq, before.seq, "\(name): the sequence goes on from the highest stored")
            let warning = lines.withLock { $0 }.first { $0.contains("meta rows are missing or unreadable") }
            XCTAssertNotNil(warning, "\(name): \(lines.withLock { $0 })")
            XCTAssertTrue(warning?.contains(path) == true && warning?.contains(shown) == true, "\(name): \(warning ?? "")")
            XCTAssertTrue(warning?.contains("its 3 stored tasks are served under a new epoch") == true, warning ?? "")
            // A change after it numbers on from there, and the next start reads the meta rows it wrote.
            let changed = try second!.post("/api/tasks/keep.a", #"{"progress":0.75}"#)
            XCTAssertGreaterThan(changed["task"]?["seq"]?.numberValue ?? 0, before.seq, name)
            second = nil
            let quiet = Locked<[String]>([])
            let third = try server(logging: quiet)
            XCTAssertEqual(try listed(third).epoch, after.epoch, "\(name): the new epoch was kept")
            XCTAssertEqual(quiet.withLock { $0 }, [], name)
        }

        // A file whose meta rows are gone and that holds no task is a new file: nothing to say.
        try edit("DELETE FROM tasks; DELETE FROM meta;")
        let lines = Locked<[String]>([])
        let empty = try server(logging: lines)
        XCTAssertEqual(try listed(empty).ids, [])
        XCTAssertEqual(lines.withLock { $0 }, [])
    }

    func testStoredTasksThatFailAnUpdatesChecksAreLeftOutNamedAndCounted() throws {
        var first: TestServer? = try server()
        for id in ["keep.good", "bad.title", "bad.units", "bad.seq", "bad.time"] {
            try first!.post("/api/tasks/\(id)", #"{"title":"T","completed":3,"total":10}"#)
        }
        first = nil
        let hugeTitle = String(repeating: "x", count: 20_000_000)
        for (id, from, to) in [
            ("bad.title", #""title":"T""#, #""title":"\#(hugeTitle)""#),
            ("bad.units", #""progress":0.3"#, #""progress":1e308"#),
            ("bad.units", #""total":10"#, #""total":-5"#),
            ("bad.seq", #""seq":"#, #""seq":1e300,"was":"#),
            ("bad.time", #""stored":{"publishedAt":"#, #""stored":{"publishedAt":-1e300,"was":"#),
        ] {
            let database = try SQLiteDatabase(path: path)
            var body: [UInt8] = []
            let select = try database.prepare("SELECT body FROM tasks WHERE id = ?1")
            try select.bind(1, id)
            try select.forEachRow { body = $0.blob(0) }
            let text = String(decoding: body, as: UTF8.self)
            XCTAssertTrue(text.contains(from), "\(id): \(from) in \(text)")
            let update = try database.prepare("UPDATE tasks SET body = ?1 WHERE id = ?2")
            try update.bind(1, blob: Array(text.replacingOccurrences(of: from, with: to).utf8))
            try update.bind(2, id)
            try update.run()
        }

        let lines = Locked<[String]>([])
        let second = try server(logging: lines)
        let after = try listed(second)
        XCTAssertEqual(after.ids, ["keep.good"])
        XCTAssertEqual(after.tasks["keep.good"]?["progress"], .number(0.3))
        let logged = lines.withLock { $0 }
        for (id, reason) in [
            ("bad.title", "title is longer than 200"), ("bad.units", "progress"), ("bad.seq", "\"seq\" is not a whole number"),
            ("bad.time", "stored.publishedAt is not an instant"),
        ] {
            let line = logged.filter { $0.contains("'\(id)'") }
            XCTAssertEqual(line.count, 1, "\(id): one line naming it: \(logged.map { $0.prefix(300) })")
            XCTAssertTrue(line.first?.contains(reason) == true && line.first?.contains(path) == true, "\(id): \(line.first?.prefix(300) ?? "")")
            XCTAssertLessThan(line.first?.utf8.count ?? 0, 1000, "the line does not carry the row")
        }
        XCTAssertTrue(
            logged.contains { $0.contains("4 stored tasks in \(path) failed the checks an update passes") }, "\(logged.map { $0.prefix(300) })")
        // The ids are free to publish again, and what is published replaces the rows left out.
        XCTAssertEqual(try second.http().request("POST", "/api/tasks/bad.units", json: #"{"progress":0.5}"#).status, 200)
        XCTAssertEqual(try listed(second).tasks["bad.units"]?["progress"], .number(0.5))
    }
}
