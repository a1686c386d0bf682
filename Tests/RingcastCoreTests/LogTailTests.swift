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
        store.setLogBudgets(lines: 2, bytes: 1 << 20, total: 1 << 30)
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

    /// The longest line there is: 2 000 four-byte characters.
    static let worstLine = String(repeating: "𝕏", count: LogTail.maxLineCharacters)

    func testATaskKeepsItsLogBytesAndEveryTaskTogetherMaxLogBytesTheOldestGoingFirst() throws {
        let store = TaskStore(epoch: "b")
        let cost = LogTail.cost(LogTailTests.worstLine)
        XCTAssertEqual(cost, 8000 + 96)
        store.setLogBudgets(lines: 100, bytes: 3 * cost, total: 10 * cost)
        for n in 0..<5 { try store.update("t\(n)", "{}", now: t0) }
        let change = try store.apply(.appendLog(id: "t0", lines: Array(repeating: LogTailTests.worstLine, count: 5) + ["last"]), now: t0)
        XCTAssertEqual(store.log(of: "t0")?.lines.count, 3, "two worst lines and the last: logBytes holds")
        XCTAssertEqual(store.log(of: "t0")?.lines.last, "last")
        XCTAssertEqual(store.log(of: "t0")?.count, 6, "logCount counts every line received")
        let event = json(change.events.last!.bytes)
        XCTAssertEqual(event["from"], .number(3), "the event carries only what the tail keeps")
        guard case .array(let sent)? = event["lines"] else { return XCTFail("no lines") }
        XCTAssertEqual(sent.count, 3)
        XCTAssertLessThanOrEqual(store.logBytesHeld, 3 * cost)

        for n in 1..<5 {
            _ = try store.apply(.appendLog(id: "t\(n)", lines: Array(repeating: LogTailTests.worstLine, count: 3)), now: t0 + Double(n))
            XCTAssertLessThanOrEqual(store.logBytesHeld, 10 * cost, "maxLogBytes holds after t\(n)")
        }
        // 3 (t0) + 12 worst lines = too many: the oldest of all went, t0's first, then t1's first.
        XCTAssertEqual(store.log(of: "t0")?.lines, [], "t0's lines were the oldest of all")
        XCTAssertEqual(store.log(of: "t1")?.lines.count, 1)
        XCTAssertEqual(store.log(of: "t4")?.lines.count, 3, "the newest task keeps its own")
        XCTAssertEqual(store.log(of: "t0")?.count, 6, "its count stays")

        _ = try store.apply(.remove(id: "t4"), now: t0 + 10)
        XCTAssertLessThanOrEqual(store.logBytesHeld, 7 * cost, "a removed task's lines leave the budget")
        let api = API(store: store)
        let metrics = text(api.metricsSnapshot(transport: TransportStatus()).render())
        XCTAssertTrue(metrics.contains("ringcast_log_bytes \(store.logBytesHeld)\n"), metrics)
    }

    func testAFloodOfEmptyLinesIsBoundedTooAndTheEvictionOrderStaysSmall() throws {
        let store = TaskStore(epoch: "f")
        store.setLogBudgets(lines: 10_000, bytes: 8192, total: 65_536)
        for n in 0..<50 { try store.update("t\(n)", "{}", now: t0) }
        for round in 0..<40 {
            for n in 0..<50 { _ = try store.apply(.appendLog(id: "t\(n)", lines: Array(repeating: "", count: 20)), now: t0 + Double(round)) }
            XCTAssertLessThanOrEqual(store.logBytesHeld, 65_536)
        }
        let held = (0..<50).reduce(0) { $0 + (store.log(of: "t\($1)")?.lines.count ?? 0) }
        XCTAssertEqual(held * LogTail.cost(""), store.logBytesHeld, "every empty line is counted")
        XCTAssertLessThanOrEqual(store.logs.orderCount, 2 * held + 1024, "lines dropped by their own tail do not pile up in the order")
    }

    func testBudgetsFromConfigApplyToWhatStorageBroughtBack() throws {
        var tasks: [TaskRecord] = []
        for n in 0..<3 {
            var task = TaskRecord(id: "r\(n)", now: t0 + Double(n))
            task.logCount = 5
            tasks.append(task)
        }
        let lines = (0..<5).map { "line \($0) " + String(repeating: "x", count: 1000) }
        let saved = PersistedState(epoch: "r", seq: 9, tasks: tasks, logs: ["r0": lines, "r1": lines, "r2": lines])
        let store = TaskStore(persistence: Restoring(saved))
        XCTAssertEqual(store.log(of: "r0")?.lines, lines, "whole until the budgets are known")
        var config = ServerConfig()
        config.logLines = 4
        config.logBytes = 8192
        config.maxLogBytes = 65_536
        _ = API(store: store, config: config)
        XCTAssertEqual(store.log(of: "r2")?.lines, Array(lines.suffix(4)), "logLines")
        XCTAssertLessThanOrEqual(store.logBytesHeld, 3 * 4 * LogTail.cost(lines[0]))

        config.maxLogBytes = 65_536
        let small = TaskStore(persistence: Restoring(saved))
        var tight = ServerConfig()
        tight.logBytes = 8192
        tight.maxLogBytes = 65_536
        _ = API(store: small, config: tight)
        XCTAssertLessThanOrEqual(small.logBytesHeld, 65_536)
        XCTAssertEqual(small.log(of: "r2")?.lines.last, lines.last)
    }

    func testTheBudgetsAreCheckedAtStart() throws {
        func parse(_ text: String) throws -> ServerConfig { try ServerConfig.parse(Array(text.utf8), source: "c.json", environment: [:]) }
        XCTAssertEqual(try parse("{}").logBytes, 65_536)
        XCTAssertEqual(try parse("{}").maxLogBytes, 64 << 20)
        XCTAssertEqual(try parse(#"{"logBytes": 16384, "maxLogBytes": 1048576}"#).maxLogBytes, 1_048_576)
        for (text, fragment) in [
            (#"{"logBytes": 100}"#, "\"logBytes\""), (#"{"maxLogBytes": 10}"#, "\"maxLogBytes\""),
            (#"{"logBytes": 1048576, "maxLogBytes": 65536}"#, "lower logBytes or raise maxLogBytes"),
        ] {
            XCTAssertThrowsError(try parse(text), text) { XCTAssertTrue("\($0)".contains(fragment), "\($0)") }
        }
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
