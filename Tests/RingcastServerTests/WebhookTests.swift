import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

/// Webhooks through the real server to a real receiver (Tests/tools/webhook_receiver.py), which
/// checks every signature with Python's hmac.
final class WebhookTests: XCTestCase {
    private let secret = "hook-secret-for-the-tests"

    private func server(_ receiver: WebhookReceiver, states: [TaskState] = [.done, .failed, .stalled], maxAttempts: Int = 10) throws -> TestServer {
        try producerServer { config in
            config.webhooks = [
                WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: states, secret: secret,
                    maxAttempts: maxAttempts, timeoutSeconds: 5)
            ]
        }
    }

    private func metric(_ server: TestServer, _ name: String) throws -> Int? {
        let text = try server.http().request("GET", "/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix("ringcast_\(name) ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") }
    }

    func testAFailureIsDeliveredSignedAndRetriedUntilTheReceiverTakesIt() throws {
        let receiver = try WebhookReceiver(secret: secret, refuse: 2)
        let server = try server(receiver)
        try server.post("/api/tasks/ci.build", #"{"title":"Build","progress":0.4}"#)
        try server.post("/api/tasks/other.job", #"{"state":"failed"}"#)
        let answer = try server.post("/api/tasks/ci.build", #"{"state":"failed","detail":"exit 2"}"#)

        let deliveries = receiver.wait { $0.contains { $0.status == 200 } }
        XCTAssertEqual(deliveries.map(\.status), [503, 503, 200], "refused twice, then taken; nothing for other.job")
        XCTAssertTrue(deliveries.allSatisfy(\.valid), "Python's hmac verifies X-Ringcast-Signature over the exact body")
        XCTAssertTrue(deliveries.allSatisfy { $0.signature.hasPrefix("sha256=") && $0.signature.count == 7 + 64 })
        XCTAssertEqual(Set(deliveries.map(\.delivery)).count, 1, "every attempt carries the same delivery id")
        let id = try XCTUnwrap(deliveries.first?.delivery)
        XCTAssertEqual(id, "\(server.server.epoch)-\(Int(answer["seq"]!.numberValue!))-0")
        XCTAssertEqual(deliveries.first?.path, "/hook")
        let body = try XCTUnwrap(deliveries.last?.body)
        XCTAssertEqual(body["delivery"], .string(id))
        XCTAssertEqual(body["state"], .string("failed"))
        XCTAssertEqual(body["previousState"], .string("running"))
        XCTAssertEqual(body["task"]?["id"], .string("ci.build"))
        XCTAssertEqual(body["task"]?["detail"], .string("exit 2"))
        // Jittered back-off, never instant: at least half a second, then at least one (WebhookPlannerTests
        // holds the exact delays; a timed wait here may wake a few milliseconds early on a loaded machine).
        XCTAssertGreaterThanOrEqual(deliveries[1].at - deliveries[0].at, 490)
        XCTAssertGreaterThanOrEqual(deliveries[2].at - deliveries[1].at, 990)

        XCTAssertTrue(try eventually { try metric(server, "webhook_deliveries_total") == 1 })
        XCTAssertEqual(try metric(server, "webhook_retries_total"), 2)
        XCTAssertEqual(try metric(server, "webhook_failures_total"), 0)
        XCTAssertEqual(try metric(server, "webhook_outbox"), 0)
    }

    func testADeliveryIsGivenUpAfterMaxAttemptsAndCountedAsAFailure() throws {
        let receiver = try WebhookReceiver(secret: secret, refuseAll: true)
        let server = try server(receiver, maxAttempts: 2)
        try server.post("/api/tasks/ci.lint", #"{"state":"done"}"#)
        receiver.wait { $0.count == 2 }
        XCTAssertTrue(try eventually { try metric(server, "webhook_failures_total") == 1 })
        XCTAssertEqual(try metric(server, "webhook_retries_total"), 1)
        XCTAssertEqual(try metric(server, "webhook_deliveries_total"), 0)
        XCTAssertEqual(try metric(server, "webhook_outbox"), 0)
    }

    func testAbandonedWorkFiresItsStallThenItsFailure() throws {
        let receiver = try WebhookReceiver(secret: secret)
        let server = try server(receiver, states: [.stalled, .failed])
        try server.post("/api/tasks/ci.worker", #"{"title":"Worker","staleAfter":0.2,"abandonAfter":0.3}"#)
        let deliveries = receiver.wait { $0.count == 2 }
        XCTAssertEqual(deliveries.map { $0.body["state"] }, [.string("stalled"), .string("failed")])
        let detail = try XCTUnwrap(deliveries.last?.body["task"]?["detail"]?.stringValueForTests)
        XCTAssertTrue(detail.hasPrefix("abandoned: no update for "), detail)
        XCTAssertEqual(try server.task("ci.worker")?["state"], .string("failed"))
    }

    func testAHookToAPortNobodyListensOnIsRetriedWithoutHoldingUpTheServer() throws {
        let closed = closedLoopbackPort()
        let server = try producerServer { config in
            config.webhooks = [WebhookRule(url: "http://127.0.0.1:\(closed)/hook", secret: "s", maxAttempts: 2, timeoutSeconds: 1)]
        }
        try server.post("/api/tasks/job", #"{"state":"failed"}"#)
        // The service thread answers while the sender waits between its attempts.
        for n in 0..<20 { try server.post("/api/tasks/busy", #"{"progress":\#(Double(n) / 20)}"#) }
        XCTAssertTrue(try eventually(timeout: 10) { try metric(server, "webhook_failures_total") == 1 })
    }
}

extension JSONValue {
    var stringValueForTests: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    var numberValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }
}
