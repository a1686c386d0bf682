import Foundation
import RingcastCore

/// `ringcast watch ID`: one task live in the terminal, as `gh run watch` shows a run: the server's
/// bars for it and its children, its rate, time left and elapsed time, and its log as it grows;
/// it ends when the task does, with that end's exit status.
struct WatchCommand: ProducerCommand {
    static let name = "watch"
    static let summary = "follow one task live until it ends: ringcast watch ci.build"
    static let usage = ["ringcast watch ID"]
    static let discussion = """
        Shows task ID live until it ends: on a terminal, redrawn in place twice a second, the server's
        bars for the task and its children, its rate, time left and elapsed time, and the last lines of
        its log; the last view stays on the screen when it ends. Into a pipe or a file it prints a line
        each time the task's state, progress or detail changes, and each new log line indented. A task
        that does not exist yet is waited for until it appears; a server that goes away (a restart) is
        asked again until it answers. Everything shown is cleaned as `ls` cleans it: nothing a publisher
        wrote acts on the terminal.
        """
    static let epilogue = EndStatus.epilogue(waiting: false)

    let session: ProducerSession
    let id: String

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
    }

    func run() throws(CommandFailure) -> Int32 {
        var view = WatchView(session: session, id: id, terminal: isatty(STDOUT_FILENO) == 1)
        if view.terminal { view.write("\u{1B}[?1049h\u{1B}[?25l") }
        var status: Int32 = 1
        defer {
            if view.terminal {
                view.write("\u{1B}[?25h\u{1B}[?1049l")
                // The last view stays where the user can read it, as gh run watch leaves its run.
                view.write(view.lastFrame.joined(separator: "\n") + "\n")
            }
            if let task = view.task, EndStatus.of(state: task.state) == status {
                let took = task.elapsed(now: Date().timeIntervalSince1970 * 1000).map { " after " + ListCommand.duration($0) } ?? ""
                print(task.line + took)
            }
        }
        status = try pollUntilEnd(
            command: Self.name, deadline: nil, troubleOnStderr: !view.terminal,
            look: { () throws(CommandFailure) -> Int32? in try view.look() },
            trouble: { view.trouble = $0 })
        return status
    }
}

/// What `watch` has shown, and how it shows the next look.
struct WatchView {
    let session: ProducerSession
    let id: String
    let terminal: Bool
    private(set) var task: TaskView?
    var trouble: String? {
        didSet { if terminal, trouble != oldValue { draw() } }
    }
    private(set) var lastFrame: [String] = []
    private var table: [String] = []
    private var log: [String] = []
    private var logCount = 0.0
    private var lastLine: String?

    init(session: ProducerSession, id: String, terminal: Bool) {
        self.session = session
        self.id = id
        self.terminal = terminal
    }

    /// One look at the task; its end's status once it has ended.
    mutating func look() throws(CommandFailure) -> Int32? {
        let answer = try session.send("GET", "/api/tasks?watch=\(id)")
        var found: TaskView?
        if case .array(let list)? = answer["tasks"] {
            found = list.map(TaskView.init(json:)).first { $0.id == id }
        }
        task = found
        if found != nil {
            let width = terminal ? LiveList.terminalSize().columns : TextTable.defaultWidth
            table = try session.text("/api/tasks/\(id)?format=text&width=\(width)").split(separator: "\n").map { TerminalText.clean(String($0)) }
        }
        if !terminal {
            let line = found?.line ?? TerminalText.clean("\(id) does not exist yet; waiting for it to appear")
            if line != lastLine, found.map({ EndStatus.of(state: $0.state) == nil }) ?? true { print(line) }
            lastLine = line
        }
        if let count = found?.number("logCount"), count != logCount { try readLog(count) }
        if terminal { draw() }
        return found.flatMap { EndStatus.of(state: $0.state) }
    }

    /// The lines added since the last look (into a pipe, printed as they come).
    private mutating func readLog(_ count: Double) throws(CommandFailure) {
        let answer = try session.send("GET", "/api/tasks/\(id)/log")
        guard case .array(let lines)? = answer["lines"], case .number(let from)? = answer["from"] else { return }
        let texts = lines.map { line -> String in
            if case .string(let text) = line { return TerminalText.clean(text) }
            return ""
        }
        let total = from + Double(texts.count)
        let fresh = count < logCount ? texts : Array(texts.suffix(max(0, Int(total - max(logCount, from)))))
        logCount = total
        if terminal {
            log = Array((log + fresh).suffix(200))
        } else {
            for line in fresh { print("  " + line) }
        }
    }

    /// `rate 2.1 %/s · 27s left · 1m05s elapsed`.
    private var figures: String {
        guard let task else { return "" }
        var parts: [String] = []
        // Above the whole task a second, a rate comes of a burst of updates and says nothing (as on the dashboard).
        if let rate = task.number("rate"), rate > 0, rate <= 1, task.percent != nil {
            parts.append(String(format: "rate %.1f %%/s", rate * 100))
        }
        if let eta = task.number("eta"), EndStatus.of(state: task.state) == nil { parts.append(ListCommand.duration(eta) + " left") }
        if let elapsed = task.elapsed(now: Date().timeIntervalSince1970 * 1000) { parts.append(ListCommand.duration(elapsed) + " elapsed") }
        return parts.joined(separator: " · ")
    }

    private mutating func draw() {
        let size = LiveList.terminalSize()
        let clock = DateFormatter()
        clock.dateFormat = "HH:mm:ss"
        var lines = [TerminalText.clean("ringcast watch \(id) · \(session.options.serverText) · \(clock.string(from: Date()))"), ""]
        if task == nil {
            lines.append(TerminalText.clean("\(id) does not exist yet; waiting for it to appear"))
        } else {
            lines += table
            lines += ["", figures]
        }
        if let trouble { lines.append("! " + TerminalText.clean(trouble)) }
        if !log.isEmpty {
            lines.append("")
            lines.append("log:")
            let room = max(1, size.rows - lines.count - 1)
            lines += log.suffix(room).map { "  " + TerminalText.cut($0, toColumns: size.columns - 2) }
        }
        lines = Array(lines.prefix(size.rows - 1))
        lastFrame = lines
        write("\u{1B}[H" + lines.map { $0 + "\u{1B}[K\n" }.joined() + "\u{1B}[J")
    }

    func write(_ text: String) {
        _ = writeAll(ArraySlice(Array(text.utf8)), to: STDOUT_FILENO)
    }
}
