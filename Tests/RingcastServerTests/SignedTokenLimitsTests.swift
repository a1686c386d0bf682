import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Signed tokens a backend may well mint and the server must refuse with the reason, never carry
/// into a timer, a cookie or a date: times out of range (a "never expires" of 2^53 − 1, milliseconds
/// for seconds, 1e19, 1e308, −1e300), `crit`, members named twice, a `sub` that is someone else's
/// name; and the caps a token's `sub` holds to. Every token is minted by PyJWT.
final class SignedTokenLimitsTests: XCTestCase {
    private let secret = "signing-key-for-tests-0123456789abcdef"
    private let ciToken = "ci-token-0123456789abcdef"

    private func bearer(_ token: String) -> [(String, String)] { [("Authorization", "Bearer \(token)")] }

    /// Signed tokens accepted, nothing without a token, a publisher named `ci`, and `extra` settings.
    private func signedServer(extra: String = "") throws -> TestServer {
        let text = """
            {"tokenSecretEnv": "RINGCAST_TEST_TOKEN_SECRET", "anonymousRead": false, "anonymousLocalPublish": false,
             "publishers": [{"name": "ci", "token": "\(ciToken)", "patterns": ["ci.*"]}]\(extra)}
            """
        let parsed = try ServerConfig.parse(Array(text.utf8), environment: ["RINGCAST_TEST_TOKEN_SECRET": secret])
        return try TestServer {
            $0.access = parsed.access
            $0.maxTasks = parsed.maxTasks
        }
    }

    private func claims(sub: String = "deploy-bot", exp: String = "\(PyJWT.seconds(from: 600))", more: String = "", ringcast: String = "")
        -> String
    {
        #"{"sub":"\#(sub)","exp":\#(exp)\#(more),"ringcast":{"read":["*"],"publish":["a.*"]\#(ringcast)}}"#
    }

    /// The token is refused with 401 and `reason` in the message over HTTP (a publish), at sign-in
    /// (no cookie set), in the sign-in cookie, and on `/ws` (by header and by `auth` message).
    private func assertRefusedEverywhere(
        _ token: String, _ reasons: [String], on server: TestServer, _ name: String, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        func says(_ message: String) -> Bool { reasons.allSatisfy { message.contains($0) } }
        func assertUnauthorized(_ answer: HTTPResponse, _ surface: String) throws {
            XCTAssertEqual(answer.status, 401, "\(name), \(surface): \(answer.text)", file: file, line: line)
            let message = try JSONParser.parse(answer.body)["message"]?.stringValue ?? ""
            XCTAssertTrue(says(message), "\(name), \(surface): \(answer.text)", file: file, line: line)
        }
        let client = server.http()
        try assertUnauthorized(
            try client.request("POST", "/api/tasks/a.deploy-1", json: #"{"progress":0.5}"#, headers: bearer(token)), "publish")
        let signIn = try client.request("POST", "/api/session", json: #"{"token":"\#(token)"}"#)
        try assertUnauthorized(signIn, "sign-in")
        XCTAssertNil(signIn.headers["set-cookie"], "\(name): no cookie for a refused token", file: file, line: line)
        try assertUnauthorized(
            try client.request("GET", "/api/tasks", headers: [("Cookie", "\(AccessPolicy.cookieName)=\(token)")]), "cookie")

        let upgrade = TestWatcher(server.wsURL, headers: bearer(token))
        XCTAssertTrue(upgrade.waitForClose(), "\(name): /ws", file: file, line: line)
        XCTAssertEqual(upgrade.connection.peerCloseCode, Int(SocketClose.unauthorized), name, file: file, line: line)
        XCTAssertTrue(
            says(upgrade.connection.peerCloseReason), "\(name), /ws: \(upgrade.connection.peerCloseReason)", file: file, line: line)

        let message = TestWatcher(server.wsURL)
        message.wait { $0.contains { $0.type == "error" } }
        message.connection.send(#"{"type":"auth","token":"\#(token)"}"#)
        let events = message.wait(file: file, line: line) { $0.filter { $0.type == "error" }.count >= 2 }
        XCTAssertFalse(events.contains { $0.type == "snapshot" }, "\(name): auth message", file: file, line: line)
        let refusal = events.filter { $0.type == "error" }.last?.string("message") ?? ""
        XCTAssertTrue(says(refusal), "\(name), auth message: \(refusal)", file: file, line: line)
    }

    func testTokensWhoseTimesAreOutOfRangeAreRefusedWithTheReasonOnEverySurface() throws {
        let server = try signedServer()
        let now = "\(PyJWT.seconds(from: 0))"
        let cases: [(String, String, String)] = [
            ("exp 2^53 - 1", claims(exp: "9007199254740991"), #""exp" of 9"#),
            ("exp in milliseconds", claims(exp: "1e13"), #""exp" of 1"#),
            ("exp 1e19", claims(exp: "1e19"), #""exp" of 1e+19"#),
            ("nbf 1e308", claims(more: #","nbf":1e308"#), #""nbf" of 1e+308"#),
            ("exp -1e300", claims(exp: "-1e300"), #""exp" of -1e+300"#),
            ("iat 1e300", claims(more: #","iat":1e300"#), #""iat" of 1e+300"#),
            ("nbf a string", claims(more: #","nbf":"\#(now)""#), #""nbf" of string"#),
        ]
        let tokens = try PyJWT.encode(cases.map { PyJWT.Spec($0.1, secret: secret) })
        for ((name, _, reason), token) in zip(cases, tokens) {
            try assertRefusedEverywhere(token, [reason, "not a time from 1970 through 9999"], on: server, name)
        }
        // Still serving, and a token within range still holds.
        XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200)
        let good = try PyJWT.encode(claims(more: #","nbf":\#(now),"iat":\#(now)"#), secret: secret)
        XCTAssertEqual(
            try server.http().request("POST", "/api/tasks/a.deploy-1", json: #"{"progress":0.5}"#, headers: bearer(good)).status, 200)
        // A token that lasts until the end of 9999 holds, and its cookie's Max-Age is whole seconds until then.
        let lastYear = try PyJWT.encode(claims(exp: "253402300799"), secret: secret)
        let signIn = try server.http().request("POST", "/api/session", json: #"{"token":"\#(lastYear)"}"#)
        XCTAssertEqual(signIn.status, 200, signIn.text)
        let maxAge = signIn.headers["set-cookie"]?.split(separator: ";").first { $0.contains("Max-Age=") }
            .flatMap { Int($0.split(separator: "=").last ?? "") }
        XCTAssertGreaterThan(maxAge ?? 0, 250_000_000_000 - PyJWT.seconds(from: 0), signIn.headers["set-cookie"] ?? "no cookie")
        let watcher = TestWatcher(server.wsURL, headers: bearer(lastYear))
        watcher.waitForSnapshot()
        XCTAssertFalse(watcher.closed)
    }

    func testACritHeaderAMemberNamedTwiceOrASubThatIsSomeoneElsesNameIsRefused() throws {
        let server = try signedServer()
        let cases: [(String, PyJWT.Spec, String)] = [
            ("crit", PyJWT.Spec(claims(), secret: secret, headers: #"{"crit":["exp"]}"#), #"does not understand in its header's "crit" ("exp")"#),
            (
                "sub twice", PyJWT.Spec(claims(sub: "deploy-bot\",\"sub\":\"ops"), secret: secret, raw: true),
                #"its claims are not JSON (the member "sub" appears twice)"#
            ),
            (
                "exp twice", PyJWT.Spec(claims(exp: "\(PyJWT.seconds(from: -60)),\"exp\":\(PyJWT.seconds(from: 600))"), secret: secret, raw: true),
                #"the member "exp" appears twice"#
            ),
            ("sub local", PyJWT.Spec(claims(sub: "local"), secret: secret), "'local' is a name the server or config.json uses already"),
            ("sub server", PyJWT.Spec(claims(sub: "server"), secret: secret), "'server' is a name"),
            ("sub anonymous", PyJWT.Spec(claims(sub: "anonymous"), secret: secret), "'anonymous' is a name"),
            ("sub ci", PyJWT.Spec(claims(sub: "ci"), secret: secret), "'ci' is a name the server or config.json uses already"),
            ("sub CI", PyJWT.Spec(claims(sub: "CI"), secret: secret), "'CI' is a name"),
        ]
        let tokens = try PyJWT.encode(cases.map(\.1))
        for ((name, _, reason), token) in zip(cases, tokens) { try assertRefusedEverywhere(token, [reason], on: server, name) }

        // Nothing was published under those names; a token with a name of its own publishes under it.
        let own = try PyJWT.encode(claims(sub: "svc-ci"), secret: secret)
        let published = try server.http().request("POST", "/api/tasks/a.deploy-1", json: #"{"state":"done"}"#, headers: bearer(own))
        XCTAssertEqual(published.status, 200, published.text)
        XCTAssertEqual(try JSONParser.parse(published.body)["task"]?["by"], .string("svc-ci"))
    }

    func testASignedTokensSubHoldsAShareOfTheTasksAndItsOwnCapsWhenItCarriesThem() throws {
        // maxTasks 20: a sub without a claim holds a tenth, 2.
        let server = try signedServer(extra: #", "maxTasks": 20"#)
        let client = server.http()
        let tokens = try PyJWT.encode([
            PyJWT.Spec(claims(sub: "alice"), secret: secret),
            PyJWT.Spec(claims(sub: "bob"), secret: secret),
            PyJWT.Spec(claims(sub: "carol", ringcast: #","maxTasks":5,"maxConnections":1"#), secret: secret),
            PyJWT.Spec(claims(sub: "dave", ringcast: #","maxTasks":1e300"#), secret: secret),
            PyJWT.Spec(claims(sub: "erin", ringcast: #","maxConnections":2.5"#), secret: secret),
        ])
        func publish(_ id: String, _ token: String) throws -> HTTPResponse {
            try client.request("POST", "/api/tasks/\(id)", json: "{}", headers: bearer(token))
        }
        for index in 1...2 { XCTAssertEqual(try publish("a.alice-\(index)", tokens[0]).status, 200) }
        let third = try publish("a.alice-3", tokens[0])
        XCTAssertEqual(third.status, 409, third.text)
        XCTAssertTrue(third.text.contains("'alice' already holds 2 tasks"), third.text)
        XCTAssertTrue(third.text.contains("tokenMaxTasks"), third.text)
        // Another sub still has its share; one that carries maxTasks has that many.
        XCTAssertEqual(try publish("a.bob-1", tokens[1]).status, 200)
        for index in 1...5 { XCTAssertEqual(try publish("a.carol-\(index)", tokens[2]).status, 200, "carol \(index)") }
        XCTAssertEqual(try publish("a.carol-6", tokens[2]).status, 409)
        // A cap that is not a whole count is refused with the reason.
        for (token, claim) in [(tokens[3], "maxTasks"), (tokens[4], "maxConnections")] {
            let refused = try publish("a.x", token)
            XCTAssertEqual(refused.status, 401, refused.text)
            XCTAssertTrue(refused.text.contains("ringcast.\(claim) that is not a whole number from 1 to 10000000"), refused.text)
        }

        // maxConnections 1: a second WebSocket under carol is closed with 4429 naming her.
        let first = TestWatcher(server.wsURL, headers: bearer(tokens[2]))
        first.waitForSnapshot()
        let second = TestWatcher(server.wsURL, headers: bearer(tokens[2]))
        XCTAssertTrue(second.waitForClose())
        XCTAssertEqual(second.connection.peerCloseCode, Int(SocketClose.tooManyConnections))
        XCTAssertTrue(second.connection.peerCloseReason.contains("'carol'"), second.connection.peerCloseReason)
        XCTAssertFalse(first.closed)
    }

    func testTokenMaxTasksIsASettingWithinTheServersMaxTasks() throws {
        let config = try ServerConfig.parse(Array(#"{"maxTasks": 500, "tokenMaxTasks": 7}"#.utf8))
        XCTAssertEqual(config.access.tokenMaxTasks, 7)
        XCTAssertEqual(config.effectiveAccess.tokenMaxTasks, 7)
        XCTAssertEqual(try ServerConfig.parse(Array(#"{"maxTasks": 500}"#.utf8)).effectiveAccess.tokenMaxTasks, 50)
        XCTAssertEqual(ServerConfig().effectiveAccess.tokenMaxTasks, 1000)
        XCTAssertThrowsError(try ServerConfig.parse(Array(#"{"tokenMaxTasks": 0}"#.utf8))) {
            XCTAssertTrue("\($0)".contains("tokenMaxTasks"), "\($0)")
        }
    }
}
