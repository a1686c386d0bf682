import XCTest

@testable import RingcastCore

final class HostPolicyTests: XCTestCase {
    func testOnlyOurOwnNamesPass() {
        let policy = HostPolicy(host: "127.0.0.1", allowedHosts: ["ringcast.example.com", ".corp.example"])
        for allowed in [
            "127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST", "localhost.", "app.localhost:3000",
            "127.1.2.3:80", "[::1]:8080", "[::1]", "ringcast.example.com", "RingCast.Example.COM:443",
            "corp.example", "dash.corp.example:8080",
        ] {
            XCTAssertTrue(policy.allows(allowed), allowed)
        }
        for refused in [
            "evil.example:8080", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example",
            "ringcast.example.com.evil.example", "notcorp.example", "10.0.0.1", "[fe80::1]:80", "",
            "127.0.0.1:80:80", "[::1", "a b", "127.0.0.256", "127.0.0", "evil.example:x",
        ] {
            XCTAssertFalse(policy.allows(refused), refused)
        }
        XCTAssertTrue(policy.allows(nil), "a request without Host is not a browser's")
    }

    func testTheConfiguredHostAndTheEscapeHatch() {
        XCTAssertTrue(HostPolicy(host: "dash.internal", allowedHosts: []).allows("dash.internal:8080"))
        XCTAssertTrue(HostPolicy(host: "::1", allowedHosts: []).allows("[::1]:8080"))
        XCTAssertTrue(HostPolicy(host: "0.0.0.0", allowedHosts: ["10.0.0.5"]).allows("10.0.0.5:8080"))
        XCTAssertFalse(HostPolicy(host: "0.0.0.0", allowedHosts: []).allows("10.0.0.5:8080"), "an address to bind is not a name to answer to")
        XCTAssertTrue(HostPolicy(host: "127.0.0.1", allowedHosts: ["*"]).allows("anything.example"))
    }

    func testTheRebindingPairGets421BeforeAnyRouting() {
        let api = API(store: TaskStore(epoch: "hostepoch"))
        let rebinding = RequestHeaders(host: "evil.example:8080", origin: "http://evil.example:8080")
        for method in ["POST", "DELETE"] {
            let response = api.handle(
                APIRequest(method: method, path: "/api/tasks/x", body: Array(#"{"progress":0.5}"#.utf8), headers: rebinding), now: t0)
            XCTAssertEqual(response.status, 421, method)
            XCTAssertEqual(json(response.body)["error"], .string("misdirected_request"))
            XCTAssertEqual(json(response.body)["field"], .string("Host"))
            XCTAssertTrue(text(response.body).contains("allowedHosts"))
        }
        XCTAssertEqual(api.handle(APIRequest(method: "GET", path: "/healthz", headers: rebinding), now: t0).status, 421)
        XCTAssertNil(api.store.task("x"), "nothing was published")
        XCTAssertThrowsError(try api.checkHost("evil.example"))
        XCTAssertNoThrow(try api.checkHost("localhost:8080"))
    }
}
