import SchemaValidation
import XCTest

@testable import RingcastCore

/// Log tails in the core: bodies in JSON or text/plain, the last `logLines` kept, `log` events with
/// `from`, `logCount` in the task (never the lines), the tail read back, storage's share.
final class LogTailTests: XCTestCase {
    private var api: API!

    override func setUp() {
        var config = ServerConfig()
        config.logLines = 3
        api = API(store: TaskStore(epoch: "logepoch"), config: config)
    }

    @discardableResult
    private func call(_ method: String, _ path: String, _ body: String = "", contentType: String? = nil, now: Double = t0) -> APIResponse {
        api.handle(APIRequest(method: method, path: path, body: Array(body.utf8), headers: RequestHeaders(contentType: contentType)), now: now)
    }

    func testLinesInJSONOrPlainTextAreKeptToTheLastLogLines() throws {
        call("POST", "/api/tasks/ci.build", #"{"title": "Build"}"#)
        let first = call("POST", "/api/tasks/ci.build/log", #"{"lines": ["compiling a.c", "compiling b.c"]}"#, now: t0 + 1)
        XCTAssertEqual(first.status, 200, text(first.body))
        XCTAssertEqual(json(first.body)["task"]?["logCount"], .number(2))
        XCTAssertEqual(first.events.map(\.type), [.log])
        let event = decode(first.events[0])
        XCTAssertEqual(event["type"], .string("log"))
        XCTAssertEqual(event["id"], .string("ci.build"))
        XCTAssertEqual(event["title"], .string("Build"), "a log event carries the task, like every task event")
        XCTAssertEqual(event["from"], .number(0))
        XCTAssertEqual(event["lines"], .array([.string("compiling a.c"), .string("compiling b.c")]))

        let plain = call("POST", "/api/tasks/ci.build/log", "linking\r\nwarning: x\n\ndone\n", contentType: "text/plain; charset=utf-8", now: t0 + 2)
        XCTAssertEqual(plain.status, 200, text(plain.body))
        XCTAssertEqual(
            decode(plain.events[0])["lines"], .array(["linking", "warning: x", "", "done"].suffix(3).map(JSONValue.string)),
            "four lines came at once: the event carries the three kept")
        XCTAssertEqual(decode(plain.events[0])["from"], .number(2 + 1))

        let tail = json(call("GET", "/api/tasks/ci.build/log").body)
        XCTAssertEqual(tail.keys, ["id", "logCount", "from", "lines"])
        XCTAssertEqual(tail["logCount"], .number(6))
        XCTAssertEqual(tail["from"], .number(3))
        XCTAssertEqual(tail["lines"], .array([.string("warning: x"), .string(""), .string("done")]))
        XCTAssertNil(json(call("GET", "/api/tasks/ci.build").body)["lines"], "the task carries the count, never the lines")
        XCTAssertEqual(json(call("GET", "/api/tasks/ci.build").body)["logCount"], .number(6))
    }

    func testBadLogBodiesAreRefusedWithTheField() {
        call("POST", "/api/tasks/t", "{}")
        for (body, status, field) in [
            (#"{"lines": "one"}"#, 422, "lines"), (#"{"lines": [1]}"#, 422, "lines"), ("{}", 422, "lines"),
            (#"{"lines": []}"#, 422, "lines"), (#"{"line": ["x"]}"#, 422, "line"), ("not json", 400, nil),
        ] {
            let response = call("POST", "/api/tasks/t/log", body)
            XCTAssertEqual(response.status, status, body)
            XCTAssertEqual(json(response.body)["field"], field.map(JSONValue.string) ?? .null, body)
        }
        XCTAssertEqual(call("POST", "/api/tasks/nobody/log", #"{"lines": ["x"]}"#).status, 404, "a log belongs to a task that exists")
        XCTAssertEqual(call("GET", "/api/tasks/nobody/log").status, 404)
        XCTAssertEqual(call("DELETE", "/api/tasks/t/log").status, 405)
        let long = String(repeating: "x", count: 5000)
        XCTAssertEqual(call("POST", "/api/tasks/t/log", "\(long)\n", contentType: "text/plain").status, 200)
        XCTAssertEqual(api.store.log(of: "t")?.lines.first?.count, LogTail.maxLineCharacters, "a long line is cut, not refused")
    }

    /// Found writing the OpenAPI document's LogTail schema, whose lines are at most 2 000 long as JSON
    /// Schema counts, in code points (as every length of the API is): a `\r\n` inside an element
    /// started no line (split as Characters, `\r\n` is one Character, not a `\n`), and a line was cut
    /// at 2 000 Characters, so 2 000 accented letters kept 4 000 code points.
    func testLinesAreSplitAndCutByCodePoints() throws {
        call("POST", "/api/tasks/t", "{}")
        XCTAssertEqual(call("POST", "/api/tasks/t/log", #"{"lines": ["a\r\nb", "c\rd"]}"#).status, 200)
        XCTAssertEqual(api.store.log(of: "t")?.lines, ["a", "b", "c\rd"], "\\r\\n ends a line; a lone \\r does not")
        let accents = String(repeating: "e\u{301}", count: LogTail.maxLineCharacters)
        for contentType in [nil, "text/plain"] {
            let body = contentType == nil ? #"{"lines": [""# + accents + #""]}"# : accents
            XCTAssertEqual(call("POST", "/api/tasks/t/log", body, contentType: contentType).status, 200)
            let line = try XCTUnwrap(api.store.log(of: "t")?.lines.last)
            XCTAssertEqual(line.unicodeScalars.count, LogTail.maxLineCharacters, "\(contentType ?? "json"): cut to 2 000 code points")
            XCTAssertTrue(line.hasSuffix("…"))
        }
        let tail = json(call("GET", "/api/tasks/t/log").body)
        XCTAssertNil(SchemaValidator().violation(of: tail, against: try XCTUnwrap(SchemaValidator().component("LogTail"))))
    }

    func testALogLineRenewsTheLeaseAndBringsAStalledTaskBack() throws {
        call("POST", "/api/tasks/lease", #"{"staleAfter": 1}"#)
        _ = api.store.runDue(now: t0 + 1000)
        XCTAssertEqual(api.store.task("lease")?.state, .stalled)
        let response = call("POST", "/api/tasks/lease/log", #"{"lines": ["alive"]}"#, now: t0 + 1500)
        XCTAssertEqual(response.events.map(\.type), [.state, .log])
        XCTAssertEqual(api.store.task("lease")?.state, .running)
        XCTAssertEqual(api.store.task("lease")?.publishedAt, t0 + 1500)
    }

    func testABatchOrASocketMayCarryLogEventsAndTheRemovalForgetsTheLog() throws {
        call("POST", "/api/tasks/b", "{}")
        let batch = call("POST", "/api/events", #"[{"type":"log","id":"b","lines":["one\ntwo"]},{"type":"log","id":"b","lines":["three"]}]"#)
        XCTAssertEqual(json(batch.body)["applied"], .number(2), text(batch.body))
        XCTAssertEqual(api.store.log(of: "b")?.lines, ["one", "two", "three"], "a line break inside an element starts another line")
        XCTAssertEqual(call("DELETE", "/api/tasks/b").status, 200)
        call("POST", "/api/tasks/b", "{}")
        XCTAssertEqual(api.store.log(of: "b")?.lines, [], "a new task of the same id starts with an empty log")
    }

    func testStorageKeepsTheLinesApartFromTheTask() throws {
        final class Logs: TaskPersistence {
            var logs: [String: [String]] = [:]
            var urgent: [String] = []
            func load() -> PersistedState? { nil }
            func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) { if urgent { self.urgent.append(task.id) } }
            func remove(id: String, epoch: String, seq: UInt64) {}
            var hasPendingWrites: Bool { false }
            func flush() {}
            func saveLog(id: String, lines: [String]) { logs[id] = lines }
        }
        let persistence = Logs()
        let store = TaskStore(persistence: persistence, epoch: "e")
        store.logLines = 2
        try store.update("s", "{}", now: t0)
        _ = try store.apply(.appendLog(id: "s", lines: ["a", "b", "c"]), now: t0)
        XCTAssertEqual(persistence.logs["s"], ["b", "c"])
        XCTAssertEqual(persistence.urgent, [], "log lines are written behind, like progress")
        let stored = try XCTUnwrap(TaskRecord(stored: store.task("s")!.encodedForStorage()))
        XCTAssertEqual(stored.logCount, 3)
        let reloaded = TaskStore(
            persistence: Restoring(PersistedState(epoch: "e", seq: 9, tasks: [stored], logs: ["s": ["b", "c"], "gone": ["x"]])))
        XCTAssertEqual(reloaded.log(of: "s")?.lines, ["b", "c"])
        XCTAssertEqual(reloaded.log(of: "s")?.count, 3)
        XCTAssertNil(reloaded.log(of: "gone"))
    }
}

/// Persistence that only hands back a saved state.
final class Restoring: TaskPersistence {
    let state: PersistedState
    init(_ state: PersistedState) { self.state = state }
    func load() -> PersistedState? { state }
    func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) {}
    func remove(id: String, epoch: String, seq: UInt64) {}
    var hasPendingWrites: Bool { false }
    func flush() {}
}
