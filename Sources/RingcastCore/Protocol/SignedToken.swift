/// Signed tokens: JSON Web Tokens (RFC 7519) in compact form, signed with HMAC-SHA256 (`HS256`,
/// RFC 7518 §3.2) under the key config's `tokenSecretEnv` names, so a team's backend grants
/// access without anyone editing config.json. The claims:
///
/// - `exp` (required) and `nbf` (optional): NumericDates, seconds since 1970; the token holds from
///   `nbf` until `exp`.
/// - `sub`: the name the grant acts under (`by`, log lines); `signed` when absent.
/// - `ringcast`: `{"read": [patterns], "publish": [patterns]}`; what it may publish it may read too.
///
/// Only HS256 is accepted: a token whose header names another algorithm (`none` above all) is
/// refused before its signature is looked at, so no header can choose how it is checked.
public enum SignedToken {
    /// Three base64url parts and two dots: what a signed token looks like before it is checked.
    public static func looksLikeOne(_ token: String) -> Bool { token.utf8.lazy.filter { $0 == UInt8(ascii: ".") }.count == 2 }

    /// The longest token read (a header, claims of a few hundred patterns, a signature).
    public static let maxBytes = 16 * 1024
    /// The longest `sub` kept as a name.
    public static let maxSubjectLength = 100

    /// The grant the token carries, or the 401 that says what is wrong with it.
    public static func verify(_ token: String, secret: [UInt8], now: Double) -> Result<Grant, APIError> {
        do throws(APIError) {
            return .success(try grant(of: token, secret: secret, now: now))
        } catch {
            return .failure(error)
        }
    }

    private static func refusal(_ reason: String) -> APIError { APIError(.unauthorized, "the signed token \(reason)") }

    private static func grant(of token: String, secret: [UInt8], now: Double) throws(APIError) -> Grant {
        guard token.utf8.count <= maxBytes else { throw refusal("is longer than \(maxBytes) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw refusal("is malformed: expected three base64url parts, header.claims.signature") }
        guard let header = try? JSONParser.parse(headerBytes), case .object = header else {
            throw refusal("is malformed: its header is not a JSON object")
        }
        guard case .string(let algorithm)? = header["alg"] else { throw refusal("names no algorithm (\"alg\"): sign it with HS256") }
        guard algorithm == "HS256" else {
            throw refusal("is signed with \"\(algorithm.prefix(20))\": only HS256 is accepted (an unsigned token, alg none, never is)")
        }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard AccessPolicy.constantTimeEqual(HMACSHA256.authenticate(signed, key: secret), signature) else {
            throw refusal("has a wrong signature: it was not signed with this server's tokenSecretEnv key, or was changed since")
        }
        guard let claims = try? JSONParser.parse(claimBytes), case .object = claims else {
            throw refusal("is malformed: its claims are not a JSON object")
        }
        guard case .number(let expires)? = claims["exp"] else { throw refusal("has no \"exp\": a signed token must expire") }
        guard now < expires * 1000 else {
            throw refusal("expired at \(UTCTime.iso8601(unixMilliseconds: expires * 1000)): ask for a new one")
        }
        switch claims["nbf"] {
        case nil: break
        case .number(let notBefore)?:
            guard now >= notBefore * 1000 else {
                throw refusal("is not valid before \(UTCTime.iso8601(unixMilliseconds: notBefore * 1000)) (its \"nbf\")")
            }
        default: throw refusal("has an \"nbf\" that is not a number of seconds")
        }
        var name = "signed"
        switch claims["sub"] {
        case nil: break
        case .string(let subject)? where !subject.isEmpty && subject.count <= maxSubjectLength: name = subject
        default: throw refusal("has a \"sub\" that is not a name of 1 to \(maxSubjectLength) characters")
        }
        guard case .object? = claims["ringcast"] else {
            throw refusal("grants nothing: its claims need \"ringcast\": {\"read\": [patterns], \"publish\": [patterns]}")
        }
        let read = try scope(claims["ringcast"]?["read"], claim: "read")
        let publish = try scope(claims["ringcast"]?["publish"], claim: "publish")
        guard !(read.isNothing && publish.isNothing) else { throw refusal("grants nothing: ringcast.read and ringcast.publish are empty") }
        return Grant(kind: .signed, name: name, read: read.union(publish), publish: publish, expiresAt: expires * 1000)
    }

    private static func scope(_ value: JSONValue?, claim: String) throws(APIError) -> Scope {
        guard let value else { return .nothing }
        guard case .array(let items) = value, items.count <= 1000 else { throw refusal("has a ringcast.\(claim) that is not a list of patterns") }
        var globs: [Glob] = []
        for item in items {
            guard case .string(let pattern) = item, Glob.isValid(pattern) else {
                throw refusal("has a ringcast.\(claim) entry that is not an id pattern (letters, digits, '.', '_', '-', '*', '?')")
            }
            if !globs.contains(Glob(pattern)) { globs.append(Glob(pattern)) }
        }
        return Scope(WatchSet(globs))
    }
}
