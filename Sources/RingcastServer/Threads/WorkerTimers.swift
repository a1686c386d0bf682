import RingcastCore
import RingcastLWS
import RingcastPlatform

/// A service thread's clock work for the state: the heartbeat every thread sends its watchers,
/// and, on worker 0 alone, the state's deadline timer (ticks, hides, leases, retention) and its
/// write-behind timer. Service thread only.
final class WorkerTimers {
    private var heartbeat: LoopTimer?
    private var deadline: LoopTimer?
    private var writeBehind: LoopTimer?
    private let heartbeatSeconds: Double

    init(heartbeatSeconds: Double) { self.heartbeatSeconds = heartbeatSeconds }

    /// On the loop's thread: the heartbeat, and on worker 0 (`deadlineFired` given) the state's timers.
    func prepare(
        _ loop: ServiceLoop, heartbeatFired: @escaping () -> Void, deadlineFired: (() -> Void)?, writeBehindFired: @escaping () -> Void
    ) throws {
        heartbeat = try loop.makeTimer(heartbeatFired)
        scheduleHeartbeat()
        guard let deadlineFired else { return }
        deadline = try loop.makeTimer(deadlineFired)
        writeBehind = try loop.makeTimer(writeBehindFired)
    }

    func scheduleHeartbeat() { heartbeat?.schedule(seconds: heartbeatSeconds) }

    /// The state's next deadline (Unix ms), or none.
    func arm(_ at: Double?) {
        guard let at else {
            deadline?.cancel()
            return
        }
        deadline?.schedule(microseconds: UnixTime.microseconds(until: at, now: Clock.now()))
    }

    func armWriteBehind() { writeBehind?.schedule(seconds: SQLitePersistence.writeBehindSeconds) }
}
