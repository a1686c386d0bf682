/// Tasks as text for a terminal: `GET /api/tasks` and `GET /api/tasks/{id}` with
/// `Accept: text/plain` or `?format=text` answer a table that fits `width` columns (80 by default):
///
///     PROGRESS         TASK                                STATE      ETA
///     ███████░░░  70%  Build 42 · compiling                running    12 s
///     ··········   --  Waiting for a runner                running    1 min 30 s
///     ████░░░░░░  42%  Training · input ended at 21/50     failed
///     3 tasks: 2 running, 1 failed
///
/// Children sit under their parent, indented; rows are in id order, so a table redrawn in place
/// does not jump about. A title or detail cannot act on the terminal: it is cleaned, and measured
/// in columns, by `TerminalText`. Read-only, from the store as it is.
public enum TextTable {
    public static let defaultWidth = 80
    public static let widths = 60...200
    /// bar, space, percentage, two spaces … two spaces, state, two spaces, ETA.
    static let barColumns = 10
    static let stateColumns = 9
    static let etaColumns = 16
    static var fixedColumns: Int { barColumns + 1 + 4 + 2 + 2 + stateColumns + 2 + etaColumns }

    // MARK: Asking for text

    /// Whether a GET asks for text: `?format=text` (or `json`), else an Accept header that ranks
    /// `text/plain` above `application/json` (`*/*` alone stays JSON). A `width` out of range is
    /// refused whichever is answered, as docs/PROTOCOL.md says: a JSON answer does not hide it.
    public static func wanted(_ request: APIRequest) throws(APIError) -> Bool {
        switch request.query["format"] {
        case "text"?: return true
        case "json"?, nil: break
        case let other?: throw APIError(.invalidField, "format '\(other.prefix(40))' is not one of text, json", field: "format")
        }
        _ = try width(request)
        guard request.query["format"] == nil, let accept = request.headers.accept else { return false }
        let text = quality(of: "text", "plain", in: accept)
        let json = quality(of: "application", "json", in: accept)
        return text.q > json.q || (text.q == json.q && text.q > 0 && text.specificity > json.specificity)
    }

    /// The q of the most specific range of `accept` that covers `type/subtype` (0 when none does).
    static func quality(of type: String, _ subtype: String, in accept: String) -> (q: Double, specificity: Int) {
        var best: (q: Double, specificity: Int) = (0, -1)
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingSpaces.lowercased() }
            guard let media = parts.first else { continue }
            let specificity: Int
            switch media {
            case "\(type)/\(subtype)": specificity = 2
            case "\(type)/*": specificity = 1
            case "*/*": specificity = 0
            default: continue
            }
            var q = 1.0
            for parameter in parts.dropFirst() where parameter.hasPrefix("q=") { q = Double(parameter.dropFirst(2)) ?? 1 }
            if specificity > best.specificity { best = (q, specificity) }
        }
        return (max(0, best.q), best.specificity)
    }

    /// `?width=N` (60–200), else 80.
    public static func width(_ request: APIRequest) throws(APIError) -> Int {
        guard let text = request.query["width"] else { return defaultWidth }
        guard let width = Int(text), widths.contains(width) else {
            throw APIError(
                .invalidField, "width '\(text.prefix(20))' is not a number of columns from \(widths.lowerBound) to \(widths.upperBound)",
                field: "width")
        }
        return width
    }

    // MARK: The table

    /// `tasks` as rows, each followed by its children among them; then a line that counts them.
    /// `now` counts down a spinner's ETA (its kind's usual length, which is time) since its last change.
    public static func render(_ tasks: [TaskRecord], width: Int = defaultWidth, now: Double? = nil) -> String {
        let listed = Set(tasks.map(\.id))
        var children: [String: [TaskRecord]] = [:]
        var roots: [TaskRecord] = []
        for task in tasks.sorted(by: { $0.id < $1.id }) {
            if let parent = task.parent, listed.contains(parent) { children[parent, default: []].append(task) } else { roots.append(task) }
        }
        let titleColumns = width - fixedColumns
        var lines = [header(titleColumns: titleColumns)]
        var shown: Set<String> = []
        func add(_ task: TaskRecord, depth: Int) {
            guard shown.insert(task.id).inserted else { return }
            lines.append(row(task, depth: depth, titleColumns: titleColumns, now: now))
            guard depth < 16 else { return }
            for child in children[task.id] ?? [] { add(child, depth: depth + 1) }
        }
        for task in roots { add(task, depth: 0) }
        // Tasks that name each other as parents have no root: they still get their rows.
        for task in tasks.sorted(by: { $0.id < $1.id }) where !shown.contains(task.id) { add(task, depth: 0) }
        lines.append(summary(tasks, width: width))
        return lines.joined(separator: "\n") + "\n"
    }

    static func header(titleColumns: Int) -> String {
        TerminalText.pad("PROGRESS", barColumns + 1 + 4 + 2) + TerminalText.pad("TASK", titleColumns + 2)
            + TerminalText.pad("STATE", stateColumns + 2) + "ETA"
    }

    static func row(_ task: TaskRecord, depth: Int, titleColumns: Int, now: Double? = nil) -> String {
        var name = String(repeating: "  ", count: min(depth, 8)) + TerminalText.clean(task.title)
        if let detail = task.detail, !detail.isEmpty { name += " · " + TerminalText.clean(detail) }
        let line =
            bar(task.progress) + " " + percent(task.progress) + "  " + TerminalText.fit(name, titleColumns) + "  "
            + TerminalText.pad(task.state.rawValue, stateColumns) + "  " + eta(task, now: now)
        return trimmingTrailingSpaces(line)
    }

    /// `███████░░░` for 70 %; dots for an indeterminate task.
    static func bar(_ progress: Double?) -> String {
        guard let progress else { return String(repeating: "·", count: barColumns) }
        let filled = min(barColumns, max(0, Int((progress * Double(barColumns)).rounded(.down))))
        return String(repeating: "█", count: filled) + String(repeating: "░", count: barColumns - filled)
    }

    /// ` 70%` (cut down, so 99.9 % is not 100 %), `  --` when indeterminate.
    static func percent(_ progress: Double?) -> String {
        let text = progress.map { "\(Int((min(1, max(0, $0)) * 100 + 1e-9).rounded(.down)))%" } ?? "--"
        return String(repeating: " ", count: max(0, 4 - text.count)) + text
    }

    /// A running task's time left (a timer's from its last tick), and `slow` when it is.
    static func eta(_ task: TaskRecord, now: Double? = nil) -> String {
        guard task.state == .running else { return "" }
        var left = task.timer.map { $0.seconds - $0.elapsedSeconds(tick: $0.ticksEmitted) } ?? task.eta
        if task.timer == nil, task.progress == nil, let eta = task.eta, let now {
            left = eta - max(0, now - task.updatedAt) / 1000
            if left! <= 0 { left = nil }
        }
        let parts = [left.map(duration), task.slow ? "slow" : nil].compactMap { $0 }
        return parts.joined(separator: " ")
    }

    /// `45 s`, `2 min 5 s`, `1 h 5 min`, as the dashboard writes them (rounded up: never `0 s` early).
    /// An ETA is a quotient of two small numbers (1e-300 progress a second gives 1e300 s): past
    /// `longestDuration`, or not a number, it is written as that bound, never converted whole.
    public static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite || seconds == .infinity else { return "0 s" }
        let total = Int(min(max(0, seconds), longestDuration).rounded(.up))
        if total < 60 { return "\(total) s" }
        let minutes = total / 60
        if minutes < 60 { return total % 60 == 0 ? "\(minutes) min" : "\(minutes) min \(total % 60) s" }
        return minutes % 60 == 0 ? "\(minutes / 60) h" : "\(minutes / 60) h \(minutes % 60) min"
    }

    /// About 31 710 years in seconds: as far off as a duration is written.
    public static let longestDuration = 1e12

    /// `3 tasks: 2 running, 1 failed`; the states that do not fit in `width` end in `…`.
    static func summary(_ tasks: [TaskRecord], width: Int = .max) -> String {
        var counts: [TaskState: Int] = [:]
        for task in tasks { counts[task.state, default: 0] += 1 }
        var states = TaskState.allCases.compactMap { state in counts[state].map { "\($0) \(state.rawValue)" } }
        let head = tasks.count == 1 ? "1 task" : "\(tasks.count) tasks"
        var line = states.isEmpty ? head : head + ": " + states.joined(separator: ", ")
        while TerminalText.columns(of: line) > width, !states.isEmpty {
            states.removeLast()
            line = head + ": " + (states + ["…"]).joined(separator: ", ")
        }
        return line
    }

    static func trimmingTrailingSpaces(_ line: String) -> String {
        var line = line
        while line.last == " " { line.removeLast() }
        return line
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (no Foundation here).
    var trimmingSpaces: String {
        let isSpace = { (c: Character) in c == " " || c == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[start...end])
    }
}

extension API {
    /// `GET /api/tasks` as text: the watched tasks. `GET /api/tasks/{id}` as text: the task and
    /// everything under it.
    /// The table of `watch` (or of task `id` and everything under it), holding only what
    /// `scope` may read: a reader's table of a parent leaves out the children it may not see.
    func textAnswer(
        _ request: APIRequest, watch: WatchSet = WatchSet([Glob("*")]), under id: String? = nil, within scope: Scope = .everything, now: Double
    ) throws(APIError) -> APIResponse {
        let width = try TextTable.width(request)
        var tasks: [TaskRecord]
        if let id {
            guard store.task(id) != nil else { throw APIError(.notFound, "no task '\(id)'", field: "id") }
            tasks = store.tasks.values.filter { task in
                var current: TaskRecord? = task
                for _ in 0..<17 {
                    guard let step = current else { return false }
                    if step.id == id { return true }
                    current = step.parent.flatMap { store.task($0) }
                }
                return false
            }
        } else {
            tasks = store.tasks(matching: watch)
        }
        if !scope.isEverything { tasks = tasks.filter { scope.allows($0.id) } }
        return APIResponse(body: Array(TextTable.render(tasks, width: width, now: now).utf8), contentType: "text/plain; charset=utf-8")
    }
}
