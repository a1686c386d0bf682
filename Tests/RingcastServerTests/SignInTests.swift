import Foundation
import RingcastCore
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
}
