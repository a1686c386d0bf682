import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastPlatform
import XCTest

/// One received event, when it arrived, and which of its watcher's frames (counted from 1) held it.
package struct Received: Sendable {
    package let event: JSONValue
    package let at: Double
    package var frame = 0

    package init(event: JSONValue, at: Double, frame: Int = 0) {
        self.event = event
        self.at = at
        self.frame = frame
    }

    package var type: String? {
        if case .string(let type)? = event["type"] { return type }
        return nil
    }
    package var id: String? {
        if case .string(let id)? = event["id"] { return id }
        return nil
    }
    package func number(_ key: String) -> Double? {
        if case .number(let n)? = event[key] { return n }
        return nil
    }
    package func string(_ key: String) -> String? {
        if case .string(let s)? = event[key] { return s }
        return nil
    }
}

/// Items arriving on another thread, and a way to wait until what has arrived passes a test.
/// @unchecked Sendable: `items` and `closed` are touched only under `condition`.
package final class Inbox<Element>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Element] = []
    private var closed = false

    package init() {}

    package var all: [Element] { condition.withLock { items } }
    package var isClosed: Bool { condition.withLock { closed } }

    package func append(contentsOf new: [Element]) {
        condition.withLock {
            items += new
            condition.broadcast()
        }
    }

    /// No more items will come.
    package func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Waits until `predicate` holds over everything received so far (failing the test after
    /// `timeout`); returns what was received.
    @discardableResult
    package func wait(
        timeout: Double = 5, describe: ([Element]) -> String = { "\($0)" }, file: StaticString = #filePath, line: UInt = #line,
        until predicate: ([Element]) -> Bool
    ) -> [Element] {
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

    package func waitForClose(timeout: Double = 5) -> Bool {
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
/// @unchecked Sendable: what it receives goes to the Inbox; `closeError` is written once, on the
/// client context's thread, before the inbox closes; `connection` is set once, in init.
package final class TestWatcher: WebSocketDelegate, @unchecked Sendable {
    private let inbox = Inbox<Received>()
    /// Frames received so far; the client context's thread only.
    private var frames = 0
    package private(set) var closeError: String?
    package var connection: WebSocketConnection!

    package static let clients = try! WebSocketClientContext()

    package init(_ url: String, headers: [(String, String)] = [], context: WebSocketClientContext = TestWatcher.clients) {
        connection = context.connect(ServerURL(url)!, headers: headers, delegate: self)
    }

    deinit { connection.close() }

    package func webSocketDidOpen(_ connection: WebSocketConnection) {}

    package func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        let at = nowMs()
        guard let json = try? JSONParser.parse(message) else {
            XCTFail("the server sent a frame that is not JSON: \(String(decoding: message, as: UTF8.self))")
            return
        }
        let batch: [JSONValue]
        if case .array(let items) = json { batch = items } else { batch = [json] }
        frames += 1
        inbox.append(contentsOf: batch.map { [frames] in Received(event: $0, at: at, frame: frames) })
    }

    package func webSocketDidClose(_ connection: WebSocketConnection, error: String?) {
        closeError = error
        inbox.close()
    }

    package var received: [Received] { inbox.all }
    package var closed: Bool { inbox.isClosed }

    /// Waits until `predicate` holds over everything received so far; returns what was received.
    @discardableResult
    package func wait(
        timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line,
        until predicate: ([Received]) -> Bool
    ) -> [Received] {
        inbox.wait(
            timeout: timeout, describe: { $0.map { String(decoding: JSONWriter.encode($0.event), as: UTF8.self) }.description },
            file: file, line: line, until: predicate)
    }

    package func waitForClose(timeout: Double = 5) -> Bool { inbox.waitForClose(timeout: timeout) }

    /// Waits for hello and snapshot, the first two events of every connection.
    @discardableResult
    package func waitForSnapshot(file: StaticString = #filePath, line: UInt = #line) -> (hello: Received, snapshot: Received) {
        let events = wait(file: file, line: line) { $0.contains { $0.type == "snapshot" } }
        // After a timeout (already a failure) the test goes on with empty events rather than crashing.
        let missing = Received(event: .null, at: 0)
        return (events.first ?? missing, events.first { $0.type == "snapshot" } ?? missing)
    }

    package func events(for id: String, type: String? = nil) -> [Received] {
        received.filter { $0.id == id && (type == nil || $0.type == type) }
    }
}
