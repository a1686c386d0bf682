import XCTest

@testable import RingcastCore

/// What the fuzz targets (Fuzz/) and the schemathesis run (Tests/schemathesis) found, each input kept
/// as a literal with the answer it must get. docs/FUZZING.md says how to add one.
final class FuzzRegressionTests: XCTestCase {
    private func api() -> API { API(store: TaskStore(epoch: "regressions1")) }

    private func call(_ api: API, _ method: String, _ path: String, _ body: String = "", now: Double = t0) -> APIResponse {
        api.handle(APIRequest(method: method, path: path, body: Array(body.utf8)), now: now)
    }

    /// schemathesis: a timer that started long ago hung the server. `dueTick` counted up to the newest
    /// due tick one step at a time: 3.15 × 10⁹ steps for a year-long countdown at 0.01 s started at 0.
    func testATimerThatStartedLongAgoCostsNoStepPerMissedTick() throws {
        let api = api()
        let response = call(api, "POST", "/api/timers/x", #"{"seconds":31536000,"interval":0.01,"startAt":0}"#)
        XCTAssertEqual(response.status, 200, text(response.body))
        let events = api.store.runDue(now: t0)
        XCTAssertEqual(events.map(\.type), [.tick, .state], "the countdown ended in 1971: one tick to the end, then done")
        XCTAssertEqual(api.store.task("x")?.state, .done)
        XCTAssertEqual(api.store.task("x")?.timer?.ticksEmitted, 3_153_600_000)

        // Half-way through a long countdown: the newest due tick, found without counting.
        var timer = TimerSpec(seconds: 31_536_000, interval: 0.01, startedAt: t0 - 1_000_000)
        XCTAssertEqual(timer.dueTick(at: t0), 100_000)
        timer.ticksEmitted = 100_000
        XCTAssertNil(timer.dueTick(at: t0))
        XCTAssertEqual(timer.dueTick(at: t0 + 11), 100_001)
    }

    /// The computed tick is the one the old loop found, for intervals that do not divide the length.
    func testTheComputedDueTickIsTheNewestDueOne() {
        for (seconds, interval) in [(1.0, 0.3), (10.0, 1.0), (2.0, 0.05), (0.5, 0.7), (7.3, 0.01), (100.0, 0.33)] {
            var timer = TimerSpec(seconds: seconds, interval: interval, startedAt: t0)
            var now = t0
            while now <= timer.endsAt + 1000 {
                var expected: Int?
                if timer.ticksEmitted < timer.tickCount, timer.tickTime(timer.ticksEmitted + 1) <= now {
                    var k = timer.ticksEmitted + 1
                    while k < timer.tickCount, timer.tickTime(k + 1) <= now { k += 1 }
                    expected = k
                }
                XCTAssertEqual(timer.dueTick(at: now), expected, "\(seconds) s every \(interval) s at +\(now - t0) ms")
                if let expected { timer.ticksEmitted = expected }
                now += 37
            }
            XCTAssertEqual(timer.ticksEmitted, timer.tickCount)
        }
    }

    /// socket target: `{"type":"resume","id":""}` was refused with an error event whose `id` was "", and
    /// any invalid id (a path, a megabyte of text) was echoed as the id of the task the error was for.
    /// The error names a task only when the refused event named a valid one.
    func testAnErrorEventNamesOnlyAValidTaskID() throws {
        let api = api()
        var session = api.openSocket(
            SocketRequest(mode: .publish, watch: SocketRequest.nothing), headers: RequestHeaders(), fromLoopback: true, now: t0
        ).session
        for (message, id) in [
            (#"{"type":"resume","id":""}"#, nil), (#"{"type":"resume","id":"../etc"}"#, nil),
            (#"{"type":"resume","id":"tea"}"#, "tea"), (#"[{"type":"pause","id":"a b"},{"type":"pause","id":"ok"}]"#, nil),
        ] as [(String, String?)] {
            let reply = api.receive(.text(Array(message.utf8)), on: &session, now: t0)
            let error = json(reply.frames[0])
            XCTAssertEqual(error["type"], .string("error"), message)
            XCTAssertEqual(error["id"], id.map(JSONValue.string), message)
        }
    }

    /// http target: the router dropped the path's first segment unread, so `POST x/api/tasks/y` (any
    /// text before the first slash) created task y. A path that does not start with `/` names nothing.
    func testAPathNotStartingWithASlashIsNoEndpoint() {
        let api = api()
        for path in ["x/api/tasks/y", "\u{FFFD}\u{FFFD}/api/tasks/y", "api/tasks/y", "/../api/tasks/y", "//api/tasks/y"] {
            let response = call(api, "POST", path, #"{"progress": 0.5}"#)
            XCTAssertEqual(response.status, 404, "\(path): \(text(response.body))")
            XCTAssertEqual(json(response.body)["field"], .null, path)
        }
        XCTAssertTrue(api.store.tasks.isEmpty)
        XCTAssertEqual(call(api, "POST", "/api/tasks/y", #"{"progress": 0.5}"#).status, 200)
    }

    /// Seen while writing the http target's invariants, which catch it (Fuzz/corpus/http/units-overflow.txt):
    /// two children with totals near the largest double made their parent's total infinite, which the
    /// encoder writes as null (the document says a number) and storage loses. Unit counts now stop at
    /// 2^53, the largest a browser counts exactly, so any sum stays finite.
    func testUnitCountsStopWhereTheirSumsStayFinite() throws {
        let api = api()
        let limit = 9_007_199_254_740_992.0
        XCTAssertEqual(call(api, "POST", "/api/tasks/p").status, 200)
        for child in ["a", "b"] {
            let response = call(api, "POST", "/api/tasks/\(child)", #"{"parent": "p", "total": 9007199254740992, "completed": 9007199254740992}"#)
            XCTAssertEqual(response.status, 200, text(response.body))
        }
        let parent = try XCTUnwrap(api.store.task("p"))
        XCTAssertEqual(parent.total, 2 * limit)
        XCTAssertEqual(parent.progress, 1)
        XCTAssertEqual(json(parent.encodedObject(now: t0))["total"], .number(2 * limit))
        for body in [#"{"total": 1.7e308}"#, #"{"completed": 9007199254740994}"#] {
            let refused = call(api, "POST", "/api/tasks/a", body)
            XCTAssertEqual(refused.status, 422, body)
            XCTAssertEqual(json(refused.body)["error"], .string("invalid_field"), body)
        }
    }
}
