import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// `Server.reload` on a running server: origins and readers apply to what comes next and to open
/// watchers, webhook deliveries still owed reach the new senders, and a reload that cannot be
/// applied whole changes nothing.
final class LiveReloadTests: XCTestCase {
    private let token = "reader-token-one-0001"

    private func reload(_ server: TestServer, _ change: (inout ServerConfig) -> Void) throws {
        var file = server.server.config
        change(&file)
        try server.server.reload(file, bytes: Array("{}".utf8), source: "config.json")
    }

    func testAllowedOriginsApplyToTheNextRequest() throws {
        let server = try TestServer()
        let preflight: () throws -> Int = {
            try server.http().request(
                "OPTIONS", "/api/tasks", headers: [("Origin", "https://example.com"), ("Access-Control-Request-Method", "POST")]
            ).status
        }
        XCTAssertEqual(try preflight(), 403)
        try reload(server) { $0.allowedOrigins = ["https://example.com"] }
        XCTAssertEqual(try preflight(), 204)
        XCTAssertEqual(server.server.configGeneration?.generation, 1, "the first reload of a server that noted no file")
    }

    func testAWatcherWhoseRightsShrankGetsASnapshotOfWhatItMayReadNowAndNothingElse() throws {
        let server = try TestServer {
            $0.access = AccessPolicy(readers: [.reader(name: "team", token: token, patterns: WatchSet([Glob("*")]))], anonymousRead: .nobody)
        }
        _ = try server.post("/api/tasks/a.one", #"{"title":"A"}"#)
        _ = try server.post("/api/tasks/b.one", #"{"title":"B"}"#)
        let watcher = TestWatcher(server.wsURL + "?watch=*", headers: [("Authorization", "Bearer \(token)")])
        let first = watcher.waitForSnapshot().snapshot
        XCTAssertEqual(first.event["tasks"].map { if case .array(let tasks) = $0 { tasks.count } else { 0 } }, 2)

        try reload(server) {
            $0.access = AccessPolicy(readers: [.reader(name: "team", token: token, patterns: WatchSet([Glob("a.*")]))], anonymousRead: .nobody)
        }
        let snapshots = watcher.wait { $0.filter { $0.type == "snapshot" }.count == 2 }.filter { $0.type == "snapshot" }
        let ids: [String] =
            if case .array(let tasks)? = snapshots[1].event["tasks"] {
                tasks.compactMap { if case .string(let id)? = $0["id"] { id } else { nil } }
            } else { [] }
        XCTAssertEqual(ids, ["a.one"], "the new snapshot holds only what the reader may read now")
        _ = try server.post("/api/tasks/b.two", #"{"title":"B2"}"#)
        _ = try server.post("/api/tasks/a.two", #"{"title":"A2"}"#)
        watcher.wait { $0.contains { $0.id == "a.two" } }
        XCTAssertFalse(watcher.received.contains { $0.id == "b.two" }, "b.* is no longer the reader's")
        XCTAssertFalse(watcher.closed)
    }

    func testDeliveriesOwedByTheOldSendersAreSentByTheNewOnes() throws {
        let secret = "reload-hook-secret-0123456789"
        let receiver = try WebhookReceiver(secret: secret, refuseAll: true)
        let rule = { (states: [TaskState]) in
            WebhookRule(url: receiver.url, patterns: WatchSet([Glob("deploy.*")]), states: states, secret: secret)
        }
        let server = try TestServer { $0.webhooks = [rule([.done])] }
        _ = try server.post("/api/tasks/deploy.web", #"{"title":"Deploy","state":"done"}"#)
        let refused = try XCTUnwrap(receiver.wait { !$0.isEmpty }.first)
        XCTAssertEqual(refused.status, 503)

        try reload(server) { $0.webhooks = [rule([.done, .failed])] }
        receiver.accept()
        let delivered = try XCTUnwrap(receiver.wait(timeout: 15) { $0.contains { $0.status == 200 } }.last)
        XCTAssertEqual(delivered.delivery, refused.delivery, "the same delivery, sent by the new senders")
        XCTAssertTrue(delivered.valid)
    }

    func testACertificateThatIsNotItsKeysRefusesTheWholeReload() throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try TestServer { $0.tls = certificates.good }
        let api = HTTPClient(host: "127.0.0.1", port: server.port, secure: true, tls: TLSSettings(caFile: certificates.caFile))
        let newToken = "reader-token-two-0002"
        func status() throws -> Int { try api.request("GET", "/api/tasks", headers: [("Authorization", "Bearer \(newToken)")]).status }
        XCTAssertEqual(try status(), 401)
        XCTAssertThrowsError(
            try reload(server) {
                $0.tls = TLSFiles(cert: certificates.good.cert, key: certificates.wrongHost.key)
                $0.access = AccessPolicy(readers: [.reader(name: "team", token: newToken, patterns: WatchSet([Glob("*")]))])
            }
        ) { error in
            XCTAssertTrue("\(error)".contains("is not the PEM private key of"), "\(error)")
        }
        XCTAssertEqual(try status(), 401, "nothing of the refused file applied")
        XCTAssertNil(server.server.configGeneration)

        try reload(server) { $0.access = AccessPolicy(readers: [.reader(name: "team", token: newToken, patterns: WatchSet([Glob("*")]))]) }
        XCTAssertEqual(try status(), 200)
    }
}
