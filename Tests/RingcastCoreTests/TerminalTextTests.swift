import XCTest

@testable import RingcastCore

/// The one cleaning of text bound for a terminal, and its measure in columns.
final class TerminalTextTests: XCTestCase {
    /// Every class of control a hostile title or log line may carry, each between two words.
    static let hostile: [(name: String, text: String)] = [
        ("CR and erase line", "\r\u{1B}[2Kdone 100%"),
        ("backspace", "ab\u{8}\u{8}"),
        ("bell", "\u{7}"),
        ("tab, line feed, vertical tab, form feed", "\t\n\u{B}\u{C}"),
        ("NUL", "\u{0}"),
        ("DEL", "\u{7F}"),
        ("CSI colour", "\u{1B}[31;1m"),
        ("CSI private mode", "\u{1B}[?1049h"),
        ("cursor home and clear", "\u{1B}[H\u{1B}[2J"),
        ("OSC 0 title, BEL", "\u{1B}]0;owned title\u{7}"),
        ("OSC 8 link, ST", "\u{1B}]8;;http://evil.example/\u{1B}\\click\u{1B}]8;;\u{1B}\\"),
        ("OSC 52 clipboard", "\u{1B}]52;c;cm0gLXJmIH4=\u{7}"),
        ("DCS", "\u{1B}Pq#0;2;0;0;0\u{1B}\\"),
        ("APC", "\u{1B}_payload\u{1B}\\"),
        ("two-character escape", "\u{1B}c\u{1B}(0"),
        ("C1 CSI", "\u{9B}2J"),
        ("C1 OSC", "\u{9D}0;c1 title\u{9C}"),
        ("C1 NEL and others", "\u{85}\u{84}\u{8D}"),
        ("bidi overrides", "\u{202A}\u{202B}\u{202C}\u{202D}\u{202E}"),
        ("bidi isolates", "\u{2066}\u{2067}\u{2068}\u{2069}"),
        ("bidi marks", "\u{200E}\u{200F}\u{061C}"),
        ("line and paragraph separators", "\u{2028}\u{2029}"),
        ("an escape cut short", "\u{1B}"),
    ]

    func testNothingATerminalActsOnSurvives() {
        for (name, payload) in TerminalTextTests.hostile {
            let cleaned = TerminalText.clean("before " + payload + " after")
            XCTAssertTrue(cleaned.hasPrefix("before "), name)
            for scalar in cleaned.unicodeScalars {
                let value = scalar.value
                XCTAssertFalse(
                    value < 0x20 || (0x7F..<0xA0).contains(value), "\(name): U+\(String(value, radix: 16)) left in \(cleaned.debugDescription)")
                XCTAssertFalse(
                    [0x061C, 0x200E, 0x200F, 0x2028, 0x2029].contains(value) || (0x202A...0x202E).contains(value)
                        || (0x2066...0x206F).contains(value),
                    "\(name): bidi control left")
            }
            XCTAssertEqual(TerminalText.clean(cleaned), cleaned, "\(name): cleaning twice changes nothing")
        }
    }

    func testSequencesGoWholeAndOtherControlsBecomeSpaces() {
        XCTAssertEqual(TerminalText.clean("red \u{1B}[31mred\u{1B}[0m\tend"), "red red end")
        XCTAssertEqual(TerminalText.clean("a\u{1B}]0;title\u{7}b"), "ab", "an OSC's text is not shown")
        XCTAssertEqual(TerminalText.clean("a\u{1B}]52;c;AAAA\u{1B}\\b"), "ab")
        XCTAssertEqual(
            TerminalText.clean("a\u{1B}]8;;http://x/\u{1B}\\link\u{1B}]8;;\u{1B}\\b"), "alinkb", "a hyperlink's text stays, its target goes")
        XCTAssertEqual(TerminalText.clean("failed\r\u{1B}[2Kdone 100%"), "failed done 100%", "a CR cannot hide what came before")
        XCTAssertEqual(TerminalText.clean("x\u{1B}]0;never ended"), "x", "an OSC nothing ends hides the rest, it never reaches the terminal")
        XCTAssertEqual(TerminalText.clean("\u{202E}gnp.exe"), "gnp.exe")
        XCTAssertEqual(TerminalText.clean("plain words, accents é, 日本語, 🎉"), "plain words, accents é, 日本語, 🎉")
    }

    func testColumnsAreCountedAsATerminalDoes() {
        XCTAssertEqual(TerminalText.columns(of: "Build 42"), 8)
        XCTAssertEqual(TerminalText.columns(of: "日本語"), 6, "East Asian Wide")
        XCTAssertEqual(TerminalText.columns(of: "ＡＢ"), 4, "Fullwidth")
        XCTAssertEqual(TerminalText.columns(of: "🎉"), 2, "emoji presentation")
        XCTAssertEqual(TerminalText.columns(of: "❤\u{FE0F}"), 2, "text emoji asked for as emoji")
        XCTAssertEqual(TerminalText.columns(of: "👨‍👩‍👧"), 2, "a ZWJ family is one cluster")
        XCTAssertEqual(TerminalText.columns(of: "🇫🇷"), 2, "a flag")
        XCTAssertEqual(TerminalText.columns(of: "e\u{301}"), 1, "a combining accent takes no column")
    }

    func testCuttingKeepsClustersWhole() {
        XCTAssertEqual(TerminalText.cut("日本語のタイトル", toColumns: 7), "日本語…", "a wide character is not split")
        XCTAssertEqual(TerminalText.columns(of: TerminalText.fit("日本語のタイトル", 8)), 8, "padded to the column")
        let family = "👨‍👩‍👧"
        let cut = TerminalText.cut(String(repeating: family, count: 10), toColumns: 7)
        XCTAssertEqual(cut, family + family + family + "…", "no cluster split, no U+FFFD")
        XCTAssertFalse(cut.unicodeScalars.contains("\u{FFFD}"))
        XCTAssertEqual(TerminalText.cut("e\u{301}e\u{301}e\u{301}", toColumns: 2), "e\u{301}…")
        XCTAssertEqual(TerminalText.pad("宽", 4), "宽  ")
        XCTAssertEqual(TerminalText.cut("short", toColumns: 40), "short")
    }
}
