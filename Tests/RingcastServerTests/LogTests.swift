import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Log tails through the real server: appended over HTTP (JSON or text/plain) and on a socket,
/// followed by a watcher, read back, kept across a restart.
final class LogTests: XCTestCase {
    /// A POST with a body of its own content type.
    private func postText(_ server: TestServer, _ path: String, _ text: String) throws -> HTTPResponse {
        try server.http().request("POST", path, body: Array(text.utf8), headers: [("Content-Type", "text/plain")])
    }

    func testLinesReachAWatcherAsAppendedLinesAndTheTailIsReadBack() throws {
        let server = try TestServer { $0.logLines = 4 }
        try server.post("/api/tasks/ci.build", #"{"title":"Build"}"#)
        let watcher = TestWatcher(server.wsURL + "?watch=ci.*")
        watcher.waitForSnapshot()
        try server.post("/api/tasks/ci.build/log", #"{"lines":["compiling a.c","compiling b.c"]}"#)
        let plain = try postText(server, "/api/tasks/ci.build/log", "linking\nwarning: unused x\n")
        XCTAssertEqual(plain.status, 200, plain.text)
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }
        publisher.connection.send(#"{"type":"log","id":"ci.build","lines":["done"]}"#)

        let logs = watcher.wait { $0.filter { $0.type == "log" }.count == 3 }.filter { $0.type == "log" }
        XCTAssertEqual(logs.map { $0.number("from") }, [0, 2, 4])
        XCTAssertEqual(
            logs.map { $0.event["lines"] },
            [
                .array([.string("compiling a.c"), .string("compiling b.c")]),
                .array([.string("linking"), .string("warning: unused x")]), .array([.string("done")]),
            ])
        XCTAssertEqual(logs.last?.number("logCount"), 5)
        let tail = try JSONParser.parse(try server.http().request("GET", "/api/tasks/ci.build/log").body)
        XCTAssertEqual(tail["from"], .number(1))
        XCTAssertEqual(tail["lines"], .array(["compiling b.c", "linking", "warning: unused x", "done"].map(JSONValue.string)))
    }

    func testTheTailIsKeptAcrossARestart() throws {
        let folder = try TemporaryFolder("ringcast-logs")
        defer { folder.remove() }
        let path = folder.file("ringcast.db").path
        var first: TestServer? = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent))
        try first!.post("/api/tasks/job", "{}")
        try first!.post("/api/tasks/job/log", #"{"lines":["one","two"]}"#)
        try first!.post("/api/tasks/gone", "{}")
        try first!.post("/api/tasks/gone/log", #"{"lines":["x"]}"#)
        XCTAssertEqual(try first!.http().request("DELETE", "/api/tasks/gone").status, 200)
        first = nil
        let second = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent))
        let tail = try JSONParser.parse(try second.http().request("GET", "/api/tasks/job/log").body)
        XCTAssertEqual(tail["lines"], .array([.string("one"), .string("two")]))
        XCTAssertEqual(tail["logCount"], .number(2))
        try second.post("/api/tasks/gone", "{}")
        XCTAssertEqual(
            try JSONParser.parse(try second.http().request("GET", "/api/tasks/gone/log").body)["lines"], .array([]),
            "a removed task's log went with it")
    }
}
