import XCTest

@testable import ringcast

/// How `run` and `pipe` cut output into log lines: as a terminal would show it.
final class LogLineSplitterTests: XCTestCase {
    private func lines(_ pieces: [String]) -> [String] {
        var splitter = LogLineSplitter()
        var found: [String] = []
        for piece in pieces { splitter.feed(Array(piece.utf8)) { found.append($0) } }
        splitter.finish { found.append($0) }
        return found
    }

    func testLinesEndAtLineBreaksAndTheLastOneAtTheEnd() {
        XCTAssertEqual(lines(["one\ntwo\n", "\nthr", "ee"]), ["one", "two", "", "three"])
        XCTAssertEqual(lines(["crlf\r\n", "next\r", "\n"]), ["crlf", "next"], "a \\r\\n ends a line, also across reads")
    }

    func testACarriageReturnStartsTheLineOverAsARedrawDoes() {
        XCTAssertEqual(lines(["  10%|█    |\r  50%|█████|\r 100%|██████████|\n"]), [" 100%|██████████|"])
        XCTAssertEqual(lines(["downloading\r", "done\n"]), ["done"])
    }

    func testEscapeSequencesAreDroppedAndBadBytesReplaced() {
        XCTAssertEqual(lines(["\u{1B}[1;31merror:\u{1B}[0m failed\n"]), ["error: failed"])
        XCTAssertEqual(lines(["\u{1B}]0;title\u{07}text\n", "\u{1B}]2;t\u{1B}\\more\n"]), ["text", "more"])
        var splitter = LogLineSplitter()
        var found: [String] = []
        splitter.feed([0x61, 0xFF, 0x62, 0x0A]) { found.append($0) }
        XCTAssertEqual(found, ["a\u{FFFD}b"])
    }

    func testAnEndlessLineIsCut() {
        XCTAssertEqual(lines([String(repeating: "x", count: LogLineSplitter.maxBytes + 100) + "\n"]).first?.utf8.count, LogLineSplitter.maxBytes)
    }
}
