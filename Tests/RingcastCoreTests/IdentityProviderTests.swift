import RingcastCrypto
import Synchronization
import XCTest

@testable import RingcastCore

/// config.json's `oidc`, `proxyAuth` and `groups`, and what the core decides of a provider's token
/// before and after its signature: the order of the checks, the key cache per issuer and `kid`,
/// and the refetch window. The signature itself is libcrypto's (the server's tests and
/// Tests/browser/test_oidc.py check real RS256 and ES256 tokens); here a stand-in accepts the
/// signature `good` so that the checks around it can be reached one by one.
final class IdentityProviderTests: XCTestCase {
    private func parse(_ text: String, environment: [String: String] = [:]) throws -> ServerConfig {
        try ServerConfig.parse(Array(text.utf8), source: "test.json", environment: environment)
    }

    private func assertRefused(_ text: String, saying fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(text), "accepted \(text)", file: file, line: line) { error in
            let message = (error as? ConfigError)?.description ?? ""
            XCTAssertTrue(message.contains(fragment), "\(message) should say \(fragment)", file: file, line: line)
        }
    }

    func testAProviderIsReadWithItsDefaultsAndGroupsMapToEntries() throws {
        let config = try parse(
            #"""
            {"oidc": {"issuer": "https://id.example.com/", "clientId": "ringcast", "clientSecretEnv": "SECRET", "groupsClaim": "realm_access.roles"},
             "readers": [{"name": "team-a", "groups": ["team-a"], "patterns": ["a.*"]}]}
            """#, environment: ["SECRET": "s3cret"])
        let provider = try XCTUnwrap(config.oidc.first)
        XCTAssertEqual(provider.issuer, "https://id.example.com", "a trailing slash is not part of the issuer")
        XCTAssertEqual(provider.audience, ["ringcast"])
        XCTAssertEqual(provider.algorithms, ["RS256", "PS256", "ES256"])
        XCTAssertEqual(provider.clientSecret, "s3cret")
        XCTAssertEqual(provider.groupsClaim, ["realm_access", "roles"])
        XCTAssertEqual(config.access.readers.first?.groups, ["team-a"])
        XCTAssertEqual(config.access.readers.first?.hasToken, false)
    }

    func testSettingsThatWouldWeakenTheChecksAreRefusedWithTheReason() {
        assertRefused(#"{"oidc": {"issuer": "https://id", "clientId": "c", "algorithms": ["none"]}}"#, saying: "never accepted")
        assertRefused(#"{"oidc": {"issuer": "https://id", "clientId": "c", "algorithms": ["HS256"]}}"#, saying: "HMAC algorithm")
        assertRefused(#"{"oidc": {"issuer": "http://id.example.com", "clientId": "c"}}"#, saying: "http:// only on loopback")
        assertRefused(#"{"oidc": {"issuer": "https://id"}}"#, saying: "needs \"clientId\"")
        assertRefused(#"{"oidc": {"issuer": "https://id", "clientId": "c", "nonsense": 1}}"#, saying: "has no setting \"nonsense\"")
        assertRefused(#"{"proxyAuth": {"userHeader": "X-Auth-Request-User"}}"#, saying: "trustedProxies")
        assertRefused(#"{"readers": [{"name": "a", "groups": ["g"], "patterns": ["a.*"]}]}"#, saying: "neither \"oidc\" nor \"proxyAuth\"")
        assertRefused(#"{"readers": [{"name": "a", "patterns": ["a.*"]}]}"#, saying: "or \"groups\"")
        XCTAssertNoThrow(try parse(#"{"oidc": {"issuer": "http://127.0.0.1:9000", "clientId": "c"}}"#))
        XCTAssertNoThrow(try parse(#"{"oidc": {"issuer": "http://[::1]:9000", "clientId": "c"}}"#))
    }

    // Tokens

    private final class Fetcher: ProviderKeyFetching, @unchecked Sendable {
        let keys = Mutex<[String: [JSONWebKey]]>([:])
        let fetches = Mutex<[String]>([])
        func fetchKeys(for provider: IdentityProviderSettings) -> Result<[JSONWebKey], ProviderFetchError> {
            fetches.withLock { $0.append(provider.issuer) }
            return .success(keys.withLock { $0[provider.issuer] ?? [] })
        }
    }

    /// libcrypto's, but for the signature: `good:KID` signs anything under the key KID.
    private struct Signatures: Cryptography {
        let real = LibCrypto()
        func sha256(_ bytes: [UInt8]) -> [UInt8] { real.sha256(bytes) }
        func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] { real.hmacSHA256(key: key, message: message) }
        func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool { real.constantTimeEqual(a, b) }
        func randomBytes(count: Int) -> [UInt8] { real.randomBytes(count: count) }
        func verify(_ algorithm: SignatureAlgorithm, publicKey: JSONWebKey, message: [UInt8], signature: [UInt8]) -> Bool {
            signature == Array("good:\(publicKey.keyID ?? "")".utf8)
        }
    }

    private static func key(_ kid: String) -> JSONWebKey {
        JSONWebKey(material: .rsa(modulus: [UInt8](repeating: 0xC3, count: 256), exponent: [1, 0, 1]), keyID: kid)
    }

    override func setUp() { Crypto.install(Signatures()) }
    override func tearDown() { installCryptography() }

    private func token(_ header: JSONValue, _ claims: JSONValue, signedBy kid: String) -> String {
        [JSONWriter.encode(header), JSONWriter.encode(claims), Array("good:\(kid)".utf8)].map(Base64URL.encode).joined(separator: ".")
    }

    private let now = 1_800_000_000_000.0
    private let issuerA = "https://a.example.com"
    private let issuerB = "https://b.example.com"

    private func claims(iss: String? = nil, aud: String = "ringcast", exp: Double? = nil, extra: [(String, JSONValue)] = []) -> JSONValue {
        .object(
            [
                ("iss", .string(iss ?? issuerA)), ("sub", .string("u1")), ("aud", .string(aud)), ("exp", .number(exp ?? (now / 1000 + 300))),
                ("iat", .number(now / 1000)), ("preferred_username", .string("alice")),
                ("realm_access", .object([("roles", .array([.string("team-a")]))])),
            ] + extra)
    }

    private func setUp(refetchSeconds: Double = 60) -> (IdentityProviders, Fetcher) {
        let fetcher = Fetcher()
        fetcher.keys.withLock { $0 = [issuerA: [Self.key("a1")], issuerB: [Self.key("b1")]] }
        let settings = [issuerA, issuerB].map {
            IdentityProviderSettings(issuer: $0, clientId: "ringcast", groupsClaim: "realm_access.roles", keysRefetchSeconds: refetchSeconds)
        }
        return (IdentityProviders(settings, fetcher: fetcher), fetcher)
    }

    private func assertRefused(
        _ providers: IdentityProviders, _ token: String, saying fragment: String, at time: Double? = nil, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        switch providers.verify(token, now: time ?? now) {
        case .success(let identity): XCTFail("accepted, as \(identity)", file: file, line: line)
        case .failure(let error):
            XCTAssertEqual(error.status, 401, file: file, line: line)
            XCTAssertTrue(error.message.contains(fragment), "\(error.message) should say \(fragment)", file: file, line: line)
        }
    }

    func testAGoodTokenNamesThePersonAndTheGroupsAtTheClaimsPath() throws {
        let (providers, _) = setUp()
        let identity = try providers.verify(token(.object([("alg", .string("RS256")), ("kid", .string("a1"))]), claims(), signedBy: "a1"), now: now)
            .get()
        XCTAssertEqual(identity.name, "alice")
        XCTAssertEqual(identity.groups, ["team-a"])
        XCTAssertEqual(identity.issuer, issuerA)
        XCTAssertEqual(identity.expiresAt, now + 360_000, "exp and the leeway, well before the session's maximum")
    }

    func testEachBadTokenIsRefusedWithItsReason() {
        let (providers, _) = setUp()
        let header: JSONValue = .object([("alg", .string("RS256")), ("kid", .string("a1"))])
        assertRefused(providers, token(.object([("alg", .string("none")), ("kid", .string("a1"))]), claims(), signedBy: "a1"), saying: "alg none")
        assertRefused(providers, token(.object([("alg", .string("HS256")), ("kid", .string("a1"))]), claims(), signedBy: "a1"), saying: "HMAC")
        assertRefused(providers, token(header, claims(iss: "https://evil.example.com"), signedBy: "a1"), saying: "not a provider this server trusts")
        assertRefused(providers, token(header, claims(aud: "other"), signedBy: "a1"), saying: "is meant for \"other\"")
        assertRefused(providers, token(header, claims(exp: now / 1000 - 61), signedBy: "a1"), saying: "expired at")
        assertRefused(providers, token(header, claims(extra: [("nbf", .number(now / 1000 + 61))]), signedBy: "a1"), saying: "not valid before")
        assertRefused(providers, token(header, claims(), signedBy: "someone"), saying: "wrong signature")
        // Within the leeway (60 s) a clock a little off still holds.
        XCTAssertNoThrow(try providers.verify(token(header, claims(exp: now / 1000 - 30), signedBy: "a1"), now: now).get())
    }

    func testIssuerBsKeyNeverVouchesForIssuerAsToken() {
        let (providers, _) = setUp()
        // B's key is in the cache first, under its kid.
        XCTAssertNoThrow(
            try providers.verify(token(.object([("alg", .string("RS256")), ("kid", .string("b1"))]), claims(iss: issuerB), signedBy: "b1"), now: now)
                .get())
        assertRefused(
            providers, token(.object([("alg", .string("RS256")), ("kid", .string("b1"))]), claims(iss: issuerA), signedBy: "b1"),
            saying: "does not publish")
    }

    func testAFloodOfUnknownKidsCostsOneFetchAWindowAndRotationHoldsAtOnceAfterIt() {
        let (providers, fetcher) = setUp(refetchSeconds: 30)
        let header = { (kid: String) -> JSONValue in .object([("alg", .string("RS256")), ("kid", .string(kid))]) }
        XCTAssertNoThrow(try providers.verify(token(header("a1"), claims(), signedBy: "a1"), now: now).get())
        for index in 0..<100 {
            assertRefused(
                providers, token(header("rogue-\(index)"), claims(), signedBy: "rogue-\(index)"), saying: "does not publish", at: now + 1000)
        }
        XCTAssertEqual(fetcher.fetches.withLock { $0 }, [issuerA], "one fetch for the first token; none for the flood within its window")
        // The provider rotates: a new key is fetched once the window has passed, and the old stays.
        fetcher.keys.withLock { $0[issuerA] = [Self.key("a1"), Self.key("a2")] }
        XCTAssertNoThrow(try providers.verify(token(header("a2"), claims(), signedBy: "a2"), now: now + 31_000).get())
        XCTAssertNoThrow(try providers.verify(token(header("a1"), claims(), signedBy: "a1"), now: now + 31_000).get())
        XCTAssertEqual(fetcher.fetches.withLock { $0.count }, 2)
    }

    func testPeopleGetWhatTheEntriesOfTheirGroupsGrant() {
        var policy = AccessPolicy(
            publishers: [AccessEntry(.publisher, name: "ci", token: "", patterns: WatchSet([Glob("ci.*")]), groups: ["builders"])],
            readers: [
                AccessEntry(.reader, name: "team-a", token: "", patterns: WatchSet([Glob("a.*")]), groups: ["team-a"]),
                AccessEntry(.reader, name: "team-b", token: "reader-token-0123456789", patterns: WatchSet([Glob("b.*")]), groups: ["team-b"]),
            ], anonymousRead: .nobody)
        policy.tokenMaxTasks = 7
        let both = policy.identify(
            authorization: nil, proxied: ProxiedIdentity(user: "dora", groups: ["team-a", "builders"]), fromLoopback: false, now: now)
        XCTAssertEqual(both.grant?.kind, .person)
        XCTAssertEqual(both.grant?.name, "dora")
        XCTAssertEqual(both.grant?.read.description, "ci.*,a.*")
        XCTAssertEqual(both.grant?.publish.description, "ci.*")
        XCTAssertEqual(both.grant?.maxTasks, 7)
        guard
            case .refused(let error) = policy.identify(
                authorization: nil, proxied: ProxiedIdentity(user: "x", groups: ["nobody"]), fromLoopback: false, now: now)
        else { return XCTFail("a person of no configured group was let in") }
        XCTAssertEqual(error.status, 403)
        XCTAssertTrue(error.message.contains("'nobody'"), error.message)
        // An entry's empty token matches no presented token.
        guard case .refused = policy.identify(token: "", now: now) else { return XCTFail("an empty token matched a group-only entry") }
        XCTAssertEqual(ProxiedIdentity.groups(fromHeader: " team-a, team-b ,,"), ["team-a", "team-b"])
    }
}
