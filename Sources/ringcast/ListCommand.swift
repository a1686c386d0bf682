import Foundation
import RingcastClient
import RingcastCore

/// `ringcast ls`: the tasks as a table (or as the server's JSON); `--watch` redraws the server's
/// table of bars live (LiveList.swift).
struct ListCommand: ProducerCommand {
    static let name = "ls"
    static let summary = "list the tasks as a table; --watch redraws it live"
    static let usage = ["ringcast ls [PATTERNS] [--watch] [--json]"]
    static let discussion = """
        Lists the server's tasks: id, state, progress, title and the server's estimate of the time left
        (a timer's time left). `-` marks an indeterminate task (a spinner) or an unknown estimate.
        PATTERNS are globs over ids, comma-separated (e.g. 'ci.*,deploy.web'); all tasks by default.
        With --watch, the server's table of bars (GET /api/tasks?format=text, as wide as the terminal)
        is redrawn in place twice a second until Ctrl-C; when standard output is no terminal, the
        table is printed again each time it changes.
        """
    static let ownOptions: [Option] = [
        .flag("watch", "redraw the server's table of bars live until Ctrl-C"),
        .flag("json", "print the server's answer (epoch, seq, tasks) as JSON instead (with --watch: a line each time it changes)"),
    ]

    let session: ProducerSession
    let watch: String?
    let json: Bool
    let live: Bool

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        guard options.positional.count <= 1 else {
            throw UsageError("unexpected argument '\(options.positional[1])': give the patterns comma-separated, e.g. 'ci.*,deploy.web'")
        }
        let patterns = options.positional.first
        if let patterns, case .failure(let error) = WatchSet.parse(patterns) {
            throw UsageError(error.message)
        }
        watch = patterns
        json = options.flag("json")
        live = options.flag("watch")
    }

    func run() throws(CommandFailure) -> Int32 {
        if live {
            var list = LiveList(session: session, watch: watch, json: json)
            return try list.run()
        }
        let path = "/api/tasks" + (watch.map { "?watch=\($0)" } ?? "")
        let answer = try session.send("GET", path)
        if json {
            print(String(decoding: JSONWriter.encode(answer), as: UTF8.self))
            return 0
        }
        guard case .array(let tasks)? = answer["tasks"] else { throw CommandFailure("the server's answer holds no task list") }
        print(ListCommand.table(tasks), terminator: "")
        return 0
    }

    /// Left-aligned columns two spaces apart, counted in the columns a terminal gives them; every
    /// cell cleaned (the server's answer may carry anything a publisher sent), titles cut at 40 columns.
    static func table(_ tasks: [JSONValue]) -> String {
        var rows = [["ID", "STATE", "PROGRESS", "TITLE", "ETA"]]
        for task in tasks {
            func string(_ key: String) -> String? {
                if case .string(let text)? = task[key] { return text }
                return nil
            }
            func number(_ key: String, in object: JSONValue? = nil) -> Double? {
                if case .number(let value)? = (object ?? task)[key] { return value }
                return nil
            }
            let progress = number("progress").map { "\(Int(($0 * 100).rounded(.down)))%" } ?? "-"
            let title = TerminalText.cut(TerminalText.clean(string("title") ?? ""), toColumns: 40)
            let left = task["timer"].flatMap { number("remaining", in: $0) } ?? number("eta")
            rows.append(
                [string("id") ?? "?", string("state") ?? "?", progress, title, left.map(duration) ?? "-"].map { TerminalText.clean($0) })
        }
        let widths = (0..<5).map { column in rows.map { TerminalText.columns(of: $0[column]) }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : TerminalText.pad(cell, widths[column])
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }

    /// `45s`, `3m05s`, `2h10m`.
    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded(.up))
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m" + String(format: "%02ds", total % 60) }
        return "\(total / 3600)h" + String(format: "%02dm", total % 3600 / 60)
    }
}
