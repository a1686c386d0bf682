import XCTest

@testable import RingcastCore

/// The WebSocket half of the protocol, without a socket: the upgrade query, the opening frames,
/// messages, auth and errors.
final class SocketProtocolTests: XCTestCase {
    override class func setUp() {
        super.setUp()
        installCryptography()
    }

    private let token = "publisher-token-0123456789"

    private func api(anonymousLocal: Bool = true) -> API {
        var config = ServerConfig()
        config.heartbeatSeconds = 7
        config.maxMessageBytes = 4096
        config.access = AccessPolicy(
            publishers: [.publisher(name: "ci", token: token, patterns: WatchSet([Glob("ci.*")]))],
            anonymousLocalPublish: anonymousLocal)
        return API(store: TaskStore(epoch: "sockepoch"), config: config)
    }

    private func open(_ api: API, _ query: [String: String], authorization: String? = nil, fromLoopback: Bool = true) throws -> (
        SocketSession, [JSONValue]
    ) {
        let request = try SocketRequest.parse(query).get()
        let opening = api.openSocket(request, headers: RequestHeaders(authorization: authorization), fromLoopback: fromLoopback, now: t0)
        return (opening.session, opening.frames.map { json($0) })
    }

    private func send(_ api: API, _ text: String, _ session: inout SocketSession, now: Double = t0) -> (events: [JSONValue], frames: [JSONValue]) {
        let reply = api.receive(.text(Array(text.utf8)), on: &session, now: now)
        return (reply.events.map { decode($0) }, reply.frames.map { json($0) })
    }

    // MARK: The upgrade query

    func testQueryParsing() throws {
        XCTAssertEqual(try SocketRequest.parse([:]).get(), SocketRequest(mode: .watch, watch: WatchSet([Glob("*")])))
        let watcher = try SocketRequest.parse(["watch": "ci.*,deploy.web", "since": "abc:12"]).get()
        XCTAssertEqual(watcher.mode, .watch)
        XCTAssertEqual(watcher.watch.key, "ci.*,deploy.web")
        XCTAssertEqual(watcher.resumeSeq(in: "abc"), 12)
        XCTAssertNil(watcher.resumeSeq(in: "other"), "another epoch's seq means nothing here")
        XCTAssertNil(try SocketRequest.parse(["since": "abc:x"]).get().resumeSeq(in: "abc"))
        XCTAssertNil(try SocketRequest.parse(["since": "abc"]).get().resumeSeq(in: "abc"))

        let publisher = try SocketRequest.parse(["mode": "publish", "watch": "ci.*"]).get()
        XCTAssertEqual(publisher.mode, .publish)
        XCTAssertFalse(publisher.watch.matches("ci.build"), "a publisher watches nothing")
        XCTAssertFalse(publisher.watch.matches("x"))

        guard case .failure(let mode) = SocketRequest.parse(["mode": "shout"]) else { return XCTFail("mode=shout was accepted") }
        XCTAssertEqual(mode.code, .invalidField)
        XCTAssertEqual(mode.field, "mode")
        guard case .failure(let pattern) = SocketRequest.parse(["watch": "ci/*"]) else { return XCTFail("watch=ci/* was accepted") }
        XCTAssertEqual(pattern.code, .invalidPattern)
        XCTAssertEqual(pattern.field, "watch")
    }

    // MARK: Opening frames

    func testAWatcherStartsWithHelloAndSnapshotAndAPublisherWithHelloAlone() throws {
        let api = api()
        _ = api.handle(APIRequest(method: "POST", path: "/api/tasks/ci.a", body: Array(#"{"progress":0.5}"#.utf8)), now: t0)
        _ = api.handle(APIRequest(method: "POST", path: "/api/tasks/other", body: []), now: t0)

        let (_, frames) = try open(api, ["watch": "ci.*"])
        XCTAssertEqual(frames.count, 2)
        XCTAssertEqual(frames[0]["type"], .string("hello"))
        XCTAssertEqual(frames[0]["protocol"], .number(Double(ProtocolInfo.version)))
        XCTAssertEqual(frames[0]["epoch"], .string("sockepoch"))
        XCTAssertEqual(frames[0]["seq"], .number(2))
        XCTAssertEqual(frames[0]["heartbeat"], .number(7))
        XCTAssertEqual(frames[1]["type"], .string("snapshot"))
        XCTAssertEqual(frames[1]["full"], .bool(true))
        XCTAssertEqual(frames[1]["tasks"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["ci.a"])

        let (_, resumed) = try open(api, ["since": "sockepoch:1"])
        XCTAssertEqual(resumed[1]["full"], .bool(false))
        XCTAssertEqual(resumed[1]["since"], .number(1))
        XCTAssertEqual(resumed[1]["tasks"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["other"], "only what changed after seq 1")

        let (_, publisherFrames) = try open(api, ["mode": "publish"])
        XCTAssertEqual(publisherFrames.map { $0["type"] }, [.string("hello")])
    }

    // MARK: Messages

    func testOneEventOrAnArrayGoesThroughThePublishPathAndBadOnesGetTheirOwnErrors() throws {
        let api = api()
        var (session, _) = try open(api, ["mode": "publish"])
        let one = send(api, #"{"type":"update","id":"ci.a","progress":0.25}"#, &session)
        XCTAssertEqual(one.events.map { $0["type"] }, [.string("progress")])
        XCTAssertTrue(one.frames.isEmpty, "a good event is not answered")
        XCTAssertEqual(api.store.task("ci.a")?.progress, 0.25)

        let batch = send(
            api,
            #"[{"type":"update","id":"ci.b","progress":2},{"type":"show","id":"ci.b"},{"type":"bogus","id":"ci.c"},{"type":"hide","id":"nobody"}]"#,
            &session)
        XCTAssertEqual(batch.events.map { $0["type"] }, [.string("show")], "the good event of the batch still applies")
        XCTAssertEqual(batch.frames.map { $0["type"] }, Array(repeating: .string("error"), count: 3))
        XCTAssertEqual(batch.frames.map { $0["field"] }, [.string("events[0].progress"), .string("events[2].type"), .string("events[3].id")])
        XCTAssertEqual(batch.frames.map { $0["id"] }, [.string("ci.b"), .string("ci.c"), .string("nobody")], "each error names its task")
        XCTAssertEqual(batch.frames.map { $0["error"] }, [.string("invalid_field"), .string("invalid_event"), .string("not_found")])

        let garbage = send(api, "{nope", &session)
        XCTAssertTrue(garbage.events.isEmpty)
        XCTAssertEqual(garbage.frames.first?["error"], .string("invalid_json"))

        let large = api.receive(.tooLarge, on: &session, now: t0)
        XCTAssertTrue(large.events.isEmpty)
        XCTAssertEqual(large.frames.map { json($0)["error"] }, [.string("body_too_large")])
        XCTAssertTrue(text(large.frames[0]).contains("4096"), "the error names the limit")

        XCTAssertEqual(api.metrics.clientMessages, 4)
        XCTAssertEqual(api.metrics.clientErrors, 5)
    }

    func testTheSameEventOverHTTPAndOverTheSocketMakesTheSameChange() throws {
        let overHTTP = api()
        let overSocket = api()
        let event = #"{"type":"update","id":"ci.same","title":"Same","progress":0.4,"staleAfter":30}"#
        let http = overHTTP.handle(APIRequest(method: "POST", path: "/api/events", body: Array(event.utf8)), now: t0)
        XCTAssertEqual(http.status, 200)
        var (session, _) = try open(overSocket, ["mode": "publish"])
        let socket = send(overSocket, event, &session)
        XCTAssertEqual(http.events.map { text($0.bytes) }, socket.events.map { text(JSONWriter.encode($0)) })
        XCTAssertEqual(overHTTP.store.task("ci.same"), overSocket.store.task("ci.same"))
    }

    // MARK: Who may publish

    func testTokensOnTheUpgradeOrInAnAuthMessage() throws {
        let api = api(anonymousLocal: false)
        var (anonymous, _) = try open(api, ["mode": "publish"], fromLoopback: true)
        let refused = send(api, #"{"type":"update","id":"ci.a","progress":0.1}"#, &anonymous)
        XCTAssertTrue(refused.events.isEmpty)
        XCTAssertEqual(refused.frames.first?["error"], .string("unauthorized"))

        let badAuth = send(api, #"{"type":"auth","token":"wrong-token-0123456789"}"#, &anonymous)
        XCTAssertEqual(badAuth.frames.first?["error"], .string("unauthorized"))
        XCTAssertEqual(badAuth.frames.first?["field"], .string("token"))
        let noToken = send(api, #"{"type":"auth"}"#, &anonymous)
        XCTAssertEqual(noToken.frames.first?["error"], .string("missing_field"))

        let auth = send(api, #"{"type":"auth","token":"\#(token)"}"#, &anonymous)
        XCTAssertEqual(
            auth.frames.first, json(#"{"type":"auth","ok":true,"publisher":"ci","patterns":"ci.*","name":"ci","kind":"publisher","read":"ci.*"}"#))
        XCTAssertEqual(send(api, #"{"type":"update","id":"ci.a","progress":0.1}"#, &anonymous).events.count, 1)
        let outside = send(api, #"{"type":"update","id":"deploy.web","progress":0.1}"#, &anonymous)
        XCTAssertEqual(outside.frames.first?["error"], .string("forbidden"), "a token covers only its patterns")

        var (withHeader, _) = try open(api, ["mode": "publish"], authorization: "Bearer \(token)", fromLoopback: false)
        XCTAssertEqual(send(api, #"{"type":"update","id":"ci.b","progress":0.2}"#, &withHeader).events.count, 1)
    }

    // MARK: HTTP routes the transport used to answer itself

    func testHealthMetricsAndTheOriginCheckAnswerFromTheCore() {
        let api = api()
        let status = { TransportStatus(watchers: 3, resyncs: 2, patternSets: 1) }
        let health = api.handle(APIRequest(method: "GET", path: "/healthz"), now: t0, status: status)
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(json(health.body)["watchers"], .number(3))
        let metrics = api.handle(APIRequest(method: "GET", path: "/metrics"), now: t0, status: status)
        XCTAssertEqual(metrics.contentType, "text/plain; version=0.0.4")
        XCTAssertTrue(text(metrics.body).contains("ringcast_resyncs_total 2\n"))
        XCTAssertTrue(text(metrics.body).contains("ringcast_http_requests_total 2\n"), "the metrics request counts itself")

        let foreign = RequestHeaders(host: "127.0.0.1:8080", origin: "https://evil.example")
        let refused = api.handle(APIRequest(method: "POST", path: "/api/tasks/x", headers: foreign), now: t0)
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(json(refused.body)["field"], .string("Origin"))
        let own = RequestHeaders(host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080")
        XCTAssertEqual(api.handle(APIRequest(method: "POST", path: "/api/tasks/x", headers: own), now: t0).status, 200)
        XCTAssertEqual(api.handle(APIRequest(method: "GET", path: "/api/tasks", headers: foreign), now: t0).status, 200, "reads are open")

        let remote = api.handle(APIRequest(method: "POST", path: "/api/tasks/x", fromLoopback: false), now: t0)
        XCTAssertEqual(remote.status, 401, "anonymous publishing is for loopback only")
        let tooLarge = api.handle(APIRequest(method: "POST", path: "/api/tasks/x", bodyTooLarge: true), now: t0)
        XCTAssertEqual(tooLarge.status, 413)
    }
}
