import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// The surfaces through the built executable: `pipe` ends honestly when its input stops short,
/// `run` says its ends in the same words, `ls --watch` redraws the server's table until Ctrl-C,
/// and past runs of a kind give the next one its expected length.
final class SurfaceCommandTests: XCTestCase {
    /// `sh -c SCRIPT` with the built ringcast as `$RINGCAST`, to the end.
    private func shell(_ script: String, server: TestServer) throws -> (status: Int32, stdout: String, stderr: String) {
        try MissingBinary.check()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        var environment = ProcessInfo.processInfo.environment
        environment["RINGCAST"] = ringcastBinary
        environment["RINGCAST_URL"] = server.httpURL
        environment["RINGCAST_TOKEN"] = nil
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    // MARK: pipe's honest ends

    func testAProgramThatCrashesAt21Of50LeavesItsPipeFailedWhereItStopped() throws {
        let server = try producerServer()
        // `python train.py 2>&1 | ringcast pipe ml.train`, train.py crashing at 21/50.
        let train =
            #"i=1; while [ $i -le 21 ]; do echo "epoch [$i/50] loss 0.$i"; i=$((i+1)); done; echo 'Traceback: CUDA out of memory' >&2; exit 1"#
        let result = try shell("(\(train)) 2>&1 | \"$RINGCAST\" pipe ml.train --title Training", server: server)
        XCTAssertEqual(result.status, 3, "the pipeline's status says the input ended early: \(result.stderr)")
        XCTAssertEqual(result.stderr, "ringcast: pipe: ml.train failed: input ended at 21/50 (--done-at-eof takes any end for done)\n")
        XCTAssertTrue(result.stdout.hasPrefix("epoch [1/50] loss 0.1\n"), result.stdout)
        XCTAssertTrue(
            result.stdout.hasSuffix("epoch [21/50] loss 0.21\nTraceback: CUDA out of memory\n"), "the input passes through, the crash included")
        let task = try XCTUnwrap(try server.task("ml.train"))
        XCTAssertEqual(task["state"], .string("failed"))
        XCTAssertEqual(task["detail"], .string("input ended at 21/50"))
        XCTAssertEqual(task["completed"], .number(21))
        XCTAssertEqual(task["total"], .number(50))
        XCTAssertEqual(task["progress"], .number(0.42), "failed where it stopped, not at 100 %")

        // The same input with --done-at-eof: done at 100 %, as before.
        let old = try shell("(\(train)) 2>&1 | \"$RINGCAST\" pipe ml.old --done-at-eof", server: server)
        XCTAssertEqual(old.status, 0, old.stderr)
        XCTAssertEqual(try server.task("ml.old")?["state"], .string("done"))
    }

    func testAPipeThatReachesAHundredPercentOrReadsNoProgressEndsDone() throws {
        let server = try producerServer()
        let full = try RingcastProcess.run(["pipe", "copy"], server: server, stdin: "copying 40%\ncopying 100%\n")
        XCTAssertEqual(full.status, 0, full.stderr)
        XCTAssertEqual(full.stderr, "")
        XCTAssertEqual(try server.task("copy")?["state"], .string("done"))
        XCTAssertNil(try server.task("copy")?["detail"])

        let units = try RingcastProcess.run(["pipe", "files"], server: server, stdin: "[3/10]\n[10/10] done\n")
        XCTAssertEqual(units.status, 0, units.stderr)
        XCTAssertEqual(try server.task("files")?["state"], .string("done"))

        let chatter = try RingcastProcess.run(["pipe", "chatter"], server: server, stdin: "starting\nworking\nfinished\n")
        XCTAssertEqual(chatter.status, 0, "no progress read: nothing says it stopped short")
        XCTAssertEqual(try server.task("chatter")?["state"], .string("done"))

        let percent = try RingcastProcess.run(["pipe", "download"], server: server, stdin: "12.5%\n55.5%\n")
        XCTAssertEqual(percent.status, 3)
        XCTAssertEqual(try server.task("download")?["detail"], .string("input ended at 55.5%"))
    }

    func testRunSaysItsEndsInTheSameWordsAndItsHelpListsTheStatuses() throws {
        let server = try producerServer()
        XCTAssertEqual(try RingcastProcess.run(["run", "job", "--", "sh", "-c", "exit 4"], server: server).status, 4)
        XCTAssertEqual(try server.task("job")?["detail"], .string("exit status 4"))
        let runHelp = try RingcastProcess.run(["run", "--help"]).stdout
        let pipeHelp = try RingcastProcess.run(["pipe", "--help"]).stdout
        for help in [runHelp, pipeHelp] {
            XCTAssertTrue(help.contains("\nexit status:\n"), help)
            XCTAssertTrue(help.contains("  2") && help.contains("a wrong argument"), help)
            XCTAssertTrue(help.contains("--kind K"), help)
            XCTAssertTrue(help.split(separator: "\n").allSatisfy { $0.count <= 100 }, "help fits its width")
        }
        XCTAssertTrue(pipeHelp.contains("\"input ended at 21/50\""))
        XCTAssertTrue(runHelp.contains("\"exit status N\""))
    }

    // MARK: ls --watch

    func testLsWatchPrintsTheServersTableAgainAtEachChangeUntilCtrlC() throws {
        try MissingBinary.check()
        let server = try producerServer()
        try server.post("/api/tasks/ci.build-42", #"{"title":"Build 42","progress":0.1}"#)
        try server.post("/api/tasks/other", #"{"title":"Not watched"}"#)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ringcastBinary)
        process.arguments = ["ls", "ci.*", "--watch"]
        process.environment = ProcessInfo.processInfo.environment.merging(["RINGCAST_URL": server.httpURL]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        let collected = Collected()
        output.fileHandleForReading.readabilityHandler = { handle in collected.append(handle.availableData) }
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        XCTAssertTrue(eventually(timeout: 10) { collected.text.contains("█░░░░░░░░░  10%  Build 42") }, "first table: \(collected.text)")
        try server.post("/api/tasks/ci.build-42", #"{"progress":0.7}"#)
        try server.post("/api/tasks/ci.lint", #"{"title":"Lint","state":"done"}"#)
        XCTAssertTrue(eventually(timeout: 10) { collected.text.contains("100%  Lint") }, "redrawn: \(collected.text)")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "Ctrl-C is how it ends")
        output.fileHandleForReading.readabilityHandler = nil
        collected.append(output.fileHandleForReading.readDataToEndOfFile())

        let tables = collected.text.components(separatedBy: "\n\n")
        XCTAssertGreaterThanOrEqual(tables.count, 2, collected.text)
        XCTAssertEqual(Set(tables).count, tables.count, "printed again only when it changed")
        let last = try XCTUnwrap(tables.last).split(separator: "\n").map(String.init)
        XCTAssertEqual(last.first?.hasPrefix("PROGRESS"), true)
        // Its ETA column is the server's estimate, which depends on how fast the updates came: not read here.
        XCTAssertTrue(last.contains { $0.hasPrefix("███████░░░  70%  Build 42                            running") }, last.joined(separator: "\n"))
        XCTAssertEqual(last.last, "2 tasks: 1 running, 1 done")
        XCTAssertFalse(collected.text.contains("Not watched"), "only the patterns given")
    }

    func testLsTakesItsPatternsAsAnArgument() throws {
        let server = try producerServer()
        try server.post("/api/tasks/ci.a", "{}")
        try server.post("/api/tasks/deploy.b", "{}")
        let listed = try RingcastProcess.run(["ls", "deploy.*"], server: server)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertTrue(listed.stdout.contains("deploy.b") && !listed.stdout.contains("ci.a"), listed.stdout)
        let twice = try RingcastProcess.run(["ls", "ci.*", "deploy.*"], server: server)
        XCTAssertEqual(twice.status, 2)
        XCTAssertTrue(twice.stderr.contains("comma-separated"), twice.stderr)
        XCTAssertEqual(
            try RingcastProcess.run(["ls", "--watch", "--server", "http://127.0.0.1:\(closedLoopbackPort())"]).status, 1,
            "a server not there at the start ends it")
    }

    // MARK: ETA from history

    func testThreeRunsOfAKindGiveTheFourthItsMedianAsExpectedSeconds() throws {
        let server = try producerServer()
        for (run, seconds) in ["0.2", "0.4", "0.3"].enumerated() {
            XCTAssertEqual(try RingcastProcess.run(["run", "nightly-\(run)", "--", "sleep", seconds], server: server).status, 0)
        }
        let kinds = try JSONParser.parse(try server.http().request("GET", "/api/kinds").body)
        guard case .array(let list)? = kinds["kinds"], list.count == 1, case .number(let median)? = list[0]["median"] else {
            return XCTFail("\(kinds)")
        }
        XCTAssertEqual(list[0]["kind"], .string("nightly"))
        XCTAssertGreaterThanOrEqual(median, 0.3, "the middle run slept 0.3 s; the server's clock saw at least that")
        let fourth = try server.post("/api/tasks/nightly-3", #"{"progress":null}"#)
        XCTAssertEqual(fourth["task"]?["expectedSeconds"], .number(median))
        // A run with --kind counts where it says.
        XCTAssertEqual(try RingcastProcess.run(["run", "adhoc", "--kind", "nightly", "--", "true"], server: server).status, 0)
        XCTAssertEqual(try server.task("adhoc")?["kind"], .string("nightly"))
        guard case .array(let after)? = try JSONParser.parse(try server.http().request("GET", "/api/kinds").body)["kinds"] else { return XCTFail() }
        XCTAssertEqual(after.first?["runs"], .number(4))
    }
}

/// Bytes a reader thread appends while the test looks. @unchecked Sendable: `data` is under `lock`.
final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var data: [UInt8] = []  // not Data: see RingcastProcess's output
    func append(_ more: Data) { lock.withLock { data.append(contentsOf: more) } }
    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
}
