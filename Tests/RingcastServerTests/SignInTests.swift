import Foundation
import RingcastCore
import RingcastCrypto
import RingcastTestSupport
import XCTest

/// Signing in trades a token for a cookie: a token up to what a browser keeps in a cookie signs
/// in, and is then accepted from the cookie; a longer one is refused with the reason, and never
/// goes unanswered.
final class SignInTests: XCTestCase {
    func testATokenUpToTheCookieLimitSignsInAndALongerOneIsRefusedWithAReason() throws {
        let fits = String(repeating: "f", count: API.maxSignInTokenBytes)
        let tooLong = String(repeating: "t", count: API.maxSignInTokenBytes + 1)
        let server = try TestServer {
            $0.access = AccessPolicy(
                readers: [
                    .reader(name: "long", token: fits, patterns: WatchSet([Glob("*")])),
                    .reader(name: "longer", token: tooLong, patterns: WatchSet([Glob("*")])),
                ], anonymousRead: .nobody)
        }
        let client = server.http()
        let signedIn = try client.request("POST", "/api/session", json: #"{"token":"\#(fits)"}"#)
        XCTAssertEqual(signedIn.status, 200, signedIn.text)
        XCTAssertEqual(signedIn.headers["set-cookie"]?.hasPrefix("ringcast_token=\(fits); Path=/"), true)
        XCTAssertEqual(try client.request("GET", "/api/tasks").status, 401, "nobody reads without a token here")
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("Cookie", "ringcast_token=\(fits)")]).status, 200)

        let refused = try client.request("POST", "/api/session", json: #"{"token":"\#(tooLong)"}"#)
        XCTAssertEqual(refused.status, 400, refused.text)
        let error = try JSONParser.parse(refused.body)
        XCTAssertEqual(error["field"], .string("token"))
        XCTAssertTrue(refused.text.contains("Authorization: Bearer"), refused.text)
        XCTAssertNil(refused.headers["set-cookie"])
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("Authorization", "Bearer \(tooLong)")]).status, 200, "the header takes it")
    }
    /// Signing out refuses the signed token the cookie held from then on, as a cookie and as a
    /// header alike, until its exp; a config entry's token is the entry's, and stays good.
    func testSigningOutRefusesTheSignedTokenItSignedInWith() throws {
        let secret = "signing-key-for-tests-0123456789abcdef"
        let readerToken = "reader-token-0123456789"
        let text = #"{"tokenSecretEnv": "K", "anonymousRead": false, "readers": [{"name": "r", "token": "\#(readerToken)", "patterns": ["*"]}]}"#
        let parsed = try ServerConfig.parse(Array(text.utf8), environment: ["K": secret])
        let server = try TestServer { $0.access = parsed.access }
        let client = server.http()
        let claims = #"{"sub":"alice","exp":\#(PyJWT.seconds(from: 600)),"ringcast":{"read":["*"],"publish":[]}}"#
        let minted = try PyJWT.encode([.init(claims, secret: secret), .init(claims.replacingOccurrences(of: "alice", with: "bob"), secret: secret)])
        let (token, other) = (minted[0], minted[1])
        let cookie = [("Cookie", "ringcast_token=\(token)")]
        XCTAssertEqual(try client.request("POST", "/api/session", json: #"{"token":"\#(token)"}"#).status, 200)
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: cookie).status, 200)

        XCTAssertEqual(try client.request("DELETE", "/api/session", headers: cookie).status, 200)
        let refused = try client.request("GET", "/api/tasks", headers: cookie)
        XCTAssertEqual(refused.status, 401)
        XCTAssertTrue(refused.text.contains("signed out"), refused.text)
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("Authorization", "Bearer \(token)")]).status, 401, "as a header too")
        XCTAssertEqual(try client.request("POST", "/api/session", json: #"{"token":"\#(token)"}"#).status, 401, "nor signs in again")
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: [("Cookie", "ringcast_token=\(other)")]).status, 200, "another token holds")

        let entry = [("Cookie", "ringcast_token=\(readerToken)")]
        XCTAssertEqual(try client.request("DELETE", "/api/session", headers: entry).status, 200)
        XCTAssertEqual(try client.request("GET", "/api/tasks", headers: entry).status, 200, "an entry's token is not the session's to revoke")
    }

    func testTheSignedOutListIsBoundedAndForgetsWhatExpired() {
        // No server here to install the process's Cryptography, which the list hashes tokens with.
        Crypto.installIfAbsent(LibCrypto())
        let list = SignedOutTokens()
        list.add("gone-soon", until: 2_000, now: 1_000)
        XCTAssertTrue(list.contains("gone-soon", now: 1_500))
        XCTAssertFalse(list.contains("gone-soon", now: 2_000), "refused anyway once expired")
        list.add("already-expired", until: 900, now: 1_000)
        XCTAssertFalse(list.contains("already-expired", now: 1_000))
        for index in 0..<(SignedOutTokens.capacity + 10) { list.add("token-\(index)", until: 10_000 + Double(index), now: 2_500) }
        XCTAssertEqual(list.count, SignedOutTokens.capacity)
        XCTAssertTrue(list.contains("token-\(SignedOutTokens.capacity + 9)", now: 2_500), "the newest kept")
        XCTAssertFalse(list.contains("token-0", now: 2_500), "the soonest to expire went first")
    }
}

/// The sign-in at an identity provider is in the route table, so in the OpenAPI document, though the
/// server answers it ahead of the API: a server with a provider answers each of its routes with a
/// status the document lists for it (none a 404 or a 405), and another method with 405 and the
/// table's Allow.
final class SignInRouteTests: XCTestCase {
    func testEverySignInRouteOfTheTableIsAnsweredAsDocumented() throws {
        // Nothing listens on port 1: the provider's discovery fails at once, which login answers 502.
        let server = try TestServer { $0.oidc = [IdentityProviderSettings(issuer: "https://127.0.0.1:1/", clientId: "ringcast")] }
        let client = server.http()
        let routes = Routes.table.filter(\.handler.isSignIn)
        XCTAssertEqual(routes.count, 4)
        for route in routes {
            for method in route.methods {
                let response = try client.request(method, route.path)
                XCTAssertFalse([404, 405].contains(response.status), "\(method) \(route.path): \(response.status) \(response.text)")
                let documented = OpenAPI.document["paths"]?[route.path]?[method.lowercased()]?["responses"]?[String(response.status)]
                XCTAssertNotNil(documented, "\(method) \(route.path) answered \(response.status), which the document does not list")
            }
            let refused = try client.request("DELETE", route.path)
            XCTAssertEqual(refused.status, 405, "DELETE \(route.path): \(refused.text)")
            XCTAssertEqual(refused.headers["allow"], route.allow, "DELETE \(route.path)")
        }
    }

    /// Without a provider the steps are not found, but a method they never take is still a 405
    /// with the table's `Allow`, as with one.
    func testWithoutAProviderTheStepsAre404AndOtherMethods405() throws {
        let server = try TestServer()
        let client = server.http()
        for route in Routes.table.filter(\.handler.isSignIn) {
            let answer = try client.request("GET", route.path)
            XCTAssertEqual(answer.status, route.handler == .signIn(.providers) ? 200 : 404, "GET \(route.path): \(answer.text)")
            let refused = try client.request("POST", route.path)
            XCTAssertEqual(refused.status, 405, "POST \(route.path): \(refused.text)")
            XCTAssertEqual(refused.headers["allow"], route.allow, "POST \(route.path)")
        }
    }
}
