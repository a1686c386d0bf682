import XCTest

@testable import RingcastCore

/// A task's timeline and its link: each change that matters recorded once with its time and who
/// made it, bounded with `created` kept, kept by storage, read as scoped as the log; `url` only
/// http and https; the task page served at `/tasks/{id}`.
final class TimelineTests: XCTestCase {
    private var api: API!

    override func setUp() {
        var config = ServerConfig()
        config.timelineEntries = 6
        api = API(store: TaskStore(epoch: "timeline"), config: config)
    }

    @discardableResult
    private func call(_ method: String, _ path: String, _ body: String = "", now: Double = t0, loopback: Bool = true) -> APIResponse {
        api.handle(APIRequest(method: method, path: path, body: Array(body.utf8), fromLoopback: loopback), now: now)
    }

    private func entries(_ id: String) -> [JSONValue] { json(call("GET", "/api/tasks/\(id)/timeline").body)["entries"]?.arrayValue ?? [] }

    func testEachChangeIsRecordedWithItsTimeAndWhoMadeIt() throws {
        call("POST", "/api/tasks/deploy.web", #"{"title": "Deploy", "controls": ["cancel", "pause", "resume"], "progress": 0.1}"#)
        call("POST", "/api/tasks/deploy.web", #"{"progress": 0.5}"#, now: t0 + 1000)
        XCTAssertEqual(call("POST", "/api/tasks/deploy.web/pause", now: t0 + 2000).status, 200)
        call("POST", "/api/tasks/deploy.web", #"{"state": "paused"}"#, now: t0 + 3000)
        XCTAssertEqual(call("POST", "/api/tasks/deploy.web/resume", now: t0 + 4000).status, 200)
        call("POST", "/api/tasks/deploy.web/hide", now: t0 + 5000)
        call("POST", "/api/tasks/deploy.web/show", now: t0 + 6000)
        _ = try api.store.apply(.requestControl(id: "deploy.web", action: .cancel), by: Principal(name: "alice", maxTasks: nil), now: t0 + 7000)

        let answer = call("GET", "/api/tasks/deploy.web/timeline")
        XCTAssertEqual(answer.status, 200, text(answer.body))
        XCTAssertEqual(json(answer.body)["id"], .string("deploy.web"))
        // Seven entries, six kept: the oldest after `created` went; progress alone records nothing.
        XCTAssertEqual(
            json(answer.body)["entries"],
            json(
                #"""
                [{"at": \#(Int(t0)), "event": "created", "state": "running", "by": "local"},
                 {"at": \#(Int(t0) + 3000), "event": "state", "state": "paused", "by": "local"},
                 {"at": \#(Int(t0) + 4000), "event": "requested", "action": "resume", "by": "local"},
                 {"at": \#(Int(t0) + 5000), "event": "hidden", "by": "local"},
                 {"at": \#(Int(t0) + 6000), "event": "shown", "by": "local"},
                 {"at": \#(Int(t0) + 7000), "event": "requested", "action": "cancel", "by": "alice"}]
                """#))
        XCTAssertNil(json(call("GET", "/api/tasks/deploy.web").body)["timeline"], "the timeline is never part of the task")
    }

    func testTheServersOwnChangesRecordNoOne() throws {
        call("POST", "/api/tasks/etl.copy", #"{"staleAfter": 1, "abandonAfter": 2}"#)
        _ = api.store.runDue(now: t0 + 1000)
        _ = api.store.runDue(now: t0 + 3000)
        XCTAssertEqual(api.store.task("etl.copy")?.state, .failed)
        XCTAssertEqual(
            entries("etl.copy").dropFirst().map { [$0["event"], $0["state"], $0["by"]] },
            [[.string("state"), .string("stalled"), nil], [.string("abandoned"), .string("failed"), nil]])
        let timers = TaskStore(epoch: "timers")
        try timers.startTimer("tea", seconds: 1, interval: 1, now: t0)
        _ = timers.runDue(now: t0 + 1000)
        XCTAssertEqual(timers.task("tea")?.state, .done)
        XCTAssertEqual(timers.task("tea")?.timeline.map(\.event), [.created, .state])
        XCTAssertEqual(timers.task("tea")?.timeline.last?.state, .done)
        XCTAssertNil(timers.task("tea")?.timeline.last?.by)
    }

    func testTheTimelineIsReadLikeTheLog() {
        call("POST", "/api/tasks/t", "{}")
        XCTAssertEqual(call("GET", "/api/tasks/nobody/timeline").status, 404)
        XCTAssertEqual(call("GET", "/api/tasks/-bad/timeline").status, 400)
        XCTAssertEqual(call("POST", "/api/tasks/t/timeline").status, 405)
        let remote = call("GET", "/api/tasks/t/timeline", loopback: false)
        XCTAssertEqual(remote.status, call("GET", "/api/tasks/t/log", loopback: false).status, "scoped as the log is")
        XCTAssertEqual(remote.status, 401, "another machine reads nothing without a token by default")
    }

    func testAStoredTaskKeepsItsTimelineAndLink() throws {
        call("POST", "/api/tasks/ci.build-7", #"{"url": "https://ci.example.com/runs/7", "state": "failed"}"#)
        let task = try XCTUnwrap(api.store.task("ci.build-7"))
        let back = try XCTUnwrap(TaskRecord(stored: task.encodedForStorage()))
        XCTAssertEqual(back.timeline, task.timeline)
        XCTAssertEqual(back.timeline.map(\.event), [.created])
        XCTAssertEqual(back.timeline.first?.state, .failed, "created failed: one entry says so")
        XCTAssertEqual(back.url, "https://ci.example.com/runs/7")
        XCTAssertEqual(back, task)
    }

    func testALinkIsHTTPOrHTTPSAndNullClearsIt() {
        for good in ["https://ci.example.com/runs/42", "HTTP://x", "http://x?q=1#f", "https://xn--bcher-kva.example/é"] {
            XCTAssertEqual(call("POST", "/api/tasks/a", #"{"url": "\#(good)"}"#).status, 200, good)
            XCTAssertEqual(json(call("GET", "/api/tasks/a").body)["url"], .string(good))
        }
        for bad in ["javascript:alert(1)", "ftp://x", "http://", "https:///x", "https://a b", "//x", "data:text/html,x"] {
            let answer = call("POST", "/api/tasks/a", #"{"url": "\#(bad)"}"#)
            XCTAssertEqual(answer.status, 422, bad)
            XCTAssertEqual(json(answer.body)["field"], .string("url"), bad)
        }
        XCTAssertEqual(call("POST", "/api/tasks/a", #"{"url": null}"#).status, 200)
        XCTAssertNil(json(call("GET", "/api/tasks/a").body)["url"])
        let long = "https://x/" + String(repeating: "a", count: TaskURL.maxLength)
        XCTAssertEqual(call("POST", "/api/tasks/a", #"{"url": "\#(long)"}"#).status, 422)
    }

    /// A link is shown whole on the task page and in the widget: characters that reorder or hide
    /// text, and a user before the host, would make it read as a link to somewhere else.
    func testALinkThatWouldReadAsAnotherIsRefusedNamingWhy() {
        let cases: [(String, String)] = [
            ("https://ci.example.com/\u{202E}txt.exe", "bidirectional override"),
            ("https://ci.example.com\u{202D}.evil.test/", "bidirectional override"),
            ("https://x/\u{2066}a\u{2069}", "bidirectional override"),
            ("https://x/a\u{85}b", "control character"),
            ("https://x/a\u{9F}", "control character"),
            ("https://ci.example.com@evil.test/runs/1", "user@host"),
            ("https://user:secret@x/", "user@host"),
        ]
        for (bad, reason) in cases {
            let answer = call("POST", "/api/tasks/a", String(decoding: JSONWriter.encode(.object([("url", .string(bad))])), as: UTF8.self))
            XCTAssertEqual(answer.status, 422, bad.debugDescription)
            let body = json(answer.body)
            XCTAssertEqual(body["field"], .string("url"), bad.debugDescription)
            let message = body["message"]?.stringValue ?? ""
            XCTAssertTrue(message.contains(reason), message)
            XCTAssertFalse(message.unicodeScalars.contains { TaskURL.isHidden($0) && $0 != " " }, "the echo is cleaned: \(message.debugDescription)")
        }
        XCTAssertEqual(call("POST", "/api/tasks/a", #"{"url": "https://x/blame/a@b?who=c@d"}"#).status, 200, "an @ after the host is a path's")
    }

    func testTheTaskPageIsServedAtItsPathWhenThereIsOne() {
        XCTAssertEqual(call("GET", "/tasks/ci.build-42").status, 404, "no task.html: no page")
        api.taskPage = Array("<!doctype html><title>task</title>".utf8)
        let page = call("GET", "/tasks/ci.build-42")
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.contentType, "text/html; charset=utf-8")
        XCTAssertEqual(page.body, api.taskPage)
        XCTAssertEqual(call("POST", "/tasks/ci.build-42").status, 405)
        XCTAssertEqual(call("GET", "/tasks/a/b").status, 404)
    }
}
