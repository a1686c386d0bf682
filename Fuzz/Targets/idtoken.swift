import RingcastCore
import RingcastCrypto

/// Identity providers' tokens (IdentityProviders.verify, AccessPolicy.identify with `oidc`). An
/// input of two parts (`---` between) is a header and claims, given the signature a stand-in for
/// libcrypto accepts, so every check after the signature is reached; any input is tried as a token
/// string as it stands too. An accepted token names an algorithm of the provider's list (never
/// `none`, never an HMAC one), the configured issuer, an audience of ours, a key of that issuer
/// (issuer B's `kid` never vouches for issuer A), and a session that ends after now, at its `exp`
/// and leeway at the latest; a refusal is a 401 beginning "the identity provider's token"; the
/// provider's keys are fetched at most once a window however many `kid`s the inputs name.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIdentityToken(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    check(text(input))
    let parts = steps(input)
    if parts.count >= 2 {
        check([parts[0], parts[1], Array("ok".utf8)].map(Base64URL.encode).joined(separator: "."))
    }
    return 0
}

private let issuerA = "https://a.example.com"
private let issuerB = "https://b.example.com"
private let leewaySeconds = 60.0

/// Issuer A publishes `a1` (RSA), issuer B `b1` (P-256); fetches are counted.
private final class Keys: ProviderKeyFetching, @unchecked Sendable {
    var fetches = 0
    func fetchKeys(for provider: IdentityProviderSettings) -> Result<[JSONWebKey], ProviderFetchError> {
        fetches += 1
        if provider.issuer == issuerA {
            return .success([JSONWebKey(material: .rsa(modulus: [UInt8](repeating: 0xC3, count: 256), exponent: [1, 0, 1]), keyID: "a1")])
        }
        return .success([JSONWebKey(material: .p256(x: [UInt8](repeating: 7, count: 32), y: [UInt8](repeating: 9, count: 32)), keyID: "b1")])
    }
}

/// libcrypto's, but a signature `ok` holds under any key.
private struct StandIn: Cryptography {
    let real = LibCrypto()
    func sha256(_ bytes: [UInt8]) -> [UInt8] { real.sha256(bytes) }
    func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] { real.hmacSHA256(key: key, message: message) }
    func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool { real.constantTimeEqual(a, b) }
    func randomBytes(count: Int) -> [UInt8] { real.randomBytes(count: count) }
    func verify(_ algorithm: SignatureAlgorithm, publicKey: JSONWebKey, message: [UInt8], signature: [UInt8]) -> Bool {
        signature == Array("ok".utf8)
    }
}

private let keys = Keys()
private let providers = IdentityProviders(
    [
        IdentityProviderSettings(issuer: issuerA, clientId: "ringcast", keysRefetchSeconds: 1e9),
        IdentityProviderSettings(issuer: issuerB, clientId: "ringcast", algorithms: ["ES256"], keysRefetchSeconds: 1e9),
    ], fetcher: keys)
private let policy: AccessPolicy = {
    var policy = AccessPolicy(
        readers: [AccessEntry(.reader, name: "team-a", token: "", patterns: WatchSet([Glob("a.*")]), groups: ["team-a"])],
        anonymousRead: .nobody)
    policy.providers = providers
    return policy
}()

private func check(_ token: String) {
    let result = providers.verify(token, now: t0, crypto: StandIn())
    expect(keys.fetches <= 2, "the keys were fetched \(keys.fetches) times within one window")
    switch result {
    case .success(let identity):
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
            let head = try? JSONParser.parse(header, uniqueMembers: true), let body = try? JSONParser.parse(claims, uniqueMembers: true)
        else { return expect(false, "accepted a token that is not a header and claims: \(token.prefix(200))") }
        let algorithm = head["alg"]?.stringValue ?? ""
        expect(["RS256", "PS256", "ES256"].contains(algorithm), "accepted alg \(algorithm)")
        expect(head["crit"] == nil, "accepted a header with crit")
        expect(identity.issuer == body["iss"]?.stringValue, "the identity's issuer is not the token's")
        expect(identity.issuer == issuerA ? algorithm != "ES256" : algorithm == "ES256", "issuer \(identity.issuer) accepted \(algorithm)")
        let kid = head["kid"]?.stringValue
        expect(kid == nil || kid == (identity.issuer == issuerA ? "a1" : "b1"), "issuer \(identity.issuer) accepted the kid \(kid ?? "")")
        let audience = body["aud"].map { $0.arrayValue?.compactMap(\.stringValue) ?? [$0.stringValue ?? ""] } ?? []
        expect(audience.contains("ringcast"), "accepted the audience \(audience)")
        guard let exp = body["exp"]?.numberValue else { return expect(false, "accepted a token without exp") }
        expect(identity.expiresAt > t0 && identity.expiresAt <= exp * 1000 + leewaySeconds * 1000, "a session ending at \(identity.expiresAt)")
        expect(UnixTime.range.contains(identity.expiresAt), "a session end of \(identity.expiresAt) outside 1970…9999")
        switch policy.identify(token: token, now: t0, crypto: StandIn()) {
        case .token(let grant): expect(grant.kind == .person && identity.groups.contains("team-a"), "granted \(grant)")
        case .refused(let error): expect(error.status == 403 && !identity.groups.contains("team-a"), "refused \(error.message)")
        case .anonymous: expect(false, "a verified token was taken for no token")
        }
    case .failure(let error):
        expect(error.status == 401, "a refusal with status \(error.status)")
        expect(error.message.hasPrefix("the identity provider's token "), "a refusal saying \(error.message)")
    }
}
