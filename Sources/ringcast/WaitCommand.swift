import Foundation
import RingcastCore

/// `ringcast wait ID…`: blocks until every task named reaches a state, for a CI job that must
/// wait for another (deploy after build) or a script that needs to know how a task ended.
struct WaitCommand: ProducerCommand {
    static let name = "wait"
    static let summary = "block until tasks end: ringcast wait ci.build --timeout 10m"
    static let usage = ["ringcast wait ID... [--for done|ended|STATE] [--timeout DURATION] [--quiet]"]
    static let discussion = """
        Blocks until every task named reaches the state --for names: done (the default), ended (any end:
        done, failed or cancelled), or one state (running, paused, stalled, done, failed, cancelled).
        Waiting for done or a state, a task that fails or is cancelled ends the wait at once (unless
        that end is the state); waiting for ended, every task must end, and the status is the worst end
        (failed, then cancelled). It prints a line each time a task appears or changes state (unless
        --quiet). A task that does not exist yet is waited for until it appears. It asks the server
        twice a second; a server that goes away (a restart) is said once on stderr and asked again until
        it answers, and the wait goes on where it was.
        """
    static let epilogue = EndStatus.epilogue(waiting: true)
    static let ownOptions: [Option] = [
        .value("for", "CONDITION", "done, ended or a state", default: "done"),
        .value("timeout", "DURATION", "give up after this long: 90, 90s, 10m, 1h30m; exit status 4 (default: no limit)"),
        .flag("quiet", "print nothing but errors"),
    ]

    enum Condition: Equatable {
        case ended
        case state(String)

        var wanted: String? {
            if case .state(let state) = self { return state }
            return nil
        }
    }

    let session: ProducerSession
    let ids: [String]
    let condition: Condition
    let timeout: Double?
    let quiet: Bool

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        guard !options.positional.isEmpty else { throw UsageError("name the task(s) to wait for: ringcast wait ci.build") }
        for id in options.positional where !TaskID.isValid(id) {
            throw UsageError("'\(id)' is not a task id (letters, digits, '.', '_' and '-', starting with a letter or digit)")
        }
        var seen = Set<String>()
        ids = options.positional.filter { seen.insert($0).inserted }
        let wanted = options.value("for")!
        if wanted == "ended" {
            condition = .ended
        } else if TaskState(rawValue: wanted) != nil {
            condition = .state(wanted)
        } else {
            throw UsageError(
                "--for '\(wanted)' is not done, ended or a state (\(TaskState.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        if let text = options.value("timeout") {
            guard let seconds = parseDuration(text) else {
                throw UsageError("--timeout '\(text)' is not a duration: write 90, 90s, 10m or 1h30m")
            }
            timeout = seconds
        } else {
            timeout = nil
        }
        quiet = options.flag("quiet")
    }

    func run() throws(CommandFailure) -> Int32 {
        let deadline = timeout.map { Date().timeIntervalSince1970 + $0 }
        // Ids hold no glob characters, so the ids themselves are the patterns.
        let path = "/api/tasks?watch=" + ids.joined(separator: ",")
        var said: [String: String] = [:]
        var states: [String: String] = [:]
        let status = try pollUntilEnd(command: Self.name, deadline: deadline) { () throws(CommandFailure) -> Int32? in
            let answer = try session.send("GET", path)
            guard case .array(let list)? = answer["tasks"] else { throw CommandFailure("the server's answer holds no task list") }
            var tasks: [String: TaskView] = [:]
            for json in list {
                let task = TaskView(json: json)
                tasks[task.id] = task
            }
            states = tasks.mapValues(\.state)
            for id in ids {
                let line = tasks[id]?.state ?? "absent"
                guard said[id] != line else { continue }
                let before = said[id]
                said[id] = line
                if quiet { continue }
                if let task = tasks[id] {
                    print(task.line)
                } else {
                    print(
                        TerminalText.clean(
                            before == nil ? "\(id) does not exist yet; waiting for it to appear" : "\(id) is gone; waiting for it to appear again"))
                }
            }
            return verdict(ids.map { tasks[$0] })
        }
        if status == EndStatus.timedOut, !quiet {
            let missing = ids.filter { id in
                guard let state = states[id] else { return true }
                return condition == .ended ? EndStatus.of(state: state) == nil : state != condition.wanted
            }
            fail("wait: --timeout passed; still waiting for \(missing.joined(separator: ", "))")
        }
        return status
    }

    /// The status once it is known: every task there and in the state, or one that cannot get
    /// there (its end is not the one waited for); nil to keep waiting.
    func verdict(_ tasks: [TaskView?]) -> Int32? {
        let states = tasks.map { $0?.state }
        switch condition {
        case .ended:
            let ends = states.map { $0.flatMap(EndStatus.of(state:)) }
            guard ends.allSatisfy({ $0 != nil }) else { return nil }
            let all = ends.compactMap { $0 }
            return all.contains(EndStatus.failed) ? EndStatus.failed : all.contains(EndStatus.cancelled) ? EndStatus.cancelled : EndStatus.reached
        case .state(let wanted):
            for state in states {
                guard let state, state != wanted, let end = EndStatus.of(state: state) else { continue }
                return end == EndStatus.reached ? EndStatus.endedOtherwise : end
            }
            return states.allSatisfy { $0 == wanted } ? EndStatus.reached : nil
        }
    }
}
