import Foundation
import Ringcast
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// `controlRequests`: what the server carries back to the client that published a task.
final class ControlRequestTests: XCTestCase {
    func testACancelRequestArrivesOnControlRequests() async throws {
        let server = try producerServer()
        try server.post("/api/tasks/svc.copy", #"{"controls":["cancel","pause","resume"]}"#)
        let rc = try RingcastClient(url: server.httpURL)
        let heard = Inbox<ControlRequest>()
        let listener = Task { for await request in rc.controlRequests { heard.append(contentsOf: [request]) } }
        try await rc.update("svc.copy", progress: 0.1)
        try await rc.flush(timeout: 5)
        // The update was written; once the server has applied it, the socket is the task's publisher.
        XCTAssertTrue(try eventually { try server.task("svc.copy")?["progress"] == .number(0.1) })
        let answer = try server.post("/api/tasks/svc.copy/cancel")
        XCTAssertEqual(answer["delivered"], .number(1))
        let requests = heard.wait { !$0.isEmpty }
        XCTAssertEqual(requests.first, ControlRequest(id: "svc.copy", action: .cancel, seq: UInt64(answer["seq"]!.numberValue!)))
        try await rc.update("svc.copy", state: .cancelled)
        await rc.close()
        _ = await listener.value
        XCTAssertEqual(try server.task("svc.copy")?["state"], .string("cancelled"))
    }
}

private extension JSONValue {
    var numberValue: Double? { if case let .number(n) = self { return n }; return nil }
}
