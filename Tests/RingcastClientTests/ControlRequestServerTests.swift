import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// `controlRequests` against the real server: `POST /api/tasks/{id}/cancel` reaches the client
/// that published the task.
final class ControlRequestServerTests: XCTestCase {
    func testACancelRequestArrivesOnControlRequests() async throws {
        let server = try producerServer()
        try server.post("/api/tasks/svc.copy", #"{"controls":["cancel","pause","resume"]}"#)
        let rc = try RingcastClient(url: server.httpURL)
        let heard = Inbox<RingcastClient.ControlRequest>()
        let listener = Task { for await request in rc.controlRequests { heard.append(contentsOf: [request]) } }
        try await rc.update("svc.copy", progress: 0.1)
        try await rc.flush(timeout: 5)
        // Flushed and kept: the socket is the task's publisher now.
        XCTAssertEqual(try server.task("svc.copy")?["progress"], .number(0.1))
        let answer = try server.post("/api/tasks/svc.copy/cancel")
        XCTAssertEqual(answer["delivered"], .number(1))
        let requests = heard.wait { !$0.isEmpty }
        XCTAssertEqual(requests.first?.id, "svc.copy")
        XCTAssertEqual(requests.first?.action, .cancel)
        XCTAssertEqual(requests.first?.seq.map(Double.init), answer["seq"]?.numberValue)
        try await rc.update("svc.copy", state: .cancelled)
        await rc.close()
        listener.cancel()
        XCTAssertEqual(try server.task("svc.copy")?["state"], .string("cancelled"))
    }
}
