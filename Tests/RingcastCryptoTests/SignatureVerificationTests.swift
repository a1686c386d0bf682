import Foundation
import RingcastCore
import RingcastCrypto
import Synchronization
import XCTest

/// RS256, PS256 and ES256 on libcrypto against tokens PyJWT signed with Python's `cryptography`
/// (Tests/fixtures/jwt-signatures.json, made by Tests/tools/make_jwt_fixtures.py): each holds under
/// its key, and fails once changed, under another key, or read as another algorithm.
final class SignatureVerificationTests: XCTestCase {
    private let crypto = LibCrypto()

    static let fixture: JSONValue = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("fixtures/jwt-signatures.json")
        guard let data = FileManager.default.contents(atPath: url.path), let value = try? JSONParser.parse(Array(data)) else {
            fatalError("cannot read \(url.path): run python3 Tests/tools/make_jwt_fixtures.py")
        }
        return value
    }()

    private func key(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> JSONWebKey {
        let value = try XCTUnwrap(Self.fixture["keys"]?[name], "no key \(name) in the fixture", file: file, line: line)
        return try JSONWebKey.parse(value)
    }

    /// The signed part of a token and its signature's bytes.
    private func token(_ algorithm: String) throws -> (message: [UInt8], signature: [UInt8]) {
        let text = try XCTUnwrap(Self.fixture["tokens"]?[algorithm]?.stringValue)
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        XCTAssertEqual(parts.count, 3)
        return (Array((parts[0] + "." + parts[1]).utf8), try XCTUnwrap(Base64URL.decode(parts[2])))
    }

    private func without(_ key: JSONWebKey, alg: Bool = true) -> JSONWebKey {
        var key = key
        if alg { key.algorithm = nil }
        return key
    }

    func testEachAlgorithmHoldsUnderItsKey() throws {
        let rs = try token("RS256")
        let ps = try token("PS256")
        let es = try token("ES256")
        XCTAssertTrue(crypto.verify(.rs256, publicKey: try key("rsa"), message: rs.message, signature: rs.signature))
        XCTAssertTrue(crypto.verify(.ps256, publicKey: try key("rsa-pss"), message: ps.message, signature: ps.signature))
        XCTAssertEqual(es.signature.count, 64, "JOSE's r || s, not DER")
        XCTAssertTrue(crypto.verify(.es256, publicKey: try key("ec"), message: es.message, signature: es.signature))
        // Again from the key cache.
        XCTAssertTrue(crypto.verify(.es256, publicKey: try key("ec"), message: es.message, signature: es.signature))
    }

    func testAChangedMessageOrSignatureFails() throws {
        for (algorithm, name) in [("RS256", "rsa"), ("PS256", "rsa-pss"), ("ES256", "ec")] {
            let signed = try token(algorithm)
            let alg = try XCTUnwrap(SignatureAlgorithm(rawValue: algorithm))
            let publicKey = try key(name)
            var message = signed.message
            message[message.count - 3] ^= 0x01
            XCTAssertFalse(crypto.verify(alg, publicKey: publicKey, message: message, signature: signed.signature), "\(algorithm): changed claims")
            var signature = signed.signature
            signature[signature.count / 2] ^= 0x80
            XCTAssertFalse(crypto.verify(alg, publicKey: publicKey, message: signed.message, signature: signature), "\(algorithm): changed signature")
            XCTAssertFalse(crypto.verify(alg, publicKey: publicKey, message: signed.message, signature: []), "\(algorithm): no signature")
            XCTAssertFalse(
                crypto.verify(alg, publicKey: publicKey, message: signed.message, signature: Array(signed.signature.dropLast())), "\(algorithm): cut")
        }
        // r = s = 0 is no signature at all, and DER where JOSE's raw form is due is refused by its length.
        let es = try token("ES256")
        XCTAssertFalse(crypto.verify(.es256, publicKey: try key("ec"), message: es.message, signature: [UInt8](repeating: 0, count: 64)))
        XCTAssertFalse(crypto.verify(.es256, publicKey: try key("ec"), message: es.message, signature: [0x30, 0x44] + es.signature + [0, 0]))
    }

    func testAnotherKeyFails() throws {
        let rs = try token("RS256")
        let ps = try token("PS256")
        let es = try token("ES256")
        XCTAssertFalse(crypto.verify(.rs256, publicKey: try key("rsa-other"), message: rs.message, signature: rs.signature))
        XCTAssertFalse(crypto.verify(.ps256, publicKey: without(try key("rsa-other")), message: ps.message, signature: ps.signature))
        XCTAssertFalse(crypto.verify(.es256, publicKey: try key("ec-other"), message: es.message, signature: es.signature))
    }

    /// Keys are kept by their numbers: a key that reuses another's `kid` (another issuer's, say)
    /// is its own key, and what the first verified does not hold under the second.
    func testAKidReusedByAnotherKeyIsAnotherKey() throws {
        let rs = try token("RS256")
        let genuine = try key("rsa")
        var impostor = try key("rsa-other")
        impostor.keyID = genuine.keyID
        XCTAssertTrue(crypto.verify(.rs256, publicKey: genuine, message: rs.message, signature: rs.signature))
        XCTAssertFalse(crypto.verify(.rs256, publicKey: impostor, message: rs.message, signature: rs.signature))
        XCTAssertTrue(crypto.verify(.rs256, publicKey: genuine, message: rs.message, signature: rs.signature))
    }

    func testAnotherAlgorithmFails() throws {
        let rs = try token("RS256")
        let ps = try token("PS256")
        let es = try token("ES256")
        let rsa = without(try key("rsa"))
        // The same RSA key, the other padding: PKCS #1 v1.5 is not PSS, nor the reverse.
        XCTAssertTrue(crypto.verify(.rs256, publicKey: rsa, message: rs.message, signature: rs.signature))
        XCTAssertFalse(crypto.verify(.ps256, publicKey: rsa, message: rs.message, signature: rs.signature))
        XCTAssertFalse(crypto.verify(.rs256, publicKey: rsa, message: ps.message, signature: ps.signature))
        // A key whose set says RS256 checks nothing else, even what it signed.
        XCTAssertEqual(try key("rsa").refusal(for: .ps256), "the key \"rsa-1\" is for RS256, not PS256")
        XCTAssertFalse(crypto.verify(.ps256, publicKey: try key("rsa"), message: ps.message, signature: ps.signature))
        // A key of the other family.
        XCTAssertFalse(crypto.verify(.es256, publicKey: rsa, message: es.message, signature: es.signature))
        XCTAssertFalse(crypto.verify(.rs256, publicKey: without(try key("ec")), message: rs.message, signature: rs.signature))
        XCTAssertEqual(without(try key("ec")).refusal(for: .rs256), "the key \"ec-1\" is a P-256 key and cannot check RS256")
    }

    /// Numbers that parse but are no key: a point off the curve is refused by libcrypto, not trusted.
    func testAPointOffTheCurveVerifiesNothing() throws {
        let es = try token("ES256")
        guard case .p256(let x, let y) = try key("ec").material else { return XCTFail("not a P-256 key") }
        var offCurve = y
        offCurve[31] ^= 0x01
        let key = JSONWebKey(material: .p256(x: x, y: offCurve))
        XCTAssertFalse(crypto.verify(.es256, publicKey: key, message: es.message, signature: es.signature))
    }

    /// Through the protocol, as the core calls it, from several threads at once on one cached key.
    func testVerificationFromManyThreads() throws {
        let rs = try token("RS256")
        let es = try token("ES256")
        let rsa = try key("rsa")
        let ec = try key("ec")
        let checker: any Cryptography = crypto
        let failures = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let ok =
                index.isMultiple(of: 2)
                ? checker.verify(.rs256, publicKey: rsa, message: rs.message, signature: rs.signature)
                : checker.verify(.es256, publicKey: ec, message: es.message, signature: es.signature)
            if !ok { failures.add(1, ordering: .relaxed) }
        }
        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
    }
}
