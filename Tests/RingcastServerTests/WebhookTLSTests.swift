import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

@testable import RingcastServer

/// Webhooks to https:// receivers, their certificates signed by a CA the test makes with openssl:
/// delivered and signed through the hook's `caFile`; refused, attempt by attempt with the reason,
/// when the certificate is for another host; and peers that abuse the handshake held to the deadline.
final class WebhookTLSTests: XCTestCase {
    private var certificates: TestCertificates!

    override func setUpWithError() throws { certificates = try TestCertificates() }
    override func tearDown() { certificates?.remove() }

    private func metrics(_ server: TestServer) throws -> PrometheusScrape {
        try PrometheusScrape(server.http().request("GET", "/metrics").text)
    }

    func testAnHTTPSReceiverGetsSignedBodiesThatVerifyOverOneKeptConnection() throws {
        let receiver = try WebhookReceiver(secret: "s3cret", tls: certificates.good)
        XCTAssertTrue(receiver.url.hasPrefix("https://"))
        let server = try TestServer { config in
            config.publicDir = emptyPublicDirectory
            var rule = WebhookRule(url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s3cret", concurrency: 1)
            rule.caFile = self.certificates.caFile
            config.webhooks = [rule]
        }
        for n in 0..<3 { try server.post("/api/tasks/ci.job-\(n)", #"{"state":"failed","detail":"exit 2"}"#) }
        let deliveries = receiver.wait(timeout: 30) { $0.count >= 3 }
        XCTAssertEqual(deliveries.count, 3)
        for delivery in deliveries {
            XCTAssertTrue(delivery.valid, "the signature verifies: \(delivery.signature)")
            XCTAssertEqual(delivery.path, "/hook")
            XCTAssertEqual(delivery.body["event"]?["state"] ?? delivery.body["state"], .string("failed"), "\(delivery.body)")
        }
        XCTAssertEqual(Set(deliveries.map(\.peer)).count, 1, "one slot, one kept TLS connection: \(deliveries.map(\.peer))")
        XCTAssertTrue(try eventually(timeout: 10) { try metrics(server).value("ringcast_webhook_deliveries_total") == 3 })
    }

    func testAReceiverThatAsksForAClientCertificateGetsTheHooksAndOnlyWithIt() throws {
        let receiver = try WebhookReceiver(secret: "s", tls: certificates.good, clientCA: certificates.caFile)
        func server(presenting: Bool) throws -> TestServer {
            try TestServer { config in
                config.publicDir = emptyPublicDirectory
                var rule = WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", maxAttempts: 50, timeoutSeconds: 2,
                    concurrency: 1)
                rule.caFile = self.certificates.caFile
                if presenting {
                    rule.clientCert = self.certificates.good.cert
                    rule.clientKey = self.certificates.good.key
                }
                config.webhooks = [rule]
            }
        }
        let without = try server(presenting: false)
        try without.post("/api/tasks/ci.anonymous", #"{"state":"failed"}"#)
        XCTAssertTrue(
            try eventually(timeout: 30) { (try metrics(without).value("ringcast_webhook_retries_total") ?? 0) >= 2 },
            "refused in the handshake, retried")
        XCTAssertTrue(receiver.deliveries.isEmpty, "nothing reached it without a certificate")

        let with = try server(presenting: true)
        try with.post("/api/tasks/ci.known", #"{"state":"failed"}"#)
        let deliveries = receiver.wait(timeout: 30) { $0.contains { $0.body["task"]?["id"] == .string("ci.known") } }
        XCTAssertTrue(deliveries.allSatisfy(\.valid))
    }

    func testAWrongHostReceiverFailsEachAttemptWithThatReasonAndOpensTheCircuit() throws {
        let receiver = try WebhookReceiver(secret: "s", tls: certificates.wrongHost)
        let log = LogLines()
        let server = try TestServer(logger: Logger(level: .debug) { log.append($0) }) { config in
            config.publicDir = emptyPublicDirectory
            var rule = WebhookRule(
                url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", maxAttempts: 50, timeoutSeconds: 5,
                concurrency: 1, circuitFailures: 3, circuitOpenSeconds: 3600)
            rule.caFile = self.certificates.caFile
            config.webhooks = [rule]
        }
        for n in 0..<4 { try server.post("/api/tasks/ci.job-\(n)", #"{"state":"failed"}"#) }
        let hook = ["hook": "0"]
        XCTAssertTrue(try eventually(timeout: 30) { try metrics(server).value("ringcast_webhook_circuit_state", hook) == 2 }, "open")
        let failures = log.all.filter { $0.contains("webhook") && $0.contains("wrong host") }
        XCTAssertEqual(failures.count, 3, "each attempt failed naming the reason: \(log.all.joined(separator: "\n"))")
        XCTAssertTrue(receiver.deliveries.isEmpty, "nothing was sent to a receiver whose certificate is for another host")
        XCTAssertEqual(try metrics(server).value("ringcast_webhook_circuit_opens_total", hook), 1)
    }

    func testAStalledHandshakeAndAnEndlessCertificateChainFailWithAReasonWithinTheDeadline() throws {
        let cases: [(name: String, lie: HostileReceiver.Lie, reason: String)] = [
            ("a stalled handshake", .stallHandshake, "within 1.0 s"),
            ("an endless certificate chain", .endlessCertificateChain, "the TLS handshake with 127.0.0.1"),
        ]
        for (name, lie, reason) in cases {
            let receiver = try HostileReceiver(lie)
            defer { receiver.stop() }
            let client = HTTPClient(
                host: "127.0.0.1", port: receiver.port, secure: true, tls: TLSSettings(caFile: certificates.caFile), timeoutSeconds: 1,
                maxBodyBytes: 8192)
            let started = Date()
            XCTAssertThrowsError(try client.request("POST", "/hook", json: "{}"), name) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(name): \(error)")
            }
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, name)
            XCTAssertTrue(eventually(timeout: 5) { receiver.attempts == 1 }, "\(name): the hello reached it")
        }
    }

    func testAWebhookSenderLivesThroughAStalledHandshakeAndAnEndlessChain() throws {
        for lie in [HostileReceiver.Lie.stallHandshake, .endlessCertificateChain] {
            let receiver = try HostileReceiver(lie)
            defer { receiver.stop() }
            let server = try TestServer { config in
                config.publicDir = emptyPublicDirectory
                var rule = WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", maxAttempts: 50, timeoutSeconds: 1)
                rule.caFile = self.certificates.caFile
                config.webhooks = [rule]
            }
            try server.post("/api/tasks/ci.build", #"{"state":"failed"}"#)
            XCTAssertTrue(eventually(timeout: 30) { receiver.attempts >= 2 }, "\(lie): the first attempt failed and another followed")
            XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200, "\(lie)")
        }
    }
}
