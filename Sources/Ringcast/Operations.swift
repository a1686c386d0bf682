import Foundation
import RingcastCore
import RingcastLWS

/// What the server keeps for operators beside the API's counters: the readiness probes and their
/// last answers (for /readyz), and when recent events reached the fan-out (for the publish-to-write
/// latency). Service thread only.
final class OperationsState {
    /// Seconds between readiness questions, and how long one may wait for its answer.
    static let readinessInterval = 2.0
    static let readinessDeadline = 5.0

    /// When the server was made, in Unix seconds (`ringcast_start_time_seconds`).
    let startTime = Date().timeIntervalSince1970
    /// Storage first; a Redis engine adds its own probe here.
    let probes: [ReadinessProbe]
    var trackers: [ReadinessTracker]
    /// Whether each probe was last reported ready, so the log says when it changes.
    var reportedReady: [Bool?]
    var readinessTimer: LoopTimer?
    var publishTimes = PublishTimes()

    init(probes: [ReadinessProbe]) {
        self.probes = probes
        trackers = probes.map { ReadinessTracker(name: $0.readinessName, deadlineSeconds: OperationsState.readinessDeadline) }
        reportedReady = probes.map { _ in nil }
    }

    func readiness(now: Double) -> [ReadinessStatus] { trackers.map { $0.status(now: now) } }
}

/// When each of the last `capacity` sequence numbers was handed to the fan-out, by a monotonic clock.
/// The owner's thread only.
struct PublishTimes {
    private var seqs: [UInt64]
    private var times: [Double]

    init(capacity: Int = 8192) {
        seqs = Array(repeating: 0, count: capacity)
        times = Array(repeating: 0, count: capacity)
    }

    mutating func record(_ seq: UInt64, at time: Double) {
        guard seq > 0 else { return }
        let slot = Int(seq % UInt64(seqs.count))
        seqs[slot] = seq
        times[slot] = time
    }

    /// nil once `seq` is too old to be remembered.
    func time(of seq: UInt64) -> Double? {
        let slot = Int(seq % UInt64(seqs.count))
        return seqs[slot] == seq ? times[slot] : nil
    }
}

extension Clock {
    /// Seconds on a clock that never jumps, for durations.
    static func monotonicSeconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}

extension RingcastServer {
    /// The probes /readyz asks: storage, when it can be asked.
    static func readinessProbes(for persistence: TaskPersistence) -> [ReadinessProbe] {
        [persistence as? ReadinessProbe].compactMap { $0 }
    }

    /// On the service thread as the loop starts: ask every probe now, then every `readinessInterval`.
    func startOperations(_ loop: ServiceLoop) throws {
        operations.readinessTimer = try loop.makeTimer { [unowned self] in askReadiness() }
        askReadiness()
    }

    private func askReadiness() {
        let now = Clock.now()
        for (index, probe) in operations.probes.enumerated() where operations.trackers[index].isIdle {
            operations.trackers[index].asked(now: now)
            probe.checkReadiness { [self] failure in
                loop.post { [self] in readinessAnswered(index, failure: failure) }
            }
        }
        reportReadinessChanges(now: now)
        operations.readinessTimer?.schedule(seconds: OperationsState.readinessInterval)
    }

    private func readinessAnswered(_ index: Int, failure: String?) {
        let now = Clock.now()
        operations.trackers[index].answered(failure, now: now)
        reportReadinessChanges(now: now)
    }

    /// One log line when a dependency stops answering, and one when it is back.
    private func reportReadinessChanges(now: Double) {
        for (index, status) in operations.readiness(now: now).enumerated() where status.ready != operations.reportedReady[index] {
            // Before the first answer (unless it is overdue) there is nothing to report yet.
            let tracker = operations.trackers[index]
            if tracker.answeredAt == nil, !tracker.isOverdue(now: now) { continue }
            if status.ready {
                if operations.reportedReady[index] == false { logger.info("\(status.name) answers again: ready", fields: [("check", .string(status.name))]) }
            } else {
                logger.error("not ready: \(status.failure ?? status.name)", fields: [("check", .string(status.name))])
            }
            operations.reportedReady[index] = status.ready
        }
    }

    /// Events handed to the fan-out now: remembered by seq, to time how long their frames take.
    func notePublished(_ events: [OutboundEvent]) {
        let now = Clock.monotonicSeconds()
        for event in events { operations.publishTimes.record(event.seq, at: now) }
    }

    /// A frame just written to a watcher: its bytes, and how long the newest event in it took since
    /// it reached the fan-out (`newestSeq` is nil when the frame carried no new event: hello, an
    /// error, a heartbeat).
    func noteFrameWritten(_ frame: [UInt8], newestSeq: UInt64?) {
        api.metrics.bytesSent["websocket"] += frame.count
        guard let newestSeq, let publishedAt = operations.publishTimes.time(of: newestSeq) else { return }
        api.metrics.publishToWrite.observe(max(0, Clock.monotonicSeconds() - publishedAt))
    }

    /// What `/readyz` and `/metrics` add to the transport's status.
    func withOperations(_ status: TransportStatus) -> TransportStatus {
        var status = status
        status.openSockets = peers.count
        status.startTime = operations.startTime
        status.readiness = operations.readiness(now: Clock.now())
        status.storage = (persistence as? StorageMetricsSource)?.storageMetrics
        return status
    }
}
