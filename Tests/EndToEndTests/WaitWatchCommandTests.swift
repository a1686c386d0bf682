import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// `ringcast wait` and `ringcast watch` through the built executable: the exit status each end
/// gives, the timeout, a task that appears later, and a `ringcast serve` restarted on the same
/// port (SQLite storage) in the middle; `watch` read through a real pty (`script`, util-linux).
final class WaitWatchCommandTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-wait") }
    override func tearDown() { folder?.remove() }

    /// `ringcast serve` on `port`, keeping its state in a SQLite file of the test's, so that a
    /// second start on the same port takes up where the first stopped.
    private func serve(port: Int) throws -> ServeProcess {
        let config = folder.file("config.json")
        try Data(
            #"{"port": \#(port), "publicDir": "\#(emptyPublicDirectory)", "storage": "\#(folder.file("ringcast.db").path)", "logLevel": "error"}"#
                .utf8
        ).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        XCTAssertEqual(served.port, port, served.firstLine)
        return served
    }

    // MARK: wait

    func testWaitExitsWithHowTheTasksEnded() throws {
        let server = try producerServer()
        try server.post("/api/tasks/ci.built", #"{"state":"done"}"#)
        try server.post("/api/tasks/ci.broken", #"{"state":"failed","detail":"exit status 2"}"#)
        try server.post("/api/tasks/ci.stopped", #"{"state":"cancelled","detail":"cancelled on request"}"#)
        try server.post("/api/tasks/ci.slow", #"{"progress":0.2}"#)

        let done = try RingcastProcess.run(["wait", "ci.built"], server: server)
        XCTAssertEqual(done.status, 0, done.stderr)
        XCTAssertEqual(done.stdout, "ci.built done\n")

        let failed = try RingcastProcess.run(["wait", "ci.built", "ci.broken"], server: server)
        XCTAssertEqual(failed.status, 1, failed.stderr)
        XCTAssertTrue(failed.stdout.contains("ci.broken failed: exit status 2\n"), failed.stdout)

        let cancelled = try RingcastProcess.run(["wait", "ci.stopped", "--quiet"], server: server)
        XCTAssertEqual(cancelled.status, 3, cancelled.stderr)
        XCTAssertEqual(cancelled.stdout, "", "--quiet prints nothing")

        let started = Date()
        let timedOut = try RingcastProcess.run(["wait", "ci.slow", "ci.built", "--timeout", "1s"], server: server)
        XCTAssertEqual(timedOut.status, 4, timedOut.stderr)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1, "not before the timeout")
        XCTAssertEqual(timedOut.stderrLines, ["ringcast: wait: --timeout passed; still waiting for ci.slow"])
        XCTAssertEqual(timedOut.stdout, "ci.slow running 20%\nci.built done\n")

        // Any end: the worst of them.
        XCTAssertEqual(try RingcastProcess.run(["wait", "ci.built", "ci.stopped", "--for", "ended"], server: server).status, 3)
        XCTAssertEqual(try RingcastProcess.run(["wait", "ci.broken", "--for", "failed"], server: server).status, 0)
        XCTAssertEqual(try RingcastProcess.run(["wait", "ci.built", "--for", "running"], server: server).status, 5)
        XCTAssertEqual(try RingcastProcess.run(["wait", "ci.slow", "--for", "running"], server: server).status, 0)

        let wrong = try RingcastProcess.run(["wait", "ci.built", "--for", "finished"], server: server)
        XCTAssertEqual(wrong.status, 2)
        XCTAssertTrue(wrong.stderr.contains("--for 'finished' is not done, ended or a state"), wrong.stderr)
        XCTAssertEqual(try RingcastProcess.run(["wait", "ci.built", "--timeout", "soon"], server: server).status, 2)
        XCTAssertEqual(try RingcastProcess.run(["wait"], server: server).status, 2)
        let help = try RingcastProcess.run(["wait", "--help"])
        for status in ["0  ", "1  ", "3  ", "4  "] { XCTAssertTrue(help.stdout.contains("\n  " + status), "exit status \(status) in --help") }
    }

    func testWaitForATaskNotThereYetRidesOutAServerRestart() throws {
        let port = closedLoopbackPort()
        var served = try serve(port: port)
        var client = HTTPClient(host: "127.0.0.1", port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.5}"#).status, 200)
        let waiting = try RingcastProcess(
            ["wait", "ci.build", "deploy.web", "--timeout", "60"], environment: ["RINGCAST_URL": "http://127.0.0.1:\(port)"])
        defer { if waiting.process.isRunning { waiting.process.terminate() } }
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(waiting.process.isRunning, "deploy.web does not exist yet: it waits")

        XCTAssertEqual(served.stop(), 0)
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertTrue(waiting.process.isRunning, "a server gone away is asked again")
        served = try serve(port: port)
        client = HTTPClient(host: "127.0.0.1", port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"state":"done"}"#).status, 200)
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(waiting.process.isRunning, "deploy.web is not done")
        XCTAssertEqual(try client.request("POST", "/api/tasks/deploy.web", json: #"{"state":"done"}"#).status, 200)

        let result = waiting.wait()
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(
            result.stdout.split(separator: "\n"),
            ["ci.build running 50%", "deploy.web does not exist yet; waiting for it to appear", "ci.build done", "deploy.web done"])
        XCTAssertEqual(result.stderrLines.count, 1, "the server going away, said once: \(result.stderr)")
        XCTAssertTrue(result.stderr.contains("trying again"), result.stderr)
        _ = served.stop()
    }

    // MARK: watch

    func testWatchIntoAPipeExitsWithTheTasksEnd() throws {
        let server = try producerServer()
        for (id, state, status) in [("job.done", "done", Int32(0)), ("job.failed", "failed", 1), ("job.cancelled", "cancelled", 3)] {
            try server.post("/api/tasks/\(id)", #"{"progress":0.3}"#)
            let watching = try RingcastProcess(["watch", id], environment: ["RINGCAST_URL": server.httpURL])
            defer { if watching.process.isRunning { watching.process.terminate() } }
            try server.post("/api/tasks/\(id)/log", #"{"lines":["step one"]}"#)
            Thread.sleep(forTimeInterval: 0.8)
            try server.post("/api/tasks/\(id)", #"{"state":"\#(state)"}"#)
            let result = watching.wait()
            XCTAssertEqual(result.status, status, "\(state): \(result.stderr)")
            XCTAssertTrue(result.stdout.hasPrefix("\(id) running 30%\n"), result.stdout)
            XCTAssertTrue(result.stdout.contains("  step one\n"), "its log, followed: \(result.stdout)")
            XCTAssertTrue(result.stdout.contains("\n\(id) \(state) after "), result.stdout)
        }
    }

    func testWatchOnATerminalShowsTheTaskItsChildrenAndLogAndRidesOutARestart() throws {
        try MissingBinary.check()
        let port = closedLoopbackPort()
        var served = try serve(port: port)
        var client = HTTPClient(host: "127.0.0.1", port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"title":"Build 42","progress":0.4}"#).status, 200)
        XCTAssertEqual(
            try client.request("POST", "/api/tasks/ci.build.unit", json: #"{"title":"Unit tests","parent":"ci.build","progress":0.6}"#).status, 200)
        XCTAssertEqual(
            try client.request("POST", "/api/tasks/ci.build/log", json: #"{"lines":["compiling a.c","\u001b[31mred\u001b]0;owned\u0007 text"]}"#)
                .status, 200)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", "stty rows 40 cols 100; exec \"$RINGCAST\" watch ci.build", "/dev/null"]
        var environment = ProcessInfo.processInfo.environment
        environment["RINGCAST"] = ringcastBinary
        environment["RINGCAST_URL"] = "http://127.0.0.1:\(port)"
        environment["RINGCAST_TOKEN"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let collected = Collected()
        output.fileHandleForReading.readabilityHandler = { handle in collected.append(handle.availableData) }
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        XCTAssertTrue(eventually(timeout: 10) { collected.text.contains("Unit tests") }, "the task and its children: \(collected.text)")
        XCTAssertTrue(collected.text.contains("\u{1B}[?1049h"), "drawn on the alternate screen")
        XCTAssertTrue(collected.text.contains("████░░░░░░  40%  Build 42"), collected.text)
        XCTAssertTrue(collected.text.contains("  compiling a.c"), "its log: \(collected.text)")
        XCTAssertTrue(collected.text.contains(" elapsed"), collected.text)

        XCTAssertEqual(served.stop(), 0)
        XCTAssertTrue(eventually(timeout: 10) { collected.text.contains("trying again") }, "the server gone, said: \(collected.text)")
        XCTAssertTrue(process.isRunning, "and asked again")
        served = try serve(port: port)
        client = HTTPClient(host: "127.0.0.1", port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build/log", json: #"{"lines":["linking"]}"#).status, 200)
        XCTAssertTrue(eventually(timeout: 10) { collected.text.contains("  linking") }, "followed after the restart: \(collected.text)")
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"state":"failed","detail":"exit status 2"}"#).status, 200)

        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        collected.append(output.fileHandleForReading.readDataToEndOfFile())
        XCTAssertEqual(process.terminationStatus, 1, "the task failed: \(collected.text)")
        let text = collected.text
        let afterScreen = try XCTUnwrap(text.range(of: "\u{1B}[?1049l", options: .backwards)).upperBound
        let left = String(text[afterScreen...])
        XCTAssertTrue(left.contains("Build 42 · exit status 2"), "the last view stays on the screen: \(left)")
        XCTAssertTrue(left.contains("ci.build failed: exit status 2 after "), left)
        // Only the command's own sequences reached the terminal; the log line's were cleaned away.
        XCTAssertFalse(text.contains("\u{1B}[31m") || text.contains("\u{1B}]0;"), text)
        XCTAssertTrue(text.contains("  red text"), text)
        _ = served.stop()
    }
}
