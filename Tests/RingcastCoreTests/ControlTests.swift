import XCTest

@testable import RingcastCore

/// Cancel and pause requests, without a socket: offered controls, the request marked on the task,
/// the control frame for the sockets that published the task, and the publisher's answer.
final class ControlTests: XCTestCase {
    private var api: API!

    override func setUp() { api = API(store: TaskStore(epoch: "ctlepoch")) }

    @discardableResult
    private func call(_ method: String, _ path: String, _ body: String = "", now: Double = t0) -> APIResponse {
        api.handle(APIRequest(method: method, path: path, body: Array(body.utf8)), now: now)
    }

    /// A fan-out writer that only counts the writes it is asked for.
    private final class Writer: FanOutWriter { func requestWrite() {} }

    /// Control frames straight into the subscription (the transport posts them to the socket's thread).
    /// @unchecked Sendable: the test touches it on one thread.
    private final class SubscriptionSink: ControlSink, @unchecked Sendable {
        let subscription: Subscription
        init(_ subscription: Subscription) { self.subscription = subscription }
        func send(_ frame: [UInt8]) { subscription.sendDirect(frame) }
    }

    private func publisherSocket(_ fanOut: FanOut) throws -> (SocketSession, Subscription) {
        let request = try SocketRequest.parse(["mode": "publish"]).get()
        let session = api.openSocket(request, headers: RequestHeaders(), fromLoopback: true, now: t0).session
        let subscription = fanOut.subscribe(request.watch, lastSeq: 0, writer: Writer())
        api.socketOpened(session, sink: SubscriptionSink(subscription))
        return (session, subscription)
    }

    /// The direct frames waiting for a subscription (hello excluded: it was never sent to it).
    private func frames(_ fanOut: FanOut, _ subscription: Subscription) -> [JSONValue] {
        var found: [JSONValue] = []
        while case .frame(let bytes, _)? = fanOut.nextFrame(for: subscription) { found.append(json(bytes)) }
        return found
    }

    func testTheControlsFieldIsASubsetOfCancelPauseResume() {
        XCTAssertEqual(call("POST", "/api/tasks/etl.copy", #"{"controls": ["cancel", "pause", "cancel"]}"#).status, 200)
        XCTAssertEqual(api.store.task("etl.copy")?.controls, [.cancel, .pause], "duplicates are dropped")
        XCTAssertEqual(json(call("GET", "/api/tasks/etl.copy").body)["controls"], .array([.string("cancel"), .string("pause")]))
        let bad = call("POST", "/api/tasks/etl.copy", #"{"controls": ["stop"]}"#)
        XCTAssertEqual(bad.status, 422)
        XCTAssertEqual(json(bad.body)["field"], .string("controls"))
        XCTAssertEqual(call("POST", "/api/tasks/etl.copy", #"{"controls": "cancel"}"#).status, 422)
        XCTAssertEqual(call("POST", "/api/tasks/etl.copy", #"{"controls": []}"#).status, 200)
        XCTAssertNil(json(call("GET", "/api/tasks/etl.copy").body)["controls"], "none offered: the field is left out")
    }

    func testACancelRequestIsMarkedSentToThePublisherAndClearedByItsAnswer() throws {
        let fanOut = FanOut()
        let (opened, subscription) = try publisherSocket(fanOut)
        var session = opened
        let (_, bystander) = try publisherSocket(fanOut)
        _ = api.receive(.text(Array(#"{"type":"update","id":"etl.copy","controls":["cancel"],"progress":0.2}"#.utf8)), on: &session, now: t0)

        let response = call("POST", "/api/tasks/etl.copy/cancel", now: t0 + 10)
        XCTAssertEqual(response.status, 200, text(response.body))
        let body = json(response.body)
        XCTAssertEqual(body.keys, ["seq", "task", "delivered"])
        XCTAssertEqual(body["task"]?["cancelRequested"], .bool(true))
        XCTAssertEqual(body["delivered"], .number(1))
        XCTAssertEqual(response.events.map(\.type), [.state], "watchers see the request (\"cancelling…\")")
        XCTAssertEqual(decode(response.events[0])["cancelRequested"], .bool(true))
        XCTAssertNil(decode(response.events[0])["requestWaiting"], "a publisher was connected to take it")
        XCTAssertEqual(response.controls.count, 1, "only the socket that published the task")
        response.controls.forEach { $0.send() }
        let seq = try XCTUnwrap(body["seq"]?.numberValue)
        XCTAssertEqual(
            frames(fanOut, subscription), [json(#"{"type":"control","id":"etl.copy","action":"cancel","seq":\#(Int(seq)),"by":"local"}"#)],
            "the publisher hears who asked")
        XCTAssertEqual(frames(fanOut, bystander), [])
        XCTAssertEqual(api.followUpMetrics.controlRequests, 1)

        // The publisher answers with a state: the request is cleared.
        _ = api.receive(.text(Array(#"{"type":"update","id":"etl.copy","state":"cancelled"}"#.utf8)), on: &session, now: t0 + 20)
        let task = try XCTUnwrap(api.store.task("etl.copy"))
        XCTAssertEqual(task.state, .cancelled)
        XCTAssertFalse(task.cancelRequested)
        XCTAssertNil(json(task.encodedObject(now: t0))["cancelRequested"])
        XCTAssertEqual(call("POST", "/api/tasks/etl.copy/cancel").status, 409, "a finished task has nothing to cancel")
    }

    func testAControlTheTaskDoesNotOfferIsRefused() {
        call("POST", "/api/tasks/plain", "{}")
        let refused = call("POST", "/api/tasks/plain/cancel")
        XCTAssertEqual(refused.status, 409)
        XCTAssertEqual(json(refused.body)["error"], .string("conflict"))
        XCTAssertTrue(json(refused.body)["message"]?.stringValue?.contains("does not offer cancel") ?? false, text(refused.body))
        XCTAssertFalse(api.store.task("plain")!.cancelRequested)
        call("POST", "/api/tasks/half", #"{"controls": ["pause"]}"#)
        XCTAssertTrue(json(call("POST", "/api/tasks/half/cancel").body)["message"]?.stringValue?.contains("offers only pause") ?? false)
        XCTAssertEqual(call("POST", "/api/tasks/nobody/cancel").status, 404)
        XCTAssertEqual(call("GET", "/api/tasks/plain/cancel").status, 405)
        XCTAssertEqual(call("POST", "/api/tasks/plain/cancel", #"{"why": "x"}"#).status, 422)
    }

    func testPauseAndResumeRequests() {
        call("POST", "/api/tasks/job", #"{"controls": ["pause", "resume"]}"#)
        XCTAssertEqual(call("POST", "/api/tasks/job/resume").status, 409, "nothing to resume while it runs")
        XCTAssertEqual(call("POST", "/api/tasks/job/pause").status, 200)
        XCTAssertTrue(api.store.task("job")!.pauseRequested)
        XCTAssertEqual(call("POST", "/api/tasks/job/resume").status, 200, "resume takes back a pause not yet answered")
        XCTAssertFalse(api.store.task("job")!.pauseRequested)
        call("POST", "/api/tasks/job/pause")
        call("POST", "/api/tasks/job", #"{"state": "paused"}"#)
        XCTAssertFalse(api.store.task("job")!.pauseRequested, "the publisher's state answers it")
        XCTAssertEqual(call("POST", "/api/tasks/job/pause").status, 409, "already paused")
        XCTAssertEqual(call("POST", "/api/tasks/job/resume").status, 200)
        XCTAssertEqual(api.store.task("job")!.state, .paused, "a resume request asks; the publisher's answer changes the state")
    }

    func testARequestMadeBeforeThePublisherConnectedReachesItOnItsFirstPublish() throws {
        call("POST", "/api/tasks/late", #"{"controls": ["cancel"]}"#)
        let answer = json(call("POST", "/api/tasks/late/cancel").body)
        XCTAssertEqual(answer["delivered"], .number(0), "published over HTTP only: no socket to tell yet")
        XCTAssertEqual(answer["task"]?["requestWaiting"], .bool(true), "every viewer sees that no publisher has it")
        XCTAssertEqual(json(call("GET", "/api/tasks/late").body)["requestWaiting"], .bool(true))
        call("POST", "/api/tasks/late", #"{"progress": 0.4}"#)
        XCTAssertTrue(api.store.task("late")!.requestWaiting, "a publish over HTTP cannot take a request")
        let fanOut = FanOut()
        var session = try publisherSocket(fanOut).0
        let reply = api.receive(.text(Array(#"{"type":"update","id":"late","progress":0.5}"#.utf8)), on: &session, now: t0)
        XCTAssertEqual(reply.frames.map { json($0)["type"] }, [.string("control")])
        XCTAssertEqual(json(reply.frames[0])["action"], .string("cancel"))
        XCTAssertFalse(api.store.task("late")!.requestWaiting, "the publisher's socket took it")
        XCTAssertTrue(api.store.task("late")!.cancelRequested, "and its answer is still to come")
        let heard = decode(try XCTUnwrap(reply.events.last))
        XCTAssertNil(heard["requestWaiting"], "watchers hear it was taken")
        XCTAssertEqual(heard["cancelRequested"], .bool(true))
        let again = api.receive(.text(Array(#"{"type":"update","id":"late","progress":0.6}"#.utf8)), on: &session, now: t0)
        XCTAssertTrue(again.frames.isEmpty, "once per socket and task")
    }

    func testAPublisherThatDisconnectsStallsItsLeasedRunningTasksAtOnce() throws {
        let fanOut = FanOut()
        var session = try publisherSocket(fanOut).0
        var other = try publisherSocket(fanOut).0
        let batch =
            #"[{"type":"update","id":"leased","staleAfter":30},{"type":"update","id":"free"},{"type":"update","id":"shared","staleAfter":30},{"type":"update","id":"over","staleAfter":30,"state":"done"}]"#
        _ = api.receive(.text(Array(batch.utf8)), on: &session, now: t0)
        _ = api.receive(.text(Array(#"{"type":"update","id":"shared"}"#.utf8)), on: &other, now: t0)
        let events = api.socketClosed(session, now: t0 + 100)
        XCTAssertEqual(events.map(\.id), ["leased"], "only a running task with a lease that no other open socket publishes")
        XCTAssertEqual(events.map(\.type), [.state])
        XCTAssertEqual(api.store.task("leased")?.state, .stalled)
        XCTAssertEqual(api.store.task("leased")?.stalledAt, t0 + 100)
        XCTAssertEqual(api.store.task("shared")?.state, .running)
        XCTAssertTrue(api.socketClosed(other, now: t0 + 200, stallTasks: false).isEmpty, "a stopping server stalls nothing")
        XCTAssertEqual(api.store.task("shared")?.state, .running)
    }
}
