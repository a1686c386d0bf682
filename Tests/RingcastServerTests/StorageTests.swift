import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

final class StorageTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-storage") }
    override func tearDown() { folder?.remove() }

    private func server(port: Int = 0) throws -> TestServer {
        let path = folder.file("state/ringcast.db").path
        let persistence = try SQLitePersistence(path: path, logger: .silent)
        return try TestServer(persistence: persistence) { $0.port = port }
    }

    func testAStorageThatIsNotARedisURLSaysWhatIsWrongWithIt() {
        var config = ServerConfig()
        config.storage = "redis://127.0.0.1:6379/16"
        XCTAssertThrowsError(try Server.storage(for: config, baseDirectory: folder.url.path, logger: .silent)) { error in
            XCTAssertEqual(
                "\(error)",
                "storage 'redis://127.0.0.1:6379/16' is not a Redis URL: the database '16' is not a number from 0 to 15; "
                    + "write redis://HOST[:PORT][/DB], like redis://127.0.0.1:6379")
        }
    }

    func testWaitingForRedisReplicasWithoutRedisIsRefusedAtStart() {
        var config = ServerConfig()
        config.redisReplicas = 1
        config.storage = "memory"
        XCTAssertThrowsError(try Server.storage(for: config, baseDirectory: folder.url.path, logger: .silent)) { error in
            XCTAssertTrue("\(error)".contains("redisReplicas is 1 but storage is memory, not Redis"), "\(error)")
        }
    }

    func testARestartBringsBackEveryTaskItsEpochAndItsSequence() throws {
        var first: TestServer? = try server()
        try first!.post("/api/tasks/keep.progress", #"{"title":"Half","progress":0.5,"detail":"écrit — \"quoted\""}"#)
        try first!.post("/api/tasks/keep.done", #"{"progress":0.3}"#)
        try first!.post("/api/tasks/keep.done", #"{"state":"done"}"#)
        try first!.post("/api/tasks/keep.shown/show", #"{"hideAfter":60,"modal":true}"#)
        try first!.post("/api/timers/keep.timer", #"{"seconds":30,"interval":1}"#)
        try first!.post("/api/tasks/keep.parent", #"{"title":"Parent"}"#)
        try first!.post("/api/tasks/keep.child", #"{"parent":"keep.parent","completed":1,"total":4}"#)
        try first!.post("/api/tasks/gone", "{}")
        XCTAssertEqual(try first!.http().request("DELETE", "/api/tasks/gone").status, 200)
        let before = try JSONParser.parse(try first!.http().request("GET", "/api/tasks").body)
        first = nil  // stops the server, which flushes what was written behind

        let second = try server()
        let after = try JSONParser.parse(try second.http().request("GET", "/api/tasks").body)
        XCTAssertEqual(after["epoch"], before["epoch"], "the epoch survives, so watchers can resume")
        XCTAssertEqual(after["seq"], before["seq"])
        guard case .array(let beforeTasks)? = before["tasks"], case .array(let afterTasks)? = after["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(afterTasks.count, 6)
        func byID(_ tasks: [JSONValue]) -> [String: JSONValue] {
            Dictionary(
                uniqueKeysWithValues: tasks.compactMap { task in
                    if case .string(let id)? = task["id"] { return (id, task) }
                    return nil
                })
        }
        let old = byID(beforeTasks)
        let new = byID(afterTasks)
        for id in ["keep.progress", "keep.done", "keep.shown", "keep.parent", "keep.child"] {
            XCTAssertEqual(new[id], old[id], "\(id) came back changed")
        }
        XCTAssertNil(new["gone"])
        XCTAssertEqual(new["keep.done"]?["state"], .string("done"))
        XCTAssertEqual(new["keep.parent"]?["progress"], .number(0.25))
        XCTAssertEqual(new["keep.timer"]?["state"], .string("running"))
        XCTAssertEqual(new["keep.timer"]?["timer"]?["startedAt"], old["keep.timer"]?["timer"]?["startedAt"], "a timer keeps its phase")

        // A page that saw the last seq before the restart resumes with nothing to catch up on.
        guard case .string(let epoch)? = before["epoch"], case .number(let seq)? = before["seq"] else { return XCTFail("no epoch") }
        let watcher = TestWatcher(second.wsURL + "?since=\(epoch):\(Int(seq))")
        let snapshot = watcher.waitForSnapshot().snapshot
        XCTAssertEqual(snapshot.event["full"], .bool(false), "same epoch: the page resumes instead of starting over")
        guard case .array(let changed)? = snapshot.event["tasks"] else { return XCTFail("no tasks in the snapshot") }
        XCTAssertTrue(changed.allSatisfy { $0["id"] == .string("keep.timer") }, "only the ticking timer changed since: \(changed)")
        XCTAssertEqual(snapshot.event["removed"], .array([]))
        // The timer ticks on from where it was.
        let tick = watcher.wait(timeout: 3) { $0.contains { $0.type == "tick" } }.first { $0.type == "tick" }!
        XCTAssertGreaterThan(tick.number("seq")!, seq)
        try second.post("/api/tasks/keep.progress", #"{"progress":0.6}"#)
        let next = try JSONParser.parse(try second.http().request("GET", "/api/tasks/keep.progress").body)
        guard case .number(let nextSeq)? = next["seq"] else { return XCTFail("no seq") }
        XCTAssertGreaterThan(nextSeq, seq, "the sequence carries on after a restart")
    }
}
