import COpenSSL
import Glibc
import RingcastCore

/// The core's `Cryptography` on OpenSSL 3's libcrypto, through EVP: SHA-256, HMAC-SHA256,
/// `CRYPTO_memcmp`, `RAND_bytes`, and RS256, PS256 and ES256 verification with a key built from
/// a JSON Web Key's numbers (`EVP_PKEY_fromdata`). Keys built are kept by their numbers (never by
/// `kid` alone, which another issuer may reuse), up to `maxKeys`. Any thread: the algorithms
/// are fetched once and the HMAC template is only ever copied, both of which libcrypto allows
/// from many threads at once; the key cache is behind its lock.
public final class LibCrypto: Cryptography, @unchecked Sendable {
    public static let maxKeys = 256
    private let keys = KeyCache()
    /// SHA-256 and HMAC, fetched once: OpenSSL 3 looks `EVP_sha256()` and `HMAC()` up anew on
    /// every call, which cost more than hashing a token (Benchmarks/RESULTS.md, "Signed tokens").
    private let digest: OpaquePointer
    private let mac: OpaquePointer
    /// An HMAC-SHA256 context without a key, copied for each MAC.
    private let hmacTemplate: OpaquePointer

    public init() {
        guard let digest = EVP_MD_fetch(nil, "SHA256", nil), let mac = EVP_MAC_fetch(nil, "HMAC", nil), let template = EVP_MAC_CTX_new(mac)
        else { fatalError("libcrypto has no SHA-256 or HMAC: its default provider is not loaded") }
        var parameters = [
            OSSL_PARAM_construct_utf8_string(LibCrypto.name("digest"), UnsafeMutablePointer(mutating: LibCrypto.name("SHA256")), 0),
            OSSL_PARAM_construct_end(),
        ]
        guard EVP_MAC_CTX_set_params(template, &parameters) == 1 else { fatalError("libcrypto refuses HMAC with SHA-256") }
        self.digest = digest
        self.mac = mac
        hmacTemplate = template
    }

    deinit {
        EVP_MAC_CTX_free(hmacTemplate)
        EVP_MAC_free(mac)
        EVP_MD_free(digest)
    }

    public func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &output, &length, digest, nil) }
        precondition(done == 1 && length == 32, "EVP_Digest(SHA-256) failed: libcrypto cannot hash")
        return Array(output.prefix(32))
    }

    public func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length = 0
        let context = EVP_MAC_CTX_dup(hmacTemplate)
        defer { EVP_MAC_CTX_free(context) }
        // A null key means "the key set before"; an empty key is a pointer with a length of 0.
        let keyBytes = key.isEmpty ? [0] : key
        let done = keyBytes.withUnsafeBufferPointer { keyBuffer in
            message.withUnsafeBufferPointer { messageBuffer in
                context != nil && EVP_MAC_init(context, keyBuffer.baseAddress, key.count, nil) == 1
                    && EVP_MAC_update(context, messageBuffer.baseAddress, messageBuffer.count) == 1
                    && EVP_MAC_final(context, &output, &length, output.count) == 1
            }
        }
        precondition(done && length == 32, "HMAC(SHA-256) failed: libcrypto cannot authenticate")
        return Array(output.prefix(32))
    }

    public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    public func randomBytes(count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed: libcrypto's generator is not seeded")
        return bytes
    }

    public func verify(_ algorithm: SignatureAlgorithm, publicKey: JSONWebKey, message: [UInt8], signature: [UInt8]) -> Bool {
        let verified = check(algorithm, publicKey: publicKey, message: message, signature: signature)
        // A refusal leaves its reasons in this thread's error queue, where the next TLS call on
        // the thread (lws's, curl's) would read them as its own.
        if !verified { ERR_clear_error() }
        return verified
    }

    private func check(_ algorithm: SignatureAlgorithm, publicKey: JSONWebKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard publicKey.refusal(for: algorithm) == nil, let key = key(publicKey.material) else { return false }
        var signed = signature
        if algorithm == .es256 {
            guard let der = LibCrypto.derSignature(joseSignature: signature) else { return false }
            signed = der
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestVerifyInit(context, &keyContext, digest, nil, key.pointer) == 1 else { return false }
        if algorithm == .ps256 {
            guard EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            else { return false }
        }
        return signed.withUnsafeBufferPointer { signatureBuffer in
            message.withUnsafeBufferPointer { messageBuffer in
                EVP_DigestVerify(context, signatureBuffer.baseAddress, signatureBuffer.count, messageBuffer.baseAddress, messageBuffer.count) == 1
            }
        }
    }

    /// The key of `material`, built once; nil when libcrypto refuses the numbers (a point not on the curve).
    private func key(_ material: JSONWebKey.Material) -> PublicKey? {
        let numbers = KeyNumbers(material)
        if let known = keys.withLock({ $0[numbers] }) { return known }
        guard let built = PublicKey(material) else { return nil }
        keys.withLock { keys in
            if keys.count >= LibCrypto.maxKeys { keys.removeAll() }
            keys[numbers] = built
        }
        return built
    }

    /// What the cache knows a key by: its numbers as plain arrays. Not `JSONWebKey.Material`
    /// itself: an enum whose cases both carry arrays keeps its case in the spare bits of those
    /// arrays' pointers, which LeakSanitizer cannot follow, so every cached P-256 key would be
    /// reported as leaked by a process that exits with it.
    fileprivate struct KeyNumbers: Hashable {
        let isCurvePoint: Bool
        let first: [UInt8]
        let second: [UInt8]

        init(_ material: JSONWebKey.Material) {
            switch material {
            case .rsa(let modulus, let exponent): (isCurvePoint, first, second) = (false, modulus, exponent)
            case .p256(let x, let y): (isCurvePoint, first, second) = (true, x, y)
            }
        }
    }

    /// A C string that lives as long as the process, for libcrypto's parameter names and values,
    /// which it keeps by reference.
    static func name(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// JOSE's ES256 signature, r ‖ s of 32 bytes each (RFC 7518 §3.4), as the DER `ECDSA-Sig-Value`
    /// that libcrypto verifies.
    static func derSignature(joseSignature: [UInt8]) -> [UInt8]? {
        guard joseSignature.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = joseSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = joseSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }
}

/// An `EVP_PKEY` holding a public key only. libcrypto lets threads verify with one key at once
/// (each with its own `EVP_MD_CTX`), and it is never changed after it is built: safe to share.
private final class PublicKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init?(_ material: JSONWebKey.Material) {
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        // The builder keeps pointers to the names, strings, octets and numbers pushed, not copies,
        // until OSSL_PARAM_BLD_to_param: names are static, numbers freed after it, and the point is
        // built inside its buffer's scope.
        var numbers: [OpaquePointer] = []
        defer { numbers.forEach { BN_free($0) } }
        let type: StaticString
        let parameters: UnsafeMutablePointer<OSSL_PARAM>?
        switch material {
        case .rsa(let modulus, let exponent):
            type = "RSA"
            for (name, bytes) in [(LibCrypto.name("n"), modulus), (LibCrypto.name("e"), exponent)] {
                guard let number = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else { return nil }
                numbers.append(number)
                guard OSSL_PARAM_BLD_push_BN(builder, name, number) == 1 else { return nil }
            }
            parameters = OSSL_PARAM_BLD_to_param(builder)
        case .p256(let x, let y):
            type = "EC"
            // SEC 1 §2.3.3: an uncompressed point is 0x04, then x, then y.
            let point: [UInt8] = [0x04] + x + y
            parameters = point.withUnsafeBufferPointer { buffer -> UnsafeMutablePointer<OSSL_PARAM>? in
                guard OSSL_PARAM_BLD_push_utf8_string(builder, LibCrypto.name("group"), LibCrypto.name("prime256v1"), 0) == 1,
                    OSSL_PARAM_BLD_push_octet_string(builder, LibCrypto.name("pub"), buffer.baseAddress, buffer.count) == 1
                else { return nil }
                return OSSL_PARAM_BLD_to_param(builder)
            }
        }
        guard let parameters else { return nil }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, LibCrypto.name(type), nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1, EVP_PKEY_fromdata(context, &key, rc_evp_pkey_public_key, parameters) == 1, let key else {
            return nil
        }
        pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }
}

/// The keys built, behind a pthread mutex: the thread sanitizer follows that lock, and not the
/// standard library's `Mutex`, which on Linux waits in the kernel (futex) where the sanitizer cannot
/// see it, so it would report every key read by two threads as a race (RingcastPlatform's `Locked`
/// for the same reason; this target builds without it for the fuzz targets).
private final class KeyCache: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var keys: [LibCrypto.KeyNumbers: PublicKey] = [:]

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout [LibCrypto.KeyNumbers: PublicKey]) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&keys)
    }
}
