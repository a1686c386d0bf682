import Foundation
import RingcastClient
import RingcastCore

/// `ringcast run ID -- CMD ARGS…`: a spinner while CMD runs, then done or failed from its exit status.
struct RunCommand: ProducerCommand {
    static let name = "run"
    static let summary = "a spinner while a command runs, then done or failed: ringcast run build -- make"
    static let usage = ["ringcast run ID [--title T] [--hide-after SECONDS] [--stale-after SECONDS] -- CMD [ARGS…]"]
    static let discussion = """
    Runs CMD with ARGS, its input and output untouched, while task ID shows a spinner; then marks the
    task done (exit status 0) or failed, and exits with CMD's status (128+N when a signal N ended it,
    127 when CMD is not found).
    While CMD runs the task's lease is kept alive: if ringcast itself dies, the task turns `stalled`.
    SIGINT and SIGTERM sent to ringcast alone are passed on to CMD.
    If the server cannot be reached at the start, CMD is not run (exit status 1).
    """
    static let ownOptions: [Option] = [
        .value("title", "T", "the task's title (default: the command line)"),
        .value("hide-after", "SECONDS", "hide the task that long after CMD ends"),
        .value("stale-after", "SECONDS", "the lease; it is renewed every third of it", default: "10"),
    ]
    static let takesPassthrough = true

    let session: ProducerSession
    let id: String
    let command: [String]
    let title: String
    let hideAfter: Double?
    let lease: Double

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
        guard !options.passthrough.isEmpty, !options.passthrough[0].isEmpty else {
            throw UsageError("give the command after --, e.g. ringcast run \(id) -- make test")
        }
        command = options.passthrough
        let commandLine = command.joined(separator: " ")
        title = try options.text("title", maxLength: 200) ?? (commandLine.count > 200 ? String(commandLine.prefix(199)) + "…" : commandLine)
        hideAfter = try options.seconds("hide-after")
        lease = try options.seconds("stale-after", minimum: 1)!
    }

    func run() throws(CommandFailure) -> Int32 {
        // A fresh spinner: clears what an earlier run left (counts, detail, a pending hide).
        try session.send("POST", ProducerSession.taskPath(id), .object([
            ("title", .string(title)), ("progress", .null), ("completed", .null), ("total", .null),
            ("detail", .null), ("state", .string("running")), ("visible", .bool(true)),
            ("hideAfter", .null), ("staleAfter", .number(lease)),
        ]))
        // The child must not inherit the kept-alive socket; the next request opens a new one.
        session.disconnect()

        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(command)
        } catch {
            _ = try? session.send("POST", ProducerSession.taskPath(id), .object(finalFields(state: "failed", detail: "could not start: \(error.reason)")))
            fail("run: cannot run '\(command[0])': \(error.reason)")
            return error.exitCode
        }
        let keepAlive = LeaseKeeper(session: session, id: id, every: lease / 3)
        let forwarder = SignalForwarder(to: child.pid)
        let status = child.wait()
        forwarder.stop()
        keepAlive.stop()

        let fields: [(String, JSONValue)]
        switch status {
        case .exited(0): fields = finalFields(state: "done", detail: nil)
        case let .exited(code): fields = finalFields(state: "failed", detail: "exit status \(code)")
        case let .signalled(signal): fields = finalFields(state: "failed", detail: "killed by \(signalName(signal))")
        }
        do {
            try session.send("POST", ProducerSession.taskPath(id), .object(fields))
        } catch {
            // CMD ran: its status is the answer; the dashboard's loss gets one line.
            fail("run: \(error)")
        }
        return status.exitCode
    }

    private func finalFields(state: String, detail: String?) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [("state", .string(state))]
        if let detail { fields.append(("detail", .string(detail))) }
        if let hideAfter { fields.append(("hideAfter", .number(hideAfter))) }
        return fields
    }
}

/// A child process started with posix_spawnp: our stdin, stdout and stderr, our environment, and the
/// signal dispositions a fresh process expects (ringcast blocks SIGINT/SIGTERM and ignores SIGPIPE).
struct ChildProcess {
    enum Status: Equatable {
        case exited(Int32)
        case signalled(Int32)

        /// As a shell reports it: the exit code, or 128 + the signal.
        var exitCode: Int32 {
            switch self {
            case let .exited(code): return code
            case let .signalled(signal): return 128 + signal
            }
        }
    }

    struct SpawnError: Error {
        let reason: String
        /// As a shell says it: 127 not found, 126 found but not runnable.
        let exitCode: Int32
    }

    let pid: pid_t

    static func spawn(_ arguments: [String]) throws(SpawnError) -> ChildProcess {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        TerminationSignals.resetForChild(&attributes)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawnp(&pid, arguments[0], nil, &attributes, argv, environ)
        guard result == 0 else {
            let reason = result == ENOENT ? "command not found" : String(cString: strerror(result))
            throw SpawnError(reason: reason, exitCode: result == ENOENT ? 127 : 126)
        }
        return ChildProcess(pid: pid)
    }

    /// Blocks until the child ends.
    func wait() -> Status {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return .exited(127) }
        }
        // The <sys/wait.h> macros, which Swift cannot import.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }
}

func signalName(_ signal: Int32) -> String {
    let names: [Int32: String] = [SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGABRT: "SIGABRT", SIGKILL: "SIGKILL",
                                  SIGSEGV: "SIGSEGV", SIGPIPE: "SIGPIPE", SIGTERM: "SIGTERM", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE"]
    return names[signal] ?? "signal \(signal)"
}

/// Renews a task's lease on its own thread while a command runs: an empty update every `interval`.
/// It owns the session until `stop()` returns.
/// @unchecked Sendable: `stopped` and `finished` sit under `condition`; only the lease thread uses the session.
final class LeaseKeeper: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false
    private var finished = false
    private let session: ProducerSession

    init(session: ProducerSession, id: String, every interval: Double) {
        self.session = session
        let thread = Thread { [self] in
            condition.lock()
            while !stopped {
                if !condition.wait(until: Date().addingTimeInterval(interval)), !stopped {
                    // A lost renewal is not worth a word: the next one, or the final update, follows.
                    _ = try? self.session.send("POST", ProducerSession.taskPath(id), .object([]))
                }
            }
            finished = true
            condition.broadcast()
            condition.unlock()
        }
        thread.name = "ringcast-lease"
        thread.start()
    }

    /// Stops renewing and waits for the thread to end.
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
            while !finished { condition.wait() }
        }
    }
}

/// Passes SIGINT and SIGTERM that were sent to ringcast alone (with kill) on to the child. A terminal's
/// Ctrl-C already reaches the whole foreground group, child included, so it is not sent twice.
/// @unchecked Sendable: `running` sits under `lock`; `done` is a semaphore.
final class SignalForwarder: @unchecked Sendable {
    private let lock = NSLock()
    private var running = true
    private let done = DispatchSemaphore(value: 0)

    init(to pid: pid_t) {
        let thread = Thread { [self] in
            while lock.withLock({ running }) {
                if let (signal, sentByKill) = TerminationSignals.take(timeout: 0.1), sentByKill { kill(pid, signal) }
            }
            done.signal()
        }
        thread.name = "ringcast-signals"
        thread.start()
    }

    func stop() {
        lock.withLock { running = false }
        done.wait()
    }
}
