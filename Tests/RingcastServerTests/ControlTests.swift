import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

/// Cancel and pause requests through the real server: from `POST /api/tasks/{id}/cancel` to the
/// WebSocket that published the task, and a publisher that disconnects.
final class ControlTests: XCTestCase {
    /// A publishing socket, open (it has its hello).
    private func publisherSocket(_ server: TestServer) -> TestWatcher {
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }
        return publisher
    }

    func testACancelRequestReachesThePublishingSocketAndWatchersSeeItUntilTheAnswer() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=etl.*")
        watcher.waitForSnapshot()
        let publisher = publisherSocket(server)
        publisher.connection.send(#"{"type":"update","id":"etl.copy","title":"Copy","controls":["cancel","pause"],"staleAfter":30}"#)
        watcher.wait { $0.contains { $0.id == "etl.copy" } }
        let other = publisherSocket(server)

        let answer = try server.post("/api/tasks/etl.copy/cancel")
        XCTAssertEqual(answer["delivered"], .number(1))
        XCTAssertEqual(answer["task"]?["cancelRequested"], .bool(true))
        let control = try XCTUnwrap(publisher.wait { $0.contains { $0.type == "control" } }.first { $0.type == "control" })
        XCTAssertEqual(
            control.event,
            try JSONParser.parse(#"{"type":"control","id":"etl.copy","action":"cancel","seq":\#(Int(answer["seq"]!.numberValue!)),"by":"local"}"#))
        let marked = try XCTUnwrap(watcher.wait { $0.contains { $0.event["cancelRequested"] == .bool(true) } }.last)
        XCTAssertEqual(marked.type, "state")
        XCTAssertEqual(marked.string("state"), "running", "cancelling…: still running until the publisher answers")

        publisher.connection.send(#"{"type":"update","id":"etl.copy","state":"cancelled"}"#)
        let cancelled = try XCTUnwrap(watcher.wait { $0.contains { $0.string("state") == "cancelled" } }.last)
        XCTAssertNil(cancelled.event["cancelRequested"])
        XCTAssertFalse(other.received.contains { $0.type == "control" }, "a socket that never published the task hears nothing")

        let refused = try server.http().request("POST", "/api/tasks/etl.copy/cancel")
        XCTAssertEqual(refused.status, 409)
        XCTAssertTrue(refused.text.contains("already cancelled"), refused.text)
    }

    func testAPublisherThatDisconnectsStallsItsLeasedTasksAtOnce() throws {
        let server = try producerServer()
        let watcher = TestWatcher(server.wsURL + "?watch=svc.*")
        watcher.waitForSnapshot()
        let publisher = publisherSocket(server)
        publisher.connection.send(#"[{"type":"update","id":"svc.leased","staleAfter":600},{"type":"update","id":"svc.free"}]"#)
        watcher.wait { $0.contains { $0.id == "svc.free" } }
        let closedAt = nowMs()
        publisher.connection.close()
        let stalled = try XCTUnwrap(watcher.wait { $0.contains { $0.id == "svc.leased" && $0.string("state") == "stalled" } }.last)
        XCTAssertLessThan(stalled.at - closedAt, 60_000, "at once, not when its ten-minute lease runs out")
        XCTAssertEqual(try server.task("svc.free")?["state"], .string("running"), "a task without a lease is left as it is")
    }

    func testAControlRequestReachesASocketWhoseAuthMessageReplacedItsSubscription() throws {
        let token = "w-publisher-token-0123456789"
        let server = try producerServer {
            $0.access = AccessPolicy(publishers: [.publisher(name: "w", token: token, patterns: WatchSet([Glob("w.*")]))], anonymousRead: .nobody)
        }
        // No token: hello and the error, no snapshot; its `auth` starts it over in the fan-out
        // with a new subscription, while where its control requests go was set as it opened.
        let socket = TestWatcher(server.wsURL + "?watch=w.*")
        socket.wait { $0.contains { $0.type == "error" } }
        socket.connection.send(#"{"type":"auth","token":"\#(token)"}"#)
        socket.wait { $0.contains { $0.type == "snapshot" } }
        socket.connection.send(#"{"type":"update","id":"w.job","controls":["cancel"]}"#)
        socket.wait { $0.contains { $0.id == "w.job" } }

        let asked = try server.http().request("POST", "/api/tasks/w.job/cancel", json: "{}", headers: [("Authorization", "Bearer \(token)")])
        XCTAssertEqual(asked.status, 200, asked.text)
        XCTAssertEqual(try JSONParser.parse(asked.body)["delivered"], .number(1))
        let control = try XCTUnwrap(socket.wait { $0.contains { $0.type == "control" } }.first { $0.type == "control" })
        XCTAssertEqual(control.string("action"), "cancel")
        XCTAssertEqual(control.id, "w.job")
    }

    func testAPendingRequestReachesAPublisherThatConnectsLater() throws {
        let server = try producerServer()
        try server.post("/api/tasks/late.job", #"{"controls":["pause","resume"]}"#)
        XCTAssertEqual(try server.post("/api/tasks/late.job/pause")["delivered"], .number(0))
        let publisher = publisherSocket(server)
        publisher.connection.send(#"{"type":"update","id":"late.job","progress":0.1}"#)
        let control = try XCTUnwrap(publisher.wait { $0.contains { $0.type == "control" } }.first { $0.type == "control" })
        XCTAssertEqual(control.string("action"), "pause")
    }
}
