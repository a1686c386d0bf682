import RingcastCore

/// Signed tokens (SignedToken.verify, AccessPolicy.identify) and the NumericDate arithmetic every
/// accepted token meets. An input of two parts (`---` between) is a header and claims, signed here
/// with the fixture's key so every claim is reached past the signature check; any input is tried
/// as a token string as it stands too. An accepted token holds only a finite `exp` from 1970
/// through 9999 and after now, a `sub` that is nobody else's name, and counts within range; a
/// refusal is a 401 saying what is wrong; a header with `crit` or an object naming a member twice is
/// never accepted. Every Double the input holds (its first 8 bytes as bits, each number of its
/// claims) goes through UTCTime.iso8601 and the UnixTime helpers a timer and a cookie take, which
/// must never trap and stay in their ranges. An input that is a JSON Web Key Set (an identity
/// provider's `jwks_uri` answer) is read as one: every key kept is one this server can check
/// (RSA of 2048 to 16384 bits, P-256 coordinates of 32 bytes), every key left out has its reason,
/// and checking a signature with each, on libcrypto, never traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzToken(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    var policy = AccessPolicy(
        publishers: [.publisher(name: "ci", token: "fuzz-token-ci-0123456789", patterns: WatchSet([Glob("ci.*")]))],
        anonymousLocalPublish: false, tokenSecret: tokenKey)
    policy.tokenMaxTasks = 7
    checkToken(text(input), policy: policy)
    let parts = steps(input)
    if parts.count >= 2 {
        let unsigned = base64URL(parts[0]) + "." + base64URL(parts[1])
        let token = unsigned + "." + base64URL(Crypto.current.hmacSHA256(key: tokenKey, message: Array(unsigned.utf8)))
        checkToken(token, policy: policy, header: parts[0], claims: parts[1])
    }
    if input.first == UInt8(ascii: "{") { checkKeySet(input) }
    if input.count >= 8 {
        checkTime(Double(bitPattern: input.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }))
    }
    if parts.count >= 2, case .object(let members)? = try? JSONParser.parse(parts[1]) {
        for case (_, .number(let n)) in members {
            checkTime(n)
            checkTime(n * 1000)
        }
    }
    return 0
}

private let tokenKey = Array("fuzz-signing-key-0123456789abcdef".utf8)
private let nobodyElse = [AccessPolicy.localName, AccessPolicy.anonymousName, Principal.server.name, "ci"]

private func checkToken(_ token: String, policy: AccessPolicy, header: [UInt8]? = nil, claims: [UInt8]? = nil) {
    let result = SignedToken.verify(token, secret: tokenKey, now: t0)
    let refusedByParts: String? = {
        guard let header, let claims else { return nil }
        guard let parsed = try? JSONParser.parse(header, uniqueMembers: true) else { return "a header that is not JSON or names a member twice" }
        if parsed["crit"] != nil { return "a header with crit" }
        if (try? JSONParser.parse(claims, uniqueMembers: true)) == nil { return "claims that are not JSON or name a member twice" }
        return nil
    }()
    switch result {
    case .success(let grant):
        expect(refusedByParts == nil, "accepted \(refusedByParts ?? "")")
        guard let expiresAt = grant.expiresAt else { fatalError("invariant broken: a signed grant without an expiry") }
        expect(UnixTime.range.contains(expiresAt) && expiresAt > t0, "accepted an exp of \(expiresAt) ms")
        expect(grant.kind == .signed && !grant.name.isEmpty && grant.name.count <= SignedToken.maxSubjectLength, "sub \(grant.name)")
        for count in [grant.maxTasks, grant.maxConnections] {
            if let count { expect((1...SignedToken.maxCount).contains(count), "a count of \(count)") }
        }
        checkTime(expiresAt)
        // What the session timer and the cookie do with it.
        expect(UnixTime.microseconds(until: expiresAt, now: t0) > 0, "a live token's timer is not in the future")
        expect(UnixTime.seconds(until: expiresAt, now: t0) >= 0, "a negative Max-Age")
        switch SignedToken.verify(token, secret: tokenKey, now: expiresAt) {
        case .success: fatalError("invariant broken: a token still holds at its exp")
        case .failure(let error): expect(error.message.contains("expired at"), "at its exp: \(error.message)")
        }
        switch policy.identify(token: token, now: t0) {
        case .token(let held):
            expect(!nobodyElse.contains(held.name.lowercased()), "a signed token acts as '\(held.name)'")
            expect(held.maxTasks == (grant.maxTasks ?? 7), "the sub's task cap \(String(describing: held.maxTasks))")
        case .refused(let error):
            expect(nobodyElse.contains(grant.name.lowercased()), "identify refused a token verify took: \(error.message)")
        case .anonymous: fatalError("invariant broken: a presented token read as anonymous")
        }
    case .failure(let error):
        expect(error.code == .unauthorized && error.message.hasPrefix("the signed token "), "refusal \(error.code): \(error.message)")
    }
}

private func checkKeySet(_ input: [UInt8]) {
    let set: JSONWebKeySet
    do {
        set = try JSONWebKeySet.parse(input)
    } catch {
        expect(error.description.hasPrefix("the JSON Web Key set "), "a key set refused as \(error)")
        return
    }
    expect(set.keys.count + set.skipped.count <= JSONWebKeySet.maxKeys, "more keys than the limit")
    for skipped in set.skipped { expect(skipped.description.hasPrefix("the JSON Web Key "), "a key left out as \(skipped)") }
    for key in set.keys {
        switch key.material {
        case .rsa(let modulus, let exponent):
            expect(modulus.first != 0 && (256...2048).contains(modulus.count), "an RSA modulus of \(modulus.count) bytes")
            expect((1...8).contains(exponent.count) && exponent.last! & 1 == 1, "an RSA exponent of \(exponent)")
        case .p256(let x, let y): expect(x.count == 32 && y.count == 32, "P-256 coordinates of \(x.count) and \(y.count) bytes")
        }
        for algorithm in SignatureAlgorithm.allCases {
            let verified = Crypto.current.verify(algorithm, publicKey: key, message: input, signature: Array(input.suffix(64)))
            expect(!verified || key.refusal(for: algorithm) == nil, "a key verified \(algorithm.rawValue) it does not fit")
        }
    }
}

/// Whatever the Double: a date or `invalid time (…)`, and clamped spans, never a trap.
private func checkTime(_ value: Double) {
    let written = UTCTime.iso8601(unixMilliseconds: value)
    if UnixTime.range.contains(value) {
        expect(written.utf8.count == 24 && written.hasSuffix("Z"), "\(value) ms written as \(written)")
    } else if UTCTime.formattable.contains(value) {
        expect(written.hasSuffix("Z") && written.utf8.count <= 27, "\(value) ms written as \(written)")
    } else {
        expect(written.hasPrefix("invalid time"), "\(value) ms written as \(written)")
    }
    let longest = Int64(UnixTime.longestSpan * 1000)
    for (deadline, now) in [(value, t0), (t0, value), (value, value), (value, -value)] {
        let micros = UnixTime.microseconds(until: deadline, now: now)
        expect((0...longest).contains(micros), "\(micros) µs until \(deadline) from \(now)")
        let seconds = UnixTime.seconds(until: deadline, now: now)
        expect(seconds >= 0 && Double(seconds) <= UnixTime.longestSpan / 1000, "\(seconds) s until \(deadline) from \(now)")
    }
    if UnixTime.isSane(seconds: value) { expect(UnixTime.isSane(milliseconds: value * 1000), "sane seconds \(value) are not sane ms") }
}

private func base64URL(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        let chunk = bytes[index..<min(index + 3, bytes.count)]
        let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
        for position in 0...chunk.count { out.append(alphabet[Int(value >> (18 - 6 * UInt32(position)) & 63)]) }
        index += 3
    }
    return String(decoding: out, as: UTF8.self)
}
