import RingcastCore
import XCTest

/// JSON Web Keys (RFC 7517) as the core reads them: the keys a token can be checked with, and each
/// malformed or unfit key refused with a reason that names what is wrong.
final class JSONWebKeyTests: XCTestCase {
    /// A 2048-bit modulus (its top bit set), base64url.
    private let modulus = "w" + String(repeating: "A", count: 340) + "Q"
    private let coordinate = String(repeating: "A", count: 42) + "E"

    private func parse(_ text: String) throws(JSONWebKeyError) -> JSONWebKey { try JSONWebKey.parse(json(text)) }

    private func refusal(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            let key = try parse(text)
            XCTFail("accepted \(key)", file: file, line: line)
            return ""
        } catch {
            return error.description
        }
    }

    func testRSAAndP256KeysAreRead() throws {
        let rsa = try parse(#"{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": "\#(modulus)", "e": "AQAB"}"#)
        guard case .rsa(let n, let e) = rsa.material else { return XCTFail("not RSA") }
        XCTAssertEqual(n.count, 256)
        XCTAssertEqual(e, [1, 0, 1])
        XCTAssertEqual(rsa.keyID, "k1")
        XCTAssertNil(rsa.refusal(for: .rs256))
        // A leading zero byte, which some sets write, is no part of the number.
        let padded = try parse(#"{"kty": "RSA", "n": "AM\#(modulus.dropFirst())", "e": "AQAB"}"#)
        guard case .rsa(let paddedN, _) = padded.material else { return XCTFail("not RSA") }
        XCTAssertEqual(paddedN.count, 256)
        let ec = try parse(#"{"kty": "EC", "crv": "P-256", "kid": "e1", "x": "\#(coordinate)", "y": "\#(coordinate)", "key_ops": ["verify"]}"#)
        XCTAssertEqual(ec.material, .p256(x: Array(repeating: 0, count: 31) + [1], y: Array(repeating: 0, count: 31) + [1]))
        XCTAssertNil(ec.refusal(for: .es256))
        XCTAssertEqual(ec.refusal(for: .ps256), "the key \"e1\" is a P-256 key and cannot check PS256")
    }

    func testMalformedKeysAreRefusedWithTheirReason() {
        let cases: [(String, String)] = [
            (#"["RSA"]"#, "the JSON Web Key is a JSON array, not an object"),
            (#"{"n": "\#(modulus)", "e": "AQAB"}"#, "has no \"kty\""),
            (#"{"kty": "oct", "k": "c2VjcmV0"}"#, "carries private or secret key material (\"k\")"),
            (#"{"kty": "oct", "kid": "h"}"#, "the JSON Web Key \"h\" is a shared secret (kty oct)"),
            (#"{"kty": "OKP", "crv": "Ed25519", "x": "AA"}"#, "has the key type \"OKP\": only RSA and EC (P-256) are supported"),
            (#"{"kty": "RSA", "n": "\#(modulus)", "e": "AQAB", "d": "AQAB"}"#, "carries private or secret key material (\"d\")"),
            (#"{"kty": "RSA", "e": "AQAB"}"#, "has no \"n\""),
            (#"{"kty": "RSA", "n": "\#(modulus)="}"#, "has a \"n\" that is not base64url"),
            (#"{"kty": "RSA", "n": "\#(modulus)", "e": "AQAC"}"#, "has an RSA exponent \"e\" that is not an odd number above 1"),
            (#"{"kty": "RSA", "n": "\#(modulus)", "e": "AQ"}"#, "has an RSA exponent \"e\" that is not an odd number above 1"),
            (#"{"kty": "RSA", "n": "\#(modulus.prefix(171))", "e": "AQAB"}"#, "has an RSA modulus of 1024 bits: RS256 and PS256 need 2048"),
            (#"{"kty": "EC", "x": "\#(coordinate)", "y": "\#(coordinate)"}"#, "has no \"crv\""),
            (#"{"kty": "EC", "crv": "P-384", "x": "\#(coordinate)", "y": "\#(coordinate)"}"#, "is on the curve \"P-384\": only P-256"),
            (#"{"kty": "EC", "crv": "P-256", "x": "\#(coordinate)", "y": "AQ"}"#, "has P-256 coordinates of 32 and 1 bytes: each must be 32"),
            (#"{"kty": "EC", "crv": "P-256", "x": "\#(coordinate)"}"#, "has no \"y\""),
            (#"{"kty": "EC", "crv": "P-256", "kid": 7, "x": "\#(coordinate)", "y": "\#(coordinate)"}"#, "has a \"kid\" that is not a string"),
            (#"{"kty": "EC", "crv": "P-256", "x": "\#(coordinate)", "y": "\#(coordinate)", "key_ops": "verify"}"#, "\"key_ops\" that is not a list"),
        ]
        for (key, reason) in cases {
            let said = refusal(key)
            XCTAssertTrue(said.contains(reason), "\(key): \(said)")
            XCTAssertTrue(said.hasPrefix("the JSON Web Key "), said)
        }
    }

    func testAKeyMeantForSomethingElseChecksNoSignature() throws {
        let base = #""kty": "EC", "crv": "P-256", "kid": "e1", "x": "\#(coordinate)", "y": "\#(coordinate)""#
        XCTAssertEqual(try parse("{\(base), \"use\": \"enc\"}").refusal(for: .es256), "the key \"e1\" is for \"enc\", not signatures (\"sig\")")
        XCTAssertEqual(try parse("{\(base), \"alg\": \"ES384\"}").refusal(for: .es256), "the key \"e1\" is for ES384, not ES256")
        let signing = try parse("{\(base), \"key_ops\": [\"sign\"]}")
        XCTAssertEqual(signing.refusal(for: .es256), "the key \"e1\" does not allow \"verify\" in its key_ops")
    }

    func testAKeySetKeepsWhatItCanCheckAndSaysWhatItLeftOut() throws {
        let set = try JSONWebKeySet.parse(
            Array(
                #"""
                {"keys": [
                  {"kty": "RSA", "kid": "r1", "alg": "RS256", "n": "\#(modulus)", "e": "AQAB"},
                  {"kty": "EC", "crv": "P-256", "kid": "e1", "x": "\#(coordinate)", "y": "\#(coordinate)"},
                  {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "AA"},
                  {"kty": "RSA", "kid": "enc", "use": "enc", "n": "\#(modulus)", "e": "AQAB"}
                ]}
                """#.utf8))
        XCTAssertEqual(set.keys.map(\.keyID), ["r1", "e1", "enc"])
        XCTAssertEqual(set.skipped.map(\.keyID), ["ed"])
        XCTAssertEqual(set.candidates(keyID: "r1", algorithm: .rs256).map(\.keyID), ["r1"])
        XCTAssertEqual(set.candidates(keyID: "r1", algorithm: .es256).map(\.keyID), [])
        XCTAssertEqual(set.candidates(keyID: nil, algorithm: .ps256).map(\.keyID), [], "r1 is for RS256 and enc for encryption")
        XCTAssertEqual(set.candidates(keyID: nil, algorithm: .es256).map(\.keyID), ["e1"])
        XCTAssertEqual(set.candidates(keyID: "missing", algorithm: .rs256), [])
        for (text, reason) in [
            (#"{"keys": {}}"#, "the JSON Web Key set has no \"keys\" list"),
            (#"{"keys": [], "keys": []}"#, "the JSON Web Key set is not JSON"),
            ("<html>", "the JSON Web Key set is not JSON"),
        ] {
            XCTAssertThrowsError(try JSONWebKeySet.parse(Array(text.utf8)), text) { error in
                XCTAssertTrue("\(error)".hasPrefix(reason), "\(text): \(error)")
            }
        }
    }
}
