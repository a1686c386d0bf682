import Foundation
import XCTest

// The built `ringcast` executable in processes of its own, for the end-to-end tests.

/// The executable the tests run: $RINGCAST_BIN when set, else the one built next to this test
/// bundle (same build configuration), else .build/debug/ringcast.
package let ringcastBinary: String = {
    if let given = ProcessInfo.processInfo.environment["RINGCAST_BIN"], !given.isEmpty { return given }
    let runner = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let sibling = runner.deletingLastPathComponent().appendingPathComponent("ringcast").path
    return FileManager.default.isExecutableFile(atPath: sibling) ? sibling : repositoryRoot + "/.build/debug/ringcast"
}()

/// A test that runs the executable fails, never skips, when there is none to run.
package struct MissingBinary: Error, CustomStringConvertible {
    package var description: String { "no executable at \(ringcastBinary): build it first (swift build, or make test)" }

    package static func check() throws {
        guard FileManager.default.isExecutableFile(atPath: ringcastBinary) else { throw MissingBinary() }
    }
}

/// A program a test needs is not installed.
package struct MissingTool: Error, CustomStringConvertible {
    package let description: String
    package init(_ tool: String) { description = "\(tool) is not installed: scripts/deps.sh installs it" }
}

/// `ringcast serve` in a process of its own, started and read until it says where it listens.
package final class ServeProcess {
    package let process = Process()
    /// The first line it printed: `listening on http://HOST:PORT`.
    package let firstLine: String
    package let port: Int
    /// Signalled once the process has exited (and again by each `stop` that saw it, for the next).
    private let exited = DispatchSemaphore(value: 0)

    /// `environment` is added to this process's; `errorLog` receives what it writes to stderr;
    /// `openFileLimit` runs it under that RLIMIT_NOFILE, soft and hard (util-linux's prlimit,
    /// which execs it: the pid is the server's).
    package init(_ arguments: [String], environment: [String: String] = [:], errorLog: URL? = nil, openFileLimit: Int? = nil) throws {
        try MissingBinary.check()
        if let openFileLimit {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
                throw MissingTool("/usr/bin/prlimit (Debian's util-linux)")
            }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            process.arguments = ["--nofile=\(openFileLimit):\(openFileLimit)", ringcastBinary, "serve"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: ringcastBinary)
            process.arguments = ["serve"] + arguments
        }
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.terminationHandler = { [exited] _ in exited.signal() }
        let output = Pipe()
        process.standardOutput = output
        if let errorLog {
            _ = FileManager.default.createFile(atPath: errorLog.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: errorLog)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        firstLine = readLine(from: output.fileHandleForReading)
        port = Int(firstLine.split(separator: ":").last ?? "") ?? 0
    }

    deinit {
        if process.isRunning { _ = stop() }
    }

    /// Sends `signal` and returns the exit status. A server that has not stopped 30 seconds later
    /// (a sanitizer's build is slow, but not that slow) fails the test and is killed, so that a
    /// server stuck in its service loop ends the test instead of hanging the whole run.
    package func stop(_ signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        if exited.wait(timeout: .now() + 30) == .timedOut {
            XCTFail("ringcast serve (pid \(process.processIdentifier)) did not stop within 30 s of signal \(signal); killed it")
            kill(process.processIdentifier, SIGKILL)
        } else {
            exited.signal()
        }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// Runs a program to the end: its status and everything it wrote, stdout and stderr together.
package func runToEnd(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// One line (without its newline) read byte by byte, so nothing after it is consumed.
package func readLine(from handle: FileHandle) -> String {
    var line: [UInt8] = []
    while true {
        let byte = handle.readData(ofLength: 1)
        if byte.isEmpty || byte.first == UInt8(ascii: "\n") { break }
        line.append(byte.first!)
    }
    return String(decoding: line, as: UTF8.self)
}

/// The real `ringcast` executable, its output collected; RINGCAST_URL/RINGCAST_TOKEN come only from `environment`.
/// @unchecked Sendable: `output` and `errors` are written once each by their reader and read only
/// after `readers` says both are done.
package final class RingcastProcess: @unchecked Sendable {
    package struct Result {
        package let status: Int32
        package let stdout: String
        package let stderr: String
        package var stderrLines: [Substring] { stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast() }
    }

    package let process = Process()
    private let input = Pipe()
    // Bytes, not Data: Data's storage pointer sits in a multi-payload enum whose tag bits
    // LeakSanitizer cannot see through, so an instance still alive at exit read as a leak.
    private var output: [UInt8] = []
    private var errors: [UInt8] = []
    private let readers = DispatchGroup()

    package init(_ arguments: [String], environment: [String: String] = [:]) throws {
        try MissingBinary.check()
        process.executableURL = URL(fileURLWithPath: ringcastBinary)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        merged["RINGCAST_URL"] = nil
        merged["RINGCAST_TOKEN"] = nil
        merged.merge(environment) { $1 }
        process.environment = merged
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardInput = input
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        try process.run()
        readers.enter()
        DispatchQueue.global().async {
            self.output = Array(outputPipe.fileHandleForReading.readDataToEndOfFile())
            self.readers.leave()
        }
        readers.enter()
        DispatchQueue.global().async {
            self.errors = Array(errorPipe.fileHandleForReading.readDataToEndOfFile())
            self.readers.leave()
        }
    }

    package func write(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }
    package func closeInput() { try? input.fileHandleForWriting.close() }

    package func wait() -> Result {
        closeInput()
        process.waitUntilExit()
        readers.wait()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self), stderr: String(decoding: errors, as: UTF8.self))
    }

    /// Runs to the end with `stdin` as input, against `server` (as RINGCAST_URL) when given.
    package static func run(
        _ arguments: [String], server: TestServer? = nil, stdin: String = "",
        environment: [String: String] = [:]
    ) throws -> Result {
        var environment = environment
        if let server, environment["RINGCAST_URL"] == nil { environment["RINGCAST_URL"] = server.httpURL }
        let process = try RingcastProcess(arguments, environment: environment)
        process.write(stdin)
        return process.wait()
    }

    /// The processes this one started that are still running (from /proc: their parent is it).
    package var children: [pid_t] {
        let parent = process.processIdentifier
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // After the command name in parentheses: state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == parent ? pid : nil
        }
    }
}

/// A redis-server of the test's own on a free loopback port, without persistence (so a restart
/// loses everything, as the harshest restart would), stopped when it goes away.
package final class RedisProcess {
    package let port: Int
    /// Settings of its own (`--databases 2`), after the ones every test's Redis has.
    private let settings: [String]
    private var process: Process?

    package init(port: Int = closedLoopbackPort(), settings: [String] = []) throws {
        self.port = port
        self.settings = settings
        try start()
    }

    deinit { stop() }

    package var url: String { "redis://127.0.0.1:\(port)" }

    package func start() throws {
        guard let path = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first(where: FileManager.default.isExecutableFile) else {
            throw RedisMissing()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "yes"] + settings
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        guard eventually(timeout: 5, { answersPing() }) else { throw RedisMissing(detail: "redis-server on port \(port) did not answer PING") }
    }

    /// Kills it at once (no save), as a crash would.
    package func stop() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    package func restart() throws {
        stop()
        try start()
    }

    private func answersPing() -> Bool {
        guard let socket = try? RawSocket(port: port, timeoutSeconds: 1) else { return false }
        try? socket.send("PING\r\n")
        return socket.receive(until: Array("PONG".utf8)).count >= 4
    }
}

package struct RedisMissing: Error, CustomStringConvertible {
    var detail = "no redis-server: install Debian's redis-server (scripts/deps.sh test does)"
    package var description: String { detail }
}
