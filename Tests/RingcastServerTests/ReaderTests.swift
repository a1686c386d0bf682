import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Who may see what, on a real server: a reader scoped to `a.*` sees every `a.*` task and nothing
/// of `b.*` on each surface (the WebSocket's snapshot and events, the task list as JSON and text,
/// a task, its log, its badge, the kinds, /metrics, a parent's children), however it presents its
/// token (header, cookie, `auth` message). Anonymous access from another machine is
/// Tests/browser/test_access_network.py's, in a network namespace of its own.
final class ReaderTests: XCTestCase {
    let readerToken = "reader-a-token-0123456789"
    let everythingToken = "reader-all-token-0123456789"

    private func bearer(_ token: String) -> [(String, String)] { [("Authorization", "Bearer \(token)")] }

    /// Readers of `a.*` and of everything; tasks published anonymously from loopback: a parent
    /// `a.p` with a child of each scope, a task and a finished run of each kind, and a log line each.
    private func populatedServer(configure: (inout ServerConfig) -> Void = { _ in }) throws -> TestServer {
        let server = try TestServer {
            $0.access = AccessPolicy(readers: [
                .reader(name: "team-a", token: readerToken, patterns: WatchSet([Glob("a.*")])),
                .reader(name: "ops", token: everythingToken, patterns: WatchSet([Glob("*")])),
            ])
            configure(&$0)
        }
        for (path, body) in [
            ("/api/tasks/a.p", #"{"title":"A parent"}"#), ("/api/tasks/a.p-1", #"{"title":"A child","parent":"a.p","progress":0.5}"#),
            ("/api/tasks/b.q", #"{"title":"B child","parent":"a.p","progress":0.25}"#),
            ("/api/tasks/a.two", #"{"title":"A two"}"#), ("/api/tasks/b.other", #"{"title":"B other"}"#),
            ("/api/tasks/a.two/log", #"{"lines":["a-line"]}"#), ("/api/tasks/b.other/log", #"{"lines":["secret=hunter2"]}"#),
            ("/api/tasks/a.build-1", #"{"title":"A build"}"#), ("/api/tasks/b.build-1", #"{"title":"B build"}"#),
            ("/api/tasks/a.build-1", #"{"state":"done"}"#), ("/api/tasks/b.build-1", #"{"state":"done"}"#),
        ] {
            _ = try server.post(path, body)
        }
        return server
    }

    private func ids(_ body: [UInt8]) throws -> Set<String> {
        guard case .array(let tasks)? = try JSONParser.parse(body)["tasks"] else { return [] }
        return Set(tasks.compactMap { if case .string(let id)? = $0["id"] { return id } else { return nil } })
    }

    func testAReaderSeesEveryTaskOfItsPatternsAndNothingElseOnEachHTTPSurface() throws {
        let server = try populatedServer()
        let client = server.http()
        let aTasks: Set = ["a.p", "a.p-1", "a.two", "a.build-1"]

        // The task list, as JSON, by header and by the sign-in cookie alike.
        for headers in [bearer(readerToken), [("Cookie", "theme=dark; ringcast_token=\(readerToken)")]] {
            let list = try client.request("GET", "/api/tasks", headers: headers)
            XCTAssertEqual(list.status, 200)
            XCTAssertEqual(try ids(list.body), aTasks, "every a.* task and nothing of b.*")
        }
        // The list of a watch pattern outside the reader's is empty, not an error: it lists what the reader may see of it.
        XCTAssertEqual(try ids(try client.request("GET", "/api/tasks?watch=b.*", headers: bearer(readerToken)).body), [])

        // As text, and a parent's table: its children the reader may see, not the others.
        let table = try client.request("GET", "/api/tasks?format=text", headers: bearer(readerToken)).text
        for title in ["A parent", "A child", "A two", "A build"] { XCTAssertTrue(table.contains(title), table) }
        for title in ["B child", "B other", "B build"] { XCTAssertFalse(table.contains(title), table) }
        let family = try client.request("GET", "/api/tasks/a.p?format=text", headers: bearer(readerToken)).text
        XCTAssertTrue(family.contains("A child"), family)
        XCTAssertFalse(family.contains("B child"), family)
        let everything = try client.request("GET", "/api/tasks/a.p?format=text", headers: bearer(everythingToken)).text
        XCTAssertTrue(everything.contains("B child"), "a reader of * sees both children: \(everything)")

        // One task, its log, its badge: a.* answers, b.* is 403 with the protocol's error body.
        for path in ["/api/tasks/a.two", "/api/tasks/a.two/log", "/badge/a.two.svg"] {
            XCTAssertEqual(try client.request("GET", path, headers: bearer(readerToken)).status, 200, path)
        }
        for path in ["/api/tasks/b.other", "/api/tasks/b.other/log", "/badge/b.other.svg", "/api/tasks/b.nonexistent"] {
            let refused = try client.request("GET", path, headers: bearer(readerToken))
            XCTAssertEqual(refused.status, 403, path)
            let body = try JSONParser.parse(refused.body)
            XCTAssertEqual(body["error"], .string("forbidden"), path)
            XCTAssertEqual(body["field"], .string("id"), path)
            XCTAssertFalse(refused.text.contains("hunter2"), path)
        }
        XCTAssertTrue(try client.request("GET", "/api/tasks/a.two/log", headers: bearer(readerToken)).text.contains("a-line"))

        // The kinds of the tasks it may see.
        let kinds = try client.request("GET", "/api/kinds", headers: bearer(readerToken)).text
        XCTAssertTrue(kinds.contains("\"a.build\""), kinds)
        XCTAssertFalse(kinds.contains("\"b.build\""), kinds)
        XCTAssertTrue(try client.request("GET", "/api/kinds", headers: bearer(everythingToken)).text.contains("\"b.build\""))

        // /metrics counts every task: a reader of * (or loopback) may read it, one of a.* may not.
        let metrics = try client.request("GET", "/metrics", headers: bearer(readerToken))
        XCTAssertEqual(metrics.status, 403, metrics.text)
        XCTAssertEqual(try client.request("GET", "/metrics", headers: bearer(everythingToken)).status, 200)
        XCTAssertEqual(try client.request("GET", "/metrics").status, 200, "loopback without a token")

        // A reader publishes nothing; a token that matches no entry reads nothing either.
        let publish = try client.request("POST", "/api/tasks/a.new", json: "{}", headers: bearer(readerToken))
        XCTAssertEqual(publish.status, 403, publish.text)
        XCTAssertTrue(publish.text.contains("may read but not publish"), publish.text)
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: bearer("no-such-token-0123456789")).status, 401)
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("Cookie", "ringcast_token=no-such-token-0123456789")]).status, 401)
    }

    func testAReaderWatchesOnlyItsTasksOnTheWebSocket() throws {
        let server = try populatedServer()
        // Watching everything is narrowed to what the reader may see: the snapshot, then the events.
        let watcher = TestWatcher(server.wsURL, headers: bearer(readerToken))
        let snapshot = watcher.waitForSnapshot().snapshot
        guard case .array(let tasks)? = snapshot.event["tasks"] else { return XCTFail("no tasks in \(snapshot.event)") }
        XCTAssertEqual(Set(tasks.compactMap { $0["id"]?.stringValue }), ["a.p", "a.p-1", "a.two", "a.build-1"])

        _ = try server.post("/api/tasks/b.later", #"{"title":"B later"}"#)
        _ = try server.post("/api/tasks/b.other/log", #"{"lines":["secret=again"]}"#)
        _ = try server.post("/api/tasks/a.later", #"{"title":"A later"}"#)
        watcher.wait { $0.contains { $0.id == "a.later" } }
        XCTAssertFalse(watcher.received.contains { ($0.id ?? "").hasPrefix("b.") }, "no event of b.* reaches a reader of a.*")

        // A pattern inside the reader's is kept as asked.
        let narrow = TestWatcher(server.wsURL + "?watch=a.two", headers: bearer(readerToken))
        guard case .array(let one)? = narrow.waitForSnapshot().snapshot.event["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(one.compactMap { $0["id"]?.stringValue }, ["a.two"])

        // A pattern outside it is refused: an error event that says why, then close 4403.
        let outside = TestWatcher(server.wsURL + "?watch=b.*", headers: bearer(readerToken))
        let error = outside.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }
        XCTAssertEqual(error?.string("error"), "forbidden")
        XCTAssertEqual(error?.string("field"), "watch")
        XCTAssertTrue(outside.waitForClose())
        XCTAssertEqual(outside.connection.peerCloseCode, Int(SocketClose.forbidden))
        XCTAssertTrue(outside.connection.peerCloseReason.contains("team-a"), outside.connection.peerCloseReason)
        XCTAssertFalse(outside.received.contains { $0.type == "snapshot" })

        // The sign-in cookie on the upgrade works as the header does.
        let withCookie = TestWatcher(server.wsURL, headers: [("Cookie", "ringcast_token=\(readerToken)")])
        guard case .array(let seen)? = withCookie.waitForSnapshot().snapshot.event["tasks"] else { return XCTFail("no tasks") }
        XCTAssertFalse(seen.contains { ($0["id"]?.stringValue ?? "").hasPrefix("b.") })
    }

    func testAWatcherThatMustSignInWaitsForItsAuthMessageOrIsClosedWithTheReason() throws {
        let server = try populatedServer {
            $0.access.anonymousRead = .nobody
            $0.handshakeTimeoutSeconds = 1
        }
        // No token where reading needs one: hello, an error saying so, no snapshot; then `auth`.
        let signing = TestWatcher(server.wsURL)
        let error = signing.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }
        XCTAssertEqual(error?.string("error"), "unauthorized")
        XCTAssertFalse(signing.received.contains { $0.type == "snapshot" })
        signing.connection.send(#"{"type":"auth","token":"\#(readerToken)"}"#)
        let events = signing.wait { $0.contains { $0.type == "snapshot" } }
        XCTAssertEqual(events.first { $0.type == "auth" }?.string("read"), "a.*")
        guard case .array(let tasks)? = events.first(where: { $0.type == "snapshot" })?.event["tasks"] else { return XCTFail("no snapshot") }
        XCTAssertEqual(Set(tasks.compactMap { $0["id"]?.stringValue }), ["a.p", "a.p-1", "a.two", "a.build-1"])
        _ = try server.post("/api/tasks/a.after", "{}")
        signing.wait { $0.contains { $0.id == "a.after" } }
        XCTAssertFalse(signing.closed)

        // One that never signs in is closed once handshakeTimeoutSeconds have passed, with the reason.
        let silent = TestWatcher(server.wsURL)
        XCTAssertTrue(silent.waitForClose(timeout: 10))
        XCTAssertEqual(silent.connection.peerCloseCode, Int(SocketClose.unauthorized))
        XCTAssertTrue(silent.connection.peerCloseReason.contains("needs a token"), silent.connection.peerCloseReason)
        // And loopback reads nothing over HTTP without a token either.
        XCTAssertEqual(try server.http().request("GET", "/api/tasks").status, 401)
    }

    func testAnEntryHoldsAtMostItsMaxConnections() throws {
        let server = try TestServer {
            $0.access = AccessPolicy(readers: [
                AccessEntry(.reader, name: "kiosk", token: readerToken, patterns: WatchSet([Glob("*")]), maxConnections: 1)
            ])
        }
        let first = TestWatcher(server.wsURL, headers: bearer(readerToken))
        first.waitForSnapshot()
        let second = TestWatcher(server.wsURL, headers: bearer(readerToken))
        XCTAssertTrue(second.waitForClose())
        XCTAssertEqual(second.connection.peerCloseCode, Int(SocketClose.tooManyConnections))
        XCTAssertTrue(second.connection.peerCloseReason.contains("'kiosk'"), second.connection.peerCloseReason)
        XCTAssertEqual(second.received.map(\.type), ["hello", "error"], "the reason, and no snapshot it may not keep")
        XCTAssertEqual(second.received.last?.string("error"), "rate_limited")
        XCTAssertFalse(first.closed)
        // Its place comes back when the first one goes.
        first.connection.close()
        XCTAssertTrue(first.waitForClose())
        // The client sees the close before the server has let the connection go: wait for the server's count.
        XCTAssertTrue(try eventually { try server.http().request("GET", "/metrics").text.contains("\nringcast_watchers 0\n") })
        let third = TestWatcher(server.wsURL, headers: bearer(readerToken))
        third.waitForSnapshot()
        XCTAssertFalse(third.closed)
    }

    // MARK: Signed tokens, minted by PyJWT

    private let secret = "signing-key-for-tests-0123456789abcdef"

    private func signedServer() throws -> TestServer {
        let text = #"{"tokenSecretEnv": "RINGCAST_TEST_TOKEN_SECRET", "anonymousRead": false, "anonymousLocalPublish": false}"#
        let parsed = try ServerConfig.parse(Array(text.utf8), environment: ["RINGCAST_TEST_TOKEN_SECRET": secret])
        return try TestServer { $0.access = parsed.access }
    }

    private func claims(sub: String = "deploy-bot", exp: Int = PyJWT.seconds(from: 600), nbf: Int? = nil, read: [String] = [], publish: [String])
        -> String
    {
        func list(_ items: [String]) -> String { "[" + items.map { "\"\($0)\"" }.joined(separator: ",") + "]" }
        let notBefore = nbf.map { #","nbf":\#($0)"# } ?? ""
        return #"{"sub":"\#(sub)","exp":\#(exp)\#(notBefore),"ringcast":{"read":\#(list(read)),"publish":\#(list(publish))}}"#
    }

    func testSignedTokensHoldUntilTheyExpireAndAreRefusedWithTheReason() throws {
        let server = try signedServer()
        let client = server.http()
        let other = "another-key-entirely-0123456789abcdef"
        let minted = try PyJWT.encode([
            .init(claims(read: ["a.*"], publish: ["a.deploy-*"]), secret: secret),
            .init(claims(exp: PyJWT.seconds(from: -60), publish: ["a.*"]), secret: secret),
            .init(claims(nbf: PyJWT.seconds(from: 600), publish: ["a.*"]), secret: secret),
            .init(claims(publish: ["a.*"]), secret: other),
            .init(claims(publish: ["a.*"]), secret: nil, algorithm: "none"),
            .init(claims(publish: ["a.*"]), secret: secret, algorithm: "HS512"),
            .init(#"{"sub":"x","ringcast":{"read":["*"]}}"#, secret: secret),
        ])
        let valid = minted[0]

        // Valid: it publishes what ringcast.publish covers, under its sub, and reads what either list covers.
        let published = try client.request("POST", "/api/tasks/a.deploy-1", json: #"{"state":"done"}"#, headers: bearer(valid))
        XCTAssertEqual(published.status, 200, published.text)
        XCTAssertEqual(try JSONParser.parse(published.body)["task"]?["by"], .string("deploy-bot"))
        XCTAssertEqual(try client.request("POST", "/api/tasks/a.other", json: "{}", headers: bearer(valid)).status, 403)
        XCTAssertEqual(try client.request("GET", "/api/tasks/a.deploy-1", headers: bearer(valid)).status, 200)
        XCTAssertEqual(try client.request("GET", "/api/tasks/b.x", headers: bearer(valid)).status, 403)
        XCTAssertEqual(try client.request("GET", "/api/tasks").status, 401, "anonymousRead false: loopback needs a token too")

        let refusals: [(String, String, String)] = [
            ("expired", minted[1], "expired at"), ("nbf in the future", minted[2], "not valid before"), ("wrong key", minted[3], "wrong signature"),
            ("alg none", minted[4], "only HS256"), ("HS512", minted[5], "only HS256"),
            ("tampered claims", PyJWT.tampered(valid, claims: claims(read: ["*"], publish: ["*"])), "wrong signature"),
            ("no exp", minted[6], "must expire"),
            ("malformed", "not.a.token", "malformed"),
        ]
        for (name, token, reason) in refusals {
            let answer = try server.http().request("GET", "/api/tasks", headers: bearer(token))
            XCTAssertEqual(answer.status, 401, "\(name): \(answer.text)")
            let body = try JSONParser.parse(answer.body)
            XCTAssertEqual(body["error"], .string("unauthorized"), name)
            XCTAssertTrue(body["message"]?.stringValue?.contains(reason) == true, "\(name): \(answer.text)")
            // On the upgrade: the error event, then close 4401 with the reason.
            let watcher = TestWatcher(server.wsURL, headers: bearer(token))
            XCTAssertTrue(watcher.waitForClose(), name)
            XCTAssertEqual(watcher.connection.peerCloseCode, Int(SocketClose.unauthorized), name)
            XCTAssertTrue(watcher.connection.peerCloseReason.contains(reason), "\(name): \(watcher.connection.peerCloseReason)")
        }
    }

    func testAWatcherWhoseTokenExpiresIsClosedWithTheExpiryCode() throws {
        let server = try signedServer()
        // exp is whole seconds: this one ends one to two seconds from now.
        let brief = try PyJWT.encode(claims(exp: PyJWT.seconds(from: 2), read: ["*"], publish: []), secret: secret)
        let watcher = TestWatcher(server.wsURL, headers: bearer(brief))
        watcher.waitForSnapshot()
        XCTAssertTrue(watcher.waitForClose(timeout: 15), "closed once the token expired")
        XCTAssertEqual(watcher.connection.peerCloseCode, Int(SocketClose.tokenExpired))
        XCTAssertTrue(watcher.connection.peerCloseReason.contains("expired"), watcher.connection.peerCloseReason)

        // Signed in by an auth message, the same: the new token's exp closes it.
        let later = TestWatcher(server.wsURL)
        later.wait { $0.contains { $0.type == "error" } }
        let second = try PyJWT.encode(claims(exp: PyJWT.seconds(from: 2), read: ["*"], publish: []), secret: secret)
        later.connection.send(#"{"type":"auth","token":"\#(second)"}"#)
        later.wait { $0.contains { $0.type == "snapshot" } }
        XCTAssertTrue(later.waitForClose(timeout: 15))
        XCTAssertEqual(later.connection.peerCloseCode, Int(SocketClose.tokenExpired))
    }

    // MARK: Scopes wherever a task names another, and quotas

    private let ciToken = "ci-token-0123456789abcdef"
    private let deployToken = "deploy-token-0123456789abcdef"
    private let narrowToken = "narrow-token-0123456789abcdef"

    private func publishingServer(logger: Logger = .silent) throws -> TestServer {
        try TestServer(logger: logger) {
            $0.access = AccessPolicy(
                publishers: [
                    .publisher(name: "ci", token: ciToken, patterns: WatchSet([Glob("ci.*")]), maxTasks: 3),
                    .publisher(name: "deploy", token: deployToken, patterns: WatchSet([Glob("deploy.*")])),
                    .publisher(name: "narrow", token: narrowToken, patterns: WatchSet([Glob("x.build-*")])),
                ],
                anonymousLocalMaxTasks: 2)
        }
    }

    func testAKindOrParentOutsideThePublishersPatternsIsRefusedNamingTheField() throws {
        let server = try publishingServer()
        let client = server.http()
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build-1", json: #"{"title":"Build"}"#, headers: bearer(ciToken)).status, 200)
        for (body, field) in [(#"{"kind":"ci.build"}"#, "kind"), (#"{"parent":"ci.build-1"}"#, "parent")] {
            let refused = try client.request("POST", "/api/tasks/deploy.web", json: body, headers: bearer(deployToken))
            XCTAssertEqual(refused.status, 403, refused.text)
            XCTAssertEqual(try JSONParser.parse(refused.body)["field"], .string(field))
            // In a batch and on the WebSocket alike.
            let batch = try client.request(
                "POST", "/api/events", json: #"[{"type":"update","id":"deploy.web",\#(body.dropFirst())]"#, headers: bearer(deployToken))
            XCTAssertEqual(try JSONParser.parse(batch.body)["field"], .string("events[0].\(field)"), batch.text)
        }
        let socket = TestWatcher(server.wsURL + "?mode=publish", headers: bearer(deployToken))
        socket.wait { $0.contains { $0.type == "hello" } }
        socket.connection.send(#"{"type":"update","id":"deploy.web","parent":"ci.build-1","progress":0.5}"#)
        XCTAssertEqual(socket.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }?.string("field"), "parent")
        XCTAssertNil(try server.task("deploy.web"), "nothing of the refused events was applied")
        XCTAssertNil(try server.task("ci.build-1")?["progress"]?.numberValue, "the ci parent's progress is its own")

        // A kind inside the patterns is fine; a task whose default kind lies outside them is its own kind.
        XCTAssertEqual(
            try client.request("POST", "/api/tasks/deploy.web", json: #"{"kind":"deploy.site"}"#, headers: bearer(deployToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/x.build-7", json: "{}", headers: bearer(narrowToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/x.build-7", json: #"{"state":"done"}"#, headers: bearer(narrowToken)).status, 200)
        let kinds = try client.request("GET", "/api/kinds").text
        XCTAssertTrue(kinds.contains("\"x.build-7\""), kinds)
        XCTAssertFalse(kinds.contains("\"x.build\""), "x.build is not the narrow publisher's to feed: \(kinds)")
    }

    func testOnePublisherAtItsMaxTasksLeavesTheOthersAbleToCreateTasks() throws {
        let server = try publishingServer()
        let client = server.http()
        for n in 1...3 {
            XCTAssertEqual(try client.request("POST", "/api/tasks/ci.t\(n)", json: "{}", headers: bearer(ciToken)).status, 200)
        }
        let full = try client.request("POST", "/api/tasks/ci.t4", json: "{}", headers: bearer(ciToken))
        XCTAssertEqual(full.status, 409, full.text)
        XCTAssertEqual(try JSONParser.parse(full.body)["error"], .string("too_many_tasks"))
        XCTAssertTrue(full.text.contains("'ci'"), "the refusal names the entry: \(full.text)")
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.t1", json: #"{"progress":0.5}"#, headers: bearer(ciToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/deploy.a", json: "{}", headers: bearer(deployToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/deploy.b", json: "{}", headers: bearer(deployToken)).status, 200)
        // Anonymous loopback publishing has a share of its own.
        XCTAssertEqual(try client.request("POST", "/api/tasks/l.1", json: "{}").status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/l.2", json: "{}").status, 200)
        let local = try client.request("POST", "/api/tasks/l.3", json: "{}")
        XCTAssertEqual(local.status, 409)
        XCTAssertTrue(local.text.contains("anonymousLocalMaxTasks"), local.text)
        XCTAssertEqual(try client.request("POST", "/api/tasks/deploy.c", json: "{}", headers: bearer(deployToken)).status, 200)
        // A task removed gives its place back.
        XCTAssertEqual(try client.request("DELETE", "/api/tasks/ci.t1", headers: bearer(ciToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.t4", json: "{}", headers: bearer(ciToken)).status, 200)
    }

    func testAPublishersShareHoldsAcrossARestart() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("readers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("ringcast.db").path
        do {
            let server = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent)) {
                $0.access = AccessPolicy(publishers: [.publisher(name: "ci", token: ciToken, patterns: WatchSet([Glob("ci.*")]), maxTasks: 2)])
            }
            for n in 1...2 {
                XCTAssertEqual(
                    try server.http().request("POST", "/api/tasks/ci.\(n)", json: #"{"state":"done"}"#, headers: bearer(ciToken)).status, 200)
            }
            server.server.stop()
        }
        let again = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent)) {
            $0.access = AccessPolicy(publishers: [.publisher(name: "ci", token: ciToken, patterns: WatchSet([Glob("ci.*")]), maxTasks: 2)])
        }
        XCTAssertEqual(try again.http().request("POST", "/api/tasks/ci.3", json: "{}", headers: bearer(ciToken)).status, 409)
    }

    // MARK: Who did it

    func testRequestsRemovalsAndStatesRecordWhoMadeThem() throws {
        let lines = Locked<[String]>([])
        let logger = Logger(level: .info) { line in lines.withLock { $0.append(line) } }
        let server = try publishingServer(logger: logger)
        let client = server.http()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        XCTAssertEqual(
            try client.request("POST", "/api/tasks/ci.job", json: #"{"controls":["cancel"]}"#, headers: bearer(ciToken)).status, 200)
        let cancel = try client.request("POST", "/api/tasks/ci.job/cancel")
        XCTAssertEqual(try JSONParser.parse(cancel.body)["task"]?["by"], .string("local"), "loopback asked")
        let answered = try client.request("POST", "/api/tasks/ci.job", json: #"{"state":"cancelled"}"#, headers: bearer(ciToken))
        XCTAssertEqual(try JSONParser.parse(answered.body)["task"]?["by"], .string("ci"))
        XCTAssertEqual(try client.request("DELETE", "/api/tasks/ci.job", headers: bearer(ciToken)).status, 200)
        let events = watcher.wait { $0.contains { $0.type == "remove" && $0.id == "ci.job" } }
        XCTAssertEqual(events.first { $0.event["cancelRequested"] == .bool(true) }?.string("by"), "local")
        XCTAssertEqual(events.first { $0.string("state") == "cancelled" }?.string("by"), "ci")
        XCTAssertEqual(events.first { $0.type == "remove" }?.string("by"), "ci")
        let log = lines.withLock { $0 }
        XCTAssertTrue(log.contains { $0.contains("local asked to cancel ci.job") }, "\(log)")
        XCTAssertTrue(log.contains { $0.contains("ci removed ci.job") }, "\(log)")
    }

    // MARK: Cross-origin answers and proxies

    func testAPIAnswersNameOnlyListedOriginsAndStaticFilesAnyone() throws {
        let server = try TestServer { $0.allowedOrigins = ["http://partner.example"] }
        let client = server.http()
        _ = try server.post("/api/tasks/ci.x", #"{"title":"x"}"#)
        let listed = try client.request("GET", "/api/tasks", headers: [("Origin", "http://partner.example")])
        XCTAssertEqual(listed.headers["access-control-allow-origin"], "http://partner.example")
        XCTAssertEqual(listed.headers["vary"], "Origin")
        let evil = try client.request("GET", "/api/tasks/ci.x/log", headers: [("Origin", "https://evil.example")])
        XCTAssertNil(evil.headers["access-control-allow-origin"], "no CORS header: the page's fetch() cannot read it")
        XCTAssertNil(try client.request("GET", "/api/tasks").headers["access-control-allow-origin"])
        XCTAssertEqual(try client.request("GET", "/ringcast-widget.js").headers["access-control-allow-origin"], "*")
        // A preflight: what the listed origin may send; nothing for another.
        let preflight = try client.request(
            "OPTIONS", "/api/tasks/ci.x", headers: [("Origin", "http://partner.example"), ("Access-Control-Request-Method", "POST")])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.headers["access-control-allow-headers"], "authorization, content-type")
        let refused = try client.request("OPTIONS", "/api/tasks/ci.x", headers: [("Origin", "https://evil.example")])
        XCTAssertEqual(refused.status, 403)
        XCTAssertNil(refused.headers["access-control-allow-origin"])
        let change = try client.request("POST", "/api/tasks/ci.x", json: "{}", headers: [("Origin", "https://evil.example")])
        XCTAssertEqual(change.status, 403)
    }

    func testForwardedForIsBelievedOnlyFromATrustedProxy() throws {
        let proxied = try TestServer { $0.trustedProxies = ["127.0.0.1"] }
        let client = proxied.http()
        XCTAssertEqual(try client.request("GET", "/api/tasks").status, 401, "a proxy that names no client: remote, not its own loopback")
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("X-Forwarded-For", "127.0.0.1")]).status, 200)
        for header in [
            ("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-For", "203.0.113.7, 127.0.0.1"),
        ] {
            XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [header]).status, 401, "\(header): a remote client")
            XCTAssertEqual(try client.request("POST", "/api/tasks/x", json: "{}", headers: [header]).status, 401, "\(header)")
        }
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("Forwarded", "for=127.0.0.1")]).status, 401, "not the header config names")
        let forwarded = TestWatcher(proxied.wsURL, headers: [("X-Forwarded-For", "203.0.113.7")])
        XCTAssertEqual(forwarded.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }?.string("error"), "unauthorized")

        // Without trustedProxies the headers are anyone's to write, and ignored.
        let direct = try TestServer()
        XCTAssertEqual(try direct.http().request("GET", "/api/tasks", headers: [("X-Forwarded-For", "203.0.113.7")]).status, 200)
    }
}
