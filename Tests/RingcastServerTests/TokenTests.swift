import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

final class TokenTests: XCTestCase {
    let ciToken = "ci-token-0123456789abcdef"
    let deployToken = "deploy-token-0123456789abcdef"

    /// A server configured from real config.json text, the CI token taken from the environment.
    private func securedServer(anonymousLocal: Bool) throws -> TestServer {
        setenv("RINGCAST_TEST_CI_TOKEN", ciToken, 1)
        let text = """
            {"anonymousLocalPublish": \(anonymousLocal), "publishers": [
              {"name": "ci", "tokenEnv": "RINGCAST_TEST_CI_TOKEN", "patterns": ["ci.*"]},
              {"name": "deploy", "token": "\(deployToken)", "patterns": ["deploy.*", "release"]}
            ]}
            """
        let parsed = try ServerConfig.parse(Array(text.utf8), environment: ProcessInfo.processInfo.environment)
        return try TestServer { $0.access = parsed.access }
    }

    private func bearer(_ token: String) -> [(String, String)] { [("Authorization", "Bearer \(token)")] }

    func testMissingOrWrongTokenIs401AndAnUncoveredIdIs403() throws {
        let server = try securedServer(anonymousLocal: false)
        let client = server.http()
        let missing = try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.1}"#)
        XCTAssertEqual(missing.status, 401)
        XCTAssertEqual(try JSONParser.parse(missing.body)["error"], .string("unauthorized"))
        let wrong = try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.1}"#, headers: bearer("not-the-token-at-all-000"))
        XCTAssertEqual(wrong.status, 401)
        let uncovered = try client.request("POST", "/api/tasks/deploy.web", json: #"{"progress":0.1}"#, headers: bearer(ciToken))
        XCTAssertEqual(uncovered.status, 403)
        let body = try JSONParser.parse(uncovered.body)
        XCTAssertEqual(body["error"], .string("forbidden"))
        XCTAssertEqual(body["field"], .string("id"))

        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build", json: #"{"progress":0.1}"#, headers: bearer(ciToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/release", json: "{}", headers: bearer(deployToken)).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.build/hide", json: "{}", headers: bearer(deployToken)).status, 403)
        XCTAssertEqual(try client.request("DELETE", "/api/tasks/ci.build").status, 401)
        XCTAssertEqual(try client.request("POST", "/api/timers/ci.t", json: #"{"seconds":5}"#, headers: bearer(ciToken)).status, 200)

        // A batch is all or nothing: one uncovered id refuses the lot.
        let batch = try client.request(
            "POST", "/api/events", json: #"[{"type":"update","id":"ci.a"},{"type":"update","id":"deploy.b"}]"#, headers: bearer(ciToken))
        XCTAssertEqual(batch.status, 403)
        XCTAssertEqual(try JSONParser.parse(batch.body)["field"], .string("events[1].id"))
        XCTAssertEqual(try client.request("GET", "/api/tasks/ci.a").status, 404)

        // Reading needs no token.
        XCTAssertEqual(try client.request("GET", "/api/tasks").status, 200)
    }

    /// The protocol names `Authorization: Bearer TOKEN` only: a bare token (once taken) or another
    /// scheme is a 401 that says how to write it, even where loopback may publish without one, and
    /// sign-in refuses it the same way.
    func testATokenWithoutBearerIsRefusedWithHowToWriteIt() throws {
        let server = try securedServer(anonymousLocal: true)
        let client = server.http()
        for header in [ciToken, "Basic \(ciToken)", "Bearer ", "Token \(ciToken)"] {
            for (method, path, body) in [
                ("POST", "/api/tasks/ci.bare", #"{"progress":0.5}"#), ("GET", "/api/tasks", ""), ("POST", "/api/session", ""),
            ] {
                let refused = try client.request(method, path, body: Array(body.utf8), headers: [("Authorization", header)])
                XCTAssertEqual(refused.status, 401, "\(method) \(path) with Authorization: \(header)")
                let error = try JSONParser.parse(refused.body)
                XCTAssertEqual(error["error"], .string("unauthorized"))
                XCTAssertEqual(error["field"], .string("Authorization"))
                guard case .string(let message)? = error["message"] else { return XCTFail("no message") }
                XCTAssertTrue(message.contains("\"Bearer <token>\""), message)
            }
        }
        XCTAssertNil(try server.task("ci.bare"), "nothing was published with a refused header")
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.bare", json: "{}", headers: [("Authorization", "bearer  \(ciToken)")]).status, 200)

        let upgrade = TestWatcher(server.wsURL + "?mode=publish", headers: [("Authorization", ciToken)])
        let refusal = upgrade.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }
        XCTAssertEqual(refusal?.string("field"), "Authorization")
        XCTAssertTrue(upgrade.waitForClose(), "a bare token on the upgrade closes the socket, as any token that does not hold")
    }

    func testLoopbackPublishesWithoutATokenWhileAnonymousLocalPublishIsOn() throws {
        let server = try securedServer(anonymousLocal: true)
        let client = server.http()
        XCTAssertEqual(try client.request("POST", "/api/tasks/anything.at.all", json: "{}").status, 200)
        // A token that is presented is still checked.
        XCTAssertEqual(try client.request("POST", "/api/tasks/x", json: "{}", headers: bearer("wrong-token-0000000000")).status, 401)
        XCTAssertEqual(try client.request("POST", "/api/tasks/deploy.x", json: "{}", headers: bearer(ciToken)).status, 403)
        XCTAssertTrue(isLoopbackAddress("127.0.0.1"))
        XCTAssertTrue(isLoopbackAddress("127.3.2.1"))
        XCTAssertTrue(isLoopbackAddress("::1"))
        XCTAssertTrue(isLoopbackAddress("::ffff:127.0.0.1"))
        XCTAssertFalse(isLoopbackAddress("10.0.0.7"))
        XCTAssertFalse(isLoopbackAddress("::ffff:192.168.1.2"))
    }

    func testWebSocketPublishingNeedsATokenFromTheHeaderOrAnAuthMessage() throws {
        let server = try securedServer(anonymousLocal: false)
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()

        let anonymous = TestWatcher(server.wsURL)
        anonymous.waitForSnapshot()
        anonymous.connection.send(#"{"type":"update","id":"ci.x","progress":0.5}"#)
        let refused = anonymous.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }!
        XCTAssertEqual(refused.string("error"), "unauthorized")
        XCTAssertFalse(anonymous.closed, "a refused event does not disconnect")

        let withHeader = TestWatcher(server.wsURL, headers: bearer(ciToken))
        withHeader.waitForSnapshot()
        withHeader.connection.send(#"[{"type":"update","id":"ci.x","progress":0.5},{"type":"update","id":"deploy.y","progress":0.5}]"#)
        let errors = withHeader.wait { $0.contains { $0.type == "error" } }.filter { $0.type == "error" }
        XCTAssertEqual(errors.first?.string("error"), "forbidden")
        XCTAssertEqual(errors.first?.string("field"), "events[1].id")
        watcher.wait { $0.contains { $0.id == "ci.x" } }

        anonymous.connection.send(#"{"type":"auth","token":"\#(deployToken)"}"#)
        let ok = anonymous.wait { $0.contains { $0.type == "auth" } }.first { $0.type == "auth" }!
        XCTAssertEqual(ok.string("publisher"), "deploy")
        anonymous.connection.send(#"{"type":"update","id":"deploy.y","progress":0.25}"#)
        watcher.wait { $0.contains { $0.id == "deploy.y" } }
        XCTAssertFalse(watcher.received.contains { $0.id == "ci.x" && $0.number("progress") != 0.5 })
    }

    func testConfigErrorsNameThePublisherField() {
        func message(_ text: String, _ environment: [String: String] = [:]) -> String {
            do {
                _ = try ServerConfig.parse(Array(text.utf8), environment: environment)
                return "accepted"
            } catch {
                return error.description
            }
        }
        XCTAssertTrue(message(#"{"publishers":[{"name":"ci","tokenEnv":"NOPE_NOT_SET","patterns":["ci.*"]}]}"#).contains("publishers[0].tokenEnv"))
        XCTAssertTrue(message(#"{"publishers":[{"name":"ci","token":"short","patterns":["ci.*"]}]}"#).contains("shorter than 16"))
        XCTAssertTrue(message(#"{"publishers":[{"name":"ci","token":"0123456789abcdef0","patterns":[]}]}"#).contains("publishers[0].patterns"))
        XCTAssertTrue(message(#"{"publishers":[{"token":"0123456789abcdef0","patterns":["a"]}]}"#).contains("\"name\""))
        XCTAssertEqual(message(#"{"publishers":[{"name":"ci","tokenEnv":"T","patterns":["ci.*"]}]}"#, ["T": "0123456789abcdef0"]), "accepted")
        XCTAssertTrue(message(#"{"anonymousLocalPublish":"yes"}"#).contains("anonymousLocalPublish"))
        // Readers, signed tokens and proxies: what the server would not carry out is refused.
        let token = "0123456789abcdef0"
        let reader = #"{"name":"r","token":"\#(token)","patterns":["a.*"]}"#
        XCTAssertTrue(message(#"{"readers":[{"name":"r","token":"\#(token)","patterns":["a.*"],"maxTasks":3}]}"#).contains("publishes nothing"))
        XCTAssertTrue(
            message(#"{"readers":[\#(reader)],"publishers":[{"name":"r","token":"x\#(token)","patterns":["a.*"]}]}"#).contains("used twice"))
        XCTAssertTrue(
            message(#"{"readers":[\#(reader)],"publishers":[{"name":"p","token":"\#(token)","patterns":["a.*"]}]}"#).contains("another entry's"))
        XCTAssertTrue(message(#"{"readers":[{"name":"local","token":"\#(token)","patterns":["a.*"]}]}"#).contains("server's own"))
        XCTAssertTrue(message(#"{"publishers":[{"name":"p","token":"\#(token)","patterns":["a.*"],"maxTasks":20000}]}"#).contains("maxTasks"))
        XCTAssertTrue(message(#"{"anonymousRead":"everyone"}"#).contains("anonymousRead"))
        XCTAssertTrue(message(#"{"tokenSecretEnv":"NOPE"}"#).contains("NOPE is not set"))
        XCTAssertTrue(message(#"{"tokenSecretEnv":"K"}"#, ["K": "short"]).contains("shorter than 32"))
        XCTAssertTrue(message(#"{"trustedProxies":["proxy.example"]}"#).contains("trustedProxies"))
        let good = #"{"anonymousRead":["public.*"],"trustedProxies":["::1"],"tokenSecretEnv":"K"}"#
        XCTAssertEqual(message(good, ["K": String(repeating: "k", count: 32)]), "accepted")
    }
}
