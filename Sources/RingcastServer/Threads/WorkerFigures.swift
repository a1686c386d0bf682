import RingcastCore
import RingcastLWS
import RingcastPlatform
import Synchronization

/// A service thread's figures: what it counts (`counters`, read by /healthz and /metrics on any
/// thread) and the frames it writes, gathered here without a lock and added to `counters` within
/// `reportSeconds`. Service thread only, but for `counters`.
final class WorkerFigures {
    let counters = WorkerCounters()
    /// When each recent seq's change was applied, to time its frames.
    @exclusivity(unchecked) private var publishTimes = PublishTimes()
    /// Frame figures not yet added to `counters.metrics` (`noteFrameWritten`).
    @exclusivity(unchecked) private var unreportedFrames = TransportMetrics()
    @exclusivity(unchecked) private var isReportDue = false
    private var reportTimer: LoopTimer?
    /// How late `/metrics` may show a thread's frame figures.
    static let reportSeconds = 0.25

    func prepare(_ loop: ServiceLoop) throws {
        reportTimer = try loop.makeTimer { [unowned self] in reportFrames() }
    }

    /// Counts something of this thread's in its `TransportMetrics`.
    func count(_ body: (inout TransportMetrics) -> Void) { counters.metrics.withLock { body(&$0) } }

    /// Deliveries reaching this thread's fan-out: when their change was applied, by seq.
    func notePublished(_ delivery: SharedState.Delivery) {
        for event in delivery.events { publishTimes.record(event.seq, at: delivery.appliedAt) }
    }

    /// A frame just written to a watcher: its size, its events, and how long the newest event in it
    /// took since its change was applied (`newestSeq` is nil when the frame carried no new event:
    /// hello, an error, a heartbeat). On the delivery path, so no lock: the figures gather in this
    /// thread's own `unreportedFrames` and reach `/metrics` within `reportSeconds`.
    func noteFrameWritten(bytes: Int, events: Int, newestSeq: UInt64?) {
        let latency = newestSeq.flatMap { publishTimes.time(of: $0) }.map { max(0, Clock.monotonicSeconds() - $0) }
        unreportedFrames.webSocketBytes += bytes
        unreportedFrames.eventsPerFrame.observe(Double(events))
        if let latency { unreportedFrames.publishToWrite.observe(latency) }
        if !isReportDue {
            isReportDue = true
            reportTimer?.schedule(seconds: WorkerFigures.reportSeconds)
        }
    }

    /// Adds the frames written since the last report to what `/metrics` reads.
    func reportFrames() {
        isReportDue = false
        let figures = unreportedFrames
        unreportedFrames = TransportMetrics()
        count { $0 = $0 + figures }
    }
}

/// A worker's figures that /healthz and /metrics read from other threads: written by its thread only.
final class WorkerCounters: Sendable {
    let watchers = Atomic<Int>(0)
    let resyncs = Atomic<Int>(0)
    let patternSets = Atomic<Int>(0)
    let framesSent = Atomic<Int>(0)
    let eventsSent = Atomic<Int>(0)
    let socketsOpened = Atomic<Int>(0)
    let coalesced = Atomic<Int>(0)
    /// The rest of what /metrics shows of this thread: written by it, read by a scrape on any thread.
    let metrics = Locked(TransportMetrics())

    func update(from fanOut: FanOut) {
        watchers.store(fanOut.subscriberCount, ordering: .relaxed)
        coalesced.store(fanOut.coalescedCount, ordering: .relaxed)
        resyncs.store(fanOut.resyncCount, ordering: .relaxed)
        patternSets.store(fanOut.groupCount, ordering: .relaxed)
    }

    /// Counts one written frame of `events` events (from the writer thread alone, so load-add-store is safe).
    func wrote(events: Int) {
        framesSent.store(framesSent.load(ordering: .relaxed) + 1, ordering: .relaxed)
        eventsSent.store(eventsSent.load(ordering: .relaxed) + events, ordering: .relaxed)
    }
}

/// When each of the last `capacity` sequence numbers' change was applied, by a monotonic clock.
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
