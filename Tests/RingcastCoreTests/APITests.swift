import XCTest

@testable import RingcastCore

final class APITests: XCTestCase {
    private var api: API!

    override func setUp() {
        api = API(store: TaskStore(epoch: "apiepoch"))
    }

    @discardableResult
    private func call(_ method: String, _ path: String, _ body: String = "", query: [String: String] = [:], now: Double = t0) -> APIResponse {
        api.handle(APIRequest(method: method, path: path, query: query, body: Array(body.utf8)), now: now)
    }

    /// Asserts an error answer: its status, and a body of exactly `{"error", "message", "field"}`.
    private func assertError(
        _ response: APIResponse, _ status: Int, _ code: String, field: String?,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(response.status, status, text(response.body), file: file, line: line)
        let body = json(response.body, file: file, line: line)
        XCTAssertEqual(body.keys, ["error", "message", "field"], file: file, line: line)
        XCTAssertEqual(body["error"], .string(code), file: file, line: line)
        XCTAssertFalse(body["message"]?.stringValue?.isEmpty ?? true, "a message says what was wrong", file: file, line: line)
        XCTAssertEqual(body["field"], field.map(JSONValue.string) ?? .null, file: file, line: line)
        XCTAssertTrue(response.events.isEmpty, "an error publishes nothing", file: file, line: line)
    }

    // MARK: Routes

    /// Publishing is not reading: a loopback publisher under `anonymousRead: false` may change any
    /// task, but an answer that carried the task would read it back (an empty update reads any).
    func testAnAnswerCarriesTheTaskOnlyToACallerThatMayReadIt() {
        var config = ServerConfig()
        config.access = AccessPolicy(anonymousRead: .nobody)
        api = API(store: TaskStore(epoch: "apiepoch"), config: config)
        var patch = TaskPatch()
        patch.title = "Payroll run"
        patch.detail = "acct 4411"
        patch.controls = [.cancel]
        _ = api.execute([.update(id: "secret", patch: patch)], answer: .task, now: t0)
        XCTAssertEqual(call("GET", "/api/tasks/secret").status, 401, "the caller may not read it")
        for (method, path, body) in [
            ("POST", "/api/tasks/secret", "{}"), ("PATCH", "/api/tasks/secret", "{}"), ("POST", "/api/tasks/secret/show", ""),
        ] {
            let answer = call(method, path, body)
            XCTAssertEqual(answer.status, 200, "\(method) \(path)")
            XCTAssertEqual(json(answer.body).keys, ["seq"], "\(method) \(path): \(text(answer.body))")
            XCTAssertFalse(text(answer.body).contains("Payroll"))
        }
        let cancel = call("POST", "/api/tasks/secret/cancel")
        XCTAssertEqual(json(cancel.body).keys, ["seq", "delivered"], text(cancel.body))
        XCTAssertEqual(json(call("DELETE", "/api/tasks/secret").body).keys, ["seq", "removed"])

        config.access = AccessPolicy(anonymousRead: .patterns(WatchSet([Glob("public.*")])))
        api = API(store: TaskStore(epoch: "apiepoch"), config: config)
        XCTAssertEqual(json(call("POST", "/api/tasks/public.status", "{}").body).keys, ["seq", "task"], "what it may read, it is shown")
        XCTAssertEqual(json(call("POST", "/api/tasks/private.status", "{}").body).keys, ["seq"])
    }

    func testUpsertAnswersSeqAndTask() {
        let response = call("POST", "/api/tasks/ci.build-42", #"{"title": "Build", "progress": 0.4}"#)
        XCTAssertEqual(response.status, 200)
        let body = json(response.body)
        XCTAssertEqual(body.keys, ["seq", "task"])
        XCTAssertEqual(body["seq"], .number(1))
        XCTAssertEqual(body["task"]?["id"], .string("ci.build-42"))
        XCTAssertEqual(body["task"]?["title"], .string("Build"))
        XCTAssertEqual(body["task"]?["progress"], .number(0.4))
        XCTAssertEqual(body["task"]?["updatedAt"], .number(t0))
        XCTAssertEqual(response.events.map(\.type), [.progress])
        for method in ["PUT", "PATCH"] {
            XCTAssertEqual(call(method, "/api/tasks/ci.build-42", #"{"progress": 0.5}"#).status, 200, method)
        }
        XCTAssertEqual(api.store.task("ci.build-42")?.progress, 0.5)
        XCTAssertEqual(call("POST", "/api/tasks/empty").status, 200, "an empty body is an empty update")
        XCTAssertEqual(call("POST", "/api/tasks/blank", " \n").status, 200)
    }

    func testGetOneAndList() {
        call("POST", "/api/tasks/a.one", #"{"progress": 0.1}"#)
        call("POST", "/api/tasks/b.two")
        let one = call("GET", "/api/tasks/a.one")
        XCTAssertEqual(one.status, 200)
        XCTAssertEqual(json(one.body)["progress"], .number(0.1))
        XCTAssertEqual(json(one.body)["seq"], .number(1))
        XCTAssertTrue(one.events.isEmpty)

        let list = json(call("GET", "/api/tasks").body)
        XCTAssertEqual(list.keys, ["epoch", "seq", "tasks"])
        XCTAssertEqual(list["epoch"], .string("apiepoch"))
        XCTAssertEqual(list["seq"], .number(2))
        XCTAssertEqual(list["tasks"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["a.one", "b.two"])
        let filtered = json(call("GET", "/api/tasks", query: ["watch": "b.*"]).body)
        XCTAssertEqual(filtered["tasks"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["b.two"])
        assertError(call("GET", "/api/tasks", query: ["watch": "b/*"]), 400, "invalid_pattern", field: "watch")
    }

    func testShowAndHide() {
        let shown = call("POST", "/api/tasks/splash/show", #"{"hideAfter": 1, "modal": true, "detail": "Loading"}"#)
        XCTAssertEqual(shown.status, 200)
        XCTAssertEqual(shown.events.map(\.type), [.show])
        XCTAssertEqual(json(shown.body)["task"]?["hideAt"], .number(t0 + 1000))
        XCTAssertEqual(json(shown.body)["task"]?["modal"], .bool(true))
        let hidden = call("POST", "/api/tasks/splash/hide", now: t0 + 10)
        XCTAssertEqual(hidden.status, 200)
        XCTAssertEqual(hidden.events.map(\.type), [.hide])
        XCTAssertEqual(json(hidden.body)["task"]?["visible"], .bool(false))
        assertError(call("POST", "/api/tasks/splash/hide", #"{"now": true}"#), 422, "unknown_field", field: "now")
        assertError(call("POST", "/api/tasks/ghost/hide"), 404, "not_found", field: "id")
        assertError(call("POST", "/api/tasks/splash/show", #"{"hideAfter": 0}"#), 422, "invalid_field", field: "hideAfter")
        assertError(call("GET", "/api/tasks/splash/show"), 405, "method_not_allowed", field: nil)
        assertError(call("POST", "/api/tasks/splash/explode"), 404, "not_found", field: nil)
    }

    func testTimers() {
        let started = call("POST", "/api/timers/tea", #"{"seconds": 2, "interval": 0.05, "title": "Tea"}"#)
        XCTAssertEqual(started.status, 200)
        let task = json(started.body)["task"]
        XCTAssertEqual(task?["title"], .string("Tea"))
        XCTAssertEqual(task?["timer"]?["seconds"], .number(2))
        XCTAssertEqual(task?["timer"]?["interval"], .number(0.05))
        XCTAssertEqual(task?["timer"]?["endsAt"], .number(t0 + 2000))
        XCTAssertEqual(api.store.nextDeadline(), t0 + 50)
        XCTAssertEqual(json(call("POST", "/api/timers/tea/pause", now: t0 + 10).body)["task"]?["state"], .string("paused"))
        XCTAssertEqual(json(call("POST", "/api/timers/tea/resume", now: t0 + 20).body)["task"]?["state"], .string("running"))
        XCTAssertEqual(json(call("POST", "/api/timers/tea/cancel", now: t0 + 30).body)["task"]?["state"], .string("cancelled"))
        assertError(call("POST", "/api/timers/tea/resume", now: t0 + 40), 409, "conflict", field: "id")
        XCTAssertEqual(json(call("POST", "/api/timers/egg").body)["error"], .string("missing_field"))
        XCTAssertEqual(api.store.task("tea")?.timer?.interval, 0.05)
        let defaulted = json(call("POST", "/api/timers/egg", #"{"seconds": 180}"#).body)
        XCTAssertEqual(defaulted["task"]?["timer"]?["interval"], .number(1), "interval defaults to 1 s")
    }

    // MARK: Status codes for each error kind

    func testEachErrorKindHasItsStatus() {
        call("POST", "/api/tasks/plain")
        assertError(call("POST", "/api/tasks/a", "{\"progress\": "), 400, "invalid_json", field: nil)
        assertError(call("POST", "/api/tasks/a", "[1]"), 400, "invalid_json", field: nil)
        assertError(call("POST", "/api/tasks/-bad"), 400, "invalid_id", field: "id")
        assertError(call("GET", "/api/tasks/" + String(repeating: "x", count: 129)), 400, "invalid_id", field: "id")
        assertError(call("POST", "/api/tasks/a", #"{"progress": 1.5}"#), 422, "invalid_field", field: "progress")
        assertError(call("POST", "/api/tasks/a", #"{"progress": "50%"}"#), 422, "invalid_field", field: "progress")
        assertError(call("POST", "/api/tasks/a", #"{"state": "stalled"}"#), 422, "invalid_field", field: "state")
        assertError(call("POST", "/api/tasks/a", #"{"total": 0}"#), 422, "invalid_field", field: "total")
        assertError(call("POST", "/api/tasks/a", #"{"visible": "yes"}"#), 422, "invalid_field", field: "visible")
        assertError(call("POST", "/api/tasks/a", #"{"parent": "../x"}"#), 422, "invalid_field", field: "parent")
        assertError(call("POST", "/api/tasks/a", #"{"progres": 0.5}"#), 422, "unknown_field", field: "progres")
        assertError(call("POST", "/api/timers/t", #"{"interval": 1}"#), 422, "missing_field", field: "seconds")
        assertError(call("POST", "/api/timers/t", #"{"seconds": 5, "interval": 0}"#), 422, "invalid_field", field: "interval")
        assertError(call("GET", "/api/tasks/nobody"), 404, "not_found", field: "id")
        assertError(call("DELETE", "/api/tasks/nobody"), 404, "not_found", field: "id")
        assertError(call("POST", "/api/nothing"), 404, "not_found", field: nil)
        assertError(call("GET", "/api"), 404, "not_found", field: nil)
        assertError(call("GET", "/index.html"), 404, "not_found", field: nil)
        assertError(call("POST", "/api/timers/plain/pause"), 409, "not_a_timer", field: "id")
        assertError(call("POST", "/api/timers/plain/rewind"), 404, "not_found", field: nil)
        assertError(call("DELETE", "/api/tasks"), 405, "method_not_allowed", field: nil)
        assertError(call("GET", "/api/events"), 405, "method_not_allowed", field: nil)
        assertError(call("GET", "/api/timers/plain"), 405, "method_not_allowed", field: nil)
        assertError(call("HEAD", "/api/tasks/plain"), 405, "method_not_allowed", field: nil)
        XCTAssertEqual(api.store.seq, 1, "no invalid request changed anything")
        // ... and the next valid request still works.
        let ok = call("POST", "/api/tasks/a", #"{"progress": 1}"#)
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(json(ok.body)["seq"], .number(2))
    }

    func testErrorCodeStatusTable() {
        let expected: [(APIError.Code, Int)] = [
            (.invalidJSON, 400), (.invalidID, 400), (.invalidPattern, 400), (.invalidEvent, 400),
            (.invalidField, 422), (.unknownField, 422), (.missingField, 422), (.notFound, 404),
            (.notATimer, 409), (.conflict, 409), (.methodNotAllowed, 405), (.bodyTooLarge, 413),
            (.unauthorized, 401), (.forbidden, 403),
        ]
        for (code, status) in expected { XCTAssertEqual(code.status, status, code.rawValue) }
    }

    func testErrorEncodings() {
        let error = APIError(.invalidField, "progress \"2\" is out of range", field: "progress")
        XCTAssertEqual(text(error.encodedBody), #"{"error":"invalid_field","message":"progress \"2\" is out of range","field":"progress"}"#)
        XCTAssertEqual(text(APIError(.notFound, "gone").encodedBody), #"{"error":"not_found","message":"gone","field":null}"#)
        XCTAssertEqual(
            text(error.encodedEvent()), #"{"type":"error","error":"invalid_field","message":"progress \"2\" is out of range","field":"progress"}"#)
        let nested = error.within("events[2]")
        XCTAssertEqual(nested.field, "events[2].progress")
        XCTAssertEqual(nested.message, "events[2]: progress \"2\" is out of range")
        XCTAssertEqual(APIError(.invalidEvent, "x").within("events[0]").field, "events[0]")
    }

    // MARK: Command parsing

    func testPatchTellsAbsentFromNull() throws {
        let absent = try TaskPatch.parse(json("{}"))
        XCTAssertEqual(absent, TaskPatch())
        XCTAssertTrue(absent.detail == nil, "absent is nil, not .some(nil)")
        let cleared = try TaskPatch.parse(json(#"{"detail": null, "progress": null, "hideAfter": null}"#))
        XCTAssertEqual(cleared.detail, .some(nil))
        XCTAssertEqual(cleared.progress, .some(nil))
        XCTAssertEqual(cleared.hideAfter, .some(nil))
        XCTAssertNil(cleared.title)
        let set = try TaskPatch.parse(json(#"{"progress": 0, "state": "paused", "visible": false}"#))
        XCTAssertEqual(set.progress, .some(.some(0)))
        XCTAssertEqual(set.state, .paused)
        XCTAssertEqual(set.visible, false)
    }

    func testEventTypesMapToCommands() throws {
        for type in ["update", "progress", "state"] {
            XCTAssertEqual(
                try Command.parse(event: json(#"{"type": "\#(type)", "id": "a", "progress": 0.5}"#)),
                .update(id: "a", patch: try TaskPatch.parse(json(#"{"progress": 0.5}"#))), type)
        }
        XCTAssertEqual(
            try Command.parse(event: json(#"{"type": "timer", "id": "t", "seconds": 3, "startAt": 1700000000000}"#)),
            .startTimer(id: "t", spec: TimerStart(seconds: 3, interval: 1, startAt: 1_700_000_000_000)))
        XCTAssertEqual(
            try Command.parse(event: json(#"{"type": "show", "id": "s", "modal": true}"#)),
            .show(id: "s", options: ShowOptions(modal: true)))
        XCTAssertEqual(try Command.parse(event: json(#"{"id": "x", "type": "remove"}"#)).id, "x")
    }

    // MARK: Delete

    func testDelete() {
        call("POST", "/api/tasks/a")
        let removed = call("DELETE", "/api/tasks/a")
        XCTAssertEqual(removed.status, 200)
        XCTAssertEqual(text(removed.body), #"{"seq":2,"removed":"a"}"#)
        XCTAssertEqual(removed.events.map(\.type), [.remove])
        assertError(call("GET", "/api/tasks/a"), 404, "not_found", field: "id")
    }

    // MARK: Batches

    func testBatchAppliesInOrder() {
        let response = call(
            "POST", "/api/events",
            #"""
            [{"type": "update", "id": "a", "progress": 0.1},
             {"type": "progress", "id": "a", "progress": 0.2},
             {"type": "state", "id": "a", "state": "done"},
             {"type": "show", "id": "b", "hideAfter": 5},
             {"type": "hide", "id": "b"},
             {"type": "timer", "id": "t", "seconds": 10},
             {"type": "pause", "id": "t"},
             {"type": "resume", "id": "t"},
             {"type": "cancel", "id": "t"},
             {"type": "remove", "id": "a"}]
            """#)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(text(response.body), #"{"seq":10,"applied":10,"errors":[]}"#)
        XCTAssertEqual(response.events.map(\.type), [.progress, .progress, .state, .show, .hide, .show, .state, .state, .state, .remove])
        XCTAssertEqual(response.events.map(\.seq), Array(1...10))
        XCTAssertNil(api.store.task("a"))
        XCTAssertEqual(api.store.task("t")?.state, .cancelled)
    }

    func testABatchItemThatFailsDoesNotStopTheRest() {
        let response = call(
            "POST", "/api/events", #"[{"type":"update","id":"a"},{"type":"hide","id":"ghost"},{"type":"pause","id":"a"},{"type":"update","id":"b"}]"#)
        XCTAssertEqual(response.status, 200)
        let body = json(response.body)
        XCTAssertEqual(body["applied"], .number(2))
        XCTAssertEqual(body["seq"], .number(2))
        let errors = body["errors"]?.arrayValue ?? []
        XCTAssertEqual(errors.map { $0["index"] }, [.number(1), .number(2)])
        XCTAssertEqual(errors.map { $0["error"] }, [.string("not_found"), .string("not_a_timer")])
        XCTAssertEqual(errors.first?.keys, ["index", "error", "message", "field"])
        XCTAssertEqual(response.events.count, 2)
    }

    func testAMalformedBatchChangesNothing() {
        assertError(
            call("POST", "/api/events", #"[{"type":"update","id":"a"},{"type":"update","id":"b","progress":7}]"#),
            422, "invalid_field", field: "events[1].progress")
        assertError(call("POST", "/api/events", #"[{"type":"explode","id":"a"}]"#), 400, "invalid_event", field: "events[0].type")
        assertError(call("POST", "/api/events", #"[{"id":"a"}]"#), 422, "missing_field", field: "events[0].type")
        assertError(call("POST", "/api/events", #"[{"type":"update"}]"#), 422, "missing_field", field: "events[0].id")
        assertError(call("POST", "/api/events", #"[{"type":"update","id":"no/slash"}]"#), 400, "invalid_id", field: "events[0].id")
        assertError(call("POST", "/api/events", #"[{"type":"update","id":"a"}, 3]"#), 400, "invalid_event", field: "events[1]")
        assertError(call("POST", "/api/events", #"[{"type":"remove","id":"a","now":1}]"#), 422, "unknown_field", field: "events[0].now")
        assertError(call("POST", "/api/events", #""update""#), 400, "invalid_json", field: nil)
        assertError(call("POST", "/api/events", ""), 400, "invalid_json", field: nil)
        XCTAssertEqual(api.store.seq, 0)
        XCTAssertTrue(api.store.tasks.isEmpty)
        // One event object on its own is a batch of one.
        XCTAssertEqual(text(call("POST", "/api/events", #"{"type":"update","id":"a"}"#).body), #"{"seq":1,"applied":1,"errors":[]}"#)
    }

    func testOversizedBatch() {
        let event = #"{"type":"update","id":"a"}"#
        let body = "[" + Array(repeating: event, count: API.maxBatchEvents + 1).joined(separator: ",") + "]"
        assertError(call("POST", "/api/events", body), 413, "body_too_large", field: nil)
        XCTAssertEqual(api.store.seq, 0)
    }

    func testHealthBody() {
        call("POST", "/api/tasks/a")
        XCTAssertEqual(
            text(api.healthBody(watchers: 3)),
            #"{"ok":true,"protocol":6,"server":"\#(RingcastVersion.version)","epoch":"apiepoch","seq":1,"tasks":1,"watchers":3}"#)
    }
}
