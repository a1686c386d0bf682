import Foundation
import RingcastCore

/// What `wait` and `watch` share: the exit status a task's end gives, durations as people type
/// them, and the loop that asks the server twice a second (as `ls --watch` does) and rides out a
/// server that goes away for a while.
enum EndStatus {
    static let reached: Int32 = 0
    static let failed: Int32 = 1
    static let cancelled: Int32 = 3
    static let timedOut: Int32 = 4
    static let endedOtherwise: Int32 = 5

    /// The status a task's end gives (done 0, failed 1, cancelled 3); nil while it has not ended.
    static func of(state: String) -> Int32? {
        switch state {
        case "done": return reached
        case "failed": return failed
        case "cancelled": return cancelled
        default: return nil
        }
    }

    /// The lines `--help` shows, the same for both commands.
    static func epilogue(waiting: Bool) -> String {
        """
        exit status:
          0      \(waiting ? "every task reached the state waited for" : "the task is done")
          1      \(waiting ? "a task failed" : "the task failed"); also when the server cannot be reached at the start or refuses
          2      a wrong argument
          3      \(waiting ? "a task was cancelled" : "the task was cancelled")
        """
            + (waiting
                ? """

                  4      --timeout passed first
                  5      a task ended done while another state was waited for (--for running, failed, …)
                """ : "")
            + "\n  130    interrupted (Ctrl-C)"
    }
}

/// A task as the server's JSON gives it, read for the few fields shown.
struct TaskView {
    let json: JSONValue

    func string(_ key: String) -> String? {
        if case .string(let text)? = json[key] { return text }
        return nil
    }

    func number(_ key: String) -> Double? {
        if case .number(let value)? = json[key] { return value }
        return nil
    }

    var id: String { string("id") ?? "?" }
    var state: String { string("state") ?? "?" }

    /// `42%`, or nil for a spinner.
    var percent: String? { number("progress").map { "\(Int(($0 * 100).rounded(.down)))%" } }

    /// `ci.build running 42% · compiling`, cleaned for a terminal.
    var line: String {
        var words = [id, state]
        if TaskState(rawValue: state)?.isTerminal != true, let percent { words.append(percent) }
        var text = words.joined(separator: " ")
        if let detail = string("detail"), !detail.isEmpty { text += (state == "failed" || state == "cancelled" ? ": " : " · ") + detail }
        return TerminalText.clean(text)
    }

    /// Seconds since the run began (until it ended, for an ended task), from the server's clock.
    func elapsed(now: Double) -> Double? {
        guard let started = number("startedAt") else { return nil }
        let end = TaskState(rawValue: state)?.isTerminal == true ? (number("updatedAt") ?? now) : now
        return max(0, (end - started) / 1000)
    }
}

/// A duration as a person types it: `90`, `90s`, `1.5m`, `2h`, `1h30m`; seconds.
func parseDuration(_ text: String) -> Double? {
    let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
    if let plain = Double(text), plain.isFinite, plain >= 0 { return plain }
    var total = 0.0
    var number = ""
    for character in text {
        if character.isASCII, character.isNumber || character == "." {
            number.append(character)
        } else if let unit = units[character], let value = Double(number) {
            total += value * unit
            number = ""
        } else {
            return nil
        }
    }
    return number.isEmpty && !text.isEmpty ? total : nil
}

/// Asks the server every `interval` seconds until `step` gives a status, Ctrl-C (128 + the
/// signal) or `deadline` (`EndStatus.timedOut`). A failed look is said once on stderr (or only
/// through `trouble`, by a view that draws the terminal) and tried again: a restarted server is
/// followed where it was, as `ls --watch` does. Only a server that cannot be reached at the first
/// look ends it at once (status 1, by throwing).
func pollUntilEnd(
    command: String, interval: Double = LiveList.interval, deadline: Double?, troubleOnStderr: Bool = true,
    look: () throws(CommandFailure) -> Int32?, trouble: (String?) -> Void = { _ in }
) throws(CommandFailure) -> Int32 {
    if let status = try look() { return status }
    var troubled = false
    while true {
        let wait = deadline.map { max(0, min(interval, $0 - Date().timeIntervalSince1970)) } ?? interval
        if let taken = TerminationSignals.take(timeout: wait) { return 128 + taken.signal }
        if let deadline, Date().timeIntervalSince1970 >= deadline { return EndStatus.timedOut }
        do {
            if let status = try look() { return status }
            if troubled { trouble(nil) }
            troubled = false
        } catch {
            if !troubled, troubleOnStderr { fail("\(command): \(error); trying again") }
            troubled = true
            trouble("\(error); trying again")
        }
    }
}
