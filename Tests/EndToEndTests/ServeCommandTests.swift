import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// `ringcast serve` as a process: what it prints first, how it stops, what survives kill -9.
final class ServeCommandTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-serve") }
    override func tearDown() { folder?.remove() }

    func testTheExecutablePrintsWhereItListensFirst() throws {
        let configURL = folder.file("config.json")
        try Data(#"{"host":"127.0.0.1","port":8080,"publicDir":"\#(repositoryRoot)/Public"}"#.utf8).write(to: configURL)
        let served = try ServeProcess(["--config", configURL.path, "--port", "0"])
        let prefix = "listening on http://127.0.0.1:"
        XCTAssertTrue(served.firstLine.hasPrefix(prefix), "first line: \(served.firstLine)")
        let port = try XCTUnwrap(Int(served.firstLine.dropFirst(prefix.count)))
        XCTAssertNotEqual(port, 8080, "--port 0 overrides the config and takes a free port")
        XCTAssertEqual(try HTTPClient(host: "127.0.0.1", port: port).request("GET", "/healthz").status, 200)
        XCTAssertEqual(served.stop(), 0, "SIGTERM stops the server cleanly")

        let bad = try RingcastProcess.run(["serve", "--config", configURL.path, "--port", "http"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("--port"))
    }

    func testKillNineLosesNoTerminalStateAndOnlyTheLastQuarterSecondOfProgress() throws {
        let config = folder.file("config.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"data/ringcast.db"}"#.utf8).write(to: config)

        var served = try ServeProcess(["--config", config.path])
        var client = HTTPClient(host: "127.0.0.1", port: served.port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/job.failed", json: #"{"progress":0.4}"#).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/job.failed", json: #"{"state":"failed","detail":"exit 3"}"#).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/job.slow", json: #"{"progress":0.7}"#).status, 200)
        // Plain progress is written behind (within SQLitePersistence.writeBehindSeconds): wait until
        // the file holds it, allowing a loaded machine more than the quarter second it promises.
        let database = folder.file("data/ringcast.db").path
        XCTAssertTrue(
            eventually(timeout: 3) { storedProgress(of: "job.slow", in: database) == 0.7 },
            "the progress written behind never reached the file")
        XCTAssertEqual(try client.request("POST", "/api/tasks/job.hidden/show", json: "{}").status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/job.hidden/hide", json: "{}").status, 200)
        _ = served.stop(SIGKILL)

        served = try ServeProcess(["--config", config.path])
        client = HTTPClient(host: "127.0.0.1", port: served.port)
        let failed = try JSONParser.parse(try client.request("GET", "/api/tasks/job.failed").body)
        XCTAssertEqual(failed["state"], .string("failed"))
        XCTAssertEqual(failed["detail"], .string("exit 3"))
        XCTAssertEqual(try JSONParser.parse(try client.request("GET", "/api/tasks/job.slow").body)["progress"], .number(0.7))
        XCTAssertEqual(try JSONParser.parse(try client.request("GET", "/api/tasks/job.hidden").body)["visible"], .bool(false))
    }
}

extension ServeCommandTests {
    /// An answer means it is kept: 1 000 tasks posted one by one, a third running, a third created
    /// done and a third failed in one request each, then kill -9 right after the last answer.
    func testAThousandAnswersOfMixedStatesSurviveKillNineRightAfterTheLastAnswer() throws {
        let config = folder.file("config.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"data/ringcast.db"}"#.utf8).write(to: config)
        var served = try ServeProcess(["--config", config.path])
        var client = HTTPClient(host: "127.0.0.1", port: served.port)
        var expected: [String: String] = [:]
        // A batch that ends a task, removes one and shows one: each kept before its answer.
        for index in [3, 30] { XCTAssertEqual(try client.request("POST", "/api/tasks/mixed.\(index)", json: "{}").status, 200) }
        let batch = try client.request(
            "POST", "/api/events",
            json:
                #"[{"type":"update","id":"mixed.30","state":"cancelled"},{"type":"remove","id":"mixed.3"},{"type":"show","id":"mixed.shown","hideAfter":600}]"#
        )
        XCTAssertEqual(batch.status, 200, batch.text)
        // Then 1 000 tasks; the last answer is for a task created done, and nothing comes after it.
        for index in 4...1003 where index != 30 {
            let id = "mixed.\(index)"
            let body: String
            switch index % 3 {
            case 0: body = #"{"progress":0.5}"#
            case 1:
                body = #"{"state":"done","title":"Done \#(index)"}"#
                expected[id] = "done"
            default:
                body = #"{"state":"failed","detail":"exit \#(index)"}"#
                expected[id] = "failed"
            }
            let answer = try client.request("POST", "/api/tasks/\(id)", json: body)
            XCTAssertEqual(answer.status, 200, answer.text)
        }
        expected["mixed.30"] = "cancelled"
        _ = served.stop(SIGKILL)

        served = try ServeProcess(["--config", config.path])
        client = HTTPClient(host: "127.0.0.1", port: served.port)
        let list = try JSONParser.parse(try client.request("GET", "/api/tasks?watch=mixed.*").body)
        guard case .array(let tasks)? = list["tasks"] else { return XCTFail("no task list") }
        var states: [String: String] = [:]
        for task in tasks { if case .string(let id)? = task["id"], case .string(let state)? = task["state"] { states[id] = state } }
        var wrong: [String] = []
        for (id, state) in expected where states[id] != state { wrong.append("\(id): \(states[id] ?? "missing") instead of \(state)") }
        XCTAssertTrue(wrong.isEmpty, "\(wrong.count) of \(expected.count) terminal states came back wrong: \(wrong.prefix(5))")
        XCTAssertNil(states["mixed.3"], "the removal was kept")
        XCTAssertEqual(states["mixed.shown"], "running", "the show was kept")
        let failed = try JSONParser.parse(try client.request("GET", "/api/tasks/mixed.1001").body)
        XCTAssertEqual(failed["detail"], .string("exit 1001"), "a terminal task comes back whole, not just its state")
    }

    /// README: plain progress is written behind, at most writeBehindSeconds later.
    func testPlainProgressReachesTheFileWithinTheWriteBehindWindow() throws {
        let config = folder.file("config.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"state.db"}"#.utf8).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        let client = HTTPClient(host: "127.0.0.1", port: served.port)
        let database = folder.file("state.db").path
        XCTAssertEqual(try client.request("POST", "/api/tasks/behind", json: #"{"progress":0.3}"#).status, 200)
        let answeredAt = nowMs()
        XCTAssertTrue(eventually(timeout: 3) { storedProgress(of: "behind", in: database) == 0.3 })
        XCTAssertOnTime(
            nowMs(), due: answeredAt + SQLitePersistence.writeBehindSeconds * 1000, early: SQLitePersistence.writeBehindSeconds * 1000,
            "written behind within \(SQLitePersistence.writeBehindSeconds) s (a loaded machine is allowed its usual lateness)")
        _ = served.stop(SIGKILL)
    }
}

/// The progress of task `id` as the storage file holds it now (nil when the file or the task is
/// not there yet), read through the storage engine itself, which a running server leaves readable.
private func storedProgress(of id: String, in path: String) -> Double? {
    guard FileManager.default.fileExists(atPath: path),
        let persistence = try? SQLitePersistence(path: path, logger: .silent),
        let state = persistence.load(),
        let task = state.tasks.first(where: { $0.id == id })
    else { return nil }
    return task.progress
}

/// One server per address and per storage file: a second `serve` would split the clients, or
/// write its own epoch's events into the first one's file.
extension ServeCommandTests {
    func testASecondServeOnTheSameConfigurationExitsNamingTheFirst() throws {
        let config = folder.file("config.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","storage":"data/ringcast.db","logLevel":"error"}"#.utf8).write(to: config)
        let first = try ServeProcess(["--config", config.path])
        let pid = first.process.processIdentifier

        let again = try RingcastProcess.run(["serve", "--config", config.path, "--port", String(first.port)])
        XCTAssertNotEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stderr.contains("process \(pid)"), "names the holder: \(again.stderr)")
        XCTAssertTrue(again.stderr.contains("ringcast.db"), again.stderr)

        let elsewhere = try RingcastProcess.run(["serve", "--config", config.path, "--port", "0"])
        XCTAssertNotEqual(elsewhere.status, 0, "another port, the same storage file: \(elsewhere.stderr)")
        XCTAssertTrue(elsewhere.stderr.contains("process \(pid)"), elsewhere.stderr)
        XCTAssertTrue(elsewhere.stdout.isEmpty, "it never listened: \(elsewhere.stdout)")

        XCTAssertEqual(try HTTPClient(host: "127.0.0.1", port: first.port).request("GET", "/healthz").status, 200, "the first serves on")
        XCTAssertEqual(first.stop(), 0)
        let released = try ServeProcess(["--config", config.path, "--port", String(first.port)])
        XCTAssertEqual(released.port, first.port, "the file and the port are free once the first stopped")
        XCTAssertEqual(released.stop(), 0)
    }

    func testASecondServeOnTheSamePortExitsNamingTheFirstWithoutStorage() throws {
        let config = folder.file("config.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","logLevel":"error","threads":2}"#.utf8).write(to: config)
        let first = try ServeProcess(["--config", config.path])
        let again = try RingcastProcess.run(["serve", "--config", config.path, "--port", String(first.port)])
        XCTAssertNotEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stderr.contains("pid \(first.process.processIdentifier)"), "names the holder: \(again.stderr)")
        XCTAssertTrue(again.stderr.contains("127.0.0.1:\(first.port)"), again.stderr)

        XCTAssertEqual(first.stop(), 0)
    }

    /// Another program's listener that offers to share its port (SO_REUSEPORT, as the kernel
    /// allows any process of the same user): `serve` refuses to join it.
    func testServeDoesNotShareAPortWithAnotherProgramThatWouldShare() throws {
        let config = folder.file("config.json")
        try Data(#"{"port":0,"publicDir":"\#(repositoryRoot)/Public","logLevel":"error"}"#.utf8).write(to: config)
        let foreign = try ListeningSocket(host: "127.0.0.1", port: 0, sharesPort: true)
        let refused = try RingcastProcess.run(["serve", "--config", config.path, "--port", String(foreign.port)])
        XCTAssertNotEqual(refused.status, 0, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("in use"), refused.stderr)
        XCTAssertTrue(refused.stdout.isEmpty, refused.stdout)
    }
}
