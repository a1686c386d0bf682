import Foundation
import RingcastClient
import RingcastLoad
import RingcastCore

/// `ringcast load`: many watchers, one publisher, latency measured at every watcher.
enum LoadCommand {
    static let help = """
    usage: ringcast load [--url URL] [--clients N] [--rate R] [--duration S | --messages M] [OPTIONS]

    Opens N watcher WebSockets to a Ringcast server from one client context, publishes updates at a
    rate (or as fast as the server takes them), and measures at every watcher the time from publish
    to delivery on this process's monotonic clock. Each update's `detail` carries a marker with its
    number (rcload:RUN:N:); watchers count updates, not frames. At the end it prints a table of
    connections, deliveries, loss, throughput and latency percentiles (nearest-rank), and with
    --server-pid the server's CPU time per 1000 deliveries and its memory.

    options:
      --url URL               the server (default http://127.0.0.1:8080)
      --clients N             watcher connections (default 100)
      --rate R                updates per second; 0 = as fast as possible (default 10)
      --duration S            publish for S seconds (default 10 when --messages is not given)
      --messages M            publish M updates; with --duration too, whichever ends first;
                              --messages 0 --duration S holds the watchers idle for S seconds
      --payload-bytes B       pad each update's detail to B bytes (default: the marker alone)
      --watch PATTERN         the watchers' watch patterns (default *)
      --tasks K               spread updates round-robin over task ids rcload.t0 … rcload.t(K-1) (default 1)
      --publish MODE          http (one POST per update, default), batch (POST /api/events),
                              ws (a WebSocket publisher)
      --batch-size N          updates per batch request or WebSocket frame (default 20 for batch, 1 for ws)
      --token TOKEN           a publisher token (default $RINGCAST_TOKEN), for servers that require one
      --server-pid PID        a local server's pid: report its CPU time (from /proc) and memory
      --ramp-per-second N     start at most N watcher connections a second (default 0: no limit)
      --max-handshakes N      at most N watchers connecting at once (default 256)
      --connect-timeout S     a watcher not open after S seconds has failed (default 10)
      --drain-timeout S       after the last update, wait at most S seconds for deliveries still coming
                              (default 60; it ends sooner after 2 s without any)
      --json                  print the figures as one JSON object instead of the table
      --report FILE.html      also write a page with a latency histogram and latency over time
      --quiet                 no live progress line on stderr
      --help                  show this help

    Exit status: 0 when the run completed (loss is a result, not an error), 1 when it could not
    run (no server, no watcher connected, updates refused), 2 for a bad option. Ctrl-C stops
    publishing, prints what was measured until then and exits with 130.
    """

    static let valued: Set<String> = ["url", "clients", "rate", "duration", "messages", "payload-bytes", "watch", "tasks",
                                      "publish", "batch-size", "token", "server-pid", "ramp-per-second", "max-handshakes",
                                      "connect-timeout", "drain-timeout", "report"]

    static func run(_ arguments: [String]) -> Int32 {
        let parsed: ParsedOptions
        do {
            parsed = try ParsedOptions(arguments, valued: valued, flags: ["json", "quiet", "help"])
        } catch {
            fail("load: \(error); see `ringcast load --help`")
            return 2
        }
        if parsed.flags.contains("help") { print(help); return 0 }
        let options: LoadTestOptions
        do {
            options = try makeOptions(parsed)
        } catch {
            fail("load: \(error); see `ringcast load --help`")
            return 2
        }
        let tester: LoadTester
        do {
            tester = try LoadTester(options: options)
        } catch {
            fail("load: \(error)")
            return 2
        }
        if let report = parsed.values["report"], !FileManager.default.isWritableFile(atPath: URL(fileURLWithPath: report).deletingLastPathComponent().path) {
            fail("load: --report \(report): cannot write there; give a file in a directory that exists")
            return 2
        }

        let live = !parsed.flags.contains("quiet")
        let terminal = isatty(STDERR_FILENO) != 0
        let result: LoadResult
        do {
            result = try tester.execute { progress in
                if stopSignalArrived() { tester.stop() }
                if live { show(progress, terminal: terminal) }
            }
        } catch {
            if live && terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            fail("load: \(error)")
            return 1
        }
        if live && terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        if parsed.flags.contains("json") {
            print(String(decoding: JSONWriter.encode(result.json), as: UTF8.self))
        } else {
            print(result.table)
        }
        if let report = parsed.values["report"] {
            do {
                try result.html.write(toFile: report, atomically: true, encoding: .utf8)
                if !parsed.flags.contains("json") { print("report written to \(report)") }
            } catch {
                fail("load: cannot write --report \(report): \(error.localizedDescription)")
                return 1
            }
        }
        return result.interrupted ? 130 : 0
    }

    static func makeOptions(_ parsed: ParsedOptions) throws -> LoadTestOptions {
        guard parsed.positional.isEmpty else { throw UsageError("unexpected argument '\(parsed.positional[0])'") }
        let values = parsed.values
        let urlText = values["url"] ?? "http://127.0.0.1:8080"
        guard let url = ServerURL(urlText) else {
            throw UsageError("--url '\(urlText)' is not a server address; give one like http://127.0.0.1:8080")
        }
        var options = LoadTestOptions(url: url)
        func integer(_ name: String) throws -> Int? {
            guard let text = values[name] else { return nil }
            guard let value = Int(text) else { throw UsageError("--\(name) takes a whole number, not '\(text)'") }
            return value
        }
        func decimal(_ name: String) throws -> Double? {
            guard let text = values[name] else { return nil }
            guard let value = Double(text), value.isFinite else { throw UsageError("--\(name) takes a number, not '\(text)'") }
            return value
        }
        if let clients = try integer("clients") { options.clients = clients }
        if let rate = try decimal("rate") { options.rate = rate }
        options.duration = try decimal("duration")
        options.messages = try integer("messages")
        if options.duration == nil && options.messages == nil { options.duration = 10 }
        if let bytes = try integer("payload-bytes") { options.payloadBytes = bytes }
        if let watch = values["watch"] { options.watch = watch }
        if let tasks = try integer("tasks") { options.tasks = tasks }
        if let mode = values["publish"] {
            guard let publish = LoadTestOptions.PublishMode(rawValue: mode) else {
                throw UsageError("--publish takes http, batch or ws, not '\(mode)'")
            }
            options.publish = publish
        }
        options.batchSize = try integer("batch-size") ?? (options.publish == .batch ? 20 : 1)
        options.token = values["token"] ?? ProcessInfo.processInfo.environment["RINGCAST_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        if let text = values["server-pid"] {
            guard let pid = Int32(text), pid > 0 else { throw UsageError("--server-pid takes a process id, not '\(text)'") }
            options.serverPID = pid
        }
        if let ramp = try decimal("ramp-per-second") { options.rampPerSecond = ramp }
        if let handshakes = try integer("max-handshakes") { options.maxHandshakes = handshakes }
        if let timeout = try decimal("connect-timeout") { options.connectTimeout = timeout }
        if let drain = try decimal("drain-timeout") { options.drainTimeout = drain }
        return options
    }

    /// SIGINT and SIGTERM are blocked in every thread (main.swift); a pending one means "stop".
    static func stopSignalArrived() -> Bool {
        var pending = sigset_t()
        sigemptyset(&pending)
        guard sigpending(&pending) == 0 else { return false }
        guard sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1 else { return false }
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        _ = sigtimedwait(&signals, nil, &zero)
        return true
    }

    /// The last whole second a progress line went to a non-terminal stderr (main thread only).
    private static var lastLoggedSecond = -1

    static func show(_ progress: LoadProgress, terminal: Bool) {
        let line = progress.phase.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)
            + String(format: " %5.1fs  connected %d/%d (failed %d)  sent %d  received %d  %.0f/s",
                     progress.elapsed, progress.connected, progress.clients, progress.failed, progress.published,
                     progress.delivered, progress.deliveriesPerSecond)
        if terminal {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
        } else if progress.phase == .done || Int(progress.elapsed) != lastLoggedSecond {
            // Not a terminal (a log file): one line a second instead of redrawing.
            lastLoggedSecond = Int(progress.elapsed)
            FileHandle.standardError.write(Data("\(line)\n".utf8))
        }
    }
}
