import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import Synchronization

/// What the server keeps for operators besides the API's counters: its start time, and the
/// readiness probes with their last answers (for /readyz). Worker 0 asks every probe every
/// `readinessInterval`; answers come from whatever thread the probe answers on; /readyz and
/// /metrics read them from any service thread.
///
/// `@unchecked Sendable`: `answers` is behind its lock, `readinessTimer` belongs to worker 0's
/// thread, the rest is immutable (the probes' `checkReadiness` may be called from any thread).
final class OperationsState: @unchecked Sendable {
    /// Seconds between readiness questions, and how long one may wait for its answer (longer than
    /// SQLite's busy timeout, 5 s, so a locked file is reported as such rather than as silence).
    static let readinessInterval = 2.0
    static let readinessDeadline = 10.0

    /// When the server was made, in Unix seconds (`ringcast_start_time_seconds`).
    let startTime = Date().timeIntervalSince1970
    /// Storage's probe (SQLite's writer, memory, or the Redis cluster).
    let probes: [ReadinessProbe]
    private let logger: Logger
    /// Each probe's answers, and whether the log last said it was ready (nil: nothing said yet).
    private let answers: Locked<(trackers: [ReadinessTracker], reported: [Bool?])>
    private var readinessTimer: LoopTimer?

    init(probes: [ReadinessProbe], logger: Logger) {
        self.probes = probes
        self.logger = logger
        answers = Locked(
            (
                probes.map { ReadinessTracker(name: $0.readinessName, deadlineSeconds: OperationsState.readinessDeadline) },
                probes.map { _ in nil }
            ))
    }

    /// What /readyz and /metrics report; a change they are the first to see is logged too.
    func readiness(now: Double) -> [ReadinessStatus] {
        reportChanges(now: now)
        return answers.withLock { state in state.trackers.map { $0.status(now: now) } }
    }

    /// On worker 0's thread as its loop starts: asks now, then every `readinessInterval`.
    func startAsking(on loop: ServiceLoop) throws {
        readinessTimer = try loop.makeTimer { [unowned self] in ask() }
        ask()
    }

    private func ask() {
        let now = Clock.now()
        // Marked asked under the lock, asked outside it: a probe may answer before it returns.
        let idle: [Int] = answers.withLock { state in
            let idle = state.trackers.indices.filter { state.trackers[$0].isIdle }
            for index in idle { state.trackers[index].asked(now: now) }
            return idle
        }
        for index in idle {
            probes[index].checkReadiness { [self] failure in answered(index, failure: failure) }
        }
        reportChanges(now: now)
        readinessTimer?.schedule(seconds: OperationsState.readinessInterval)
    }

    private func answered(_ index: Int, failure: String?) {
        let now = Clock.now()
        answers.withLock { $0.trackers[index].answered(failure, now: now) }
        reportChanges(now: now)
    }

    /// One log line when a dependency stops answering, and one when it is back.
    private func reportChanges(now: Double) {
        let changes: [ReadinessStatus] = answers.withLock { state in
            var changes: [ReadinessStatus] = []
            for (index, tracker) in state.trackers.enumerated() {
                // Before the first answer (unless it is overdue) there is nothing to report yet.
                if tracker.answeredAt == nil, !tracker.isOverdue(now: now) { continue }
                let status = tracker.status(now: now)
                guard status.ready != state.reported[index] else { continue }
                // The first answer is news only when it is bad.
                if state.reported[index] != nil || !status.ready { changes.append(status) }
                state.reported[index] = status.ready
            }
            return changes
        }
        for status in changes {
            if status.ready {
                logger.info("\(status.name) answers again: ready", fields: [("event", .string("ready")), ("check", .string(status.name))])
            } else {
                logger.error(
                    "not ready: \(status.failure ?? status.name)", fields: [("event", .string("not_ready")), ("check", .string(status.name))])
            }
        }
    }
}

/// Redis answers while the cluster's connections do: they notice a lost server themselves.
extension RedisCluster: ReadinessProbe {
    var readinessName: String { "redis" }
    func checkReadiness(_ answer: @escaping @Sendable (String?) -> Void) {
        answer(isAvailable ? nil : "\(url) is \(health): publishes are refused with 503 until it answers")
    }
}

extension Server {
    /// The probes /readyz asks: the storage's, when it can be asked, or the cluster's Redis.
    static func readinessProbes(for storage: ServerStorage) -> [ReadinessProbe] {
        switch storage.role {
        case .local(let persistence): [persistence as? ReadinessProbe].compactMap { $0 }
        case .cluster(let engine): [engine]
        }
    }

    /// What `/healthz`, `/readyz` and `/metrics` add to the workers' figures. Any thread.
    func withOperations(_ status: TransportStatus) -> TransportStatus {
        var status = status
        status.metrics = workerMetrics.reduce(TransportMetrics(), +)
        status.openSockets = status.metrics.connectionsAccepted - status.metrics.connectionsClosed
        status.refusals = ledger.refusalCounts.withLock { $0 }
        status.startTime = operations.startTime
        status.readiness = operations.readiness(now: Clock.now())
        status.storage = (persistence as? StorageMetricsSource)?.storageMetrics
        return status
    }
}
