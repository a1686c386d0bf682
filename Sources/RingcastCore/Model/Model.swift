/// Task ids: `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`; dots group them (`ci.build-42`).
public enum TaskID {
    public static let pattern = #"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"#

    static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    public static func isValid(_ id: String) -> Bool {
        let utf8 = id.utf8
        guard let first = utf8.first, utf8.count <= 128 else { return false }
        guard isIDByte(first), first != UInt8(ascii: "."), first != UInt8(ascii: "_"), first != UInt8(ascii: "-") else { return false }
        return utf8.allSatisfy(isIDByte)
    }
}

public enum TaskState: String, Sendable, CaseIterable {
    case running, paused, done, failed, cancelled, stalled

    /// A terminal state is never conflated away and stops timers and leases.
    public var isTerminal: Bool { self == .done || self == .failed || self == .cancelled }

    /// States a publisher may set; `stalled` belongs to the server's lease check.
    public static let settable: [TaskState] = [.running, .paused, .done, .failed, .cancelled]
}

/// A countdown the server drives. Ticks are derived, never counted: tick k falls at
/// `startedAt + min(k·interval, seconds)`, where `startedAt` moves forward by every pause's length.
public struct TimerSpec: Equatable, Sendable {
    public var seconds: Double
    public var interval: Double
    /// Unix ms; shifted by the length of each pause so the arithmetic below stays pause-free.
    public var startedAt: Double
    public var pausedAt: Double?
    /// The last tick the server has emitted (0 before the first).
    public var ticksEmitted: Int = 0
    /// Seconds after the countdown ends (or is cancelled) at which the server hides it.
    public var hideAfter: Double?

    public init(seconds: Double, interval: Double, startedAt: Double, pausedAt: Double? = nil, ticksEmitted: Int = 0) {
        self.seconds = seconds
        self.interval = interval
        self.startedAt = startedAt
        self.pausedAt = pausedAt
        self.ticksEmitted = ticksEmitted
    }

    public var tickCount: Int { max(1, Int((seconds / interval - 1e-9).rounded(.up))) }

    /// Unix ms at which tick `k` (1…tickCount) falls while running.
    public func tickTime(_ k: Int) -> Double { startedAt + min(Double(k) * interval, seconds) * 1000 }

    public func elapsedSeconds(tick k: Int) -> Double { min(Double(k) * interval, seconds) }

    public func elapsedSeconds(at now: Double) -> Double {
        let clock = pausedAt ?? now
        return min(seconds, max(0, (clock - startedAt) / 1000))
    }

    public var endsAt: Double { startedAt + seconds * 1000 }

    /// The newest tick due at `now` that has not been emitted: a late loop skips to it rather than bunching ticks.
    public func dueTick(at now: Double) -> Int? {
        guard pausedAt == nil, ticksEmitted < tickCount else { return nil }
        let next = ticksEmitted + 1
        guard tickTime(next) <= now else { return nil }
        if tickTime(tickCount) <= now { return tickCount }
        // Computed, not counted up to: a timer whose start lies far back (startAt, a restart) must not
        // cost a step per tick it missed. The estimate is off by a step at most; the loops settle it.
        var k = min(tickCount - 1, max(next, Int(((now - startedAt) / 1000 / interval).rounded(.down))))
        while k > next, tickTime(k) > now { k -= 1 }
        while k < tickCount - 1, tickTime(k + 1) <= now { k += 1 }
        return k
    }

    /// When the next tick falls, or nil when paused or finished.
    public var nextTickTime: Double? {
        guard pausedAt == nil, ticksEmitted < tickCount else { return nil }
        return tickTime(ticksEmitted + 1)
    }

    public mutating func pause(at now: Double) {
        if pausedAt == nil { pausedAt = now }
    }

    public mutating func resume(at now: Double) {
        guard let pausedAt else { return }
        startedAt += now - pausedAt
        self.pausedAt = nil
    }
}

/// Progress per second as tqdm computes it: exponential moving averages of Δprogress and Δtime
/// (smoothing 0.3), each corrected for its start-up bias 1 − (1−α)ⁿ, divided. O(1) per observation:
/// (1−α)ⁿ is carried along, not recomputed.
public struct RateEstimator: Equatable, Sendable {
    public static let smoothing = 0.3
    private var lastProgress: Double?
    private var lastTime: Double = 0
    private var averageDelta = 0.0
    private var averageSeconds = 0.0
    /// (1 − α)ⁿ after n measurements: the weight the averages' zero start still has.
    private var startWeight = 1.0

    public init() {}

    /// Feeds one observation (`time` in Unix ms); returns the current rate, or nil while unknown.
    /// An observation without progress, or without time passing, measures nothing: the interval stays
    /// open, so the next step is measured from the last one that counted (a title update does not
    /// shorten it, and steps applied in the same millisecond are not lost).
    public mutating func observe(progress: Double, at time: Double) -> Double? {
        guard let lastProgress else {
            lastProgress = progress
            lastTime = time
            return rate
        }
        let delta = progress - lastProgress
        let seconds = (time - lastTime) / 1000
        if delta < 0 {
            self = RateEstimator()
            self.lastProgress = progress
            lastTime = time
            return nil
        }
        if seconds < 0 {
            self.lastProgress = progress
            lastTime = time
            return rate
        }  // the clock went back
        guard delta > 0, seconds > 0 else { return rate }
        let alpha = RateEstimator.smoothing
        averageDelta = alpha * delta + (1 - alpha) * averageDelta
        averageSeconds = alpha * seconds + (1 - alpha) * averageSeconds
        startWeight *= 1 - alpha
        self.lastProgress = progress
        lastTime = time
        return rate
    }

    /// The bias-corrected averages: what the estimator believes one step is, in progress and seconds.
    public var correctedAverages: (delta: Double, seconds: Double)? {
        guard startWeight < 1 else { return nil }
        let correction = 1 - startWeight
        return (averageDelta / correction, averageSeconds / correction)
    }

    public var rate: Double? {
        guard let (delta, seconds) = correctedAverages, seconds > 0 else { return nil }
        return delta / seconds
    }

    /// Five steps measured or more ((1 − α)⁵ ≈ 0.17): until then a kind's history says more of
    /// the time left than this estimate does.
    public var hasSettled: Bool { startWeight < 0.2 }

    /// Everything the estimator knows, for storage: a restart (or a cluster node loading a
    /// checkpoint) carries on with the same estimate.
    public var stored: [Double] {
        [lastProgress ?? -1, lastTime, averageDelta, averageSeconds, startWeight]
    }

    public init?(stored: [Double]) {
        guard stored.count == 5, stored[4] > 0, stored[4] <= 1 else { return nil }
        lastProgress = stored[0] < 0 ? nil : stored[0]
        lastTime = stored[1]
        averageDelta = stored[2]
        averageSeconds = stored[3]
        startWeight = stored[4]
    }

    public static func eta(progress: Double, rate: Double?) -> Double? {
        guard let rate, rate > 0 else { return nil }
        return max(0, (1 - progress) / rate)
    }
}

/// The one thing a dashboard shows. Times are Unix milliseconds; durations are seconds.
public struct TaskRecord: Equatable, Sendable {
    public var id: String
    public var title: String
    public var detail: String?
    /// 0…1, or nil for indeterminate (a spinner).
    public var progress: Double?
    public var completed: Double?
    public var total: Double?
    public var state: TaskState = .running
    public var visible = true
    public var modal = false
    public var hideAt: Double?
    public var rate: Double?
    public var eta: Double?
    public var updatedAt: Double
    public var seq: UInt64 = 0
    public var parent: String?
    public var staleAfter: Double?
    /// When a publisher last touched the task: the lease (`staleAfter`) runs from here.
    public var publishedAt: Double
    public var timer: TimerSpec?
    /// What the publisher lets watchers ask of it (`POST /api/tasks/{id}/cancel` …).
    public var controls: [TaskControl] = []
    /// A cancel request waits for the publisher's answer (a published state clears it).
    public var cancelRequested = false
    /// A pause request waits for the publisher's answer (a published state, or resume, clears it).
    public var pauseRequested = false
    /// The request waiting is held for a publisher: none was connected to take it when it was
    /// asked. Cleared once a publisher's WebSocket takes it (or the request is answered).
    public var requestWaiting = false
    /// Seconds a stalled task may stay stalled before it ends `failed` (nil: the server's default).
    public var abandonAfter: Double?
    /// When the task turned `stalled` (Unix ms); nil while it is not.
    public var stalledAt: Double?
    /// Log lines received so far; the store keeps the last `logLines` of them.
    public var logCount = 0
    // ETA from history (History.swift).
    /// The kind its runs are remembered under, when the publisher named one; else `defaultKind`.
    public var kind: String?
    /// When the current run began (Unix ms): the task's creation, or its return from a finished state.
    public var runStartedAt: Double
    /// The median length of its kind's last finished runs, taken when the run began.
    public var expectedSeconds: Double?
    /// Past this many seconds of running the task is `slow` (its kind's 90th percentile); nil: never.
    public var slowAfter: Double?
    /// Running longer than 90 % of its kind's last runs took.
    public var slow = false
    // Who did it (Ownership.swift).
    /// The name of whoever created the task: its tasks count against that entry's `maxTasks`.
    public var owner: String?
    /// Who made its last state change or request (a publisher, reader, signed token's `sub`, or `local`).
    public var by: String?
    /// A link the publisher gave (a CI run, a pull request): http or https only (Timeline.swift).
    public var url: String?
    /// Its short history (Timeline.swift): never in events or snapshots, only in storage and
    /// `GET /api/tasks/{id}/timeline`.
    public var timeline: [TimelineEntry] = []
    var rateEstimator = RateEstimator()
    /// Set once a publisher gives this task progress of its own; until then a parent's progress is
    /// rolled up from its children.
    var hasOwnProgress = false

    public init(id: String, now: Double) {
        self.id = id
        title = id
        updatedAt = now
        publishedAt = now
        runStartedAt = now
    }

    /// Writes the task's fields (without braces) so events and snapshots share one encoding.
    public func writeFields(into writer: inout JSONWriter, now: Double) {
        writer.key("id")
        writer.string(id)
        writer.key("title")
        writer.string(title)
        if let detail {
            writer.key("detail")
            writer.string(detail)
        }
        writer.key("progress")
        if let progress { writer.number(progress) } else { writer.null() }
        if let completed {
            writer.key("completed")
            writer.number(completed)
        }
        if let total {
            writer.key("total")
            writer.number(total)
        }
        writer.key("state")
        writer.string(state.rawValue)
        writer.key("visible")
        writer.bool(visible)
        writer.key("modal")
        writer.bool(modal)
        if let hideAt {
            writer.key("hideAt")
            writer.number(hideAt.rounded())
        }
        if let rate {
            writer.key("rate")
            writer.number(rate)
        }
        if let eta {
            writer.key("eta")
            writer.number(eta)
        }
        writer.key("updatedAt")
        writer.number(updatedAt.rounded())
        writer.key("seq")
        writer.number(Int(seq))
        if let parent {
            writer.key("parent")
            writer.string(parent)
        }
        if let staleAfter {
            writer.key("staleAfter")
            writer.number(staleAfter)
        }
        writeFollowUpFields(into: &writer)
        writeHistoryFields(into: &writer)
        if let by {
            writer.key("by")
            writer.string(by)
        }
        if let url {
            writer.key("url")
            writer.string(url)
        }
        writer.key("startedAt")
        writer.number(runStartedAt.rounded())
        if let timer {
            writer.key("timer")
            writer.beginObject()
            writer.key("seconds")
            writer.number(timer.seconds)
            writer.key("interval")
            writer.number(timer.interval)
            writer.key("startedAt")
            writer.number(timer.startedAt.rounded())
            writer.key("endsAt")
            writer.number(timer.endsAt.rounded())
            if let pausedAt = timer.pausedAt {
                writer.key("pausedAt")
                writer.number(pausedAt.rounded())
            }
            let elapsed = timer.elapsedSeconds(tick: timer.ticksEmitted)
            writer.key("remaining")
            writer.number(roundedSeconds(timer.seconds - elapsed))
            writer.key("elapsed")
            writer.number(roundedSeconds(elapsed))
            writer.endObject()
        }
    }

    public func encodedObject(now: Double) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writeFields(into: &writer, now: now)
        writer.endObject()
        return writer.bytes
    }
}

/// Seconds to the millisecond, so 2 − 0.05·k prints as 1.95, not 1.9500000000000002.
func roundedSeconds(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
