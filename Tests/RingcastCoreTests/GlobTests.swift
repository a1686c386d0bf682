import Foundation
import XCTest

@testable import RingcastCore

final class GlobTests: XCTestCase {
    private func assertMatches(_ pattern: String, _ yes: [String], _ no: [String], file: StaticString = #filePath, line: UInt = #line) {
        let glob = Glob(pattern)
        for id in yes { XCTAssertTrue(glob.matches(id), "\(pattern) should match \(id)", file: file, line: line) }
        for id in no { XCTAssertFalse(glob.matches(id), "\(pattern) should not match \(id)", file: file, line: line) }
    }

    func testStarMatchesEverything() {
        assertMatches("*", ["a", "ci.build-42", "x.y.z", String(repeating: "z", count: 128)], [])
    }

    func testPrefixGroupCrossesDots() {
        assertMatches("ci.*", ["ci.build-42", "ci.a.b", "ci."], ["ci", "cid", "deploy.ci.x", "CI.build", "xci.build"])
    }

    func testLiteralPatternIsExact() {
        assertMatches("ci.build-42", ["ci.build-42"], ["ci.build-4", "ci.build-420", "ci.build_42", "Ci.build-42"])
    }

    func testQuestionMarkIsExactlyOneCharacter() {
        assertMatches("job-?", ["job-1", "job-a", "job-."], ["job-", "job-12"])
        assertMatches("??", ["ab", "1."], ["a", "abc"])
    }

    func testStarsInTheMiddleAndSuffixes() {
        assertMatches("*.deploy", ["prod.deploy", "a.b.deploy", ".deploy"], ["prod.deploy.x", "deploy", "prod-deploy"])
        assertMatches("*build*", ["build", "ci.build-1", "rebuild"], ["buil", "bui.ld"])
        assertMatches("a*b*c", ["abc", "aXbYc", "abbbc", "acbc", "ab.c.c"], ["ab", "acb", "abcx", "xabc"])
        assertMatches("a**b", ["ab", "a.x.b"], ["a", "ba"])
        assertMatches("*?", ["a", "ab"], [""])
    }

    func testBacktrackingNeedsMoreThanTheFirstCandidate() {
        // The first "b" after "a" is the wrong one: the matcher must retry from a later position.
        assertMatches("a*bc", ["abxbc", "abcbc"], ["abxb", "abcb"])
        // Long adversarial input stays a plain match/no-match answer.
        let id = String(repeating: "a", count: 127) + "b"
        assertMatches("*a*a*a*a*a*a*c", [], [id])
        assertMatches("*a*a*a*a*a*a*b", [id], [])
    }

    func testValidity() {
        for good in ["*", "ci.*", "a?b", "build-42", "*.deploy", "?", "A_Z.0-9", String(repeating: "a", count: 128)] {
            XCTAssertTrue(Glob.isValid(good), good)
        }
        for bad in ["", "a/b", "a b", "ci.#", "ü*", "a,b", String(repeating: "a", count: 129)] {
            XCTAssertFalse(Glob.isValid(bad), bad)
        }
    }

    func testValidityAgreesWithTheDocumentedPattern() {
        // Glob.pattern says a pattern starts with a letter, digit, '*' or '?', as ids start with a letter or digit:
        // a pattern starting with '.', '_' or '-' could never match any valid id.
        for bad in [".x", "_*", "-a"] {
            XCTAssertNil(bad.range(of: Glob.pattern, options: .regularExpression), bad)
            XCTAssertFalse(Glob.isValid(bad), bad)
        }
    }

    func testTaskIDValidity() {
        for good in ["a", "ci.build-42", "A_1", "9", "a." + String(repeating: "b", count: 126)] {
            XCTAssertTrue(TaskID.isValid(good), good)
        }
        for bad in ["", ".a", "_a", "-a", "a/b", "a b", "a*", "é", "a?", String(repeating: "a", count: 129)] {
            XCTAssertFalse(TaskID.isValid(bad), bad)
        }
    }

    // MARK: WatchSet

    func testWatchSetDefaultsToEverything() throws {
        for list in [nil, "", ",", ",,"] as [String?] {
            let watch = try WatchSet.parse(list).get()
            XCTAssertEqual(watch.key, "*")
            XCTAssertTrue(watch.matchesAll)
            XCTAssertTrue(watch.matches("any.thing"))
        }
    }

    func testWatchSetMatchesWhenAnyPatternDoes() throws {
        let watch = try WatchSet.parse("a.*,b.?,a.*").get()
        XCTAssertEqual(watch.globs.map(\.pattern), ["a.*", "b.?"], "duplicates are dropped, order kept")
        XCTAssertEqual(watch.key, "a.*,b.?")
        XCTAssertFalse(watch.matchesAll)
        XCTAssertTrue(watch.matches("a.x.y"))
        XCTAssertTrue(watch.matches("b.1"))
        XCTAssertFalse(watch.matches("b.12"))
        XCTAssertFalse(watch.matches("c.a"))
        XCTAssertTrue(try WatchSet.parse("x,*").get().matchesAll)
    }

    func testWatchSetEqualityGroupsSameLists() throws {
        XCTAssertEqual(try WatchSet.parse("a.*,b.*").get(), try WatchSet.parse("a.*,,b.*,a.*").get())
        XCTAssertNotEqual(try WatchSet.parse("a.*").get(), try WatchSet.parse("b.*").get())
    }

    /// Shared snapshots are found by a watch set's hash and equality, which read the patterns in
    /// place: the same lists meet, and a list is never taken for its prefix, its reordering, or
    /// its patterns run together.
    func testWatchSetHashAndEqualityAreThoseOfItsPatternList() throws {
        let sets = try ["a.*", "a.*,b.*", "b.*,a.*", "a.*,b.*,c", "a.*b.*", "*"].map { try WatchSet.parse($0).get() }
        for (i, lhs) in sets.enumerated() {
            for (j, rhs) in sets.enumerated() { XCTAssertEqual(lhs == rhs, i == j, "\(lhs.key) against \(rhs.key)") }
        }
        XCTAssertEqual(Set(sets + sets.map { WatchSet($0.globs.map { Glob($0.pattern) }) }).count, sets.count)
        XCTAssertEqual(try WatchSet.parse("a.*,b.*").get().hashValue, WatchSet([Glob("a.*"), Glob("b.*")]).hashValue)
    }

    func testInvalidWatchPatternNamesTheField() {
        guard case .failure(let error) = WatchSet.parse("ok.*,bad/one") else { return XCTFail("accepted a '/'") }
        XCTAssertEqual(error.code, .invalidPattern)
        XCTAssertEqual(error.status, 400)
        XCTAssertEqual(error.field, "watch")
        XCTAssertTrue(error.message.contains("'bad/one'"), error.message)
    }
    func testAWatchListIsCappedInCountAndBytes() throws {
        let most = (0..<WatchSet.maxPatterns).map { "p\($0).*" }.joined(separator: ",")
        XCTAssertEqual(try WatchSet.parse(most).get().globs.count, WatchSet.maxPatterns)
        let hostile = (0..<117).map { "*" + String(repeating: "a", count: 64) + "Z\($0)" }.joined(separator: ",")
        let tooLong = (0..<10).map { String(repeating: "a", count: 120) + "\($0)*" }.joined(separator: ",")
        for list in [most + ",x.*", hostile, tooLong] {
            guard case .failure(let error) = WatchSet.parse(list) else { return XCTFail("accepted \(list.utf8.count) bytes") }
            XCTAssertEqual(error.code, .invalidPattern)
            XCTAssertEqual(error.field, "watch")
            XCTAssertTrue(error.message.contains("at most \(WatchSet.maxPatterns) patterns"), error.message)
        }
    }

    // MARK: The matcher against the backtracking one it replaced

    /// The two-pointer matcher with one backtrack point that served before: right, but its cost is
    /// the id's length times the pattern's on an id that almost matches.
    private static func backtrackingMatch(_ pattern: [UInt8], _ text: [UInt8]) -> Bool {
        var p = 0
        var t = 0
        var starP = -1
        var starT = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "?") || pattern[p] == text[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                starP = p
                starT = t
                p += 1
            } else if starP >= 0 {
                p = starP + 1
                starT += 1
                t = starT
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }

    /// Random patterns and ids over a small alphabet, so that near misses are common: both matchers
    /// answer the same, for short patterns (one word of states) and long ones (several).
    func testTheMatcherAgreesWithTheBacktrackingOneOnRandomInputs() {
        var random = SeededGenerator(seed: 7)
        let idBytes = Array("ab.".utf8)
        let patternBytes = Array("ab.*?".utf8)
        func string(_ alphabet: [UInt8], _ length: Int) -> [UInt8] {
            (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
        }
        var matched = 0
        for round in 0..<40_000 {
            let long = round % 4 == 0
            let pattern = string(patternBytes, Int(random.next() % (long ? 140 : 9)))
            let id = string(idBytes, Int(random.next() % (long ? 160 : 12)))
            let glob = Glob(String(decoding: pattern, as: UTF8.self))
            let expected = GlobTests.backtrackingMatch(pattern, id)
            XCTAssertEqual(glob.matches(String(decoding: id, as: UTF8.self)), expected, "\(glob) against \(String(decoding: id, as: UTF8.self))")
            XCTAssertEqual(glob.matches(String(decoding: id, as: UTF8.self), holding: ByteSet(id)), expected, "\(glob), bytes counted")
            if expected { matched += 1 }
        }
        XCTAssertGreaterThan(matched, 2_000, "the inputs exercise matches, not only misses")
    }

    /// Patterns built to match a given id, then mutated by one byte: both answers agree there too,
    /// where the automaton's star and carry handling across words is exercised.
    func testTheMatcherAgreesOnPatternsCutFromTheId() {
        var random = SeededGenerator(seed: 11)
        let idBytes = Array("abc".utf8)
        for _ in 0..<5_000 {
            let id = (0..<Int(1 + random.next() % 150)).map { _ in idBytes[Int(random.next() % 3)] }
            var pattern: [UInt8] = []
            for byte in id {
                switch random.next() % 8 {
                case 0: pattern.append(UInt8(ascii: "*"))
                case 1: pattern.append(UInt8(ascii: "?"))
                case 2: continue
                default: pattern.append(byte)
                }
            }
            if random.next() % 2 == 0, !pattern.isEmpty {
                pattern[Int(random.next() % UInt64(pattern.count))] = idBytes[Int(random.next() % 3)]
            }
            let glob = Glob(String(decoding: pattern, as: UTF8.self))
            XCTAssertEqual(glob.matches(String(decoding: id, as: UTF8.self)), GlobTests.backtrackingMatch(pattern, id), glob.pattern)
        }
    }

    func testANearMissOfManyStarsStaysAPlainNo() {
        let id = String(repeating: "a", count: 128)
        assertMatches("*" + String(repeating: "a", count: 60) + "Znxi", [], [id])
        assertMatches(String(repeating: "*a", count: 64), [id], [id + "b"])
        assertMatches(String(repeating: "*a", count: 63) + "*b", [], [id])
    }
}
