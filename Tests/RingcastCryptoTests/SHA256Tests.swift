import RingcastCore
import RingcastCrypto
import XCTest

/// SHA-256 against FIPS 180-4's examples (and NIST's long-message one), HMAC-SHA256 against RFC 4231,
/// both from libcrypto; the comparison and the generator beside them.
final class SHA256Tests: XCTestCase {
    private let crypto = LibCrypto()
    private func hex(_ text: String) -> String { Hex.lowercase(crypto.sha256(Array(text.utf8))) }
    private func bytes(_ byte: UInt8, _ count: Int) -> [UInt8] { [UInt8](repeating: byte, count: count) }

    func testFIPS180Examples() {
        XCTAssertEqual(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(
            hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(
            hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        XCTAssertEqual(
            Hex.lowercase(crypto.sha256(bytes(UInt8(ascii: "a"), 1_000_000))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Where the padding changes shape: 55 bytes fit one block with the length, 56 need a second.
    func testPaddingAtTheBlockBoundaries() {
        XCTAssertEqual(hex(String(repeating: "a", count: 55)), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318")
        XCTAssertEqual(hex(String(repeating: "a", count: 56)), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a")
        XCTAssertEqual(hex(String(repeating: "a", count: 64)), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }

    func testRFC4231() {
        func mac(_ key: [UInt8], _ data: [UInt8]) -> String { Hex.lowercase(crypto.hmacSHA256(key: key, message: data)) }
        XCTAssertEqual(mac(bytes(0x0b, 20), Array("Hi There".utf8)), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        XCTAssertEqual(
            mac(Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        XCTAssertEqual(mac(bytes(0xaa, 20), bytes(0xdd, 50)), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe")
        XCTAssertEqual(mac(Array(1...25), bytes(0xcd, 50)), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b")
        // Test case 5 checks the first 128 bits only.
        XCTAssertTrue(mac(bytes(0x0c, 20), Array("Test With Truncation".utf8)).hasPrefix("a3b6167473100ee06e0c796c2955552b"))
        // A key longer than a block is hashed first.
        XCTAssertEqual(
            mac(bytes(0xaa, 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        XCTAssertEqual(
            mac(
                bytes(0xaa, 131),
                Array(
                    ("This is a test using a larger than block-size key and a larger than block-size data. "
                        + "The key needs to be hashed before being used by the HMAC algorithm.").utf8)),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2")
        // An empty key is a key of zeros, as Python's hmac computes it.
        XCTAssertEqual(mac([], []), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    func testTheSignatureHeader() {
        XCTAssertEqual(
            crypto.webhookSignature(body: Array("Hi There".utf8), key: bytes(0x0b, 20)),
            "sha256=b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    }

    func testConstantTimeEqualityNeedsTheSameLengthAndBytes() {
        XCTAssertTrue(crypto.constantTimeEqual([], []))
        XCTAssertTrue(crypto.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(crypto.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(crypto.constantTimeEqual([9, 2, 3], [1, 2, 3]))
        XCTAssertFalse(crypto.constantTimeEqual([1, 2, 3], [1, 2]))
        XCTAssertFalse(crypto.constantTimeEqual([], [0]))
    }

    func testRandomBytesAreAsManyAsAskedAndDiffer() {
        XCTAssertEqual(crypto.randomBytes(count: 0), [])
        let draws = (0..<8).map { _ in crypto.randomBytes(count: 32) }
        XCTAssertTrue(draws.allSatisfy { $0.count == 32 })
        XCTAssertEqual(Set(draws).count, 8, "eight 256-bit draws repeated one")
        // Every byte value shows up in 64 KiB of a fair generator (a stuck or zero-filled one fails).
        XCTAssertEqual(Set(crypto.randomBytes(count: 65536)).count, 256)
    }

    /// RFC 7636 appendix B's verifier and challenge; random tokens long enough for a verifier.
    func testPKCEAndRandomTokens() {
        XCTAssertEqual(crypto.pkceChallenge(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let token = crypto.randomToken()
        XCTAssertEqual(token.utf8.count, 43)
        XCTAssertEqual(Base64URL.decode(token)?.count, 32)
        XCTAssertNotEqual(token, crypto.randomToken())
        for count in 0..<70 {
            let bytes = crypto.randomBytes(count: count)
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes, "\(count) bytes")
        }
        XCTAssertEqual(Base64URL.encode(Array("any carnal pleas".utf8)), "YW55IGNhcm5hbCBwbGVhcw")
    }
}
