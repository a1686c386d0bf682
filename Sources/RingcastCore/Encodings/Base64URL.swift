/// base64url (RFC 4648 §5), as JSON Web Tokens write their parts: `-` and `_` for `+` and `/`,
/// without padding (RFC 7515 §2): how a token's parts are read, and how the random values of a
/// sign-in (`state`, `nonce`, a PKCE verifier and its challenge) are written.
public enum Base64URL {
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int(buffer >> UInt32(bits) & 63)])
            }
        }
        if bits > 0 { output.append(alphabet[Int(buffer << UInt32(6 - bits) & 63)]) }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes `text` encodes; nil for a character outside the alphabet, padding, or a length
    /// no encoding has (one character left over, or stray bits set in the last one).
    /// Inlinable, so a caller in another module gets it specialized for its string type.
    @inlinable
    public static func decode<Text: StringProtocol>(_ text: Text) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
            guard let value = sextet(byte) else { return nil }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // Two or four bits left over are the encoding's zero fill; six are a character too many.
        guard bits < 6, buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    @usableFromInline
    static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
