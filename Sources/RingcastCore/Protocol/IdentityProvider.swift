import Synchronization

/// Tokens from a team's identity provider (OpenID Connect): ID tokens (and JWT access tokens)
/// signed with the provider's own keys, which the server fetches from the provider's JWKS. The
/// core decides what holds; the server supplies the keys' fetching and the signature check
/// (libcrypto), so the core stays free of C.

/// One provider of config.json's `oidc`.
public struct IdentityProviderSettings: Equatable, Sendable {
    /// `iss` of its tokens, and where `/.well-known/openid-configuration` is found.
    public var issuer: String
    /// The JWKS's address when given; else discovery's `jwks_uri`.
    public var jwksURL: String?
    /// What a token's `aud` must hold one of; the `clientId` when unset.
    public var audience: [String]
    /// The signature algorithms accepted: RS256, PS256, ES256 (never `none`, never an HMAC one).
    public var algorithms: [String]
    /// Seconds of clock skew allowed around `exp` and `nbf`.
    public var leewaySeconds: Double
    /// The name Ringcast has at the provider, and its secret when it is a confidential client.
    public var clientId: String
    public var clientSecret: String?
    /// Where in the claims the person's groups are: `groups`, or a path like `realm_access.roles`.
    public var groupsClaim: [String]
    /// "Sign in with NAME".
    public var displayName: String
    /// The longest a browser session lasts, whatever the ID token's own `exp` says.
    public var sessionMaxAgeSeconds: Double
    /// A refetch of the JWKS for an unknown `kid` happens at most once in this many seconds.
    public var keysRefetchSeconds: Double
    /// Keys fetched longer ago than this are fetched again on their next use, so a key the
    /// provider took out of its JWKS stops holding.
    public var keysMaxAgeSeconds: Double
    /// The scopes asked for at sign-in.
    public var scopes: [String]

    public init(
        issuer: String, clientId: String, jwksURL: String? = nil, audience: [String]? = nil, algorithms: [String] = ["RS256", "PS256", "ES256"],
        leewaySeconds: Double = 60, clientSecret: String? = nil, groupsClaim: String = "groups", displayName: String? = nil,
        sessionMaxAgeSeconds: Double = 8 * 3600, keysRefetchSeconds: Double = 60, keysMaxAgeSeconds: Double = 3600,
        scopes: [String] = ["openid", "profile", "email", "groups"]
    ) {
        self.issuer = issuer
        self.clientId = clientId
        self.jwksURL = jwksURL
        self.audience = audience ?? [clientId]
        self.algorithms = algorithms
        self.leewaySeconds = leewaySeconds
        self.clientSecret = clientSecret
        self.groupsClaim = groupsClaim.split(separator: ".").map(String.init)
        self.displayName = displayName ?? issuer
        self.sessionMaxAgeSeconds = sessionMaxAgeSeconds
        self.keysRefetchSeconds = keysRefetchSeconds
        self.keysMaxAgeSeconds = keysMaxAgeSeconds
        self.scopes = scopes
    }

    /// The algorithms a provider's key may sign with.
    public static let supportedAlgorithms = SignatureAlgorithm.allCases.map(\.rawValue)

    /// An `http://` address is taken only on loopback (tests, development): anywhere else the keys
    /// and the code exchange would cross the network in the clear.
    public static func isAcceptableURL(_ url: String) -> Bool {
        if url.hasPrefix("https://") { return url.count > 8 }
        guard url.hasPrefix("http://") else { return false }
        let rest = url.dropFirst(7)
        let authority = rest.prefix { $0 != "/" }
        var host = Substring(authority)
        if host.hasPrefix("[") {
            host = host.dropFirst().prefix { $0 != "]" }
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        return host == "localhost" || isLoopbackAddress(String(host))
    }
}

/// What the server supplies: the keys of an issuer, fetched now (over https, libcurl). Any thread.
public protocol ProviderKeyFetching: Sendable {
    /// The issuer's current JWKS, or why it could not be had.
    func fetchKeys(for provider: IdentityProviderSettings) -> Result<[JSONWebKey], ProviderFetchError>
}

public struct ProviderFetchError: Error, Equatable, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// The keys seen of each issuer, looked up by issuer and `kid` together: one issuer's key never
/// verifies another's token, whatever `kid` the token names. A `kid` not held triggers a refetch
/// at most once per `keysRefetchSeconds` per issuer, so a flood of made-up `kid`s costs the
/// provider one request a window. Kept across configuration reloads. Any thread.
public final class ProviderKeyCache: Sendable {
    private struct IssuerKeys {
        var keys: [JSONWebKey] = []
        var fetchedAt: Double?
        /// When the last fetch was tried, successful or not: what the refetch window counts from.
        var triedAt: Double?
    }

    private let issuers = Mutex<[String: IssuerKeys]>([:])
    /// JWKS fetches made, every issuer together (`/metrics`, tests).
    private let fetches = Atomic<Int>(0)

    public init() {}

    public var fetchCount: Int { fetches.load(ordering: .relaxed) }

    /// The key of `kid` at `provider`, fetching the JWKS when none is held yet, when what is held is
    /// older than `keysMaxAgeSeconds`, or when `kid` is unknown and the window allows a refetch.
    func key(
        _ kid: String?, algorithm: SignatureAlgorithm, of provider: IdentityProviderSettings, fetcher: any ProviderKeyFetching, now: Double
    ) -> Result<JSONWebKey, APIError> {
        func lookup(_ keys: [JSONWebKey]) -> JSONWebKey? {
            if let kid { return keys.first { $0.keyID == kid } }
            // A token without a `kid` is taken only where the set leaves no choice.
            let fitting = JSONWebKeySet(keys: keys).candidates(keyID: nil, algorithm: algorithm)
            return fitting.count == 1 ? fitting[0] : nil
        }
        let window = provider.keysRefetchSeconds * 1000
        let (held, mayFetch) = issuers.withLock { issuers -> (JSONWebKey?, Bool) in
            var entry = issuers[provider.issuer, default: IssuerKeys()]
            let stale = entry.fetchedAt.map { now - $0 >= provider.keysMaxAgeSeconds * 1000 } ?? true
            let found = stale ? nil : lookup(entry.keys)
            if found != nil { return (found, false) }
            let allowed = entry.triedAt.map { now - $0 >= window } ?? true
            // Claimed under the lock, so that of many threads asking at once only one fetches.
            if allowed { entry.triedAt = now }
            issuers[provider.issuer] = entry
            return (stale ? lookup(entry.keys) : nil, allowed)
        }
        if !mayFetch {
            if let held { return .success(held) }
            return .failure(
                refusal(
                    kid == nil
                        ? "names no \"kid\" and the issuer's keys leave more than one choice"
                        : "names a key (\"kid\" \"\(kid!.prefix(60))\") that \(provider.issuer) does not publish; its keys were fetched less than \(Int(provider.keysRefetchSeconds)) s ago (oidc.keysRefetchSeconds), so they are not fetched again yet"
                ))
        }
        fetches.add(1, ordering: .relaxed)
        switch fetcher.fetchKeys(for: provider) {
        case .failure(let error):
            if let held { return .success(held) }
            return .failure(refusal("cannot be checked: the keys of \(provider.issuer) could not be fetched (\(error.reason))"))
        case .success(let keys):
            issuers.withLock { issuers in
                issuers[provider.issuer, default: IssuerKeys()].keys = keys
                issuers[provider.issuer, default: IssuerKeys()].fetchedAt = now
            }
            if let found = lookup(keys) { return .success(found) }
            return .failure(
                refusal(
                    kid == nil
                        ? "names no \"kid\" and the issuer's keys leave more than one choice"
                        : "names a key (\"kid\" \"\(kid!.prefix(60))\") that \(provider.issuer) does not publish in its JWKS"))
        }
    }

    private func refusal(_ reason: String) -> APIError { APIError(.unauthorized, "the identity provider's token \(reason)") }
}

/// Who a provider's token names, once it holds.
public struct ProviderIdentity: Equatable, Sendable {
    public let issuer: String
    public let subject: String
    /// `preferred_username`, else `email`, else `sub`: how logs and `by` name the person.
    public let name: String
    public let groups: [String]
    /// When the session ends (Unix ms): the token's `exp` (and the leeway), or `sessionMaxAgeSeconds`
    /// after the sign-in, whichever comes first.
    public let expiresAt: Double
    /// When the person signed in (`auth_time`, else `iat`; Unix ms), for `sessionMaxAgeSeconds`.
    public let signedInAt: Double?
    public let nonce: String?
}

/// The configured providers, their keys, and the fetching of keys the server supplies. Any thread.
public final class IdentityProviders: Sendable, Equatable {
    public let providers: [IdentityProviderSettings]
    public let keys: ProviderKeyCache
    let fetcher: any ProviderKeyFetching

    public init(_ providers: [IdentityProviderSettings], keys: ProviderKeyCache = ProviderKeyCache(), fetcher: any ProviderKeyFetching) {
        self.providers = providers
        self.keys = keys
        self.fetcher = fetcher
    }

    public static func == (a: IdentityProviders, b: IdentityProviders) -> Bool { a === b }

    /// Whether the token names one of these issuers, so its refusal is theirs to give.
    func claimsOneOfUs(_ token: String) -> Bool {
        guard let claims = Self.unverifiedClaims(token), let issuer = claims["iss"]?.stringValue else { return false }
        return providers.contains { $0.issuer == issuer }
    }

    /// Fetches, when the rules allow, the key a presented token will need, so that the check
    /// itself (under the server's state lock) finds it held and reaches no network. Called by the
    /// transport before it takes the lock; a token that is no provider's costs a look at its claims.
    public func prepareKeys(authorization: String?, cookie: String?, cookieName: String, now: Double) {
        guard let token = try? AccessPolicy.presentedToken(authorization: authorization, cookie: cookie, named: cookieName),
            SignedToken.looksLikeOne(token), let claims = Self.unverifiedClaims(token), let issuer = claims["iss"]?.stringValue,
            let provider = providers.first(where: { $0.issuer == issuer }), let header = Self.unverifiedHeader(token),
            let name = header["alg"]?.stringValue, provider.algorithms.contains(name), let algorithm = SignatureAlgorithm(rawValue: name)
        else { return }
        _ = keys.key(header["kid"]?.stringValue, algorithm: algorithm, of: provider, fetcher: fetcher, now: now)
    }

    static func unverifiedHeader(_ token: String) -> JSONValue? {
        guard let first = token.split(separator: ".", maxSplits: 1).first, let bytes = Base64URL.decode(first) else { return nil }
        return try? JSONParser.parse(bytes, uniqueMembers: true)
    }

    static func unverifiedClaims(_ token: String) -> JSONValue? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, token.utf8.count <= SignedToken.maxBytes, let bytes = Base64URL.decode(parts[1]) else { return nil }
        return try? JSONParser.parse(bytes, uniqueMembers: true)
    }

    private static func refusal(_ reason: String) -> APIError { APIError(.unauthorized, "the identity provider's token \(reason)") }

    /// The identity a token holds for, or the 401 that says why not: the algorithm first (before
    /// any key is looked at, so no header chooses how it is checked), then the issuer, the key of
    /// that issuer and `kid`, the signature, the audience and the times.
    public func verify(_ token: String, now: Double, crypto: any Cryptography = Crypto.current) -> Result<ProviderIdentity, APIError> {
        do throws(APIError) {
            return .success(try identity(of: token, now: now, crypto: crypto))
        } catch {
            return .failure(error)
        }
    }

    private func identity(of token: String, now: Double, crypto: any Cryptography) throws(APIError) -> ProviderIdentity {
        guard token.utf8.count <= SignedToken.maxBytes else { throw Self.refusal("is longer than \(SignedToken.maxBytes) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw Self.refusal("is malformed: expected three base64url parts, header.claims.signature") }
        guard let header = try? JSONParser.parse(headerBytes, uniqueMembers: true), case .object = header else {
            throw Self.refusal("is malformed: its header is not a JSON object")
        }
        guard let claims = try? JSONParser.parse(claimBytes, uniqueMembers: true), case .object = claims else {
            throw Self.refusal("is malformed: its claims are not a JSON object")
        }
        guard let algorithm = header["alg"]?.stringValue else { throw Self.refusal("names no algorithm (\"alg\")") }
        if algorithm.lowercased() == "none" {
            throw Self.refusal("is unsigned (alg none): an unsigned token is never accepted")
        }
        if algorithm.hasPrefix("HS") {
            throw Self.refusal(
                "is signed with \(algorithm.prefix(10)), an HMAC algorithm: a provider's tokens are checked with its public keys, and a public key is never taken as an HMAC secret"
            )
        }
        if header["crit"] != nil { throw Self.refusal("names extensions in its header's \"crit\" that this server does not understand") }
        guard let issuer = claims["iss"]?.stringValue else { throw Self.refusal("names no issuer (\"iss\")") }
        guard let provider = providers.first(where: { $0.issuer == issuer }) else {
            throw Self.refusal(
                "was issued by \"\(issuer.prefix(200))\", which is not a provider this server trusts (oidc issuer: \(providers.map(\.issuer).joined(separator: ", ")))"
            )
        }
        guard provider.algorithms.contains(algorithm), let signatureAlgorithm = SignatureAlgorithm(rawValue: algorithm) else {
            throw Self.refusal(
                "is signed with \"\(algorithm.prefix(20))\"; \(provider.issuer) tokens are accepted with \(provider.algorithms.joined(separator: ", ")) (oidc.algorithms)"
            )
        }
        let kid: String?
        switch header["kid"] {
        case nil: kid = nil
        case .string(let value)?: kid = value
        default: throw Self.refusal("has a \"kid\" that is not a string")
        }
        let key: JSONWebKey
        switch keys.key(kid, algorithm: signatureAlgorithm, of: provider, fetcher: fetcher, now: now) {
        case .success(let found): key = found
        case .failure(let error): throw error
        }
        if let unfit = key.refusal(for: signatureAlgorithm) { throw Self.refusal("cannot be checked: \(unfit)") }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard crypto.verify(signatureAlgorithm, publicKey: key, message: signed, signature: signature) else {
            throw Self.refusal("has a wrong signature: it was not signed by \(provider.issuer), or was changed since")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let one)?: audiences = [one]
        case .array(let many)?: audiences = many.compactMap(\.stringValue)
        default: throw Self.refusal("names no audience (\"aud\")")
        }
        guard audiences.contains(where: provider.audience.contains) else {
            throw Self.refusal(
                "is meant for \(audiences.map { "\"\($0.prefix(100))\"" }.joined(separator: ", ")), not for this server (oidc audience: \(provider.audience.joined(separator: ", ")))"
            )
        }
        let leeway = provider.leewaySeconds * 1000
        guard let expires = try instant(claims, "exp") else { throw Self.refusal("has no \"exp\"") }
        guard now < expires + leeway else {
            throw Self.refusal("expired at \(UTCTime.iso8601(unixMilliseconds: expires)): sign in again")
        }
        if let notBefore = try instant(claims, "nbf"), now + leeway < notBefore {
            throw Self.refusal("is not valid before \(UTCTime.iso8601(unixMilliseconds: notBefore)) (its \"nbf\"): check the clocks")
        }
        let issuedAt = try instant(claims, "iat")
        if let issuedAt, now + leeway < issuedAt {
            throw Self.refusal("was issued in the future (its \"iat\" is \(UTCTime.iso8601(unixMilliseconds: issuedAt))): check the clocks")
        }
        let signedInAt = try instant(claims, "auth_time") ?? issuedAt
        let sessionEnd = (signedInAt ?? now) + provider.sessionMaxAgeSeconds * 1000
        guard now < sessionEnd else {
            throw Self.refusal(
                "expired: its sign-in at \(UTCTime.iso8601(unixMilliseconds: signedInAt ?? now)) is more than oidc.sessionMaxAgeSeconds (\(Int(provider.sessionMaxAgeSeconds))) ago: sign in again"
            )
        }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty else { throw Self.refusal("names no subject (\"sub\")") }
        let name = [claims["preferred_username"], claims["email"]].lazy.compactMap { $0?.stringValue }.first { !$0.isEmpty } ?? subject
        var groupsValue: JSONValue? = claims
        for step in provider.groupsClaim { groupsValue = groupsValue?[step] }
        let groups: [String]
        switch groupsValue {
        case .array(let items)?: groups = items.compactMap(\.stringValue)
        case .string(let one)?: groups = [one]
        default: groups = []
        }
        return ProviderIdentity(
            issuer: issuer, subject: subject, name: String(name.prefix(SignedToken.maxSubjectLength)), groups: groups,
            // The leeway that let the token in lets it stay as long: a watcher is not closed at `exp`
            // only to be let in again on reconnecting.
            expiresAt: min(expires + leeway, sessionEnd), signedInAt: signedInAt, nonce: claims["nonce"]?.stringValue)
    }

    private func instant(_ claims: JSONValue, _ claim: String) throws(APIError) -> Double? {
        guard let value = claims[claim] else { return nil }
        guard case .number(let seconds) = value, UnixTime.isSane(seconds: seconds) else {
            throw Self.refusal("has an \"\(claim)\" that is not a time from 1970 through 9999 in seconds")
        }
        return seconds * 1000
    }
}

/// What an auth proxy in front said of the person (config `proxyAuth`): read by the transport only
/// from a peer in `trustedProxies`, ignored from anyone else.
public struct ProxiedIdentity: Equatable, Sendable {
    public let user: String
    public let groups: [String]

    public init(user: String, groups: [String]) {
        self.user = user
        self.groups = groups
    }

    /// oauth2-proxy's `X-Auth-Request-Groups` is comma-separated.
    public static func groups(fromHeader value: String?) -> [String] {
        guard let value else { return [] }
        return value.split(separator: ",").map { String($0.drop { $0 == " " }).trimmingSuffixSpaces }.filter { !$0.isEmpty }
    }
}

/// config `proxyAuth`: the headers an auth proxy names the person and their groups in.
public struct ProxyAuthSettings: Equatable, Sendable {
    public var userHeader: String
    public var groupsHeader: String?

    public init(userHeader: String = "X-Auth-Request-User", groupsHeader: String? = "X-Auth-Request-Groups") {
        self.userHeader = userHeader
        self.groupsHeader = groupsHeader
    }

    /// A header name as RFC 9110 spells a token: letters, digits and `-` are all a proxy uses.
    public static func isHeaderName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 100
            && name.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
            }
    }
}

extension String {
    fileprivate var trimmingSuffixSpaces: String {
        var text = Substring(self)
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
