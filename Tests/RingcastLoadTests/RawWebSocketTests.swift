import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// The load tester's watchers read their own frames (`readsFramesItself`): the same events as
/// through lws's parser, whole messages from fragments, the server's close code, and masked frames
/// the server takes. A real server on loopback.
final class RawWebSocketTests: XCTestCase {
    func testFramesReadWholeFromFragmentsAndSentMaskedReachTheServerLikeLWSsOwn() throws {
        let server = try TestServer { $0.publicDir = emptyPublicDirectory }
        // 150 tasks of about a kilobyte: the snapshot passes 64 KiB and leaves in fragments.
        let detail = String(repeating: "x", count: 990)
        for index in 0..<150 { try server.post("/api/tasks/big.\(index)", "{\"detail\":\"\(detail)\"}") }
        let context = try WebSocketClientContext(readsFramesItself: true)
        defer { context.shutdown() }

        let watcher = TestWatcher(server.wsURL, context: context)
        let (hello, snapshot) = watcher.waitForSnapshot()
        XCTAssertEqual(hello.type, "hello")
        guard case .array(let tasks)? = snapshot.event["tasks"] else { return XCTFail("no tasks in \(snapshot.event)") }
        XCTAssertEqual(tasks.count, 150, "the whole snapshot, its fragments joined")
        XCTAssertGreaterThan(JSONWriter.encode(snapshot.event).count, 65_536)
        try server.post("/api/tasks/big.7", "{\"progress\":0.5}")
        let events = watcher.wait { $0.contains { $0.type == "progress" && $0.id == "big.7" } }
        XCTAssertEqual(events.last?.number("progress"), 0.5)

        // A client's frames are masked: a publish-only socket's update is taken by the server.
        let publisher = TestWatcher(server.wsURL + "?mode=publish", context: context)
        publisher.wait { $0.contains { $0.type == "hello" } }
        publisher.connection.send(#"{"type":"update","id":"raw.sent","progress":0.25}"#)
        let deadline = Date().addingTimeInterval(5)
        while try server.task("raw.sent") == nil, Date() < deadline { usleep(10_000) }
        XCTAssertEqual(try server.task("raw.sent")?["progress"], .number(0.25))

        // The server's close frame: its code, as lws's own parser reports it.
        let refused = TestWatcher(server.wsURL + "?watch=ci.%2F", context: context)
        XCTAssertTrue(refused.waitForClose())
        XCTAssertEqual(refused.received.first { $0.type == "error" }?.string("error"), "invalid_pattern")
        XCTAssertEqual(refused.connection.peerCloseCode, 1008)

        // Closed from this side: the delegate hears of it, with no error.
        watcher.connection.close()
        XCTAssertTrue(watcher.waitForClose())
        XCTAssertNil(watcher.closeError)
    }
}
