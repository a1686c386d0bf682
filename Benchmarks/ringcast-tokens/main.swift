// swift-format-ignore-file: OrderedImports
// ringcast-tokens: signed tokens verified per CPU-second, one thread, for HS256 (the server's own
// SignedToken.verify under tokenSecretEnv) and RS256, PS256 and ES256 (a token split, its parts
// decoded, header and claims parsed, and its signature checked under the key from its JWK set),
// all through the core's Cryptography on libcrypto. The keys and the RS/PS/ES tokens are
// Tests/fixtures/jwt-signatures.json (PyJWT's). Run through Benchmarks/tokens.sh, which prints it
// as Markdown for RESULTS.md.
@preconcurrency import Glibc
import Foundation
import RingcastCore
import RingcastCrypto

setvbuf(stdout, nil, _IOLBF, 0)

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringcast-tokens: \(message)\n".utf8))
    exit(2)
}

let (fixturePath, rounds, seconds): (String, Int, Double) = {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var fixturePath = "Tests/fixtures/jwt-signatures.json"
    var rounds = 5
    var seconds = 1.0
    while !arguments.isEmpty {
        let name = arguments.removeFirst()
        guard !arguments.isEmpty else { fail("\(name) needs a value (--fixture FILE, --rounds N, --seconds S)") }
        let value = arguments.removeFirst()
        switch name {
        case "--fixture": fixturePath = value
        case "--rounds":
            guard let number = Int(value), number > 0 else { fail("--rounds wants a positive number") }
            rounds = number
        case "--seconds":
            guard let number = Double(value), number > 0 else { fail("--seconds wants a positive number") }
            seconds = number
        default: fail("unknown option \(name): --fixture FILE, --rounds N, --seconds S")
        }
    }
    return (fixturePath, rounds, seconds)
}()

let crypto = LibCrypto()
Crypto.install(crypto)

guard let data = FileManager.default.contents(atPath: fixturePath), let fixture = try? JSONParser.parse(Array(data)) else {
    fail("cannot read \(fixturePath): run from the repository's root, or make it with python3 Tests/tools/make_jwt_fixtures.py")
}
let keySet: JSONWebKeySet = {
    guard case .object(let members)? = fixture["keys"] else { fail("\(fixturePath) has no keys") }
    let set = "{\"keys\": [" + members.map { String(decoding: JSONWriter.encode($0.1), as: UTF8.self) }.joined(separator: ",") + "]}"
    do {
        return try JSONWebKeySet.parse(Array(set.utf8))
    } catch {
        fail("\(error)")
    }
}()

/// What a relying party does with a compact token whose key it holds: three parts, each decoded,
/// header and claims parsed as JSON, the key found by `kid` and the algorithm, the signature checked.
func verifyPublicKeyToken(_ token: String) -> Bool {
    let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Substring.init)
    guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
        let signature = Base64URL.decode(parts[2]),
        let headerJSON = try? JSONParser.parse(header, uniqueMembers: true), (try? JSONParser.parse(claims, uniqueMembers: true)) != nil,
        let algorithm = headerJSON["alg"]?.stringValue.flatMap(SignatureAlgorithm.init(rawValue:))
    else { return false }
    let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    return keySet.candidates(keyID: headerJSON["kid"]?.stringValue, algorithm: algorithm).contains {
        crypto.verify(algorithm, publicKey: $0, message: signed, signature: signature)
    }
}

// HS256 through the server's path, with a grant it accepts.
let hmacKey = Array("benchmark-signing-key-0123456789abcdef".utf8)
let hs256Token: String = {
    func encode(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
    let unsigned = encode(#"{"alg":"HS256","typ":"JWT"}"#) + "." + encode(#"{"sub":"ada","exp":4102444800,"ringcast":{"read":["ci.*"]}}"#)
    return unsigned + "."
        + Data(crypto.hmacSHA256(key: hmacKey, message: Array(unsigned.utf8))).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
}()
let now = 1_800_000_000_000.0

func cpuSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Tokens verified per CPU-second of this thread: batches until `seconds` of CPU have gone.
func rate(_ verify: () -> Bool) -> Double {
    guard verify() else { fail("a fixture token does not verify: the figures would measure refusals") }
    let start = cpuSeconds()
    var done = 0
    var batch = 16
    while cpuSeconds() - start < seconds {
        for _ in 0..<batch where !verify() { fail("a verification failed midway") }
        done += batch
        batch = min(batch * 2, 4096)
    }
    return Double(done) / (cpuSeconds() - start)
}

func token(_ algorithm: String) -> String {
    guard let text = fixture["tokens"]?[algorithm]?.stringValue else { fail("\(fixturePath) has no \(algorithm) token") }
    return text
}

/// A token's signed part, its signature and its key, for the signature check alone.
func signatureOnly(_ algorithm: SignatureAlgorithm) -> () -> Bool {
    let text = token(algorithm.rawValue)
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    let signed = Array(text.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    guard let signature = Base64URL.decode(parts[2]), let key = keySet.candidates(keyID: nil, algorithm: algorithm).first else {
        fail("no key in \(fixturePath) for \(algorithm.rawValue)")
    }
    return { crypto.verify(algorithm, publicKey: key, message: signed, signature: signature) }
}
let hs256Parts = hs256Token.split(separator: ".")
let hs256Signed = Array((hs256Parts[0] + "." + hs256Parts[1]).utf8)
let hs256Signature = Base64URL.decode(hs256Parts[2]) ?? []

let cases: [(String, String, () -> Bool)] = [
    (
        "HS256", "the token: SignedToken.verify (HMAC-SHA256, claims, grant)",
        { if case .success = SignedToken.verify(hs256Token, secret: hmacKey, now: now) { true } else { false } }
    ),
    ("RS256", "the token: RSA 2048, PKCS #1 v1.5", { [rs256 = token("RS256")] in verifyPublicKeyToken(rs256) }),
    ("PS256", "the token: RSA 2048, PSS", { [ps256 = token("PS256")] in verifyPublicKeyToken(ps256) }),
    ("ES256", "the token: ECDSA P-256", { [es256 = token("ES256")] in verifyPublicKeyToken(es256) }),
    ("HS256", "the signature alone", { crypto.constantTimeEqual(crypto.hmacSHA256(key: hmacKey, message: hs256Signed), hs256Signature) }),
    ("RS256", "the signature alone", signatureOnly(.rs256)),
    ("PS256", "the signature alone", signatureOnly(.ps256)),
    ("ES256", "the signature alone", signatureOnly(.es256)),
]

func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (index, character) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { out += " " }
        out.append(character)
    }
    return out
}

print("| algorithm | what is checked | tokens verified per CPU-second | CPU per token (µs) |")
print("| --- | --- | --- | --- |")
for (name, what, verify) in cases {
    let rates = (0..<rounds).map { _ in rate(verify) }.sorted()
    let median = rates[rates.count / 2]
    print("| \(name) | \(what) | \(grouped(median)) (\(grouped(rates.first!))–\(grouped(rates.last!))) | \(String(format: "%.1f", 1e6 / median)) |")
}
