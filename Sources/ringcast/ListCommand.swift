import Foundation
import RingcastClient
import RingcastCore

/// `ringcast ls`: the tasks as a table (or as the server's JSON).
struct ListCommand: ProducerCommand {
    static let name = "ls"
    static let summary = "list the tasks as a table"
    static let usage = ["ringcast ls [--watch PATTERNS] [--json]"]
    static let discussion = """
    Lists the server's tasks: id, state, progress, title and the server's estimate of the time left
    (a timer's time left). `-` marks an indeterminate task (a spinner) or an unknown estimate.
    """
    static let ownOptions: [Option] = [
        .value("watch", "PATTERNS", "only ids matching these globs, comma-separated (e.g. 'ci.*,deploy.web')"),
        .flag("json", "print the server's answer (epoch, seq, tasks) as JSON instead"),
    ]

    let session: ProducerSession
    let watch: String?
    let json: Bool

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        try options.noPositional()
        if let watch = options.value("watch"), case let .failure(error) = WatchSet.parse(watch) {
            throw UsageError("--watch: \(error.message)")
        }
        watch = options.value("watch")
        json = options.flag("json")
    }

    func run() throws(CommandFailure) -> Int32 {
        let path = "/api/tasks" + (watch.map { "?watch=\($0)" } ?? "")
        let answer = try session.send("GET", path)
        if json {
            print(String(decoding: JSONWriter.encode(answer), as: UTF8.self))
            return 0
        }
        guard case let .array(tasks)? = answer["tasks"] else { throw CommandFailure("the server's answer holds no task list") }
        print(ListCommand.table(tasks), terminator: "")
        return 0
    }

    /// Left-aligned columns two spaces apart; titles cut at 40 characters.
    static func table(_ tasks: [JSONValue]) -> String {
        var rows = [["ID", "STATE", "PROGRESS", "TITLE", "ETA"]]
        for task in tasks {
            func string(_ key: String) -> String? { if case let .string(text)? = task[key] { return text }; return nil }
            func number(_ key: String, in object: JSONValue? = nil) -> Double? {
                if case let .number(value)? = (object ?? task)[key] { return value }
                return nil
            }
            let progress = number("progress").map { "\(Int(($0 * 100).rounded(.down)))%" } ?? "-"
            var title = string("title") ?? ""
            if title.count > 40 { title = String(title.prefix(39)) + "…" }
            let left = task["timer"].flatMap { number("remaining", in: $0) } ?? number("eta")
            rows.append([string("id") ?? "?", string("state") ?? "?", progress, title, left.map(duration) ?? "-"])
        }
        let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
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
