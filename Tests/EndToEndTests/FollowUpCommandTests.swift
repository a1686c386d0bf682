import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

/// The follow-up features through the built binary: `ringcast run` obeying cancel and pause requests, its task
/// stalling the moment it dies, `run` and `pipe` sending their output's lines to the log.
final class FollowUpCommandTests: XCTestCase {
    /// A process that has not ended by `seconds` is killed, so a broken run fails the test instead of hanging it.
    private func watchdog(_ process: RingcastProcess, seconds: Double = 60) {
        let pid = process.process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [process] in
            if process.process.isRunning { kill(pid, SIGKILL) }
        }
    }

    private func start(_ arguments: [String], _ server: TestServer) throws -> RingcastProcess {
        let run = try RingcastProcess(arguments, environment: ["RINGCAST_URL": server.httpURL])
        watchdog(run)
        XCTAssertTrue(eventually(timeout: 10) { !run.children.isEmpty }, "ringcast run never started its command")
        return run
    }

    /// The state a process is in, from /proc (R running, S sleeping, T stopped).
    private func processState(_ pid: pid_t) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(close, offsetBy: 2)...].first
    }

    func testACancelRequestEndsTheCommandAndRunExits130() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=copy")
        watcher.waitForSnapshot()
        let run = try start(["run", "copy", "--title", "Copy", "--", "sh", "-c", "echo started; exec sleep 60"], server)
        XCTAssertEqual(try server.task("copy")?["controls"], .array([.string("cancel"), .string("pause"), .string("resume")]))
        let answer = try server.post("/api/tasks/copy/cancel")
        XCTAssertEqual(answer["task"]?["cancelRequested"], .bool(true))
        let result = run.wait()
        XCTAssertEqual(result.status, 130, result.stderr)
        XCTAssertEqual(result.stdout, "started\n")
        XCTAssertEqual(result.stderr, "")
        let task = try XCTUnwrap(try server.task("copy"))
        XCTAssertEqual(task["state"], .string("cancelled"))
        XCTAssertEqual(task["detail"], .string("cancelled on request"))
        XCTAssertNil(task["cancelRequested"])
        XCTAssertNil(task["controls"], "an ended command offers nothing more")
        let events = watcher.wait { $0.contains { $0.string("state") == "cancelled" } }
        let marked = try XCTUnwrap(events.firstIndex { $0.event["cancelRequested"] == .bool(true) })
        let ended = try XCTUnwrap(events.firstIndex { $0.string("state") == "cancelled" })
        XCTAssertLessThan(marked, ended, "the dashboard hears of the request first (cancelling…), then of the end")
        XCTAssertFalse(events.contains { $0.string("state") == "stalled" }, "closing its socket after the end stalls nothing")
    }

    func testACommandThatIgnoresSIGTERMIsKilledAfterTheGrace() throws {
        let server = try producerServer()
        let run = try start(["run", "stubborn", "--grace", "0.5", "--", "sh", "-c", "trap '' TERM; exec sleep 60"], server)
        let asked = nowMs()
        try server.post("/api/tasks/stubborn/cancel")
        let result = run.wait()
        XCTAssertEqual(result.status, 130)
        XCTAssertGreaterThanOrEqual(nowMs() - asked, 500, "SIGKILL only after the grace period")
        XCTAssertEqual(try server.task("stubborn")?["state"], .string("cancelled"))
    }

    func testPauseAndResumeStopAndContinueTheCommand() throws {
        let server = try producerServer()
        let run = try start(["run", "batch", "--", "sleep", "60"], server)
        let child = try XCTUnwrap(run.children.first)
        XCTAssertEqual(try server.post("/api/tasks/batch/pause")["task"]?["pauseRequested"], .bool(true))
        XCTAssertTrue(try eventually(timeout: 10) { try server.task("batch")?["state"] == .string("paused") }, "run answers with paused")
        // kill(2) returns before the child has stopped: it stops once it runs to take the signal.
        XCTAssertTrue(eventually(timeout: 5) { processState(child) == "T" }, "SIGSTOP: state \(processState(child).map(String.init) ?? "gone")")
        XCTAssertNil(try server.task("batch")?["pauseRequested"], "the answer clears the request")
        try server.post("/api/tasks/batch/resume")
        XCTAssertTrue(try eventually(timeout: 10) { try server.task("batch")?["state"] == .string("running") })
        XCTAssertNotEqual(processState(child), "T", "SIGCONT")
        // Cancelling a paused command works too: it is continued to take its SIGTERM.
        try server.post("/api/tasks/batch/pause")
        XCTAssertTrue(try eventually(timeout: 10) { try server.task("batch")?["state"] == .string("paused") })
        try server.post("/api/tasks/batch/cancel")
        XCTAssertEqual(run.wait().status, 130)
        XCTAssertEqual(try server.task("batch")?["state"], .string("cancelled"))
    }

    func testAKilledRunStallsItsTaskAtOnceNotAtTheEndOfItsLease() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=crash")
        watcher.waitForSnapshot()
        let run = try start(["run", "crash", "--stale-after", "600", "--controls", "pause,resume", "--", "sleep", "60"], server)
        // A request waits until the socket has published the task, and is then sent to it: once run
        // has answered a pause, its socket is the task's publisher.
        try server.post("/api/tasks/crash/pause")
        XCTAssertTrue(try eventually(timeout: 10) { try server.task("crash")?["state"] == .string("paused") })
        try server.post("/api/tasks/crash/resume")
        XCTAssertTrue(try eventually(timeout: 10) { try server.task("crash")?["state"] == .string("running") })
        let children = run.children
        let killedAt = nowMs()
        kill(run.process.processIdentifier, SIGKILL)
        // Foundation's Process hears of an exit only once the child's children have let go too.
        for child in children { kill(child, SIGKILL) }
        _ = run.wait()
        let stalled = try XCTUnwrap(
            watcher.wait(timeout: 10) { $0.contains { $0.string("state") == "stalled" } }.first { $0.string("state") == "stalled" })
        XCTAssertLessThan(stalled.at - killedAt, 60_000, "at once, not after the ten-minute lease")
    }

    func testRunSendsItsOutputLinesStdoutAndStderrToTheLog() throws {
        let server = try producerServer()
        let script = #"for i in 1 2 3; do echo "line $i"; done; printf '\033[31moops\033[0m\n' >&2"#
        let result = try RingcastProcess.run(["run", "build", "--", "sh", "-c", script], server: server)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "line 1\nline 2\nline 3\n", "the output passes through untouched")
        XCTAssertEqual(result.stderr, "\u{1B}[31moops\u{1B}[0m\n")
        let task = try XCTUnwrap(try server.task("build"))
        XCTAssertEqual(task["logCount"], .number(4))
        XCTAssertEqual(task["state"], .string("done"))
        let tail = try JSONParser.parse(try server.http().request("GET", "/api/tasks/build/log").body)
        guard case .array(let items)? = tail["lines"] else { return XCTFail("no lines: \(tail)") }
        let lines = items.compactMap { item -> String? in
            if case .string(let line) = item { return line }
            return nil
        }
        // Two pipes, read by two threads: stdout's lines keep their order, stderr's line falls somewhere.
        XCTAssertEqual(lines.sorted(), ["line 1", "line 2", "line 3", "oops"], "stderr too, without its colour codes")
        XCTAssertEqual(lines.filter { $0 != "oops" }, ["line 1", "line 2", "line 3"])

        let quiet = try RingcastProcess.run(["run", "quiet", "--no-log", "--", "echo", "hello"], server: server)
        XCTAssertEqual(quiet.stdout, "hello\n")
        XCTAssertNil(try server.task("quiet")?["logCount"])
    }

    func testAFloodOfOutputGoesInAFewRequestsASecondAndTheTailIsTheLastLines() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=flood")
        watcher.waitForSnapshot()
        let script = #"i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo "step $i"; done"#
        let started = nowMs()
        let result = try RingcastProcess.run(["run", "flood", "--", "sh", "-c", script], server: server)
        let elapsed = nowMs() - started
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout.split(separator: "\n").count, 3000)
        let tail = try JSONParser.parse(try server.http().request("GET", "/api/tasks/flood/log").body)
        guard case .array(let lines)? = tail["lines"] else { return XCTFail("no lines: \(tail)") }
        XCTAssertEqual(lines.count, 100, "the server keeps the last logLines")
        XCTAssertEqual(lines.first, .string("step 2901"))
        XCTAssertEqual(lines.last, .string("step 3000"))
        let events = watcher.wait { $0.contains { $0.string("state") == "done" } }
        let logEvents = events.filter { $0.type == "log" }
        XCTAssertLessThanOrEqual(logEvents.count, Int(elapsed / 250) + 2, "\(logEvents.count) log requests in \(Int(elapsed)) ms")
        let done = try XCTUnwrap(events.firstIndex { $0.string("state") == "done" })
        XCTAssertEqual(events[..<done].filter { $0.type == "log" }.count, logEvents.count, "the last lines arrive before the end")
    }

    func testPipeSendsItsLinesToTheLog() throws {
        let server = try producerServer()
        let result = try RingcastProcess.run(
            ["pipe", "train", "--done-at-eof"], server: server, stdin: "epoch 1 42%\nloss 0.3\r\nepoch 2  \r 90%\nlast")
        XCTAssertEqual(result.status, 0, result.stderr)
        let tail = try JSONParser.parse(try server.http().request("GET", "/api/tasks/train/log").body)
        XCTAssertEqual(tail["lines"], .array(["epoch 1 42%", "loss 0.3", " 90%", "last"].map(JSONValue.string)))
        XCTAssertEqual(try server.task("train")?["state"], .string("done"))
    }
}
