import Dispatch
import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform

/// `--report-to URL TASK`: the run's own progress as a Ringcast task (connected, delivered, p99 so
/// far), so that a long run shows on a dashboard like any other work. Sent through the client
/// library, at most once a second, from the load tester's calling thread.
/// @unchecked Sendable: used by that one thread; the client it holds is Sendable.
final class LoadRunReporter: @unchecked Sendable {
    private let client: RingcastClient
    private let task: String
    private var lastSentAt: UInt64 = 0

    init(url: String, task: String, token: String?, tls: TLSSettings) throws(LoadError) {
        var settings = RingcastClient.Options()
        settings.caFile = tls.caFile
        settings.insecure = tls.insecure
        do {
            client = try RingcastClient(url: url, token: token, options: settings)
        } catch {
            throw LoadError("--report-to \(url): \(error)")
        }
        self.task = task
    }

    /// Sends the run's state when a second has passed since the last (or always, with `force`).
    func report(_ progress: LoadProgress, p99Milliseconds: Double?, fraction: Double?, force: Bool = false) {
        let now = MonotonicClock.nanoseconds()
        guard force || now - lastSentAt >= 1_000_000_000 else { return }
        lastSentAt = now
        let detail =
            "\(progress.phase.rawValue): connected \(progress.connected) of \(progress.clients), failed \(progress.failed), "
            + "published \(progress.published), delivered \(progress.delivered)"
            + (p99Milliseconds.map { String(format: ", p99 %.2f ms", $0) } ?? "")
        let value: ProgressValue = fraction.map { ProgressValue(min(1, max(0, $0))) } ?? .indeterminate
        send { client, task in try await client.update(task, progress: value, title: "ringcast load", detail: detail) }
    }

    /// The run's end: its figures as the detail and the task done (or failed, when a --fail-if
    /// bound held or the run could not go on); waits for the server to take it, a few seconds at most.
    func finish(detail: String, failed: Bool) {
        let text = String(detail.prefix(1000))
        send { client, task in
            try await client.update(task, progress: failed ? nil : ProgressValue(1.0), detail: text, state: failed ? .failed : .done)
            try await client.flush(durable: false, timeout: 5)
        }
        let closed = DispatchSemaphore(value: 0)
        Task { [client] in
            await client.close(timeout: 5)
            closed.signal()
        }
        _ = closed.wait(timeout: .now() + 6)
    }

    /// One call on the client, waited for here so that updates leave in order. A server that is
    /// away costs the run nothing: the client queues (and merges) what it cannot send yet.
    private func send(_ call: @escaping @Sendable (RingcastClient, String) async throws -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task { [client, task] in
            try? await call(client, task)
            done.signal()
        }
        _ = done.wait(timeout: .now() + 2)
    }
}
