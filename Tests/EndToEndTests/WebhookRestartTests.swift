import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// The webhook outbox survives kill -9: a delivery owed when the server dies is sent after the
/// restart, with the same delivery id, and verifies with Python's hmac.
final class WebhookRestartTests: XCTestCase {
    func testAHookDueWhenTheServerIsKilledIsDeliveredAfterTheRestart() throws {
        let folder = try TemporaryFolder("ringcast-hooks")
        defer { folder.remove() }
        let secret = "restart-secret-0123456789"
        let receiver = try WebhookReceiver(secret: secret, refuseAll: true)
        let config = folder.file("config.json")
        try Data(
            #"""
            {"port": 0, "publicDir": "\#(repositoryRoot)/Public", "storage": "data/ringcast.db",
             "webhooks": [{"url": "\#(receiver.url)", "patterns": ["deploy.*"], "states": ["done", "failed"], "secret": "\#(secret)"}]}
            """#.utf8
        ).write(to: config)

        var served = try ServeProcess(["--config", config.path])
        var client = HTTPClient(host: "127.0.0.1", port: served.port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/deploy.web", json: #"{"title":"Deploy"}"#).status, 200)
        let answer = try client.request("POST", "/api/tasks/deploy.web", json: #"{"state":"failed","detail":"health check"}"#)
        XCTAssertEqual(answer.status, 200)
        let epoch = try XCTUnwrap(try JSONParser.parse(try client.request("GET", "/healthz").body)["epoch"])
        // The answer means the state and its delivery are kept; the receiver refuses the first attempt.
        let refused = try XCTUnwrap(receiver.wait { !$0.isEmpty }.first)
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(served.stop(SIGKILL), SIGKILL, "killed, no clean shutdown")

        receiver.accept()
        served = try ServeProcess(["--config", config.path])
        client = HTTPClient(host: "127.0.0.1", port: served.port)
        XCTAssertEqual(try JSONParser.parse(try client.request("GET", "/healthz").body)["epoch"], epoch, "the same state came back")
        let delivered = try XCTUnwrap(receiver.wait { $0.contains { $0.status == 200 } }.last)
        XCTAssertEqual(delivered.delivery, refused.delivery, "the same delivery id, so the receiver can de-duplicate")
        XCTAssertTrue(delivered.valid, "Python's hmac verifies the signature")
        XCTAssertEqual(delivered.body["task"]?["detail"], .string("health check"))
        XCTAssertTrue(try eventually { try client.request("GET", "/metrics").text.contains("ringcast_webhook_outbox 0\n") })
        XCTAssertTrue(try eventually { try client.request("GET", "/metrics").text.contains("ringcast_webhook_deliveries_total 1\n") })
        _ = served.stop()

        // Delivered, and the outbox kept that too: a third start sends nothing again.
        let count = receiver.deliveries.count
        served = try ServeProcess(["--config", config.path])
        client = HTTPClient(host: "127.0.0.1", port: served.port)
        XCTAssertTrue(try client.request("GET", "/metrics").text.contains("ringcast_webhook_outbox 0\n"))
        XCTAssertEqual(receiver.deliveries.count, count)
    }
}
