import SchemaValidation
import XCTest

@testable import RingcastCore

/// SchemaPattern, the matcher behind SchemaValidator's `pattern`: each construct the OpenAPI
/// document uses, a refusal for each one it does not, and agreement with what each of the
/// document's patterns means (ids, globs, watch lists, epochs, ETags, path text).
final class SchemaPatternTests: XCTestCase {
    override class func setUp() {
        super.setUp()
        installCryptography()
    }

    private func pattern(_ source: String, file: StaticString = #filePath, line: UInt = #line) -> SchemaPattern? {
        do {
            return try SchemaPattern(source)
        } catch {
            XCTFail("\(error)", file: file, line: line)
            return nil
        }
    }

    /// `source` matches each of `yes` and none of `no`.
    private func assertMatches(_ source: String, _ yes: [String], not no: [String], file: StaticString = #filePath, line: UInt = #line) {
        guard let compiled = pattern(source, file: file, line: line) else { return }
        for text in yes { XCTAssertTrue(compiled.matches(text), "\(source) should match \(text.debugDescription)", file: file, line: line) }
        for text in no { XCTAssertFalse(compiled.matches(text), "\(source) should not match \(text.debugDescription)", file: file, line: line) }
    }

    // MARK: Each construct

    func testLiteralsAreFoundAnywhereUnlessAnchored() {
        assertMatches("", ["", "anything"], not: [])
        assertMatches("b", ["b", "abc", "ab"], not: ["", "a", "B"])
        assertMatches("^b", ["b", "bc"], not: ["ab"])
        assertMatches("b$", ["b", "ab"], not: ["bc"])
        assertMatches("^b$", ["b"], not: ["", "bb", "ab", "b\n"])
        assertMatches("^$", [""], not: ["a", "\n"])
        assertMatches(#"^"x y",$"#, [#""x y","#], not: [#""x y""#])
        assertMatches("^é$", ["é"], not: ["e\u{301}", "e"])
    }

    func testClassesTakeRangesNegationAndEscapes() {
        assertMatches("^[a-c]$", ["a", "b", "c"], not: ["d", "A", "", "ab"])
        assertMatches("^[A-Za-z0-9]$", ["A", "z", "5"], not: ["-", "é", " "])
        assertMatches("^[._-]$", [".", "_", "-"], not: ["a", ","])
        assertMatches("^[-a]$", ["-", "a"], not: ["b"])
        assertMatches(#"^[a\-z]$"#, ["a", "-", "z"], not: ["b"])
        assertMatches("^[^a-c]$", ["d", "é", "\n"], not: ["a", "c", ""])
        assertMatches(#"^[^/\r\n\x00]+$"#, ["ci.build-42", "a b", "é"], not: ["", "a/b", "a\rb", "a\nb", "a\u{0}b"])
        assertMatches(#"^[\t\x41]$"#, ["\t", "A"], not: ["x", "a"])
        assertMatches(#"^[^\u202a-\u202e]$"#, ["a", "\u{2029}"], not: ["\u{202A}", "\u{202E}"])
        assertMatches(#"^[\]\\\^]$"#, ["]", "\\", "^"], not: ["a"])
        assertMatches(#"^[*?]$"#, ["*", "?"], not: ["a"])
    }

    func testEscapesOutsideAClass() {
        assertMatches(#"^\r\n\t\x00$"#, ["\r\n\t\u{0}"], not: ["rnt0"])
        assertMatches(#"^\.\*\+\?\(\)\[\]\{\}\|\^\$\\\/\-$"#, [#".*+?()[]{}|^$\/-"#], not: [""])
    }

    func testGroupsAndAlternation() {
        assertMatches(
            "^(connected|unavailable since [0-9]+)$", ["connected", "unavailable since 1700000000"],
            not: ["unavailable since ", "connected ", "xconnected", ""])
        assertMatches("^(?:ab|c)d$", ["abd", "cd"], not: ["ad", "abcd", "d"])
        assertMatches("^a|b$", ["a", "ax", "b", "xb"], not: ["x", ""])
        assertMatches("^(?:a|)b$", ["ab", "b"], not: ["aab"])
        assertMatches("^(?:(?:a|b)(?:c|d))$", ["ac", "bd"], not: ["ab", "cd"])
    }

    func testQuantifiers() {
        assertMatches("^a*$", ["", "a", "aaaa"], not: ["b", "ab"])
        assertMatches("^a+$", ["a", "aaa"], not: [""])
        assertMatches("^ab?c$", ["ac", "abc"], not: ["abbc"])
        assertMatches("^a{3}$", ["aaa"], not: ["aa", "aaaa"])
        assertMatches("^a{0,2}$", ["", "a", "aa"], not: ["aaa"])
        assertMatches("^a{2,4}$", ["aa", "aaa", "aaaa"], not: ["a", "aaaaa"])
        assertMatches("^(?:ab){2}$", ["abab"], not: ["ab", "aab", "ababab"])
        assertMatches("^(?:a*)*$", ["", "aaa"], not: ["b"])
        assertMatches("^(?:a|ab)(?:c|bcd)$", ["abcd", "ac", "abc"], not: ["ab"])
    }

    func testTextIsMatchedByUnicodeScalarsNotCharacters() {
        // A class takes one scalar: an accent written as two is two, and CR LF is two.
        assertMatches("^[^x]{2}$", ["e\u{301}", "\r\n"], not: ["é"])
        assertMatches("^[^\\n]*$", ["a\rb"], not: ["a\r\nb"])
    }

    func testNoInputMakesItBacktrack() throws {
        // Nested repetition over a long near-miss: exponential for a backtracking matcher.
        let nested = try SchemaPattern("^(?:a|a)*(?:a*)*b$")
        XCTAssertFalse(nested.matches(String(repeating: "a", count: 5_000)))
        let watch = try SchemaPattern(OpenAPI.watchListPattern)
        XCTAssertFalse(watch.matches(String(repeating: "a,", count: 2_000) + "%"))
        XCTAssertTrue(watch.matches(String(repeating: "a,", count: 2_000)))
    }

    // MARK: Refusals

    func testEveryOtherSyntaxIsRefusedSayingWhereAndWhatToWrite() {
        let refusals: [(String, offset: Int, reason: String)] = [
            (".", 0, #". is not supported: write the class it means, e.g. [^\n]"#),
            (#"^\d+$"#, 1, #"\d is not supported: write the class it means, e.g. [0-9] for \d"#),
            (#"\w"#, 0, #"\w is not supported: write the class it means, e.g. [0-9] for \d"#),
            (#"[\s]"#, 1, #"\s is not supported: write the class it means, e.g. [0-9] for \d"#),
            (#"\bword"#, 0, #"\b is not supported"#),
            (#"(a)\1"#, 3, #"\1 is not supported"#),
            (#"\u004"#, 0, #"\u takes four hex digits"#),
            (#"\p{L}"#, 0, #"\p is not supported"#),
            (#"\q"#, 0, #"\q is not an escape this reads"#),
            (#"\x4"#, 0, #"\x takes two hex digits"#),
            (#"\x+f"#, 0, #"\x takes two hex digits"#),
            ("a\\", 1, #"a \ that escapes nothing"#),
            ("(?=a)", 0, "only (…) and (?:…) groups are supported, not lookarounds or named groups"),
            ("(?!a)", 0, "only (…) and (?:…) groups are supported, not lookarounds or named groups"),
            ("(?<name>a)", 0, "only (…) and (?:…) groups are supported, not lookarounds or named groups"),
            ("(a", 0, "a ( that is never closed"),
            ("a)", 1, "a ) that closes no group"),
            ("[a", 0, "a [ that is never closed"),
            ("[a-", 0, "a [ that is never closed"),
            ("[]", 0, "an empty class matches nothing (or, negated, anything)"),
            ("[^]", 0, "an empty class matches nothing (or, negated, anything)"),
            ("[z-a]", 2, "a range whose start is above its end"),
            ("*a", 0, "* repeats nothing"),
            ("a|+", 2, "+ repeats nothing"),
            ("^*", 1, "an anchor cannot repeat"),
            ("a$?", 2, "an anchor cannot repeat"),
            ("a*?", 2, "lazy quantifiers are not supported"),
            ("a+*", 2, "a quantifier cannot repeat a quantifier"),
            ("a{2}{3}", 4, "a quantifier cannot repeat a quantifier"),
            ("a{2,}", 1, "{n,} is not supported: write {n,m} or *"),
            ("a{,2}", 1, #"a { that starts no {n} or {n,m}: escape it as \{"#),
            ("a{x}", 1, #"a { that starts no {n} or {n,m}: escape it as \{"#),
            ("a{2", 1, #"a { that starts no {n} or {n,m}: escape it as \{"#),
            ("a{3,1}", 1, "{3,1}: the least count is above the most"),
            ("a{1001}", 1, "a count above 1000"),
            ("{2}", 0, #"{ repeats nothing: escape it as \{"#),
            ("a]", 1, #"a lone ]: escape it as \]"#),
            ("a}", 1, #"a lone }: escape it as \}"#),
        ]
        for (source, offset, reason) in refusals {
            do {
                _ = try SchemaPattern(source)
                XCTFail("\(source) was taken")
            } catch {
                XCTAssertEqual(error.reason, reason, source)
                XCTAssertEqual(error.offset, offset, source)
                XCTAssertEqual(error.description, "the pattern \(source) is not supported at offset \(offset): \(reason)")
            }
        }
    }

    func testAPatternItRefusesIsAViolationNotAPass() {
        let validator = SchemaValidator()
        func schema(_ pattern: String) -> JSONValue { .object([("type", .string("string")), ("pattern", .string(pattern))]) }
        let violation = validator.violation(of: .string("7"), against: schema(#"^\d$"#))
        XCTAssertEqual(
            violation, #"$: the pattern ^\d$ is not supported at offset 1: \d is not supported: write the class it means, e.g. [0-9] for \d"#)
        XCTAssertNil(validator.violation(of: .string("7"), against: schema("^[0-9]$")))
        XCTAssertEqual(validator.violation(of: .string("x"), against: schema("^[0-9]$")), #"$: "x" does not match ^[0-9]$"#)
    }

    // MARK: The document's patterns mean what their parsers do

    /// Every `pattern` in the OpenAPI document, wherever it stands.
    private func documentPatterns(in value: JSONValue = OpenAPI.document) -> [String] {
        switch value {
        case .object(let members):
            return members.flatMap { name, member -> [String] in
                if name == "pattern", case .string(let source) = member { return [source] }
                return documentPatterns(in: member)
            }
        case .array(let items):
            return items.flatMap { documentPatterns(in: $0) }
        default:
            return []
        }
    }

    func testEveryPatternOfTheDocumentIsRead() {
        let sources = Set(documentPatterns())
        XCTAssertGreaterThanOrEqual(sources.count, 6, "\(sources)")
        for source in sources.sorted() { _ = pattern(source) }
        XCTAssertTrue(sources.isSuperset(of: [TaskID.pattern, OpenAPI.watchListPattern, OpenAPI.epochPattern, OpenAPI.urlText]), "\(sources)")
    }

    private let samples = [
        "", "a", "A", "0", "ci.build-42", "ci_x", "ci.*", "*", "?", "ci?", "*.*.*", ".ci", "_x", "-x", "ci,", ",ci", "ci,,cd", ",", "a b", "ci/x",
        "é", "e\u{301}", "ci.\n", "ci\r", "ci\u{0}", "ci;x", "ci%2F", "ci*,deploy?.web", String(repeating: "a", count: 128),
        String(repeating: "a", count: 129), String(repeating: "*", count: 128), String(repeating: "a", count: 128) + ",b",
    ]

    func testTheIDAndGlobPatternsAreTheirParsers() throws {
        let id = try SchemaPattern(TaskID.pattern)
        let glob = try SchemaPattern(Glob.pattern)
        let watch = try SchemaPattern(OpenAPI.watchListPattern)
        for sample in samples {
            XCTAssertEqual(id.matches(sample), TaskID.isValid(sample), "id \(sample.debugDescription)")
            XCTAssertEqual(glob.matches(sample), Glob.isValid(sample), "glob \(sample.debugDescription)")
            let parsed: Bool
            if case .success = WatchSet.parse(sample) { parsed = true } else { parsed = false }
            XCTAssertEqual(watch.matches(sample), parsed, "watch \(sample.debugDescription)")
        }
    }

    func testEpochsETagsAndPathTextMatchWhatTheServerWrites() throws {
        let epoch = try SchemaPattern(OpenAPI.epochPattern)
        for _ in 0..<50 {
            let made = TaskStore.newEpoch()
            XCTAssertTrue(epoch.matches(made), made)
        }
        for wrong in ["", "abc", "ABCDEFGHIJKL", "abcdefghijk", "abcdefghijklm", "abcdefghijk-"] { XCTAssertFalse(epoch.matches(wrong), wrong) }

        let etagSource = try XCTUnwrap(documentPatterns().first { $0.contains("{32}") })
        let etag = try SchemaPattern(etagSource)
        for body in [[], Array("<svg/>".utf8), Array(repeating: 0xFF, count: 4096)] as [[UInt8]] {
            let tag = Badge.etag(body)
            XCTAssertTrue(etag.matches(tag), tag)
            XCTAssertFalse(etag.matches("W/" + tag), "a weak tag is not the badge's")
            XCTAssertFalse(etag.matches(String(tag.dropFirst())))
            XCTAssertFalse(etag.matches(tag.uppercased()))
        }

        let text = try SchemaPattern(OpenAPI.urlText)
        XCTAssertTrue(text.matches(""))
        XCTAssertTrue(text.matches("ci/build-42?label=é"))
        for wrong in ["a\rb", "a\nb", "\u{0}"] { XCTAssertFalse(text.matches(wrong), wrong.debugDescription) }
    }
}
