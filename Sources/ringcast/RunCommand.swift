import Foundation
import RingcastClient
import RingcastCore

/// `ringcast run ID -- CMD ARGS…`: a spinner while CMD runs, then done or failed from its exit status.
struct RunCommand: ProducerCommand {
    static let name = "run"
    static let summary = "a spinner while a command runs, then done or failed: ringcast run build -- make"
    static let usage = [
        "ringcast run ID [--title T] [--hide-after SECONDS] [--stale-after SECONDS] -- CMD [ARGS…]",
        "ringcast run ID [--controls LIST] [--grace SECONDS] [--no-log] [--kind K] -- CMD [ARGS…]",
    ]
    static let discussion = """
        Runs CMD with ARGS while task ID shows a spinner; then marks the task done (exit status 0) or
        failed with the detail that says where it stopped ("exit status 2", "killed by SIGTERM"), and
        exits with CMD's status (128+N when a signal N ended it, 127 when CMD is not found).
        Its input is untouched; its output passes through byte for byte and its lines go to the task's
        log (--no-log leaves the output on the terminal itself and sends no lines).
        While CMD runs, ringcast holds a publishing WebSocket that keeps the task's lease alive: if
        ringcast dies, the task turns `stalled` at once. Through it the dashboard's requests arrive:
        cancel sends SIGTERM to CMD (SIGKILL after --grace seconds), marks the task cancelled and exits
        130; pause and resume send SIGSTOP and SIGCONT.
        SIGINT and SIGTERM sent to ringcast alone are passed on to CMD.
        If the server cannot be reached at the start, CMD is not run (exit status 1).
        """
    static let ownOptions: [Option] = [
        .value("title", "T", "the task's title (default: the command line)"),
        .value("hide-after", "SECONDS", "hide the task that long after CMD ends"),
        .value("stale-after", "SECONDS", "the lease; it is renewed every third of it", default: "10"),
        .value(
            "controls", "LIST", "what the dashboard may ask of CMD: cancel, pause, resume (comma-separated), or none",
            default: "cancel,pause,resume"),
        .value("grace", "SECONDS", "after a cancel request, how long CMD has between SIGTERM and SIGKILL", default: "10"),
        .flag("no-log", "leave CMD's output alone and send no log lines"),
        .value("kind", "K", "the kind whose past runs give the ETA (default: the id without its trailing number, ci.build-42 → ci.build)"),
    ]
    static let epilogue = """
        exit status:
          CMD's  the task is done (0), or failed: "exit status N", "killed by SIGNAL" (128+N)
          1      the server could not be reached at the start (CMD did not run)
          2      a wrong argument
          130    cancelled on request: the task is cancelled, "cancelled on request"
        """
    /// The exit status of a command cancelled on request (as a shell reports Ctrl-C).
    static let cancelledStatus: Int32 = 130
    static let takesPassthrough = true

    let session: ProducerSession
    let id: String
    let command: [String]
    let title: String
    let hideAfter: Double?
    let lease: Double
    let controls: [TaskControl]
    let grace: Double
    let logs: Bool
    let kind: String?

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
        grace = try options.seconds("grace", minimum: 0.01)!
        logs = !options.flag("no-log")
        kind = try options.kind()
        let list = options.value("controls")!
        if list == "none" {
            controls = []
        } else {
            controls = try list.split(separator: ",").map { name throws(UsageError) in
                guard let control = TaskControl(rawValue: String(name)) else {
                    throw UsageError("--controls takes cancel, pause and resume (comma-separated) or none, not '\(name)'")
                }
                return control
            }
        }
    }

    func run() throws(CommandFailure) -> Int32 {
        // A fresh spinner: clears what an earlier run left (counts, detail, a pending hide).
        try session.send(
            "POST", ProducerSession.taskPath(id),
            .object(
                [
                    ("title", .string(title)), ("progress", .null), ("completed", .null), ("total", .null),
                    ("detail", .null), ("state", .string("running")), ("visible", .bool(true)),
                    ("hideAfter", .null), ("staleAfter", .number(lease)), ("controls", .array(controls.map { .string($0.rawValue) })),
                ] + (kind.map { [("kind", JSONValue.string($0))] } ?? [])))
        // The child must not inherit the kept-alive socket; the next request opens a new one.
        session.disconnect()

        // Its output through pipes of ours (their read ends close on exec), so its lines can be logged.
        var output: [(read: Int32, write: Int32)] = []
        if logs {
            for _ in 0..<2 {
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { break }
                _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
                output.append((ends[0], ends[1]))
            }
            if output.count < 2 {
                output.forEach {
                    close($0.read)
                    close($0.write)
                }
                output = []
            }
        }
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(command, output: output.count == 2 ? (output[0].write, output[1].write) : nil)
        } catch {
            output.forEach {
                close($0.read)
                close($0.write)
            }
            _ = try? session.send(
                "POST", ProducerSession.taskPath(id), .object(finalFields(state: "failed", detail: "could not start: \(error.reason)")))
            fail("run: cannot run '\(command[0])': \(error.reason)")
            return error.exitCode
        }
        var tees: [OutputTee] = []
        var shipper: LogShipper?
        if output.count == 2 {
            let lines = LogShipper(options: session.options, id: id)
            shipper = lines
            for (index, ends) in output.enumerated() {
                close(ends.write)
                tees.append(OutputTee(reading: ends.read, writingTo: index == 0 ? STDOUT_FILENO : STDERR_FILENO, shipper: lines))
            }
        }
        let publisher: RunPublisher?
        do {
            publisher = try RunPublisher(options: session.options, id: id, pid: child.pid, lease: lease, grace: grace, offers: controls)
        } catch {
            publisher = nil
        }
        let forwarder = SignalForwarder(to: child.pid)
        let status = child.wait()
        publisher?.commandExited()
        forwarder.stop()
        for tee in tees { tee.wait(timeout: 2) }
        // Its last lines reach the log before its end reaches the dashboard.
        shipper?.finish()
        publisher?.finish()
        let cancelled = publisher?.wasCancelled ?? false

        let ending = TaskEnding.command(status, cancelled: cancelled)
        let fields = finalFields(state: ending.state, detail: ending.detail)
        do {
            try session.send("POST", ProducerSession.taskPath(id), .object(fields))
        } catch {
            // CMD ran: its status is the answer; the dashboard's loss gets one line.
            fail("run: \(error)")
        }
        publisher?.close()
        return cancelled ? RunCommand.cancelledStatus : status.exitCode
    }

    private func finalFields(state: String, detail: String?) -> [(String, JSONValue)] {
        // Nothing is left to ask of a command that has ended.
        var fields: [(String, JSONValue)] = [("state", .string(state)), ("controls", .null)]
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
            case .exited(let code): return code
            case .signalled(let signal): return 128 + signal
            }
        }
    }

    struct SpawnError: Error {
        let reason: String
        /// As a shell says it: 127 not found, 126 found but not runnable.
        let exitCode: Int32
    }

    let pid: pid_t

    /// - Parameter output: descriptors to give the child as its stdout and stderr (else it has ours).
    static func spawn(_ arguments: [String], output: (stdout: Int32, stderr: Int32)? = nil) throws(SpawnError) -> ChildProcess {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        TerminationSignals.resetForChild(&attributes)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let output {
            posix_spawn_file_actions_adddup2(&actions, output.stdout, STDOUT_FILENO)
            posix_spawn_file_actions_adddup2(&actions, output.stderr, STDERR_FILENO)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, environ)
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
    let names: [Int32: String] = [
        SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGABRT: "SIGABRT", SIGKILL: "SIGKILL",
        SIGSEGV: "SIGSEGV", SIGPIPE: "SIGPIPE", SIGTERM: "SIGTERM", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
    ]
    return names[signal] ?? "signal \(signal)"
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
                if let (signal, sentByKill) = TerminationSignals.take(timeout: 0.1) {
                    if sentByKill { kill(pid, signal) }
                    // A child paused on request takes the signal only once it runs again.
                    kill(pid, SIGCONT)
                }
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
