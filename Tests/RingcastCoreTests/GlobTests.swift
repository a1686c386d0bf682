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

    func testInvalidWatchPatternNamesTheField() {
        guard case .failure(let error) = WatchSet.parse("ok.*,bad/one") else { return XCTFail("accepted a '/'") }
        XCTAssertEqual(error.code, .invalidPattern)
        XCTAssertEqual(error.status, 400)
        XCTAssertEqual(error.field, "watch")
        XCTAssertTrue(error.message.contains("'bad/one'"), error.message)
    }
}
