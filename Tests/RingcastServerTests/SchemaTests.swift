import Foundation
import RingcastCore
import RingcastTestSupport
import XCTest

@testable import RingcastServer

/// Upgrades keep state: the storage file carries its schema version; a file of the release before
/// versions opens with every task, and a file of a newer release is refused with a message that says so.
final class SchemaTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-schema") }
    override func tearDown() { folder?.remove() }

    private static let fixtures = URL(fileURLWithPath: repositoryRoot).appendingPathComponent("Tests/fixtures")

    /// A copy of the fixture (opening a file migrates it).
    private func previousReleaseFile() throws -> String {
        let copy = folder.file("previous.db")
        try FileManager.default.copyItem(at: SchemaTests.fixtures.appendingPathComponent("previous-schema.db"), to: copy)
        return copy.path
    }

    private func version(of path: String) throws -> Int32 {
        try SQLiteSchema.version(of: SQLiteDatabase(path: path))
    }

    func testAFileOfTheReleaseBeforeVersionsOpensWithEveryTask() throws {
        let path = try previousReleaseFile()
        XCTAssertEqual(try version(of: path), 0, "the fixture is unversioned, as that release wrote it")
        final class Lines: @unchecked Sendable { var items: [String] = [] }  // written on this thread only
        let lines = Lines()
        let persistence = try SQLitePersistence(path: path, logger: Logger(level: .info) { lines.items.append($0) })
        let state = try XCTUnwrap(persistence.load())

        let expected = try JSONParser.parse(Array(Data(contentsOf: SchemaTests.fixtures.appendingPathComponent("previous-schema.tasks.json"))))
        XCTAssertEqual(expected["epoch"], .string(state.epoch), "the epoch survives, so pages resume")
        XCTAssertEqual(expected["seq"], .number(Double(state.seq)))
        guard case .array(let tasks)? = expected["tasks"] else { return XCTFail("the fixture's list holds no tasks") }
        XCTAssertEqual(state.tasks.count, tasks.count)
        let loaded = Dictionary(uniqueKeysWithValues: state.tasks.map { ($0.id, $0) })
        for task in tasks {
            guard case .string(let id)? = task["id"], let record = loaded[id] else {
                XCTFail("\(task) did not come back")
                continue
            }
            // The task as the old server showed it (timer fields are computed with the clock, so
            // they are compared at the time the old server answered).
            var writer = JSONWriter()
            writer.beginObject()
            record.writeFields(into: &writer, now: record.updatedAt)
            writer.endObject()
            let now = try JSONParser.parse(writer.bytes)
            for key in [
                "title", "detail", "progress", "completed", "total", "state", "visible", "modal", "hideAt", "parent", "staleAfter", "seq",
                "updatedAt",
            ] {
                XCTAssertEqual(now[key], task[key], "\(id).\(key)")
            }
            XCTAssertEqual(now["timer"]?["pausedAt"], task["timer"]?["pausedAt"], "\(id): a paused timer stays paused")
        }
        XCTAssertEqual(try version(of: path), SQLiteSchema.current, "opening stamps the current version")
        XCTAssertTrue(lines.items.contains { $0.contains("upgraded from schema version 0 to \(SQLiteSchema.current)") }, "\(lines.items)")

        // And a server serves them (running ones: finished ones may be past their retention by now).
        persistence.flush()
        let server = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent))
        XCTAssertEqual(try server.task("ci.build-42")?["detail"], .string("compiling"))
        XCTAssertEqual(try server.task("release.docs")?["parent"], .string("release"))
    }

    func testANewFileIsStampedAndAStampedOneIsLeftAlone() throws {
        let path = folder.file("new.db").path
        _ = try SQLitePersistence(path: path, logger: .silent)
        XCTAssertEqual(try version(of: path), SQLiteSchema.current)
        final class Lines: @unchecked Sendable { var items: [String] = [] }  // written on this thread only
        let lines = Lines()
        _ = try SQLitePersistence(path: path, logger: Logger(level: .debug) { lines.items.append($0) })
        XCTAssertFalse(lines.items.contains { $0.contains("upgraded") }, "\(lines.items)")
    }

    func testAFileOfANewerReleaseIsRefusedWithAMessageThatSaysSo() throws {
        let path = folder.file("newer.db").path
        let database = try SQLiteDatabase(path: path)
        try database.execute("CREATE TABLE future (x); PRAGMA user_version = \(SQLiteSchema.current + 1)")
        XCTAssertThrowsError(try SQLitePersistence(path: path, logger: .silent)) { error in
            let message = "\(error)"
            XCTAssertTrue(message.contains("written by a newer release of Ringcast"), message)
            XCTAssertTrue(message.contains("schema version \(SQLiteSchema.current + 1)"), message)
            XCTAssertTrue(message.contains(path), message)
        }
        XCTAssertEqual(try version(of: path), SQLiteSchema.current + 1, "the newer file is not touched")
    }

    func testMigrationsAscendFromOne() {
        XCTAssertEqual(SQLiteSchema.migrations.map(\.version), Array(1...SQLiteSchema.current))
    }
}
