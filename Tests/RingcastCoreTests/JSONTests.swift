import XCTest

@testable import RingcastCore

final class JSONTests: XCTestCase {
    // MARK: Parsing

    func testParsesEveryKindOfValue() throws {
        let value = try JSONParser.parse(#" { "a" : [1, -2.5, 3e2, 0, -0.125E-1], "b": {"t": true, "f": false, "n": null}, "s": "x" } "#)
        XCTAssertEqual(
            value,
            .object([
                ("a", .array([.number(1), .number(-2.5), .number(300), .number(0), .number(-0.0125)])),
                ("b", .object([("t", .bool(true)), ("f", .bool(false)), ("n", .null)])),
                ("s", .string("x")),
            ]))
    }

    func testObjectsKeepKeyOrderAndEqualityIsOrderSensitive() throws {
        let ab = try JSONParser.parse(#"{"b":1,"a":2}"#)
        XCTAssertEqual(ab.keys, ["b", "a"])
        XCTAssertNotEqual(ab, try JSONParser.parse(#"{"a":2,"b":1}"#))
    }

    func testSubscriptReturnsTheLastDuplicateAndNilOffObjects() throws {
        let value = try JSONParser.parse(#"{"k":1,"k":2}"#)
        XCTAssertEqual(value["k"], .number(2))
        XCTAssertNil(value["missing"])
        XCTAssertNil(JSONValue.array([])["k"])
    }

    func testStringEscapesAndUnicode() throws {
        let value = try JSONParser.parse(#""q\" b\\ s\/ \b\f\n\r\t é \u00e9 \ud83d\ude00 €""#)
        XCTAssertEqual(value, .string("q\" b\\ s/ \u{08}\u{0C}\n\r\t é é 😀 €"))
    }

    func testRejectsMalformedInput() {
        let bad: [(String, String)] = [
            ("", "unexpected end of input"),
            ("[1,]", "unexpected character"),
            ("{\"a\":1,}", "expected a string key"),
            ("01", "unexpected data after the JSON value"),
            ("1.", "expected a digit after '.'"),
            (".5", "unexpected character"),
            ("+1", "unexpected character"),
            ("1e", "expected a digit in the exponent"),
            ("-", "expected a digit"),
            ("NaN", "unexpected character"),
            ("tru", "unexpected end of input"),
            ("nul1", "unexpected character"),
            ("{\"a\" 1}", "expected ':'"),
            ("{1:2}", "expected a string key"),
            ("[1 2]", "expected ',' or ']'"),
            ("{\"a\":1 \"b\":2}", "expected ',' or '}'"),
            ("\"abc", "unterminated string"),
            ("\"a\tb\"", "control character in a string"),
            ("\"\\x\"", "invalid escape"),
            ("\"\\u12zz\"", "invalid hex digit in a \\u escape"),
            ("\"\\u12", "short \\u escape"),
            ("\"\\ud83d\"", "unpaired surrogate in a \\u escape"),
            ("\"\\ude00\"", "unpaired surrogate in a \\u escape"),
            ("\"\\ud83d\\u0041\"", "unpaired surrogate in a \\u escape"),
            ("1e999", "number out of range"),
            ("{} {}", "unexpected data after the JSON value"),
        ]
        for (input, reason) in bad {
            XCTAssertThrowsError(try JSONParser.parse(input), "accepted \(input)") { error in
                XCTAssertEqual((error as? JSONParseError)?.reason, reason, "for \(input)")
            }
        }
    }

    func testErrorOffsetsPointAtTheProblem() {
        XCTAssertThrowsError(try JSONParser.parse("[1, x]")) { error in
            XCTAssertEqual(error as? JSONParseError, JSONParseError(offset: 4, reason: "unexpected character"))
        }
        XCTAssertThrowsError(try JSONParser.parse("true false")) { error in
            XCTAssertEqual((error as? JSONParseError)?.offset, 5)
            XCTAssertEqual("\(error)", "invalid JSON at byte 5: unexpected data after the JSON value")
        }
    }

    func testRejectsInvalidUTF8() {
        // 0xFF never occurs in UTF-8; 0xC3 0x28 is a broken two-byte sequence; an overlong '/' (0xC0 0xAF).
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0x61, 0xC3, 0x28, 0x22], [0x22, 0xC0, 0xAF, 0x22]] {
            XCTAssertThrowsError(try JSONParser.parse(bytes)) { error in
                XCTAssertEqual((error as? JSONParseError)?.reason, "invalid UTF-8 in a string")
            }
        }
        XCTAssertThrowsError(try JSONParser.parse([0xFF]))
        // Valid multi-byte UTF-8 passes, also next to escapes.
        XCTAssertEqual(try JSONParser.parse(Array("\"ü\\nü\"".utf8)), .string("ü\nü"))
    }

    func testNestingLimit() throws {
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        XCTAssertNoThrow(try JSONParser.parse(ok))
        let deep = "[" + ok + "]"
        XCTAssertThrowsError(try JSONParser.parse(deep)) { error in
            XCTAssertEqual((error as? JSONParseError)?.reason, "nested deeper than 64 levels")
        }
    }

    func testParseForAPIReportsInvalidJSON() {
        XCTAssertThrowsError(try JSONParser.parseForAPI(Array("{".utf8))) { error in
            let apiError = error as? APIError
            XCTAssertEqual(apiError?.code, .invalidJSON)
            XCTAssertEqual(apiError?.status, 400)
            XCTAssertEqual(apiError?.message, "the body is not valid JSON: expected a string key at byte 1")
        }
    }

    // MARK: Writing

    func testWriterNumbers() {
        func written(_ n: Double) -> String { text(JSONWriter.encode(.number(n))) }
        XCTAssertEqual(written(42), "42")
        XCTAssertEqual(written(-7), "-7")
        XCTAssertEqual(written(0.1), "0.1")
        XCTAssertEqual(written(1.95), "1.95")
        XCTAssertEqual(written(1_700_000_000_123), "1700000000123")
        XCTAssertEqual(written(.nan), "null")
        XCTAssertEqual(written(.infinity), "null")
        XCTAssertEqual(written(1e20), "1e+20")
        var writer = JSONWriter()
        writer.number(12 as Int)
        XCTAssertEqual(text(writer.bytes), "12")
    }

    func testWriterEscapesStrings() {
        let encoded = text(JSONWriter.encode(.string("a\"b\\c\nd\re\tf\u{01}g\u{1F}é/")))
        XCTAssertEqual(encoded, #""a\"b\\c\nd\re\tf\u0001g\u001fé/""#)
    }

    func testWriterSeparatorsAndRawSplices() {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("a")
        writer.beginArray()
        writer.number(1 as Int)
        writer.raw(Array("{\"x\":[]}".utf8))
        writer.null()
        writer.endArray()
        writer.key("b")
        writer.bool(false)
        writer.key("c")
        writer.beginObject()
        writer.endObject()
        writer.endObject()
        XCTAssertEqual(text(writer.bytes), #"{"a":[1,{"x":[]},null],"b":false,"c":{}}"#)
    }

    // MARK: Round trips

    func testValueRoundTrips() throws {
        let values: [JSONValue] = [
            .null, .bool(true), .number(0), .number(-1), .number(0.1), .number(1e-7), .number(123456.789),
            .number(1e300), .number(-2.5e-300), .string(""), .string("tab\t\"quote\" ☃ 😀 \u{0}"),
            .array([]), .object([]),
            .object([("z", .array([.number(1), .string("two"), .null, .object([("nested", .bool(false))])])), ("a", .number(3.25))]),
        ]
        for value in values {
            let bytes = JSONWriter.encode(value)
            XCTAssertEqual(try JSONParser.parse(bytes), value, "round trip of \(text(bytes))")
        }
    }

    func testCanonicalTextRoundTripsByteForByte() throws {
        let texts = [
            #"{"type":"tick","seq":7,"id":"ci.build-42","progress":0.35,"remaining":1.3,"tasks":[],"x":null,"ok":true}"#,
            #"[{"b":1,"a":[1,2,{"c":"\"\\\n"}]},"é😀",-0.5]"#,
        ]
        for canonical in texts {
            XCTAssertEqual(text(JSONWriter.encode(try JSONParser.parse(canonical))), canonical)
        }
    }

    func testTypeNames() {
        XCTAssertEqual(
            [JSONValue.null, .bool(true), .number(1), .string(""), .array([]), .object([])].map(\.typeName),
            ["null", "boolean", "number", "string", "array", "object"])
    }
}
