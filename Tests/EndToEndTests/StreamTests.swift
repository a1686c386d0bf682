import Foundation
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// `GET /api/stream` followed by Debian's `curl -N` against the built `ringcast serve`: the
/// snapshot and events as Server-Sent Events, a restart resumed by `Last-Event-ID` without a full
/// snapshot, a full snapshot once the history is gone, JSON lines, heartbeats as comments, and a
/// reader's patterns holding on the stream as they do on `/ws`.
final class StreamTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-stream") }
    override func tearDown() { folder?.remove() }

    /// `ringcast serve` on `port` with its state in a SQLite file of the test's; `extra` adds
    /// settings to the config.
    private func serve(port: Int, extra: String = "") throws -> ServeProcess {
        let config = folder.file("config.json")
        try Data(
            #"{"port": \#(port), "publicDir": "\#(emptyPublicDirectory)", "storage": "\#(folder.file("ringcast.db").path)", "logLevel": "error", "heartbeatSeconds": 1\#(extra)}"#
                .utf8
        ).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        XCTAssertEqual(served.port, port, served.firstLine)
        return served
    }

    func testSnapshotEventsAndARestartResumedByLastEventID() throws {
        let port = closedLoopbackPort()
        var served = try serve(port: port)
        let client = HTTPClient(host: "127.0.0.1", port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.3}"#).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/other.job", json: #"{"progress":0.1}"#).status, 200)

        let first = try CurlStream("http://127.0.0.1:\(port)/api/stream?watch=ci.*")
        defer { first.stop() }
        var events = first.waitForEvents { $0.contains { $0.event == "snapshot" } }
        XCTAssertTrue(first.text.hasPrefix("retry: 2000\n\n"), "the reconnection hint first: \(first.text.prefix(40))")
        XCTAssertEqual(events.map(\.event), ["hello", "snapshot"])
        let hello = events[0].json
        let epoch = try XCTUnwrap(hello["epoch"] as? String)
        XCTAssertEqual(hello["protocol"] as? Int, 6)
        let snapshot = events[1].json
        XCTAssertEqual(snapshot["full"] as? Bool, true)
        XCTAssertEqual((snapshot["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String }, ["ci.build"], "watch=ci.* holds")
        XCTAssertEqual(events[1].id, "\(epoch):\(snapshot["seq"] as! Int)")

        XCTAssertEqual(try client.request("POST", "/api/tasks/other.job", json: #"{"progress":0.2}"#).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.6}"#).status, 200)
        events = first.waitForEvents { $0.contains { $0.event == "progress" } }
        let progress = try XCTUnwrap(events.first { $0.event == "progress" })
        XCTAssertEqual(progress.json["id"] as? String, "ci.build")
        XCTAssertEqual(progress.json["progress"] as? Double, 0.6)
        XCTAssertEqual(progress.id, "\(epoch):\(progress.json["seq"] as! Int)", "id: EPOCH:SEQ")
        XCTAssertFalse(events.contains { $0.json["id"] as? String == "other.job" }, "nothing outside the watch")
        first.waitForText { $0.contains("\n: heartbeat\n\n") }
        XCTAssertFalse(events.contains { $0.event == "heartbeat" }, "heartbeats are comments")

        // The server restarts; a change is made while the stream is away.
        XCTAssertEqual(served.stop(), 0)
        first.waitForEnd()
        served = try serve(port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.9}"#).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.other", json: #"{"progress":0.5}"#).status, 200)
        let resumed = try CurlStream("http://127.0.0.1:\(port)/api/stream?watch=ci.*", headers: ["Last-Event-ID: \(progress.id!)"])
        defer { resumed.stop() }
        events = resumed.waitForEvents { $0.contains { $0.event == "snapshot" } }
        XCTAssertEqual(events[0].json["epoch"] as? String, epoch, "the state survived the restart")
        let delta = events[1].json
        XCTAssertEqual(delta["full"] as? Bool, false, "resumed, not a full snapshot: \(delta)")
        XCTAssertEqual(delta["since"] as? Int, progress.json["seq"] as? Int)
        let changed = (delta["tasks"] as? [[String: Any]]) ?? []
        XCTAssertEqual(Set(changed.compactMap { $0["id"] as? String }), ["ci.build", "ci.other"])
        XCTAssertEqual(changed.first { $0["id"] as? String == "ci.build" }?["progress"] as? Double, 0.9)
        resumed.stop()

        // The history is gone (a new database, a new epoch): the same id gets a full snapshot.
        XCTAssertEqual(served.stop(), 0)
        try FileManager.default.removeItem(at: folder.file("ringcast.db"))
        served = try serve(port: port)
        defer { _ = served.stop() }
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.fresh", json: #"{"progress":0.1}"#).status, 200)
        let lost = try CurlStream("http://127.0.0.1:\(port)/api/stream?watch=ci.*", headers: ["Last-Event-ID: \(progress.id!)"])
        defer { lost.stop() }
        events = lost.waitForEvents { $0.contains { $0.event == "snapshot" } }
        XCTAssertNotEqual(events[0].json["epoch"] as? String, epoch)
        XCTAssertEqual(events[1].json["full"] as? Bool, true, "another epoch: a full snapshot")
        XCTAssertEqual((events[1].json["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String }, ["ci.fresh"])
    }

    func testJSONLinesByAcceptOrFormat() throws {
        let port = closedLoopbackPort()
        let served = try serve(port: port)
        defer { _ = served.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.3}"#).status, 200)
        for (query, headers) in [("watch=ci.*", ["Accept: application/x-ndjson"]), ("watch=ci.*&format=jsonl", [])] {
            let stream = try CurlStream("http://127.0.0.1:\(port)/api/stream?\(query)", headers: headers)
            defer { stream.stop() }
            stream.waitForText { $0.components(separatedBy: "\n").count >= 3 }
            XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.7}"#).status, 200)
            let text = stream.waitForText { $0.contains(#""progress":0.7"#) && $0.contains(#""type":"heartbeat""#) }
            let lines = text.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            XCTAssertFalse(lines.contains { $0 == nil }, "one JSON object a line: \(text)")
            XCTAssertEqual(lines.prefix(2).map { $0?["type"] as? String }, ["hello", "snapshot"], query)
            XCTAssertTrue(lines.contains { $0?["type"] as? String == "progress" && $0?["progress"] as? Double == 0.7 }, text)
        }
        let wrong = try client.request("GET", "/api/stream?format=xml")
        XCTAssertEqual(wrong.status, 422)
        XCTAssertTrue(String(decoding: wrong.body, as: UTF8.self).contains("format 'xml' is not one of sse, jsonl"))
        XCTAssertEqual(try client.request("GET", "/api/stream?watch=ci%2Fbuild").status, 400, "the same watch rules as /ws")
    }

    func testAReadersPatternsHoldOnTheStream() throws {
        let port = closedLoopbackPort()
        let served = try serve(
            port: port,
            extra: #", "anonymousRead": false, "readers": [{"name": "team-a", "token": "team-a-secret-token-0123456789", "patterns": ["team-a.*"]}]"#)
        defer { _ = served.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: port)
        for id in ["team-a.build", "team-b.build"] {
            XCTAssertEqual(try client.request("POST", "/api/tasks/\(id)", json: #"{"progress":0.3}"#).status, 200)
        }
        let bearer = ("Authorization", "Bearer team-a-secret-token-0123456789")
        XCTAssertEqual(try client.request("GET", "/api/stream?watch=*").status, 401, "no token, no stream")
        let outside = try client.request("GET", "/api/stream?watch=team-b.*", headers: [bearer])
        XCTAssertEqual(outside.status, 403)
        XCTAssertTrue(String(decoding: outside.body, as: UTF8.self).contains("may not watch 'team-b.*'"))

        let stream = try CurlStream("http://127.0.0.1:\(port)/api/stream?watch=*", headers: ["\(bearer.0): \(bearer.1)"])
        defer { stream.stop() }
        var events = stream.waitForEvents { $0.contains { $0.event == "snapshot" } }
        XCTAssertEqual((events[1].json["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String }, ["team-a.build"], "* narrowed")
        XCTAssertEqual(try client.request("POST", "/api/tasks/team-b.build", json: #"{"progress":0.6}"#).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/team-a.build", json: #"{"progress":0.6}"#).status, 200)
        events = stream.waitForEvents { $0.contains { $0.event == "progress" } }
        XCTAssertEqual(events.filter { $0.event == "progress" }.compactMap { $0.json["id"] as? String }, ["team-a.build"])
    }
}

/// One Server-Sent Event as a stream carried it.
struct StreamEvent {
    var id: String?
    var event: String?
    var data = ""
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:] }
}

/// Debian's `curl -sN` following a URL: what it printed, as it came.
final class CurlStream: @unchecked Sendable {
    private let process = Process()
    private let output = Pipe()
    private let inbox = Inbox<String>()

    init(_ url: String, headers: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else { throw MissingTool("/usr/bin/curl (Debian's curl)") }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-sN", "--max-time", "60"] + headers.flatMap { ["-H", $0] } + [url]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        output.fileHandleForReading.readabilityHandler = { [inbox] handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                inbox.close()
            } else {
                inbox.append(contentsOf: [String(decoding: data, as: UTF8.self)])
            }
        }
        try process.run()
    }

    var text: String { inbox.all.joined() }

    /// Ends curl and closes the pipe it wrote to: a test process that runs many leaves no
    /// descriptor behind for the tests after it.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        try? output.fileHandleForReading.close()
    }

    deinit { stop() }

    @discardableResult
    func waitForText(file: StaticString = #filePath, line: UInt = #line, until predicate: (String) -> Bool) -> String {
        inbox.wait(timeout: 10, describe: { $0.joined() }, file: file, line: line) { predicate($0.joined()) }.joined()
    }

    /// Waits until the events received so far pass `predicate`; returns them.
    @discardableResult
    func waitForEvents(file: StaticString = #filePath, line: UInt = #line, until predicate: ([StreamEvent]) -> Bool) -> [StreamEvent] {
        Self.events(in: waitForText(file: file, line: line) { predicate(Self.events(in: $0)) })
    }

    /// The stream ended (the server closed it).
    func waitForEnd(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(inbox.waitForClose(timeout: 10), "the stream did not end", file: file, line: line)
    }

    /// The whole events in `text` (those followed by their blank line), comments and `retry:` left out.
    static func events(in text: String) -> [StreamEvent] {
        var blocks = text.components(separatedBy: "\n\n")
        blocks.removeLast()
        return blocks.compactMap { block in
            var event = StreamEvent()
            var isEvent = false
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { event.id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") {
                    event.event = String(line.dropFirst(7))
                    isEvent = true
                }
                if line.hasPrefix("data: ") { event.data += line.dropFirst(6) }
            }
            return isEvent ? event : nil
        }
    }
}
