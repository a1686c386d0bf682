import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// SIGHUP on the real executable, over TLS, with a thousand watchers connected: a new reader
/// token, a new webhook and a renewed certificate apply while every watcher stays connected and
/// goes on receiving; a token the file no longer has closes only its own socket (4441); a broken
/// file is refused and the configuration that ran keeps serving.
final class ReloadTests: XCTestCase {
    private static let watcherCount = 1000
    private let oldToken = "reader-token-one-0001"
    private let newToken = "reader-token-two-0002"
    private let revokedToken = "reader-token-gone-0003"
    private let hookSecret = "reload-hook-secret-0123456789"

    private func lines(of log: URL, containing text: String) -> [Substring] {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.contains(text) }
    }

    func testSIGHUPAppliesATokenAWebhookAndACertificateWithoutDroppingAWatcherAndRefusesABrokenFile() throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let folder = try TemporaryFolder("ringcast-reload")
        defer { folder.remove() }
        let receiver = try WebhookReceiver(secret: hookSecret)

        // `tls` names these files; a renewal is written over them, as certbot's deploy hook does.
        let served = TLSFiles(cert: folder.file("cert.pem").path, key: folder.file("key.pem").path)
        func install(_ files: TLSFiles) throws {
            for (from, to) in [(files.cert, served.cert), (files.key, served.key)] {
                try? FileManager.default.removeItem(atPath: to)
                try FileManager.default.copyItem(atPath: from, toPath: to)
            }
        }
        try install(certificates.good)
        let renewed = try certificates.issue("renewed")
        let firstSerial = try TestCertificates.serial(ofFile: certificates.good.cert)
        let renewedSerial = try TestCertificates.serial(ofFile: renewed.cert)
        XCTAssertNotEqual(firstSerial, renewedSerial)

        let config = folder.file("config.json")
        func write(readers: [(name: String, token: String)], webhooks: String, threads: Int = 2) throws {
            let entries = readers.map { #"{"name": "\#($0.name)", "token": "\#($0.token)", "patterns": ["*"]}"# }.joined(separator: ", ")
            try Data(
                #"""
                {"port": 0, "publicDir": "\#(repositoryRoot)/Public", "threads": \#(threads), "anonymousRead": false,
                 "maxConnectionsPerAddress": 0, "handshakeTimeoutSeconds": 60,
                 "tls": {"cert": "cert.pem", "key": "key.pem"},
                 "readers": [\#(entries)],
                 "webhooks": \#(webhooks)}
                """#.utf8
            ).write(to: config)
        }
        try write(readers: [("team", oldToken), ("gone", revokedToken)], webhooks: "[]")
        let log = folder.file("serve.log")
        let server = try ServeProcess(["--config", config.path], errorLog: log, openFileLimit: 20_000)
        let port = server.port
        XCTAssertEqual(server.firstLine, "listening on https://127.0.0.1:\(port)")
        let tls = TLSSettings(caFile: certificates.caFile)
        let api = HTTPClient(host: "127.0.0.1", port: port, secure: true, tls: tls)
        func get(_ path: String, token: String? = nil) throws -> HTTPResponse {
            try api.request("GET", path, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
        }
        func generation() throws -> JSONValue? { try JSONParser.parse(get("/readyz").body)["config"]?["generation"] }
        XCTAssertEqual(try generation(), .number(1))
        XCTAssertEqual(try TestCertificates.serial(presentedOn: port), firstSerial)
        XCTAssertEqual(try get("/api/tasks", token: newToken).status, 401, "the new token does not hold before the reload")

        // A thousand watchers over wss, every one handshaken with the first certificate.
        let clients = try WebSocketClientContext(connectTimeoutSeconds: 30, trustedCertificates: certificates.caFile)
        let url = "wss://127.0.0.1:\(port)/ws?watch=*"
        let connectStart = Date()
        let watchers = (0..<Self.watcherCount).map { _ in
            TestWatcher(url, headers: [("Authorization", "Bearer \(oldToken)")], context: clients)
        }
        let revoked = TestWatcher(url, headers: [("Authorization", "Bearer \(revokedToken)")], context: clients)
        for watcher in watchers + [revoked] {
            watcher.wait(timeout: 60) { received in received.contains { $0.type == "snapshot" } }
        }
        let connectSeconds = Date().timeIntervalSince(connectStart)
        XCTAssertTrue(
            try eventually(timeout: 10) { try JSONParser.parse(get("/healthz").body)["watchers"] == .number(Double(Self.watcherCount + 1)) })

        // The reload: a new reader, a new webhook, the renewed certificate; "gone" leaves.
        try install(renewed)
        let hook = #"[{"url": "\#(receiver.url)", "patterns": ["build.*"], "states": ["done"], "secret": "\#(hookSecret)"}]"#
        // `threads` cannot change while the server runs: named in a warning and kept.
        try write(readers: [("team", oldToken), ("team-b", newToken)], webhooks: hook, threads: 3)
        let reloadStart = Date()
        kill(server.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually(timeout: 20) { !lines(of: log, containing: "reloaded ").isEmpty }, "the log says the reload was applied")
        let reloadSeconds = Date().timeIntervalSince(reloadStart)
        let reloaded = try XCTUnwrap(lines(of: log, containing: "reloaded ").first)
        XCTAssertTrue(reloaded.contains("applied readers, webhooks"), String(reloaded))
        XCTAssertTrue(reloaded.contains("generation 2"), String(reloaded))
        XCTAssertEqual(try generation(), .number(2))
        let kept = lines(of: log, containing: "cannot change while the server runs")
        XCTAssertEqual(kept.count, 1)
        XCTAssertTrue(kept.first?.contains("reload: threads changed") == true, "\(kept)")
        // /metrics answers loopback without a token, whatever anonymousRead says.
        XCTAssertTrue(try get("/metrics").text.contains("ringcast_service_threads 2\n"), "the running threads are kept")

        XCTAssertEqual(try get("/api/tasks", token: newToken).status, 200, "the new token holds at once")
        XCTAssertEqual(try TestCertificates.serial(presentedOn: port), renewedSerial, "a new handshake presents the renewed certificate")
        let fresh = TestWatcher(url, headers: [("Authorization", "Bearer \(newToken)")], context: clients)
        fresh.wait(timeout: 10) { received in received.contains { $0.type == "snapshot" } }
        XCTAssertTrue(revoked.waitForClose(timeout: 10), "the revoked token's watcher is closed")
        XCTAssertEqual(revoked.connection.peerCloseCode, Int(SocketClose.accessChanged), "closed 4441: the reload took its token away")

        // The old connections go on: every one of them hears what is published now, and the new hook fires.
        let publisher = HTTPClient(host: "127.0.0.1", port: port, secure: true, tls: tls)
        XCTAssertEqual(try publisher.request("POST", "/api/tasks/build.1", json: #"{"title":"Build","state":"done"}"#).status, 200)
        for watcher in watchers {
            watcher.wait(timeout: 20) { received in received.contains { $0.id == "build.1" } }
        }
        let delivered = try XCTUnwrap(receiver.wait(timeout: 10) { !$0.isEmpty }.first)
        XCTAssertTrue(delivered.valid, "the new hook signs with its secret")
        XCTAssertEqual(delivered.body["task"]?["id"], .string("build.1"))

        // A broken file is refused whole; the configuration that ran keeps serving.
        try Data(#"{"port": 0, "readers": [{"name": "team", "#.utf8).write(to: config)
        kill(server.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually(timeout: 20) { !lines(of: log, containing: "reload refused").isEmpty }, "the log says the file was refused")
        let refusal = try XCTUnwrap(lines(of: log, containing: "reload refused").first)
        XCTAssertTrue(refusal.contains("config.json") && refusal.contains("still serving generation 2"), String(refusal))
        XCTAssertEqual(try generation(), .number(2))
        XCTAssertEqual(try get("/api/tasks", token: newToken).status, 200)
        XCTAssertEqual(try get("/api/tasks", token: oldToken).status, 200)
        XCTAssertEqual(try TestCertificates.serial(presentedOn: port), renewedSerial)
        XCTAssertEqual(try publisher.request("POST", "/api/tasks/build.2", json: #"{"title":"Build","state":"done"}"#).status, 200)
        for watcher in watchers {
            watcher.wait(timeout: 20) { received in received.contains { $0.id == "build.2" } }
        }
        XCTAssertNotNil(receiver.wait(timeout: 10) { $0.contains { $0.body["task"]?["id"] == .string("build.2") } }.first)

        // Not one of the thousand was dropped, from the first connection to the last event.
        let dropped = watchers.filter(\.closed).count
        XCTAssertEqual(dropped, 0)
        XCTAssertEqual(try JSONParser.parse(get("/healthz").body)["watchers"], .number(Double(Self.watcherCount + 1)))
        print(
            "reload figures: \(Self.watcherCount) wss watchers connected in \(String(format: "%.1f", connectSeconds)) s; "
                + "SIGHUP to the log's reload line \(String(format: "%.2f", reloadSeconds)) s; dropped \(dropped)")
        for watcher in watchers + [fresh] { watcher.connection.close() }
        XCTAssertEqual(server.stop(), 0)
    }
}
