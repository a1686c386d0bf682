import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

final class ProducerCommandTests: XCTestCase {
    private func assertOneLineError(
        _ result: RingcastProcess.Result, status: Int32, containing text: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(result.status, status, "stderr: \(result.stderr)", file: file, line: line)
        XCTAssertEqual(result.stderrLines.count, 1, "want one line, got: \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.hasPrefix("ringcast: "), result.stderr, file: file, line: line)
        if let text { XCTAssertTrue(result.stderr.contains(text), "'\(text)' not in: \(result.stderr)", file: file, line: line) }
    }

    // MARK: push, show, hide, timer, rm, ls

    func testPushAcceptsPercentFractionAndUnitsAndTheOtherFields() throws {
        let server = try producerServer()
        let cases: [(String, Double)] = [("42%", 0.42), ("0.25", 0.25), ("100%", 1), ("0", 0)]
        for (argument, expected) in cases {
            let result = try RingcastProcess.run(["push", "ci.build", "--progress", argument], server: server)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stdout, "")
            XCTAssertEqual(try server.task("ci.build")?["progress"], .number(expected), argument)
        }
        XCTAssertEqual(
            try RingcastProcess.run(
                [
                    "push", "ci.build", "--progress", "42/100", "--title", "Build 42", "--detail", "compiling",
                    "--state", "paused", "--stale-after", "30", "--parent", "ci",
                ], server: server
            ).status, 0)
        let task = try XCTUnwrap(try server.task("ci.build"))
        XCTAssertEqual(task["progress"], .number(0.42))
        XCTAssertEqual(task["completed"], .number(42))
        XCTAssertEqual(task["total"], .number(100))
        XCTAssertEqual(task["title"], .string("Build 42"))
        XCTAssertEqual(task["detail"], .string("compiling"))
        XCTAssertEqual(task["state"], .string("paused"))
        XCTAssertEqual(task["staleAfter"], .number(30))
        XCTAssertEqual(task["parent"], .string("ci"))

        XCTAssertEqual(try RingcastProcess.run(["push", "ci.build", "--indeterminate", "--detail", ""], server: server).status, 0)
        XCTAssertEqual(try server.task("ci.build")?["progress"], .null)
        XCTAssertNil(try server.task("ci.build")?["detail"])
        XCTAssertEqual(try RingcastProcess.run(["push", "ci.build", "--state=done"], server: server).status, 0)
        XCTAssertEqual(try server.task("ci.build")?["state"], .string("done"))
        XCTAssertEqual(try server.task("ci.build")?["progress"], .number(1))
    }

    func testShowHideAndRemoveReachAWatcher() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        XCTAssertEqual(try RingcastProcess.run(["show", "save", "--hide-after", "30", "--modal", "--detail", "Saving…"], server: server).status, 0)
        let show = try XCTUnwrap(watcher.wait { $0.contains { $0.id == "save" && $0.type == "show" } }.last)
        XCTAssertEqual(show.event["modal"], .bool(true))
        XCTAssertEqual(show.string("detail"), "Saving…")
        XCTAssertEqual(show.number("hideAt")! - show.number("updatedAt")!, 30_000, accuracy: 1)

        XCTAssertEqual(try RingcastProcess.run(["hide", "save"], server: server).status, 0)
        watcher.wait { $0.contains { $0.id == "save" && $0.type == "hide" } }
        XCTAssertEqual(try RingcastProcess.run(["rm", "save"], server: server).status, 0)
        watcher.wait { $0.contains { $0.id == "save" && $0.type == "remove" } }
        XCTAssertNil(try server.task("save"))

        assertOneLineError(try RingcastProcess.run(["rm", "save"], server: server), status: 1, containing: "not_found")
        assertOneLineError(try RingcastProcess.run(["hide", "never"], server: server), status: 1, containing: "not_found")
    }

    func testTimerStartsPausesResumesAndCancels() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=tea")
        watcher.waitForSnapshot()
        XCTAssertEqual(
            try RingcastProcess.run(["timer", "tea", "--seconds", "60", "--interval", "0.2", "--title", "Tea", "--hide-after", "5"], server: server)
                .status, 0)
        var task = try XCTUnwrap(try server.task("tea"))
        XCTAssertEqual(task["title"], .string("Tea"))
        XCTAssertEqual(task["timer"]?["seconds"], .number(60))
        XCTAssertEqual(task["timer"]?["interval"], .number(0.2))
        watcher.wait { $0.contains { $0.type == "tick" } }

        XCTAssertEqual(try RingcastProcess.run(["timer", "tea", "--pause"], server: server).status, 0)
        task = try XCTUnwrap(try server.task("tea"))
        XCTAssertEqual(task["state"], .string("paused"))
        XCTAssertNotNil(task["timer"]?["pausedAt"])
        XCTAssertEqual(try RingcastProcess.run(["timer", "tea", "--resume"], server: server).status, 0)
        XCTAssertEqual(try server.task("tea")?["state"], .string("running"))
        XCTAssertEqual(try RingcastProcess.run(["timer", "tea", "--cancel"], server: server).status, 0)
        XCTAssertEqual(try server.task("tea")?["state"], .string("cancelled"))
        watcher.wait { $0.contains { $0.type == "state" && $0.string("state") == "cancelled" } }

        assertOneLineError(try RingcastProcess.run(["timer", "tea", "--resume"], server: server), status: 1, containing: "conflict")
        try server.post("/api/tasks/plain", "{}")
        assertOneLineError(try RingcastProcess.run(["timer", "plain", "--pause"], server: server), status: 1, containing: "not_a_timer")
    }

    func testListPrintsATableOfTasks() throws {
        let server = try producerServer()
        try server.post("/api/tasks/ci.build", #"{"title":"Build 42","progress":0.425}"#)
        try server.post("/api/tasks/ci.lint", #"{"progress":null}"#)
        try server.post("/api/tasks/deploy.web", #"{"state":"done"}"#)
        try server.post("/api/timers/tea", #"{"seconds":185,"title":"Tea"}"#)

        let result = try RingcastProcess.run(["ls"], server: server)
        XCTAssertEqual(result.status, 0, result.stderr)
        let rows = result.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        XCTAssertEqual(rows.first, ["ID", "STATE", "PROGRESS", "TITLE", "ETA"])
        XCTAssertEqual(rows.count, 5, result.stdout)
        XCTAssertTrue(rows.contains(["ci.build", "running", "42%", "Build", "42", "-"]), result.stdout)
        XCTAssertTrue(rows.contains(["ci.lint", "running", "-", "ci.lint", "-"]), result.stdout)
        XCTAssertTrue(rows.contains(["deploy.web", "done", "100%", "deploy.web", "-"]), result.stdout)
        XCTAssertTrue(rows.contains(["tea", "running", "0%", "Tea", "3m05s"]), result.stdout)
        // Columns line up: every row's second column starts where the header's does.
        let lines = result.stdout.split(separator: "\n")
        let stateColumn = try XCTUnwrap(lines.first?.range(of: "STATE")).lowerBound.utf16Offset(in: lines[0])
        for line in lines.dropFirst() {
            let afterID = try XCTUnwrap(line.firstIndex(of: " "))
            let secondColumn = try XCTUnwrap(line[afterID...].firstIndex { $0 != " " })
            XCTAssertEqual(secondColumn.utf16Offset(in: line), stateColumn, String(line))
        }

        let filtered = try RingcastProcess.run(["ls", "ci.*", "--json"], server: server)
        XCTAssertEqual(filtered.status, 0, filtered.stderr)
        guard case .array(let tasks)? = try JSONParser.parse(filtered.stdout.trimmingCharacters(in: .whitespacesAndNewlines))["tasks"] else {
            return XCTFail("ls --json printed no tasks: \(filtered.stdout)")
        }
        XCTAssertEqual(Set(tasks.compactMap { if case .string(let id)? = $0["id"] { return id } else { return nil } }), ["ci.build", "ci.lint"])
    }

    func testEveryCommandHasHelp() throws {
        for command in ["push", "show", "hide", "timer", "rm", "ls", "run", "pipe"] {
            let result = try RingcastProcess.run([command, "--help"])
            XCTAssertEqual(result.status, 0, command)
            XCTAssertTrue(result.stdout.hasPrefix("usage: ringcast \(command)") || result.stdout.contains("| ringcast \(command)"), result.stdout)
            XCTAssertTrue(result.stdout.contains("--server URL"), command)
            XCTAssertTrue(result.stdout.contains("--token TOKEN"), command)
            XCTAssertEqual(result.stderr, "")
        }
        let root = try RingcastProcess.run(["help"])
        for command in ["push", "show", "hide", "timer", "rm", "ls", "run", "pipe"] {
            XCTAssertTrue(root.stdout.contains("\n  \(command) "), "root help lacks \(command)")
        }
    }

    // MARK: Errors

    func testBadArgumentsExitTwoWithOneLine() throws {
        let server = try producerServer()
        let bad: [[String]] = [
            ["push"], ["push", "bad id"], ["push", "-starts-with-dash"], ["push", "a", "b"],
            ["push", "x", "--progress", "142%"], ["push", "x", "--progress", "42"], ["push", "x", "--progress", "abc"],
            ["push", "x", "--progress", "5/4"], ["push", "x", "--progress", "1%", "--indeterminate"],
            ["push", "x", "--state", "stalled"], ["push", "x", "--bogus"], ["push", "x", "--title"],
            ["push", "x", "--stale-after", "0"], ["push", "x", "--", "echo"],
            ["show", "x", "--hide-after", "-1"], ["show", "x", "--hide-after", "soon"],
            ["timer", "x"], ["timer", "x", "--pause", "--resume"], ["timer", "x", "--seconds", "0"],
            ["timer", "x", "--pause", "--seconds", "5"], ["timer", "x", "--seconds", "5", "--interval", "0.001"],
            ["run", "x"], ["run", "x", "--"], ["run", "--", "true"], ["pipe"], ["ls", "a", "b"], ["ls", "--watch", "a b"],
            ["push", "x", "--server", "ftp://example"], ["push", "x", "--cacert", "/no/such/ca.pem"],
            ["push", "x", "--token", "two words"], ["no-such-command"],
        ]
        for arguments in bad {
            let result = try RingcastProcess.run(arguments, server: server)
            assertOneLineError(result, status: 2)
            XCTAssertEqual(result.stdout, "", "\(arguments)")
        }
        XCTAssertNil(try server.task("x"), "a usage error must send nothing")
        let malformedEnvironment = try RingcastProcess.run(["push", "x"], environment: ["RINGCAST_URL": "127.0.0.1:8080"])
        assertOneLineError(malformedEnvironment, status: 2, containing: "RINGCAST_URL")
    }

    func testUnreachableServerExitsOneWithOneLine() throws {
        let url = "http://127.0.0.1:\(closedLoopbackPort())"
        let marker = NSTemporaryDirectory() + "ringcast-run-marker-\(getpid())"
        try? FileManager.default.removeItem(atPath: marker)
        let commands: [[String]] = [
            ["push", "x", "--progress", "1%"], ["show", "x"], ["hide", "x"], ["timer", "x", "--seconds", "3"],
            ["timer", "x", "--cancel"], ["rm", "x"], ["ls"], ["run", "x", "--server", url, "--", "touch", marker],
        ]
        for arguments in commands {
            let result = try RingcastProcess.run(arguments.contains("--") ? arguments : arguments + ["--server", url])
            assertOneLineError(result, status: 1, containing: "cannot reach the server at \(url)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "run must not start the command when the server is unreachable")
        // The environment variable is used the same way.
        assertOneLineError(try RingcastProcess.run(["push", "x"], environment: ["RINGCAST_URL": url]), status: 1, containing: url)
        // pipe still passes its input through.
        let piped = try RingcastProcess.run(["pipe", "x", "--server", url], stdin: "one 10%\ntwo 20%\n")
        assertOneLineError(piped, status: 1, containing: "cannot reach the server")
        XCTAssertEqual(piped.stdout, "one 10%\ntwo 20%\n")
    }

    func testTokensFromTheFlagAndTheEnvironment() throws {
        let token = "ci-token-0123456789abcdef"
        let server = try producerServer {
            $0.access = AccessPolicy(
                publishers: [.publisher(name: "ci", token: token, patterns: WatchSet([Glob("ci.*")]))],
                anonymousLocalPublish: false)
        }
        assertOneLineError(try RingcastProcess.run(["push", "ci.build", "--progress", "1%"], server: server), status: 1, containing: "unauthorized")
        XCTAssertEqual(try RingcastProcess.run(["push", "ci.build", "--progress", "2%", "--token", token], server: server).status, 0)
        XCTAssertEqual(try server.task("ci.build")?["progress"], .number(0.02))
        XCTAssertEqual(
            try RingcastProcess.run(["push", "ci.build", "--progress", "3%"], server: server, environment: ["RINGCAST_TOKEN": token]).status, 0)
        XCTAssertEqual(try server.task("ci.build")?["progress"], .number(0.03))
        // The flag wins over the environment.
        assertOneLineError(
            try RingcastProcess.run(
                ["push", "ci.build", "--token", "wrong-token-00000000000"], server: server,
                environment: ["RINGCAST_TOKEN": token]), status: 1, containing: "unauthorized")
        assertOneLineError(try RingcastProcess.run(["push", "deploy.web", "--token", token], server: server), status: 1, containing: "forbidden")
        XCTAssertEqual(try RingcastProcess.run(["run", "ci.job", "--token", token, "--", "true"], server: server).status, 0)
        XCTAssertEqual(try server.task("ci.job")?["state"], .string("done"))
        XCTAssertEqual(
            try RingcastProcess.run(["pipe", "ci.pipe", "--done-at-eof"], server: server, stdin: "50%\n", environment: ["RINGCAST_TOKEN": token])
                .status, 0)
        XCTAssertEqual(try server.task("ci.pipe")?["state"], .string("done"))
    }

    // MARK: Leases

    func testATaskWithStaleAfterOneTurnsStalledAfterOneSecondAndBackToRunningOnTheNextUpdate() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        XCTAssertEqual(try RingcastProcess.run(["push", "lease", "--progress", "10%", "--stale-after", "1"], server: server).status, 0)
        let first = try XCTUnwrap(watcher.wait { $0.contains { $0.id == "lease" } }.first { $0.id == "lease" })
        let stalled = try XCTUnwrap(
            watcher.wait(timeout: 3) { $0.contains { $0.id == "lease" && $0.string("state") == "stalled" } }
                .first { $0.id == "lease" && $0.string("state") == "stalled" })
        XCTAssertEqual(stalled.type, "state")
        let published = try XCTUnwrap(first.number("updatedAt"))
        XCTAssertOnTime(stalled.at, due: published + 1000, early: 5, "stalled \(stalled.at - published) ms after the update")
        XCTAssertEqual(try server.task("lease")?["state"], .string("stalled"))

        XCTAssertEqual(try RingcastProcess.run(["push", "lease", "--progress", "20%"], server: server).status, 0)
        let back = try XCTUnwrap(
            watcher.wait { $0.contains { $0.id == "lease" && $0.at > stalled.at && $0.string("state") == "running" } }
                .last { $0.id == "lease" })
        XCTAssertEqual(back.type, "state")
        XCTAssertEqual(back.number("progress"), 0.2)
    }

    // MARK: run

    func testRunShowsASpinnerWhileSleepRunsThenDone() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let started = nowMs()
        let result = try RingcastProcess.run(["run", "demo", "--", "sleep", "2"], server: server)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertGreaterThanOrEqual(nowMs() - started, 2000)
        let events = watcher.wait { $0.contains { $0.id == "demo" && $0.string("state") == "done" } }.filter { $0.id == "demo" }
        let spinner = try XCTUnwrap(events.first)
        XCTAssertEqual(spinner.event["progress"], .null, "an indeterminate task: a spinner")
        XCTAssertEqual(spinner.string("state"), "running")
        XCTAssertEqual(spinner.event["visible"], .bool(true))
        XCTAssertEqual(spinner.string("title"), "sleep 2")
        let done = try XCTUnwrap(events.last)
        XCTAssertEqual(done.type, "state")
        XCTAssertEqual(done.number("progress"), 1)
        // The watcher may hear of the spinner a little late; the command's two seconds are exact.
        XCTAssertOnTime(done.at, due: spinner.at + 2000, early: 200, late: 1000, "done after the spinner")
        // In between it only spun (lease renewals), never changed state.
        XCTAssertTrue(events.dropLast().allSatisfy { $0.string("state") == "running" && $0.event["progress"] == .null })
    }

    /// `run` holds a WebSocket client (with its service thread and TLS library state) and exits
    /// right after closing it: the thread is gone before the process exits, every time. Under
    /// AddressSanitizer (make test-sanitize) a freed-twice finding in any of these children fails
    /// the run; in a plain build glibc's own check aborts the child.
    func testRunAndPipeExitCleanlyTwentyTimesInARow() throws {
        let server = try producerServer()
        for round in 0..<20 {
            let run = try RingcastProcess.run(["run", "loop.run-\(round)", "--", "true"], server: server)
            XCTAssertEqual(run.status, 0, "round \(round): \(run.stderr)")
            XCTAssertEqual(run.stderr, "", "round \(round)")
            let pipe = try RingcastProcess.run(["pipe", "loop.pipe-\(round)", "--done-at-eof"], server: server, stdin: "50%\n")
            XCTAssertEqual(pipe.status, 0, "round \(round): \(pipe.stderr)")
        }
        XCTAssertEqual(try server.task("loop.run-19")?["state"], .string("done"))
        XCTAssertEqual(try server.task("loop.pipe-19")?["state"], .string("done"))
    }

    func testRunFalseEndsFailedAndExitsOne() throws {
        let server = try producerServer()
        let result = try RingcastProcess.run(["run", "demo", "--", "false"], server: server)
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderr, "", "the command's failure is its own; ringcast adds nothing")
        let task = try XCTUnwrap(try server.task("demo"))
        XCTAssertEqual(task["state"], .string("failed"))
        XCTAssertEqual(task["detail"], .string("exit status 1"))
    }

    func testRunPassesInputAndOutputThroughAndReturnsTheCommandsStatus() throws {
        let server = try producerServer()
        let script = #"printf 'out 50%%\n'; printf 'err\n' >&2; cat; exit 7"#
        let result = try RingcastProcess.run(
            ["run", "job", "--title", "Job", "--hide-after", "60", "--", "sh", "-c", script],
            server: server, stdin: "from stdin\n")
        XCTAssertEqual(result.status, 7)
        XCTAssertEqual(result.stdout, "out 50%\nfrom stdin\n")
        XCTAssertEqual(result.stderr, "err\n")
        let task = try XCTUnwrap(try server.task("job"))
        XCTAssertEqual(task["state"], .string("failed"))
        XCTAssertEqual(task["detail"], .string("exit status 7"))
        XCTAssertEqual(task["title"], .string("Job"))
        XCTAssertNotNil(task["hideAt"])

        // A second run of the same id starts afresh: a spinner again, the old detail gone, then done.
        XCTAssertEqual(try RingcastProcess.run(["run", "job", "--", "true"], server: server).status, 0)
        let again = try XCTUnwrap(try server.task("job"))
        XCTAssertEqual(again["state"], .string("done"))
        XCTAssertNil(again["detail"])
        XCTAssertNil(again["hideAt"])

        let missing = try RingcastProcess.run(["run", "gone", "--", "no-such-command-anywhere"], server: server)
        XCTAssertEqual(missing.status, 127)
        XCTAssertEqual(missing.stderrLines.count, 1, missing.stderr)
        XCTAssertEqual(try server.task("gone")?["state"], .string("failed"))
    }

    func testRunKeepsTheLeaseAliveAndPassesOnAKilledSignal() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        // A two-second lease over a command of 4.5 s: without renewals it would stall at 2 s. (A
        // one-second lease stalled once on a host busy enough to hold the renewal back a second.)
        let result = try RingcastProcess.run(["run", "long", "--stale-after", "2", "--", "sleep", "4.5"], server: server)
        XCTAssertEqual(result.status, 0)
        let events = watcher.wait { $0.contains { $0.id == "long" && $0.string("state") == "done" } }.filter { $0.id == "long" }
        XCTAssertFalse(events.contains { $0.string("state") == "stalled" }, "the lease ran out while the command ran")
        XCTAssertGreaterThanOrEqual(events.count, 6, "renewals every third of the lease")

        // SIGTERM sent to ringcast alone reaches the command, which ends with it: 128 + 15.
        let running = try RingcastProcess(["run", "killed", "--", "sleep", "30"], environment: ["RINGCAST_URL": server.httpURL])
        watcher.wait { $0.contains { $0.id == "killed" } }
        XCTAssertTrue(eventually { !running.children.isEmpty }, "ringcast run never started its command")
        running.process.terminate()
        let killed = running.wait()
        XCTAssertEqual(killed.status, 143)
        XCTAssertEqual(try server.task("killed")?["state"], .string("failed"))
        XCTAssertEqual(try server.task("killed")?["detail"], .string("killed by SIGTERM"))
    }

    // MARK: pipe

    func testPipeParsesEachFormatAndPassesTheInputThrough() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=train")
        watcher.waitForSnapshot()
        // --done-at-eof: the input stops at 55.5 %, and this test is about reading, not about ends.
        let pipe = try RingcastProcess(["pipe", "train", "--title", "Training", "--done-at-eof"], environment: ["RINGCAST_URL": server.httpURL])
        watcher.wait { $0.contains { $0.id == "train" } }
        XCTAssertEqual(try server.task("train")?["progress"], .null)
        XCTAssertEqual(try server.task("train")?["title"], .string("Training"))
        let lines: [(String, Double)] = [
            ("downloading 12%\n", 0.12),
            ("[3/10] compiling foo.c\n", 0.3),
            ("copied 7/20 files\n", 0.35),
            ("epoch 1:  42%|████▏     | 42/100 [00:01<00:02, 40.00it/s]\n", 0.42),
            // tqdm redraws with \r, and with unit_scale prints 4.60k/10.0k.
            ("\repoch 1:  46%|████▌     | 4.60k/10.0k [00:02<00:02, 2.30kit/s]", 0.46),
            ("\rno progress on this line, nor 2024/05/01 or src/1/2\n", 0.46),
            ("eval  55.5%\n", 0.555),
        ]
        var sent = ""
        for (text, expected) in lines {
            pipe.write(text)
            sent += text
            watcher.wait { $0.last { $0.id == "train" }?.number("progress") == expected }
            // Not a wait but a spacing: past the 50 ms throttle, so a value wrongly read from the
            // next line would go out on its own instead of merging into that line's update.
            Thread.sleep(forTimeInterval: 0.06)
        }
        let result = pipe.wait()
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, sent, "the input passes through byte for byte")
        let done = try XCTUnwrap(watcher.wait { $0.contains { $0.string("state") == "done" } }.last)
        XCTAssertEqual(done.type, "state")
        let progressValues = watcher.received.filter { $0.type == "progress" }.compactMap { $0.number("progress") }
        XCTAssertEqual(progressValues, [0.12, 0.3, 0.35, 0.42, 0.46, 0.555], "one update per progress line, none for the others")
    }

    func testPipeSendsAtMostOneUpdatePer50msByItsOwnClockAndAlwaysTheLast() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=fast")
        watcher.waitForSnapshot()
        let pipe = try RingcastProcess(["pipe", "fast", "--done-at-eof", "--trace"], environment: ["RINGCAST_URL": server.httpURL])
        watcher.wait { $0.contains { $0.id == "fast" } }
        for percent in 1...99 {
            pipe.write("step \(percent)%\n")
            Thread.sleep(forTimeInterval: 0.005)  // a spacing, not a wait: input at about 200 lines a second
        }
        // The input stays open: the last value must go out anyway, once its interval has passed.
        watcher.wait(timeout: 10) { $0.contains { $0.number("progress") == 0.99 } }
        let result = pipe.wait()
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout.split(separator: "\n").count, 99)
        watcher.wait { $0.contains { $0.string("state") == "done" } }

        // What the throttle decided, stamped by its own clock: the server's receipt times would
        // measure the scheduling of two processes on a loaded machine as well.
        let prefix = "ringcast: pipe: update sent at "
        var sends: [(at: UInt64, fields: JSONValue)] = []
        for line in result.stderrLines {
            guard line.hasPrefix(prefix), let colon = line.range(of: " s: "),
                let at = UInt64(line[line.index(line.startIndex, offsetBy: prefix.count)..<colon.lowerBound].replacingOccurrences(of: ".", with: "")),
                let fields = try? JSONParser.parse(Array(line[colon.upperBound...].utf8))
            else { return XCTFail("not a trace line: \(line)") }
            sends.append((at, fields))
        }
        for (earlier, later) in zip(sends, sends.dropFirst()) {
            XCTAssertGreaterThanOrEqual(
                later.at - earlier.at, 50_000_000, "two updates \(Double(later.at - earlier.at) / 1e6) ms apart by the pipe's clock")
        }
        XCTAssertEqual(sends.first?.fields["state"], .string("running"))
        XCTAssertEqual(sends.last?.fields["state"], .string("done"))
        let sent = sends.compactMap { $0.fields["progress"]?.numberValue }
        XCTAssertEqual(sent.last, 0.99, "the last value went out")
        XCTAssertEqual(sent, sent.sorted())
        let received = watcher.received.filter { $0.type == "progress" }.compactMap { $0.number("progress") }
        XCTAssertEqual(received, sent, "every update the pipe sent, and no other, reached the watcher")
    }
}
