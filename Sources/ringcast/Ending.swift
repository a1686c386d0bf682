import Foundation
import RingcastClient
import RingcastCore

/// How the task of `run` or `pipe` ends, in the words both use: `done`; `failed` with a detail
/// that says where it stopped ("exit status 2", "killed by SIGTERM", "input ended at 21/50");
/// `cancelled` on request. The detail is the task's, so the dashboard, the text table, a badge's
/// viewer and a webhook all read the same words.
enum TaskEnding: Equatable {
    case done
    case failed(String)
    case cancelled(String)

    /// The end of `run`'s command.
    static func command(_ status: ChildProcess.Status, cancelled: Bool) -> TaskEnding {
        if cancelled { return .cancelled("cancelled on request") }
        switch status {
        case .exited(0): return .done
        case .exited(let code): return .failed("exit status \(code)")
        case .signalled(let signal): return .failed("killed by \(signalName(signal))")
        }
    }

    /// The end of `pipe`'s input: done if the last progress it read was 100 % (or it read none),
    /// else failed where the input stopped. `doneAtEOF` takes any end for done.
    static func input(lastRead progress: ProgressValue?, doneAtEOF: Bool) -> TaskEnding {
        guard !doneAtEOF, let progress, progress != .indeterminate, !progress.isComplete else { return .done }
        return .failed("input ended at \(progress.where)")
    }

    var state: String {
        switch self {
        case .done: return "done"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        }
    }

    var detail: String? {
        switch self {
        case .done: return nil
        case .failed(let detail), .cancelled(let detail): return detail
        }
    }

    /// `ci.test failed: exit status 2`.
    func sentence(id: String) -> String { detail.map { "\(id) \(state): \($0)" } ?? "\(id) \(state)" }
}

extension ProgressValue {
    var isComplete: Bool {
        switch self {
        case .fraction(let value): return value >= 1
        case .units(let completed, let total): return completed >= total
        case .indeterminate: return false
        }
    }

    /// `21/50`, or `42%` (`55.5%`).
    var `where`: String {
        switch self {
        case .fraction(let value): return plainNumber(value * 100) + "%"
        case .units(let completed, let total): return plainNumber(completed) + "/" + plainNumber(total)
        case .indeterminate: return "an unknown point"
        }
    }
}

/// `21`, `4.6`, `0.25`: as a person writes the number (at most two decimals).
private func plainNumber(_ value: Double) -> String {
    var text = String(format: "%.2f", value)
    while text.hasSuffix("0") { text.removeLast() }
    if text.hasSuffix(".") { text.removeLast() }
    return text
}
