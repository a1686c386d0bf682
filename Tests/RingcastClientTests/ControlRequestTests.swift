import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// Cancel, pause and resume requests, as the server sends them: fed here by a fake server on a
/// real socket, so the client is held to the protocol and not to one server's timing.
final class ControlRequestTests: XCTestCase {
    func testControlsTravelAloneAndRequestsArriveOnTheStream() async throws {
        let fake = try FakeServer()
        let rc = try RingcastClient(url: fake.url)
        let requests = Collector(rc.controlRequests)
        try await rc.update("ctl.job", progress: 0.1, title: "Job", controls: [.cancel, .pause, .cancel])
        try await rc.update("ctl.quiet", controls: [])
        try await rc.flush(timeout: 5)
        let sent = fake.received.filter { $0["type"] == .string("update") }
        XCTAssertEqual(sent.count, 3)
        XCTAssertEqual(sent[0]["progress"], .number(0.1))
        XCTAssertNil(sent[0]["controls"], "the progress goes without controls, so refusing them costs it nothing")
        XCTAssertEqual(sent[1]["id"], .string("ctl.job"))
        XCTAssertEqual(sent[1]["controls"], .array([.string("cancel"), .string("pause")]), "each action once, in order")
        XCTAssertEqual(sent[2]["controls"], .array([]))
        XCTAssertNil(sent[2]["progress"])

        fake.send(#"{"type":"control","id":"ctl.job","action":"explode","seq":811}"#)
        fake.send(#"{"type":"control","id":"ctl.job","action":"cancel","seq":812}"#)
        fake.send(#"[{"type":"control","id":"ctl.job","action":"pause","seq":813},{"type":"control","id":"ctl.job","action":"resume"}]"#)
        let got = requests.wait { $0.count >= 3 }
        XCTAssertEqual(
            got,
            [
                .init(id: "ctl.job", action: .cancel, seq: 812),
                .init(id: "ctl.job", action: .pause, seq: 813),
                .init(id: "ctl.job", action: .resume, seq: nil),
            ], "an action the client does not know is left out")
        await rc.close()
        XCTAssertTrue(requests.waitForFinish(), "close() finishes the stream")
    }

    func testAServerThatRefusesControlsIsToldOnceAndTheProgressStillApplies() async throws {
        let fake = try FakeServer()
        fake.refusesControls = true
        let rc = try RingcastClient(url: fake.url)
        let errors = Collector(rc.errors)
        try await rc.update("old.a", progress: 0.2, controls: [.cancel])
        try await rc.flush(timeout: 5)
        let refusals = errors.wait { !$0.isEmpty }
        guard case .server(let code, _, let field)? = refusals.first else { return XCTFail("\(refusals)") }
        XCTAssertEqual(code, "unknown_field")
        XCTAssertEqual(field?.hasSuffix("controls"), true, "\(String(describing: field))")
        try await rc.update("old.b", progress: 0.3, controls: [.cancel])
        try await rc.update("old.c", controls: [.pause])
        try await rc.flush(timeout: 5)
        let controls = fake.received.filter { $0["controls"] != nil }
        XCTAssertEqual(controls.count, 1, "no more controls go to a server that refused them: \(controls)")
        XCTAssertEqual(fake.received.filter { $0["progress"] != nil }.count, 2)
        XCTAssertEqual(errors.items.count, 1)
        await rc.close()
    }

    func testTheRealServerKeepsTheProgressOfAnUpdateThatOffersControls() async throws {
        // A server that did not know `controls` would refuse the field (one error); ours takes it (none).
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        let errors = Collector(rc.errors)
        try await rc.update("ctl.real", progress: 0.3, title: "Real", controls: [.cancel])
        try await rc.update("ctl.real", progress: 0.4, controls: [.cancel])
        try await rc.flush(timeout: 5)
        XCTAssertEqual(try server.task("ctl.real")?["progress"], .number(0.4))
        XCTAssertEqual(try server.task("ctl.real")?["title"], .string("Real"))
        await rc.close()
        XCTAssertTrue(errors.waitForFinish())
        let seen = errors.items
        XCTAssertLessThanOrEqual(seen.count, 1, "\(seen)")
        for error in seen {
            guard case .server(let code, _, let field) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, "unknown_field")
            XCTAssertEqual(field?.hasSuffix("controls"), true, "\(String(describing: field))")
        }
    }
}
