import Foundation
import RingcastCore

/// `ringcast ls --watch`: the server's table of bars (`GET /api/tasks?format=text`), redrawn in
/// place until Ctrl-C. On a terminal it draws on the alternate screen, as wide as the terminal,
/// cut to its height, under a line with the server and the time, and puts the screen back when
/// it ends; into a pipe or a file it prints the table again each time it changes (a CI log reads
/// it as it went). It asks twice a second; a server that goes away is said on the last line and
/// asked again, and only a server unreachable at the start ends it (exit status 1).
struct LiveList {
    /// Seconds between two looks.
    static let interval = 0.5

    let session: ProducerSession
    let watch: String?
    let json: Bool
    /// Into a pipe: whether a table was printed already.
    private var hasShown = false

    init(session: ProducerSession, watch: String?, json: Bool) {
        self.session = session
        self.watch = watch
        self.json = json
    }

    mutating func run() throws(CommandFailure) -> Int32 {
        let terminal = isatty(STDOUT_FILENO) == 1
        var last = try look(width: terminal ? LiveList.terminalSize().columns : TextTable.defaultWidth)
        if terminal { write("\u{1B}[?1049h\u{1B}[?25l") }
        defer { if terminal { write("\u{1B}[?25h\u{1B}[?1049l") } }
        show(last, terminal: terminal, trouble: nil)
        var trouble: String?
        while TerminationSignals.take(timeout: LiveList.interval) == nil {
            let width = terminal ? LiveList.terminalSize().columns : TextTable.defaultWidth
            do {
                let now = try look(width: width)
                let changed = now != last || trouble != nil
                (last, trouble) = (now, nil)
                if changed || terminal { show(last, terminal: terminal, trouble: nil) }
            } catch {
                if trouble == nil, !terminal { fail("ls: \(error); trying again") }
                trouble = "\(error); trying again"
                if terminal { show(last, terminal: terminal, trouble: trouble) }
            }
        }
        return 0
    }

    /// The table (or the JSON answer, on one line) as the server has it now.
    private func look(width: Int) throws(CommandFailure) -> String {
        var query = ["width=\(width)"]
        if let watch { query.append("watch=\(watch)") }
        if json {
            return String(
                decoding: JSONWriter.encode(try session.send("GET", "/api/tasks?" + query.dropFirst().joined(separator: "&"))), as: UTF8.self) + "\n"
        }
        return try session.text("/api/tasks?format=text&" + query.joined(separator: "&"))
    }

    private mutating func show(_ table: String, terminal: Bool, trouble: String?) {
        guard terminal else {
            // Tables one after another, a blank line between them; JSON answers a line each.
            let cleaned = json ? table : table.split(separator: "\n").map { TerminalText.clean(String($0)) + "\n" }.joined()
            write((json || !hasShown ? "" : "\n") + cleaned)
            hasShown = true
            return
        }
        let size = LiveList.terminalSize()
        // The server cleaned its table, but a server may lie too: nothing in it acts on the terminal.
        var lines = table.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { TerminalText.clean(String($0)) }
        let clock = DateFormatter()
        clock.dateFormat = "HH:mm:ss"
        let top = TerminalText.clean("ringcast ls --watch · \(session.options.serverText) · \(clock.string(from: Date()))")
        let room = max(3, size.rows - 2 - (trouble == nil ? 0 : 1))
        if lines.count > room {
            // The header, as many rows as fit, and the count of the rest above the summary.
            let hidden = lines.count - room + 1
            lines =
                Array(lines.prefix(room - 2)) + [
                    "… \(hidden) more (make the terminal taller, or list fewer: ringcast ls PATTERNS --watch)", lines.last!,
                ]
        }
        var frame = "\u{1B}[H" + top + "\u{1B}[K\n\u{1B}[K\n"
        for line in lines { frame += line + "\u{1B}[K\n" }
        if let trouble { frame += "! " + TerminalText.clean(trouble) + "\u{1B}[K\n" }
        write(frame + "\u{1B}[J")
    }

    private func write(_ text: String) {
        _ = writeAll(ArraySlice(Array(text.utf8)), to: STDOUT_FILENO)
    }

    /// The terminal's columns (kept within what the server draws) and rows.
    static func terminalSize() -> (columns: Int, rows: Int) {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return (TextTable.defaultWidth, 24) }
        let columns = min(TextTable.widths.upperBound, max(TextTable.widths.lowerBound, Int(size.ws_col)))
        return (columns, max(5, Int(size.ws_row)))
    }
}
