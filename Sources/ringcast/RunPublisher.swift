import Foundation
import RingcastClient
import RingcastCore

/// The publishing WebSocket `ringcast run` holds while its command runs (RingcastClient). It keeps
/// the task's lease alive, and because it publishes the task, the server carries the dashboard's
/// requests to it: cancel sends SIGTERM to the command (SIGKILL after `grace` seconds), pause
/// SIGSTOP and resume SIGCONT, each answered with the task's new state. If ringcast dies, the
/// socket closes and the server stalls the task at once.
///
/// Lease renewals are empty updates every third of the lease, on the socket, and over HTTP too
/// while it is not connected (a proxy that will not pass WebSockets still keeps the lease, just
/// without requests).
/// @unchecked Sendable: `exited`, `cancelled`, `paused` and `stopped` are guarded by `condition`;
/// the client is Sendable; the HTTP session belongs to the renewal thread.
final class RunPublisher: @unchecked Sendable {
    private let client: RingcastClient
    private let id: String
    private let pid: pid_t
    private let grace: Double
    private let offers: [TaskControl]
    private let condition = NSCondition()
    private var exited = false
    private var cancelled = false
    private var paused = false
    private var stopped = false
    private var renewing = true
    private var listener: Task<Void, Never>?
    private let fallback: ProducerSession

    init(options: ConnectionOptions, id: String, pid: pid_t, lease: Double, grace: Double, offers: [TaskControl]) throws {
        var settings = RingcastClient.Options()
        settings.caFile = options.tls.caFile
        settings.insecure = options.tls.insecure
        client = try RingcastClient(url: options.serverText, token: options.token, options: settings)
        self.id = id
        self.pid = pid
        self.grace = grace
        self.offers = offers
        fallback = ProducerSession(options, timeoutSeconds: 5)
        let requests = client.controlRequests
        listener = Task.detached { [self] in
            for await request in requests where request.id == id { await obey(request) }
        }
        let thread = Thread { [self] in
            condition.lock()
            while !stopped {
                condition.unlock()
                // A lost renewal is not worth a word: the next one, or the final update, follows.
                // On the socket always (queued until it opens: it then publishes the task at once,
                // so requests reach it), and over HTTP too while it is not open.
                let connected = client.isConnected
                blocking { [client] in try? await client.update(id) }
                if !connected { _ = try? fallback.send("POST", ProducerSession.taskPath(id), .object([])) }
                condition.lock()
                if !stopped { _ = condition.wait(until: Date().addingTimeInterval(lease / 3)) }
            }
            renewing = false
            condition.broadcast()
            condition.unlock()
            fallback.disconnect()
        }
        thread.name = "ringcast-lease"
        thread.start()
    }

    /// Whether a cancel request ended (or is ending) the command.
    var wasCancelled: Bool { condition.withLock { cancelled } }

    /// The command has ended: requests are no longer obeyed.
    func commandExited() { condition.withLock { exited = true } }

    /// Stops renewing and obeying, and waits (briefly) until what the socket queued has been written.
    func finish() {
        condition.withLock {
            stopped = true
            condition.broadcast()
            while renewing { condition.wait() }
        }
        listener?.cancel()
        blocking { [client] in try? await client.flush(timeout: 2) }
    }

    /// Closes the socket; after the final update, so the server never sees the publisher leave a running task.
    func close() { blocking { [client] in await client.close(timeout: 2) } }

    private func obey(_ request: RingcastClient.ControlRequest) async {
        guard let control = TaskControl(rawValue: request.action.rawValue), offers.contains(control) else { return }
        enum Answer { case none, paused, running }
        let answer: Answer = condition.withLock {
            guard !exited else { return .none }
            switch control {
            case .cancel:
                cancelled = true
                kill(pid, SIGTERM)
                // A stopped process takes SIGTERM only once it runs again.
                if paused {
                    kill(pid, SIGCONT)
                    paused = false
                }
                let (pid, grace) = (pid, grace)
                DispatchQueue.global().asyncAfter(deadline: .now() + grace) { [self] in
                    if !condition.withLock({ exited }) { kill(pid, SIGKILL) }
                }
                return .none
            case .pause:
                guard !paused, !cancelled else { return .none }
                kill(pid, SIGSTOP)
                paused = true
                return .paused
            case .resume:
                guard paused else { return .none }
                kill(pid, SIGCONT)
                paused = false
                return .running
            }
        }
        switch answer {
        case .none: break
        case .paused: try? await client.update(id, state: .paused)
        case .running: try? await client.update(id, state: .running)
        }
    }
}

/// Runs `body` on the concurrency pool and waits for it: for the command line's threads, which
/// are not part of that pool, to call the async client.
func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}
