import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastLoad
import RingcastPlatform

/// `ringcast load`: many watchers, one publisher, latency measured at every watcher.
struct LoadCommand: Subcommand {
    static let name = "load"
    static let summary = "load-test a server: many watchers, latency measured at each: ringcast load --clients 1000"
    static let usage = [
        "ringcast load [--server URL] [--clients N] [--rate R] [--duration S | --messages M] [OPTIONS]",
        "ringcast load merge RUN.json RUN.json … [--json] [--report FILE.html] [--fail-if BOUNDS]",
    ]
    static let discussion = """
        Opens N watcher WebSockets to a Ringcast server from one client context (--threads: several,
        each on its own thread), publishes updates at a rate (or as fast as the server takes them),
        and measures at every watcher the time from publish to delivery on this process's monotonic
        clock. Each update's `detail` carries a marker with its number (rcload:RUN:N:); watchers count
        updates, not frames. At the end it prints a table of connections, deliveries, loss,
        throughput and latency percentiles (nearest-rank), and with --server-pid the server's CPU time
        per 1000 deliveries and its memory.

        --churn and --storm close watchers while updates flow and bring them back as the dashboard
        does (its back-off, resuming with since): the table says how long each took to come back and
        how many updates came in resume snapshots instead of one by one (not lost). --report-to
        publishes the run's own progress as a task on a Ringcast server.

        merge: adds up runs that `ringcast load --json` wrote (several processes or machines, started
        together with --start-at): counts are summed and percentiles come from the added latency
        histograms, as one run over all the deliveries would give them. docs/LOAD-TESTING.md has a
        two-machine recipe.
        """
    /// Where the table's defaults come from: the load tester's own.
    private static let defaults = LoadTestOptions(url: ServerURL(ConnectionOptions.defaultServer)!)
    static let optionGroups = [
        OptionGroup(
            "options",
            [
                .value("clients", "N", "watcher connections", default: "\(defaults.clients)"),
                .value(
                    "threads", "N", "spread the watchers over N client contexts, each on a thread of its own (the publisher has its own too)",
                    default: "\(defaults.threads)"),
                .value(
                    "source-address", "A[,B…]",
                    "bind the watchers round-robin to these local addresses (127.0.0.2,127.0.0.3): one address reaches about "
                        + "28 000 connections to one server port"),
                .value("rate", "R", "updates per second; 0 = as fast as possible", default: defaults.rate.plain),
                .value("duration", "S", "publish for S seconds (default 10 when --messages is not given)"),
                .value(
                    "messages", "M",
                    "publish M updates; with --duration too, whichever ends first; --messages 0 --duration S "
                        + "holds the watchers idle for S seconds"),
                .value("payload-bytes", "B", "pad each update's detail to B bytes (default: the marker alone)"),
                .value("watch", "PATTERN", "the watchers' watch patterns", default: defaults.watch),
                .value("tasks", "K", "spread updates round-robin over task ids rcload.t0 … rcload.t(K-1)", default: "\(defaults.tasks)"),
                .value(
                    "publish", "MODE", "how updates go; http: one POST per update, batch: POST /api/events, ws: a WebSocket publisher",
                    default: defaults.publish.rawValue),
                .value("publish-to", "URL", "publish to this server instead (another node of a cluster), watchers stay on --server"),
                .value("batch-size", "N", "updates per batch request or WebSocket frame (default 20 for batch, 1 for ws)"),
                .value("server-pid", "PID", "a local server's pid: report its CPU time (from /proc) and memory"),
                .value(
                    "ramp-per-second", "N", "start at most N watcher connections a second; 0: no limit",
                    default: defaults.rampPerSecond.plain),
                .value("max-handshakes", "N", "at most N watchers connecting at once", default: "\(defaults.maxHandshakes)"),
                .value("connect-timeout", "S", "a watcher not open after S seconds has failed", default: defaults.connectTimeout.plain),
                .value(
                    "drain-timeout", "S",
                    "after the last update, wait at most S seconds for deliveries still coming; "
                        + "it ends sooner after \(defaults.quietSeconds.plain) s without any", default: defaults.drainTimeout.plain),
                .flag(
                    "latest-value",
                    "also measure, for every update, the time until each watcher held it or a newer value of "
                        + "its task (for a server that merges a task's updates: flushMilliseconds, conflation)"),
                .value(
                    "fail-if", "BOUNDS",
                    "fail the run (exit status 3) when one of these bounds holds at its end, e.g. \"p99>50ms,loss>0,failed>0\"; "
                        + "metrics: p50 p90 p99 p99.9 max mean (ms, s or us), loss (count or N%), failed, dropped, errors, throughput (/s); "
                        + "comparisons > >= < <="),
                .value(
                    "start-at", "TIME",
                    "connect, then wait until TIME to publish: Unix seconds or ISO 8601 UTC (2026-01-31T12:00:00Z); "
                        + "runs on several machines begin together"),
                .value(
                    "churn", "R",
                    "close R watchers a second while publishing, each back after the dashboard's back-off and resuming with since; "
                        + "the time each took to come back is reported"),
                .flag(
                    "storm",
                    "close every watcher at once halfway through publishing; they come back as dashboards do (back-off, since), "
                        + "timed until all are live again"),
                .value(
                    "report-to", "URL TASK",
                    "publish the run's own progress (connected, delivered, p99 so far) as task TASK on the Ringcast server at URL"),
                .flag("json", "print the figures as one JSON object (with the latency histogram, for merge) instead of the table"),
                .value(
                    "report", "FILE.html", "also write a page with a latency histogram and latency over time", aliases: ["html"]),
                .flag("quiet", "no live progress line on stderr"),
            ]),
        // --url is how Benchmarks/run, Benchmarks/profile and older scripts name the server.
        ConnectionOptions.group.adding(alias: "url", to: "server"),
    ]
    static let epilogue = """
        Exit status: 0 when the run completed (loss is a result, not an error, unless --fail-if says
        so), 1 when it could not run (no server, no watcher connected, updates refused), 2 for a bad
        option, 3 when a --fail-if bound held (each one named on stderr). Ctrl-C stops publishing,
        prints what was measured until then and exits with 130.
        """

    enum Action {
        case run(LoadTester)
        /// Runs read from their --json files, in the order given.
        case merge([LoadResult])
    }

    let action: Action
    let failIf: LoadThresholds?
    let json: Bool
    let quiet: Bool
    let report: String?

    init(validating options: ParsedOptions) throws(UsageError) {
        do { failIf = try options.value("fail-if").map(LoadThresholds.parse) } catch { throw UsageError(error.description) }
        report = options.value("report")
        if let report, !FileManager.default.isWritableFile(atPath: URL(fileURLWithPath: report).deletingLastPathComponent().path) {
            throw UsageError("--report \(report): cannot write there; give a file in a directory that exists")
        }
        json = options.flag("json")
        quiet = options.flag("quiet")
        if options.positional.first == "merge" {
            action = .merge(try LoadCommand.readRuns(Array(options.positional.dropFirst()), options))
            return
        }
        var reportTo: (url: String, task: String)?
        if let url = options.value("report-to") {
            guard options.positional.count == 1, let task = options.positional.first else {
                throw UsageError("--report-to takes a server and a task id: --report-to http://127.0.0.1:8080 load.nightly")
            }
            reportTo = (url, task)
        } else {
            try options.noPositional()
        }
        let connection = try ConnectionOptions(options)
        var load = LoadTestOptions(url: connection.server)
        load.token = connection.token
        load.tls = connection.tls
        load.clients = try options.integer("clients")!
        load.threads = try options.integer("threads")!
        if let text = options.value("source-address") {
            load.sourceAddresses = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        load.rate = try options.decimal("rate")!
        load.duration = try options.decimal("duration")
        load.messages = try options.integer("messages")
        if load.duration == nil && load.messages == nil { load.duration = 10 }
        if let bytes = try options.integer("payload-bytes") { load.payloadBytes = bytes }
        load.watch = options.value("watch")!
        load.tasks = try options.integer("tasks")!
        let mode = options.value("publish")!
        guard let publish = LoadTestOptions.PublishMode(rawValue: mode) else {
            throw UsageError("--publish takes http, batch or ws, not '\(mode)'")
        }
        load.publish = publish
        load.batchSize = try options.integer("batch-size") ?? (publish == .batch ? 20 : 1)
        if let text = options.value("publish-to") {
            guard let url = ServerURL(text) else {
                throw UsageError("--publish-to takes a server's address, like http://127.0.0.1:8081, not '\(text)'")
            }
            load.publishURL = url
        }
        if let text = options.value("server-pid") {
            guard let pid = Int32(text), pid > 0 else { throw UsageError("--server-pid takes a process id, not '\(text)'") }
            load.serverPID = pid
        }
        load.rampPerSecond = try options.decimal("ramp-per-second")!
        load.maxHandshakes = try options.integer("max-handshakes")!
        load.connectTimeout = try options.decimal("connect-timeout")!
        load.drainTimeout = try options.decimal("drain-timeout")!
        load.latestValue = options.flag("latest-value")
        load.churnPerSecond = try options.decimal("churn") ?? 0
        load.storm = options.flag("storm")
        load.reportTo = reportTo
        load.failIf = failIf
        if let text = options.value("start-at") { load.startAt = try LoadCommand.unixTime(text) }
        do {
            action = .run(try LoadTester(options: load))
        } catch {
            throw UsageError(error.description)
        }
    }

    /// `--start-at`: Unix seconds, or ISO 8601 with its zone (2026-01-31T12:00:00Z).
    static func unixTime(_ text: String) throws(UsageError) -> Double {
        if let seconds = Double(text), seconds.isFinite { return seconds }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        throw UsageError(
            "--start-at takes Unix seconds (like \(Int(Date().timeIntervalSince1970) + 60)) or an ISO 8601 UTC time (like 2026-01-31T12:00:00Z), not '\(text)'"
        )
    }

    /// The options a merge reads besides its files; the others describe a run.
    private static let mergeOptions: Set<String> = ["json", "report", "fail-if", "quiet"]

    /// The files `merge` was given, each read as a run's --json.
    static func readRuns(_ files: [String], _ options: ParsedOptions) throws(UsageError) -> [LoadResult] {
        guard !files.isEmpty else { throw UsageError("merge needs the runs' --json files: ringcast load merge a.json b.json") }
        for option in allGroups.flatMap(\.options) where !mergeOptions.contains(option.name) && option.name != "help" {
            if options.isGiven(option.name) {
                throw UsageError("--\(option.name) describes a run, not a merge: merge takes only --json, --report and --fail-if")
            }
        }
        var runs: [LoadResult] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw UsageError("merge: cannot read \(file): give the files `ringcast load --json > FILE` wrote")
            }
            do {
                runs.append(try LoadResult(json: try JSONParser.parse(Array(data)), source: file))
            } catch let error as LoadError {
                throw UsageError("merge: \(error.description)")
            } catch {
                throw UsageError("merge: \(file) is not JSON (\(error)): give the files `ringcast load --json > FILE` wrote")
            }
        }
        return runs
    }

    func run() throws(CommandFailure) -> Int32 {
        let result: LoadResult
        switch action {
        case .merge(let runs): result = LoadResult.merge(runs, failIf: failIf)
        case .run(let tester): result = try execute(tester)
        }
        if json {
            print(String(decoding: JSONWriter.encode(result.json), as: UTF8.self))
        } else {
            print(result.table)
        }
        if let report {
            do {
                try result.html.write(toFile: report, atomically: true, encoding: .utf8)
                if !json { print("report written to \(report)") }
            } catch {
                throw CommandFailure("cannot write --report \(report): \(error.localizedDescription)")
            }
        }
        if result.interrupted { return 130 }
        return LoadCommand.verdict(result)
    }

    private func execute(_ tester: LoadTester) throws(CommandFailure) -> LoadResult {
        LWS.raiseOpenFileLimit()
        var line = quiet ? nil : ProgressLine(terminal: isatty(STDERR_FILENO) != 0)
        let result: LoadResult
        do {
            result = try tester.execute { [tester] progress in
                if TerminationSignals.take() != nil { tester.stop() }
                line?.show(progress)
            }
            line?.clear()
        } catch {
            line?.clear()
            throw CommandFailure("\(error)")
        }
        return result
    }

    /// 3 when a --fail-if bound held, each named on stderr; else 0.
    static func verdict(_ result: LoadResult) -> Int32 {
        let breaches = result.breaches
        guard !breaches.isEmpty else { return 0 }
        for breach in breaches { fail("load: failed --fail-if \(breach)") }
        return 3
    }
}

/// The live progress line on stderr: redrawn in place on a terminal, one line a second otherwise
/// (a log file). Called on the load tester's calling thread only.
struct ProgressLine {
    let terminal: Bool
    /// The last whole second a line went to a non-terminal stderr.
    private var lastLoggedSecond = -1

    init(terminal: Bool) { self.terminal = terminal }

    mutating func show(_ progress: LoadProgress) {
        let line =
            progress.phase.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)
            + String(
                format: " %5.1fs  connected %d/%d (failed %d)  sent %d  received %d  %.0f/s",
                progress.elapsed, progress.connected, progress.clients, progress.failed, progress.published,
                progress.delivered, progress.deliveriesPerSecond)
        if terminal {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
        } else if progress.phase == .done || Int(progress.elapsed) != lastLoggedSecond {
            lastLoggedSecond = Int(progress.elapsed)
            FileHandle.standardError.write(Data("\(line)\n".utf8))
        }
    }

    /// Clears a terminal's line before the results print.
    func clear() {
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}
