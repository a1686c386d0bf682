/// Signed tokens: JSON Web Tokens (RFC 7519) in compact form, signed with HMAC-SHA256 (`HS256`,
/// RFC 7518 §3.2) under the key config's `tokenSecretEnv` names, so a team's backend grants
/// access without anyone editing config.json. The claims:
///
/// - `exp` (required), `nbf` and `iat` (optional): NumericDates, seconds since 1970; the token
///   holds from `nbf` until `exp`. Each must be an instant from 1970 through 9999 (UnixTime):
///   a "never expires" of 2^53 seconds is refused with the reason, not carried into a timer.
/// - `sub`: the name the grant acts under (`by`, log lines); `signed` when absent. A name the
///   server or config.json uses already (AccessPolicy.identify) is refused, so a token cannot
///   act as `local`, `server` or a configured publisher.
/// - `ringcast`: `{"read": [patterns], "publish": [patterns], "maxTasks"?, "maxConnections"?}`;
///   what it may publish it may read too; without `maxTasks` the sub holds at most the policy's
///   `tokenMaxTasks`.
///
/// Only HS256 is accepted: a token whose header names another algorithm (`none` above all) is
/// refused before its signature is looked at, so no header can choose how it is checked. A
/// header with `crit` is refused too (RFC 7515 §4.1.11: this server understands no extension), and
/// so is a header or claims object that names a member twice (RFC 7519 §4).
public enum SignedToken {
    /// Three base64url parts and two dots: what a signed token looks like before it is checked.
    public static func looksLikeOne(_ token: String) -> Bool { token.utf8.lazy.filter { $0 == UInt8(ascii: ".") }.count == 2 }

    /// The longest token read (a header, claims of a few hundred patterns, a signature).
    public static let maxBytes = 16 * 1024
    /// The longest `sub` kept as a name.
    public static let maxSubjectLength = 100

    /// The grant the token carries, or the 401 that says what is wrong with it.
    public static func verify(_ token: String, secret: [UInt8], now: Double, crypto: any Cryptography = Crypto.current) -> Result<Grant, APIError> {
        do throws(APIError) {
            return .success(try grant(of: token, secret: secret, now: now, crypto: crypto))
        } catch {
            return .failure(error)
        }
    }

    private static func refusal(_ reason: String) -> APIError { APIError(.unauthorized, "the signed token \(reason)") }

    private static func grant(of token: String, secret: [UInt8], now: Double, crypto: any Cryptography) throws(APIError) -> Grant {
        guard token.utf8.count <= maxBytes else { throw refusal("is longer than \(maxBytes) bytes") }
        // By bytes: splitting by Characters costs more than checking an HMAC.
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Substring.init)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw refusal("is malformed: expected three base64url parts, header.claims.signature") }
        let header = try object(headerBytes, part: "header")
        guard case .string(let algorithm)? = header["alg"] else { throw refusal("names no algorithm (\"alg\"): sign it with HS256") }
        guard algorithm == "HS256" else {
            throw refusal("is signed with \"\(algorithm.prefix(20))\": only HS256 is accepted (an unsigned token, alg none, never is)")
        }
        if let critical = header["crit"] {
            let names = critical.arrayValue?.compactMap(\.stringValue).map { "\"\($0.prefix(40))\"" }.joined(separator: ", ")
            throw refusal(
                "names extensions this server does not understand in its header's \"crit\" (\(names ?? "not a list")): mint it without \"crit\"")
        }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard crypto.constantTimeEqual(crypto.hmacSHA256(key: secret, message: signed), signature) else {
            throw refusal("has a wrong signature: it was not signed with this server's tokenSecretEnv key, or was changed since")
        }
        let claims = try object(claimBytes, part: "claims")
        guard let expires = try instant(claims, "exp") else { throw refusal("has no \"exp\": a signed token must expire") }
        let notBefore = try instant(claims, "nbf")
        _ = try instant(claims, "iat")
        guard now < expires else { throw refusal("expired at \(UTCTime.iso8601(unixMilliseconds: expires)): ask for a new one") }
        if let notBefore, now < notBefore {
            throw refusal("is not valid before \(UTCTime.iso8601(unixMilliseconds: notBefore)) (its \"nbf\")")
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
        return Grant(
            kind: .signed, name: name, read: read.union(publish), publish: publish, expiresAt: expires,
            maxTasks: try count(claims["ringcast"]?["maxTasks"], claim: "maxTasks"),
            maxConnections: try count(claims["ringcast"]?["maxConnections"], claim: "maxConnections"))
    }

    /// The most a token's `maxTasks` or `maxConnections` may say (config.json's own ceiling).
    public static let maxCount = 10_000_000

    /// A JSON object, every member named once; else the refusal that names the part.
    private static func object(_ bytes: [UInt8], part: String) throws(APIError) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, uniqueMembers: true)
        } catch {
            throw refusal("is malformed: its \(part) \(part == "claims" ? "are" : "is") not JSON (\(error.reason))")
        }
        guard case .object = value else { throw refusal("is malformed: its \(part) \(part == "claims" ? "are" : "is") not a JSON object") }
        return value
    }

    /// A NumericDate claim as Unix ms, nil when absent; refused unless a finite instant from 1970 through 9999.
    private static func instant(_ claims: JSONValue, _ claim: String) throws(APIError) -> Double? {
        guard let value = claims[claim] else { return nil }
        guard case .number(let seconds) = value, UnixTime.isSane(seconds: seconds) else {
            let shown = value.numberValue.map { "\($0)" } ?? value.typeName
            throw refusal(
                "has an \"\(claim)\" of \(shown), not a time from 1970 through 9999: a NumericDate is seconds since 1970 (e.g. 1767225600), never milliseconds or a \"never\""
            )
        }
        return seconds * 1000
    }

    /// `ringcast.maxTasks` or `ringcast.maxConnections`: a whole number from 1 to `maxCount`, or nil when absent.
    private static func count(_ value: JSONValue?, claim: String) throws(APIError) -> Int? {
        guard let value else { return nil }
        guard case .number(let n) = value, n == n.rounded(), (1...Double(maxCount)).contains(n) else {
            throw refusal("has a ringcast.\(claim) that is not a whole number from 1 to \(maxCount)")
        }
        return Int(n)
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
