import RingcastClient
import RingcastCore

/// `ringcast push ID --progress 42%`: creates or updates a task.
struct PushCommand: ProducerCommand {
    static let name = "push"
    static let summary = "create or update a task: ringcast push ci.build --progress 42%"
    static let usage = [
        "ringcast push ID [--progress P | --indeterminate] [--title T] [--detail D] [--state S] [--stale-after SECONDS] [--parent ID]"
    ]
    static let discussion = "Creates or updates task ID; only the fields given change."
    static let ownOptions: [Option] = [
        .value("progress", "P", "42%, 0.42 or 42/100 (done/total: the server derives the fraction)"),
        .flag("indeterminate", "no progress: the dashboard shows a spinner"),
        .value("title", "T", "the task's title (default for a new task: its id)"),
        .value("detail", "D", "a line of detail under the title; --detail '' clears it"),
        .value("state", "S", "running, paused, done, failed or cancelled (done also sets 100%)"),
        .value("stale-after", "SECONDS", "a lease: with no update for that long the task turns `stalled`"),
        .value("parent", "ID", "count this task into another one's progress"),
    ]

    let session: ProducerSession
    let id: String
    let fields: [(String, JSONValue)]

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
        var fields: [(String, JSONValue)] = []
        if let text = options.value("progress") {
            guard !options.flag("indeterminate") else { throw UsageError("give --progress or --indeterminate, not both") }
            guard let progress = ProgressText.parseArgument(text) else {
                throw UsageError("--progress '\(text)' is not a progress: write 42%, 0.42 or 42/100")
            }
            fields += progressFields(progress)
        } else if options.flag("indeterminate") {
            fields += progressFields(.indeterminate)
        }
        if let title = try options.text("title", maxLength: 200) { fields.append(("title", .string(title))) }
        if let detail = try options.text("detail", maxLength: 1000) { fields.append(("detail", detail.isEmpty ? .null : .string(detail))) }
        if let state = options.value("state") {
            guard let parsed = TaskState(rawValue: state), TaskState.settable.contains(parsed) else {
                throw UsageError("--state '\(state)' is not one of \(TaskState.settable.map(\.rawValue).joined(separator: ", "))")
            }
            fields.append(("state", .string(parsed.rawValue)))
        }
        if let lease = try options.seconds("stale-after") { fields.append(("staleAfter", .number(lease))) }
        if let parent = options.value("parent") {
            guard TaskID.isValid(parent) else { throw UsageError("--parent '\(parent)' is not a task id") }
            fields.append(("parent", .string(parent)))
        }
        self.fields = fields
    }

    func run() throws(CommandFailure) -> Int32 {
        try session.send("POST", ProducerSession.taskPath(id), .object(fields))
        return 0
    }
}

/// The fields an update carries for a progress.
func progressFields(_ progress: ProgressValue) -> [(String, JSONValue)] {
    switch progress {
    case .fraction(let value): return [("progress", .number(value))]
    case .units(let completed, let total): return [("completed", .number(completed)), ("total", .number(total))]
    case .indeterminate: return [("progress", .null)]
    }
}

/// `ringcast show ID --hide-after 3`: makes a task visible (creating it if new).
struct ShowCommand: ProducerCommand {
    static let name = "show"
    static let summary = "show a task, optionally for a while: ringcast show save --hide-after 3"
    static let usage = ["ringcast show ID [--hide-after SECONDS] [--modal] [--detail D]"]
    static let discussion = "Shows task ID on the dashboard (creating it, as a spinner, if it does not exist)."
    static let ownOptions: [Option] = [
        .value("hide-after", "SECONDS", "the server hides it by itself that long after; a later show restarts the clock"),
        .flag("modal", "cover the dashboard with it until it is hidden"),
        .value("detail", "D", "a line of detail under the title"),
    ]

    let session: ProducerSession
    let id: String
    let fields: [(String, JSONValue)]

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
        var fields: [(String, JSONValue)] = []
        if let hideAfter = try options.seconds("hide-after") { fields.append(("hideAfter", .number(hideAfter))) }
        if options.flag("modal") { fields.append(("modal", .bool(true))) }
        if let detail = try options.text("detail", maxLength: 1000) { fields.append(("detail", .string(detail))) }
        self.fields = fields
    }

    func run() throws(CommandFailure) -> Int32 {
        try session.send("POST", ProducerSession.taskPath(id) + "/show", .object(fields))
        return 0
    }
}

/// `ringcast hide ID`.
struct HideCommand: ProducerCommand {
    static let name = "hide"
    static let summary = "hide a task"
    static let usage = ["ringcast hide ID"]
    static let discussion = "Hides task ID (it stays on the server; `show` brings it back, `rm` removes it)."

    let session: ProducerSession
    let id: String

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
    }

    func run() throws(CommandFailure) -> Int32 {
        try session.send("POST", ProducerSession.taskPath(id) + "/hide")
        return 0
    }
}

/// `ringcast rm ID`.
struct RemoveCommand: ProducerCommand {
    static let name = "rm"
    static let summary = "remove a task"
    static let usage = ["ringcast rm ID"]
    static let discussion = "Removes task ID from the server and from every dashboard."

    let session: ProducerSession
    let id: String

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
    }

    func run() throws(CommandFailure) -> Int32 {
        try session.send("DELETE", ProducerSession.taskPath(id))
        return 0
    }
}

/// `ringcast timer ID --seconds 180`, or `--pause`, `--resume`, `--cancel`.
struct TimerCommand: ProducerCommand {
    static let name = "timer"
    static let summary = "start, pause, resume or cancel a countdown: ringcast timer tea --seconds 180"
    static let usage = [
        "ringcast timer ID --seconds N [--interval SECONDS] [--title T] [--hide-after SECONDS]",
        "ringcast timer ID --pause | --resume | --cancel",
    ]
    static let discussion = """
        Starts a countdown the server ticks (drift-free, with its own phase), or pauses, resumes or
        cancels one. Starting again restarts it.
        """
    static let startOptions: [Option] = [
        .value("seconds", "N", "the countdown's length in seconds"),
        .value("interval", "SECONDS", "seconds between ticks (default 1, at least 0.01)"),
        .value("title", "T", "the timer's title"),
        .value("hide-after", "SECONDS", "hide it that long after it ends or is cancelled"),
    ]
    static let controlOptions: [Option] = [
        .flag("pause", "pause a running timer"),
        .flag("resume", "resume a paused timer"),
        .flag("cancel", "cancel a timer; it ends as cancelled"),
    ]
    static let ownOptions = startOptions + controlOptions

    enum Action {
        case start([(String, JSONValue)])
        case control(String)
    }

    let session: ProducerSession
    let id: String
    let action: Action

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
        let controls = TimerCommand.controlOptions.map(\.name).filter { options.flag($0) }
        let startOptions = TimerCommand.startOptions.map(\.name).filter { options.isGiven($0) }
        switch (controls.count, options.isGiven("seconds")) {
        case (0, true):
            var fields: [(String, JSONValue)] = [("seconds", .number(try options.seconds("seconds")!))]
            if let interval = try options.seconds("interval", minimum: 0.01) { fields.append(("interval", .number(interval))) }
            if let title = try options.text("title", maxLength: 200) { fields.append(("title", .string(title))) }
            if let hideAfter = try options.seconds("hide-after") { fields.append(("hideAfter", .number(hideAfter))) }
            action = .start(fields)
        case (1, _) where startOptions.isEmpty:
            action = .control(controls[0])
        case (1, _):
            throw UsageError("--\(controls[0]) takes no --\(startOptions[0]); start a timer with --seconds N")
        case (0, false):
            throw UsageError("give --seconds N to start a timer, or one of --pause, --resume, --cancel")
        default:
            throw UsageError("give only one of --seconds, --pause, --resume, --cancel")
        }
    }

    func run() throws(CommandFailure) -> Int32 {
        switch action {
        case .start(let fields): try session.send("POST", "/api/timers/\(id)", .object(fields))
        case .control(let verb): try session.send("POST", "/api/timers/\(id)/\(verb)")
        }
        return 0
    }
}
