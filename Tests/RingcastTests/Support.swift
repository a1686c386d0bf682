import Foundation
import Ringcast
import RingcastClient
import RingcastCore
import XCTest

/// Unix time in milliseconds: the clock the server stamps events with, read the same way.
func nowMs() -> Double { Date().timeIntervalSince1970 * 1000 }

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The executable the Makefile (and `swift build`) builds before the tests run.
let ringcastBinary = repositoryRoot + "/.build/debug/ringcast"

/// An empty directory to serve as publicDir, for tests that need the API and not the dashboard.
let emptyPublicDirectory: String = {
    let path = NSTemporaryDirectory() + "ringcast-tests-empty-public"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}()

/// `ringcast serve` in a process of its own, started and read until it says where it listens.
final class ServeProcess {
    let process = Process()
    /// The first line it printed: `listening on http://HOST:PORT`.
    let firstLine: String
    let port: Int

    init(_ arguments: [String]) throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: ringcastBinary), "build the executable first (make test does)")
        process.executableURL = URL(fileURLWithPath: ringcastBinary)
        process.arguments = ["serve"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        firstLine = readLine(from: output.fileHandleForReading)
        port = Int(firstLine.split(separator: ":").last ?? "") ?? 0
    }

    deinit {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// Sends `signal` and returns the exit status.
    func stop(_ signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return process.terminationStatus
    }
}

func readLine(from handle: FileHandle) -> String {
    var line: [UInt8] = []
    while true {
        let byte = handle.readData(ofLength: 1)
        if byte.isEmpty || byte.first == UInt8(ascii: "\n") { break }
        line.append(byte.first!)
    }
    return String(decoding: line, as: UTF8.self)
}

/// A real server on an ephemeral loopback port, serving the repository's Public/.
final class TestServer {
    let server: RingcastServer
    let port: Int

    init(persistence: TaskPersistence = MemoryOnlyPersistence(), configure: (inout ServerConfig) -> Void = { _ in }) throws {
        var config = ServerConfig()
        config.port = 0
        config.logLevel = .error
        configure(&config)
        server = RingcastServer(config: config, baseDirectory: repositoryRoot, logger: .silent, persistence: persistence)
        port = try server.start()
    }

    deinit { server.stop() }

    var wsURL: String { "ws://127.0.0.1:\(port)/ws" }

    func http() -> HTTPClient { HTTPClient(host: "127.0.0.1", port: port) }

    @discardableResult
    func post(_ path: String, _ json: String = "{}") throws -> JSONValue {
        let response = try http().request("POST", path, json: json)
        XCTAssertEqual(response.status, 200, "POST \(path) \(json): \(response.text)")
        return try JSONParser.parse(response.body)
    }
}

/// One received event and when it arrived.
struct Received {
    let event: JSONValue
    let at: Double
    var type: String? { if case let .string(type)? = event["type"] { return type }; return nil }
    var id: String? { if case let .string(id)? = event["id"] { return id }; return nil }
    func number(_ key: String) -> Double? { if case let .number(n)? = event[key] { return n }; return nil }
    func string(_ key: String) -> String? { if case let .string(s)? = event[key] { return s }; return nil }
}

/// Items arriving on another thread, and a way to wait until what has arrived passes a test.
final class Inbox<Element>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Element] = []
    private var closed = false

    var all: [Element] { condition.withLock { items } }
    var isClosed: Bool { condition.withLock { closed } }

    func append(contentsOf new: [Element]) {
        condition.withLock { items += new; condition.broadcast() }
    }

    /// No more items will come.
    func close() {
        condition.withLock { closed = true; condition.broadcast() }
    }

    /// Waits until `predicate` holds over everything received so far (failing the test after
    /// `timeout`); returns what was received.
    @discardableResult
    func wait(timeout: Double = 5, describe: ([Element]) -> String = { "\($0)" }, file: StaticString = #filePath, line: UInt = #line,
              until predicate: ([Element]) -> Bool) -> [Element] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(items) {
            if !condition.wait(until: deadline) {
                XCTFail("timed out after \(timeout) s; received \(describe(items))", file: file, line: line)
                break
            }
        }
        return items
    }

    func waitForClose(timeout: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !closed {
            if !condition.wait(until: deadline) { return false }
        }
        return true
    }
}

/// A real WebSocket watcher that records every event (arrays flattened) with its arrival time.
final class TestWatcher: WebSocketDelegate, @unchecked Sendable {
    private let inbox = Inbox<Received>()
    private(set) var closeError: String?
    var connection: WebSocketConnection!

    static let clients = try! WebSocketClientContext()

    init(_ url: String, headers: [(String, String)] = []) {
        connection = TestWatcher.clients.connect(ServerURL(url)!, headers: headers, delegate: self)
    }

    deinit { connection.close() }

    func webSocketDidOpen(_ connection: WebSocketConnection) {}

    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        let at = nowMs()
        guard let json = try? JSONParser.parse(message) else {
            XCTFail("the server sent a frame that is not JSON: \(String(decoding: message, as: UTF8.self))")
            return
        }
        let batch: [JSONValue]
        if case let .array(items) = json { batch = items } else { batch = [json] }
        inbox.append(contentsOf: batch.map { Received(event: $0, at: at) })
    }

    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) {
        closeError = error
        inbox.close()
    }

    var received: [Received] { inbox.all }
    var closed: Bool { inbox.isClosed }

    /// Waits until `predicate` holds over everything received so far; returns what was received.
    @discardableResult
    func wait(timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line, until predicate: ([Received]) -> Bool) -> [Received] {
        inbox.wait(timeout: timeout, describe: { $0.map { String(decoding: JSONWriter.encode($0.event), as: UTF8.self) }.description },
                   file: file, line: line, until: predicate)
    }

    func waitForClose(timeout: Double = 5) -> Bool { inbox.waitForClose(timeout: timeout) }

    /// Waits for hello and snapshot, the first two events of every connection.
    @discardableResult
    func waitForSnapshot(file: StaticString = #filePath, line: UInt = #line) -> (hello: Received, snapshot: Received) {
        let events = wait(file: file, line: line) { $0.contains { $0.type == "snapshot" } }
        // After a timeout (already a failure) the test goes on with empty events rather than crashing.
        let missing = Received(event: .null, at: 0)
        return (events.first ?? missing, events.first { $0.type == "snapshot" } ?? missing)
    }

    func events(for id: String, type: String? = nil) -> [Received] {
        received.filter { $0.id == id && (type == nil || $0.type == type) }
    }
}
