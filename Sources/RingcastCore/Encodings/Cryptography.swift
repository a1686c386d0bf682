import Synchronization

/// What the core asks of a cryptographic library. The core holds no C, so the implementation
/// lives in a C-facing target (`RingcastCrypto.LibCrypto`, on OpenSSL's libcrypto); the core's
/// users take one as an argument that defaults to the process's (`Crypto.current`), so a test may
/// hand in its own.
public protocol Cryptography: Sendable {
    /// SHA-256 (FIPS 180-4): 32 bytes.
    func sha256(_ bytes: [UInt8]) -> [UInt8]
    /// HMAC-SHA256 (RFC 2104): 32 bytes.
    func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8]
    /// Equal in length and content, in a time that does not depend on where they differ (only on
    /// the length, which is no secret: a token's or a MAC's length is public).
    func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool
    /// `count` bytes from a cryptographically secure generator (session ids, `state`, `nonce`,
    /// PKCE verifiers). Never returns fewer: a generator that cannot deliver stops the process,
    /// since a guessable session id is worse than none.
    func randomBytes(count: Int) -> [UInt8]
    /// Whether `signature` signs `message` under `publicKey` with `algorithm` (RFC 7518 §3.3–3.5).
    /// False, never a crash, for a key that does not fit the algorithm or a signature of any shape.
    func verify(_ algorithm: SignatureAlgorithm, publicKey: JSONWebKey, message: [UInt8], signature: [UInt8]) -> Bool
}

/// The public-key signatures a token may carry (RFC 7518's `alg` names). HS256 is no member: a
/// shared secret is checked with `hmacSHA256`, so a public key can never be taken for an HMAC key
/// (the "HS256 signed with the provider's public key" confusion).
public enum SignatureAlgorithm: String, CaseIterable, Sendable, Hashable {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256, a salt as long as the hash (RFC 7518 §3.5).
    case ps256 = "PS256"
    /// ECDSA on P-256 with SHA-256; the signature is r ‖ s, 32 bytes each (RFC 7518 §3.4), not DER.
    case es256 = "ES256"
}

/// The process's `Cryptography`: installed once at start by what owns the process (the
/// `ringcast` executable, a `Server`, a benchmark, a fuzz harness, a test class), read by the
/// core's defaults. Installing again replaces it (a test's own implementation).
public enum Crypto {
    private static let installed = Mutex<(any Cryptography)?>(nil)

    public static func install(_ implementation: any Cryptography) { installed.withLock { $0 = implementation } }

    /// Installs `implementation` unless one is installed already.
    public static func installIfAbsent(_ implementation: @autoclosure () -> any Cryptography) {
        installed.withLock { if $0 == nil { $0 = implementation() } }
    }

    /// The installed implementation; a process that never installed one stops here, naming the fix.
    public static var current: any Cryptography {
        guard let implementation = installed.withLock({ $0 }) else {
            fatalError("no Cryptography installed: call Crypto.install(LibCrypto()) (import RingcastCrypto) when the process starts")
        }
        return implementation
    }
}

extension Cryptography {
    /// `bytes` random bytes in base64url: a session id, an OpenID Connect `state` or `nonce`, or a
    /// PKCE `code_verifier` (32 bytes give the 43 characters RFC 7636 §4.1 asks for at least).
    public func randomToken(bytes: Int = 32) -> String { Base64URL.encode(randomBytes(count: bytes)) }

    /// The PKCE `code_challenge` of `verifier` with the method `S256` (RFC 7636 §4.2).
    public func pkceChallenge(verifier: String) -> String { Base64URL.encode(sha256(Array(verifier.utf8))) }

    /// `sha256=<lowercase hex>`: the `X-Ringcast-Signature` header of a webhook.
    public func webhookSignature(body: [UInt8], key: [UInt8]) -> String { "sha256=" + Hex.lowercase(hmacSHA256(key: key, message: body)) }
}

/// Bytes as lowercase hexadecimal, two digits a byte.
public enum Hex {
    public static func lowercase<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return String(decoding: text, as: UTF8.self)
    }
}
