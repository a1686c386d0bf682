import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// A storage file the server cannot open as its own stops `ringcast serve` at start with one line
/// that names the file and what is wrong, exit 2, and the file left byte for byte as it was.
final class StorageFileTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-storage-file") }
    override func tearDown() { folder?.remove() }

    /// A real storage file of `count` tasks, written by a server.
    private func realDatabase(tasks count: Int) throws -> [UInt8] {
        let config = folder.file("real.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"real.db"}"#.utf8).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        let client = HTTPClient(host: "127.0.0.1", port: served.port)
        let detail = String(repeating: "d", count: 300)
        for index in 0..<count {
            let body = #"{"title":"Task \#(index)","state":"done","detail":"\#(detail)"}"#
            XCTAssertEqual(try client.request("POST", "/api/tasks/t\(index)", json: body).status, 200)
        }
        XCTAssertEqual(served.stop(), 0)
        // What the server left in its -wal goes into the file, so the file alone holds every task.
        let checkpointed = try runToEnd("/usr/bin/sqlite3", [folder.file("real.db").path, "PRAGMA wal_checkpoint(TRUNCATE);"])
        XCTAssertEqual(checkpointed.status, 0, checkpointed.output)
        return Array(try Data(contentsOf: folder.file("real.db")))
    }

    /// `sqlite3` on a scratch file, for a database Ringcast did not write.
    private func sqliteDatabase(_ name: String, _ sql: String) throws -> [UInt8] {
        let path = folder.file(name).path
        let made = try runToEnd("/usr/bin/sqlite3", [path, sql])
        XCTAssertEqual(made.status, 0, made.output)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func testACorruptTruncatedForeignOrNewerFileIsOneLineAndExit2AndLeftAsItWas() throws {
        try MissingBinary.check()
        let real = try realDatabase(tasks: 150)
        XCTAssertGreaterThan(real.count, 16 * 4096, "a database of many pages")
        var generator = SystemRandomNumberGenerator()
        let random = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var newer = real
        // PRAGMA user_version sits at bytes 60–63 of the header, big-endian.
        newer.replaceSubrange(60..<64, with: [0, 0, 0, 99])
        let cases: [(name: String, bytes: [UInt8], says: String)] = [
            ("random.db", random, "is not an SQLite database"),
            ("half.db", Array(real.prefix(real.count / 2)), "is damaged"),
            ("cut-mid-page.db", Array(real.prefix(real.count / 2 + 1000)), "is damaged"),
            (
                "pages-overwritten.db", Array(real.prefix(8 * 4096)) + [UInt8](repeating: 0xFF, count: 4096) + Array(real.dropFirst(9 * 4096)),
                "is damaged"
            ),
            (
                "foreign.db",
                try sqliteDatabase(
                    "made-foreign.db", "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada');"),
                "another program's SQLite database (its tables: users)"
            ),
            ("newer.db", newer, "was written by a newer release of Ringcast (schema version 99"),
        ]
        let config = folder.file("config.json")
        for (name, bytes, says) in cases {
            let path = folder.file(name).path
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"\#(name)"}"#.utf8).write(to: config)
            // Bounded: a server that started after all would be stopped, and the status say so.
            let served = try runToEnd("/usr/bin/timeout", ["20", ringcastBinary, "serve", "--config", config.path])
            XCTAssertEqual(served.status, 2, "\(name): \(served.output)")
            let lines = served.output.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, "\(name): one line, not \(served.output)")
            XCTAssertTrue(served.output.contains("'\(path)'") && served.output.contains(says), "\(name): \(served.output)")
            XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: path))), bytes, "\(name) was changed")
            for side in ["-wal", "-shm", "-journal"] {
                XCTAssertFalse(FileManager.default.fileExists(atPath: path + side), "\(name)\(side) was made beside it")
            }
        }

        // The real file itself opens, with every task.
        try Data(real).write(to: folder.file("whole.db"))
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"whole.db"}"#.utf8).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        let list = try JSONParser.parse(try HTTPClient(host: "127.0.0.1", port: served.port).request("GET", "/api/tasks").body)
        guard case .array(let tasks)? = list["tasks"] else { return XCTFail("no task list") }
        XCTAssertEqual(tasks.count, 150)
        XCTAssertEqual(served.stop(), 0)
    }
}
