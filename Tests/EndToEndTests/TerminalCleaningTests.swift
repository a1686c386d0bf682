import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// What a publisher or a peer writes never acts on the terminal that shows it: titles, details
/// and log lines holding every class of control, read through `ringcast ls` and `ls --watch` on a
/// real pty (`script`, util-linux), and a Host header with an escape sequence in the server's text log.
final class TerminalCleaningTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-terminal") }
    override func tearDown() { folder?.remove() }

    /// Every class of control, each as a payload of its own.
    static let controls: [String] = [
        "\r\u{1B}[2Kdone 100%", "ab\u{8}\u{8}", "\u{7}", "\t\n\u{B}\u{C}", "\u{0}", "\u{7F}", "\u{1B}[31;1m", "\u{1B}[?1049h",
        "\u{1B}[H\u{1B}[2J", "\u{1B}]0;owned title\u{7}", "\u{1B}]8;;http://evil.example/\u{1B}\\click\u{1B}]8;;\u{1B}\\",
        "\u{1B}]52;c;cm0gLXJmIH4=\u{7}", "\u{1B}Pq#0;2;0;0;0\u{1B}\\", "\u{1B}_payload\u{1B}\\", "\u{1B}c\u{1B}(0", "\u{9B}2J",
        "\u{9D}0;c1 title\u{9C}", "\u{85}\u{84}\u{8D}", "\u{202A}\u{202B}\u{202C}\u{202D}\u{202E}", "\u{2066}\u{2067}\u{2068}\u{2069}",
        "\u{200E}\u{200F}\u{061C}", "\u{2028}\u{2029}", "\u{1B}",
    ]
    static let wide = [
        "wide.cjk": "日本語のタイトルがとても長い場合でも表は崩れません、日本語のタイトル",
        "wide.emoji": String(repeating: "🎉👨‍👩‍👧🇫🇷❤️ ", count: 12),
        "wide.marks": String(repeating: "e\u{301}", count: 30),
    ]

    /// `script` runs `command` on a pty of its own and copies what reached it.
    private func onATerminal(_ command: String, port: Int) throws -> [UInt8] {
        try MissingBinary.check()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", "stty rows 60 cols 120; " + command, "/dev/null"]
        var environment = ProcessInfo.processInfo.environment
        environment["RINGCAST"] = ringcastBinary
        environment["RINGCAST_URL"] = "http://127.0.0.1:\(port)"
        environment["RINGCAST_TOKEN"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Array(bytes)
    }

    /// What no byte of a title may become on the terminal: a control (C0 but the pty's own CR LF,
    /// DEL, C1), or a bidirectional control.
    private func assertNothingActsOnTheTerminal(_ text: String, _ surface: String, file: StaticString = #filePath, line: UInt = #line) {
        let scalars = Array(text.unicodeScalars)
        for (index, scalar) in scalars.enumerated() {
            let value = scalar.value
            let ptyLineEnd = (value == 0x0D && index + 1 < scalars.count && scalars[index + 1] == "\n") || value == 0x0A
            if ptyLineEnd { continue }
            let bidi =
                [0x061C, 0x200E, 0x200F, 0x2028, 0x2029].contains(value) || (0x202A...0x202E).contains(value) || (0x2066...0x206F).contains(value)
            if value < 0x20 || (0x7F..<0xA0).contains(value) || bidi {
                let context = String(String.UnicodeScalarView(scalars[max(0, index - 20)..<min(scalars.count, index + 20)]))
                XCTFail(
                    "\(surface): U+\(String(value, radix: 16, uppercase: true)) reached the terminal in \(context.debugDescription)", file: file,
                    line: line)
                return
            }
        }
        for hidden in ["owned title", "c1 title", "cm0gLXJmIH4=", "evil.example", "payload"] {
            XCTAssertFalse(text.contains(hidden), "\(surface): the text of a control string reached the terminal: \(hidden)", file: file, line: line)
        }
    }

    func testNothingAPublisherOrAPeerWritesReachesTheTerminal() throws {
        let config = folder.file("config.json")
        try Data(#"{"host": "127.0.0.1", "port": 0, "publicDir": "\#(repositoryRoot)/Public", "logLevel": "debug"}"#.utf8).write(to: config)
        let log = folder.file("stderr.log")
        let served = try ServeProcess(["--config", config.path], errorLog: log)
        let client = HTTPClient(host: "127.0.0.1", port: served.port)
        func post(_ path: String, _ body: JSONValue) throws {
            let answer = try client.request("POST", path, body: JSONWriter.encode(body))
            XCTAssertEqual(answer.status, 200, "\(path): \(String(decoding: answer.body, as: UTF8.self))")
        }
        for (index, payload) in TerminalCleaningTests.controls.enumerated() {
            let id = "hostile.\(index < 10 ? "0" : "")\(index)"
            try post(
                "/api/tasks/\(id)",
                .object([("title", .string("T\(index) \(payload) end")), ("detail", .string(payload)), ("progress", .number(0.5))]))
            try post("/api/tasks/\(id)/log", .object([("lines", .array([.string(payload), .string("line \(payload) end")]))]))
        }
        for (id, title) in TerminalCleaningTests.wide.sorted(by: { $0.key < $1.key }) {
            try post("/api/tasks/\(id)", .object([("title", .string(title)), ("progress", .number(0.5))]))
        }
        // A peer's Host, into the server's log of refusals.
        let raw = try RawSocket(port: served.port)
        try raw.send("GET /api/tasks HTTP/1.1\r\nHost: evil\u{1B}]0;owned title\u{7}\u{1B}[2J.host.test\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(String(decoding: raw.receive().bytes, as: UTF8.self).hasPrefix("HTTP/1.1 421"), "a Host that names no host of this server")

        // ringcast ls: a row per task, columns aligned by what the terminal shows.
        let listed = String(decoding: try onATerminal("\"$RINGCAST\" ls", port: served.port), as: UTF8.self)
        assertNothingActsOnTheTerminal(listed, "ringcast ls")
        let rows = listed.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        XCTAssertEqual(rows.count, 1 + TerminalCleaningTests.controls.count + TerminalCleaningTests.wide.count, listed)
        XCTAssertTrue(
            rows.contains { $0.hasPrefix("hostile.00") && $0.contains("T0  done 100% end") }, "the words stay, the CR and the erase go: \(listed)")
        XCTAssertTrue(rows.contains { $0.hasPrefix("wide.cjk") && $0.contains("日本語のタイトル") && $0.contains("…") }, listed)
        XCTAssertFalse(listed.contains("\u{FFFD}"), "no cluster is split")
        let taskRows = rows.dropFirst()
        let widths = Set(taskRows.map { TerminalText.columns(of: $0) })
        XCTAssertEqual(widths.count, 1, "every row is as wide on the terminal (each ends with the same ETA, -): \(widths)\n\(listed)")
        XCTAssertEqual(taskRows.map { $0.split(separator: " ", omittingEmptySubsequences: true).last }, Array(repeating: "-", count: taskRows.count))

        // ls --watch: the server's table on the alternate screen, and only the command's own sequences.
        // It redraws until Ctrl-C, sent 8 s on: the time only ends it, what it drew is asserted.
        let watched = String(
            decoding: try onATerminal("timeout --foreground -s INT 8 \"$RINGCAST\" ls --watch", port: served.port), as: UTF8.self)
        var shown = watched
        for own in ["\u{1B}[?1049h", "\u{1B}[?1049l", "\u{1B}[?25l", "\u{1B}[?25h", "\u{1B}[H", "\u{1B}[K", "\u{1B}[J"] {
            shown = shown.replacingOccurrences(of: own, with: "")
        }
        assertNothingActsOnTheTerminal(shown, "ringcast ls --watch")
        let bars = Set(shown.components(separatedBy: "\r\n").filter { $0.contains(" 50%  ") })
        XCTAssertEqual(
            Set(bars.compactMap { $0.split(separator: " ", maxSplits: 3).dropFirst(2).first.map(String.init) }).count,
            TerminalCleaningTests.controls.count + TerminalCleaningTests.wide.count, "a row for each task: \(shown)")
        XCTAssertEqual(Set(bars.map { TerminalText.columns(of: $0) }).count, 1, "every row as wide, ending at its state: \(bars)")
        XCTAssertTrue(bars.allSatisfy { TerminalText.columns(of: $0) <= 120 && $0.hasSuffix("running") }, "\(bars)")

        XCTAssertEqual(served.stop(), 0)
        let serverLog = try String(contentsOf: log, encoding: .utf8)
        XCTAssertTrue(serverLog.contains("evil.host.test"), "the refusal is logged: \(serverLog)")
        assertNothingActsOnTheTerminal(serverLog, "the server's text log")
    }
}
