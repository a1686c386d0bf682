/// A public key as a JSON Web Key (RFC 7517), of the kinds a token's signature is checked with:
/// RSA (`kty` `RSA`, `n` and `e`, RFC 7518 §6.3.1) for RS256 and PS256, and an elliptic-curve
/// key on P-256 (`kty` `EC`, `crv` `P-256`, `x` and `y`, RFC 7518 §6.2.1) for ES256. Parsed here,
/// in the core; a `Cryptography` turns the numbers into a key of its library.
///
/// Refused, each with the reason: a key of another kind (`oct` above all: a shared secret never
/// comes from a key set), a private key's members (`d`, …), an RSA modulus under 2048 bits
/// (RFC 7518 §3.3) or over 16384, coordinates that are not 32 bytes each.
public struct JSONWebKey: Hashable, Sendable {
    /// The key's numbers, big-endian and without sign.
    public enum Material: Hashable, Sendable {
        /// An RSA public key: modulus and public exponent, without leading zero bytes.
        case rsa(modulus: [UInt8], exponent: [UInt8])
        /// A point on P-256, each coordinate 32 bytes.
        case p256(x: [UInt8], y: [UInt8])
    }

    public var material: Material
    /// `kid`: the name a token's header gives the key it was signed with.
    public var keyID: String?
    /// `alg`: the one algorithm the key is meant for, when the set says so.
    public var algorithm: String?
    /// `use`: `sig` or `enc`, when the set says so.
    public var use: String?
    /// `key_ops`, when the set says so.
    public var operations: [String]?

    public init(material: Material, keyID: String? = nil, algorithm: String? = nil, use: String? = nil, operations: [String]? = nil) {
        self.material = material
        self.keyID = keyID
        self.algorithm = algorithm
        self.use = use
        self.operations = operations
    }

    static let minRSABits = 2048
    static let maxRSABits = 16384
    static let maxNameLength = 256

    /// The key `value` describes, or the error that says what is wrong with it.
    public static func parse(_ value: JSONValue) throws(JSONWebKeyError) -> JSONWebKey {
        guard case .object = value else { throw JSONWebKeyError("is a JSON \(value.typeName), not an object") }
        let keyID = try name(value, "kid")
        func refusal(_ reason: String) -> JSONWebKeyError { JSONWebKeyError(reason, keyID: keyID) }
        guard case .string(let kind)? = value["kty"] else { throw refusal("has no \"kty\" (the key type: RSA or EC)") }
        for member in ["d", "p", "q", "dp", "dq", "qi", "oth", "k"] where value[member] != nil {
            throw refusal("carries private or secret key material (\"\(member)\"): a key set publishes public keys only")
        }
        let material: Material
        switch kind {
        case "RSA":
            let modulus = stripped(try bytes(value, "n", keyID: keyID))
            let exponent = stripped(try bytes(value, "e", keyID: keyID))
            let bits = bitLength(modulus)
            guard bits >= minRSABits else { throw refusal("has an RSA modulus of \(bits) bits: RS256 and PS256 need 2048 or more (RFC 7518 §3.3)") }
            guard bits <= maxRSABits else { throw refusal("has an RSA modulus of \(bits) bits, more than the \(maxRSABits) this server checks") }
            guard (1...8).contains(exponent.count), exponent.last! & 1 == 1, exponent != [1] else {
                throw refusal("has an RSA exponent \"e\" that is not an odd number above 1 of at most 64 bits")
            }
            material = .rsa(modulus: modulus, exponent: exponent)
        case "EC":
            guard case .string(let curve)? = value["crv"] else { throw refusal("has no \"crv\": an EC key names its curve (P-256)") }
            guard curve == "P-256" else { throw refusal("is on the curve \"\(curve.prefix(20))\": only P-256 (ES256) is supported") }
            let x = try bytes(value, "x", keyID: keyID)
            let y = try bytes(value, "y", keyID: keyID)
            guard x.count == 32, y.count == 32 else {
                throw refusal("has P-256 coordinates of \(x.count) and \(y.count) bytes: each must be 32 (RFC 7518 §6.2.1.2)")
            }
            material = .p256(x: x, y: y)
        case "oct":
            throw refusal("is a shared secret (kty oct): tokens from a key set are checked with public keys only")
        default:
            throw refusal("has the key type \"\(kind.prefix(20))\": only RSA and EC (P-256) are supported")
        }
        var operations: [String]?
        if let list = value["key_ops"] {
            let names = list.arrayValue?.compactMap(\.stringValue)
            guard let names, names.count == list.arrayValue?.count, names.count <= 16 else {
                throw refusal("has a \"key_ops\" that is not a list of names")
            }
            operations = names
        }
        return JSONWebKey(
            material: material, keyID: keyID, algorithm: try name(value, "alg"), use: try name(value, "use"), operations: operations)
    }

    /// Nil when this key may check a signature of `algorithm`, else why not.
    public func refusal(for algorithm: SignatureAlgorithm) -> String? {
        let named = keyID.map { "the key \"\($0.prefix(40))\"" } ?? "the key"
        switch (algorithm, material) {
        case (.rs256, .rsa), (.ps256, .rsa), (.es256, .p256): break
        case (_, .rsa): return "\(named) is an RSA key and cannot check \(algorithm.rawValue)"
        case (_, .p256): return "\(named) is a P-256 key and cannot check \(algorithm.rawValue)"
        }
        if let declared = self.algorithm, declared != algorithm.rawValue {
            return "\(named) is for \(declared.prefix(20)), not \(algorithm.rawValue)"
        }
        if let use, use != "sig" { return "\(named) is for \"\(use.prefix(20))\", not signatures (\"sig\")" }
        if let operations, !operations.contains("verify") { return "\(named) does not allow \"verify\" in its key_ops" }
        return nil
    }

    /// A member that must be a string of a sane length when present.
    private static func name(_ value: JSONValue, _ member: String) throws(JSONWebKeyError) -> String? {
        guard let item = value[member] else { return nil }
        guard case .string(let text) = item, !text.isEmpty, text.utf8.count <= maxNameLength else {
            throw JSONWebKeyError("has a \"\(member)\" that is not a string of 1 to \(maxNameLength) bytes")
        }
        return text
    }

    private static func bytes(_ value: JSONValue, _ member: String, keyID: String?) throws(JSONWebKeyError) -> [UInt8] {
        guard case .string(let text)? = value[member] else { throw JSONWebKeyError("has no \"\(member)\"", keyID: keyID) }
        guard text.utf8.count <= maxRSABits / 6 + 4, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
            throw JSONWebKeyError("has a \"\(member)\" that is not base64url (RFC 4648 §5, without padding)", keyID: keyID)
        }
        return bytes
    }

    /// An integer without its leading zero bytes (RFC 7518 §6.3.1.1 forbids them; some sets carry one).
    private static func stripped(_ bytes: [UInt8]) -> [UInt8] { Array(bytes.drop { $0 == 0 }) }

    private static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.first else { return 0 }
        return (bytes.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }
}

/// A JSON Web Key Set (RFC 7517 §5): `{"keys": [...]}`, as an identity provider's `jwks_uri`
/// serves it. A key of a kind this server does not check (an encryption key, an Ed25519 key) is
/// left out with its reason rather than refusing the set: providers publish such keys beside
/// their signing keys.
public struct JSONWebKeySet: Equatable, Sendable {
    public static let maxKeys = 100
    public var keys: [JSONWebKey]
    /// Why each key left out was left out.
    public var skipped: [JSONWebKeyError]

    public init(keys: [JSONWebKey], skipped: [JSONWebKeyError] = []) {
        self.keys = keys
        self.skipped = skipped
    }

    public static func parse(_ bytes: [UInt8]) throws(JSONWebKeyError) -> JSONWebKeySet {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, uniqueMembers: true)
        } catch {
            throw JSONWebKeyError("set is not JSON (\(error.reason))", inSet: true)
        }
        guard case .array(let items)? = value["keys"] else { throw JSONWebKeyError("set has no \"keys\" list", inSet: true) }
        guard items.count <= maxKeys else { throw JSONWebKeyError("set has \(items.count) keys, more than \(maxKeys)", inSet: true) }
        var set = JSONWebKeySet(keys: [])
        for item in items {
            do throws(JSONWebKeyError) {
                set.keys.append(try JSONWebKey.parse(item))
            } catch {
                set.skipped.append(error)
            }
        }
        return set
    }

    /// The keys a token whose header names `keyID` and `algorithm` may be checked with: the one
    /// of that `kid`, or, when the header names none, every key that fits the algorithm.
    public func candidates(keyID: String?, algorithm: SignatureAlgorithm) -> [JSONWebKey] {
        keys.filter { key in (keyID == nil || key.keyID == keyID) && key.refusal(for: algorithm) == nil }
    }
}

/// Why a key or key set was refused: `description` reads as a sentence about the key.
public struct JSONWebKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public var keyID: String?
    var inSet = false

    public init(_ reason: String, keyID: String? = nil) {
        self.reason = reason
        self.keyID = keyID
    }

    init(_ reason: String, inSet: Bool) {
        self.reason = reason
        self.inSet = inSet
    }

    public var description: String {
        if inSet { return "the JSON Web Key \(reason)" }
        return (keyID.map { "the JSON Web Key \"\($0.prefix(40))\" " } ?? "the JSON Web Key ") + reason
    }
}
