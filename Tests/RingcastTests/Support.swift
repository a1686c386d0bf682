import Foundation
import Ringcast
import RingcastClient
import RingcastCore
import XCTest

/// Unix time in milliseconds: the clock the server stamps events with, read the same way.
func nowMs() -> Double { Date().timeIntervalSince1970 * 1000 }

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// A real server on an ephemeral loopback port, serving the repository's Public/.
final class TestServer {
    let server: RingcastServer
    let port: Int

    init(configure: (inout ServerConfig) -> Void = { _ in }) throws {
        var config = ServerConfig()
        config.port = 0
        config.logLevel = .error
        configure(&config)
        server = RingcastServer(config: config, baseDirectory: repositoryRoot, logger: .silent)
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

/// A real WebSocket watcher that records every event (arrays flattened) with its arrival time.
final class TestWatcher: WebSocketDelegate, @unchecked Sendable {
    private let condition = NSCondition()
    private var events: [Received] = []
    private(set) var frames = 0
    private(set) var closed = false
    private(set) var closeError: String?
    private(set) var opened = false
    var connection: WebSocketConnection!

    static let clients = try! WebSocketClientContext()

    init(_ url: String, headers: [(String, String)] = []) {
        connection = TestWatcher.clients.connect(ServerURL(url)!, headers: headers, delegate: self)
    }

    deinit { connection.close() }

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        condition.withLock { opened = true; condition.broadcast() }
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        let at = nowMs()
        guard let json = try? JSONParser.parse(message) else {
            XCTFail("the server sent a frame that is not JSON: \(String(decoding: message, as: UTF8.self))")
            return
        }
        let batch: [JSONValue]
        if case let .array(items) = json { batch = items } else { batch = [json] }
        condition.withLock {
            frames += 1
            events += batch.map { Received(event: $0, at: at) }
            condition.broadcast()
        }
    }

    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) {
        condition.withLock {
            closed = true
            closeError = error
            condition.broadcast()
        }
    }

    var received: [Received] { condition.withLock { events } }

    /// Waits until `predicate` holds over everything received so far; returns what was received.
    @discardableResult
    func wait(timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line, until predicate: ([Received]) -> Bool) -> [Received] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(events) {
            if !condition.wait(until: deadline) {
                XCTFail("timed out after \(timeout) s; received \(events.map { String(decoding: JSONWriter.encode($0.event), as: UTF8.self) })", file: file, line: line)
                return events
            }
        }
        return events
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

    /// Waits for hello and snapshot, the first two events of every connection.
    @discardableResult
    func waitForSnapshot(file: StaticString = #filePath, line: UInt = #line) -> (hello: Received, snapshot: Received) {
        let events = wait(file: file, line: line) { $0.contains { $0.type == "snapshot" } }
        return (events[0], events.first { $0.type == "snapshot" }!)
    }

    func events(for id: String, type: String? = nil) -> [Received] {
        received.filter { $0.id == id && (type == nil || $0.type == type) }
    }
}
