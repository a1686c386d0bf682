import Foundation
import RingcastCore

extension RingcastClient {
    /// Publishes a Foundation `Progress` as the task `id` until it finishes, is cancelled, or
    /// ``ProgressTracking/stop()`` is called.
    ///
    /// ```swift
    /// let copy = Progress(totalUnitCount: 10)
    /// let tracking = rc.track(copy, as: "etl.copy", title: "Copy")
    /// // … copy.completedUnitCount += 1 as the work goes …
    /// tracking.stop()
    /// ```
    ///
    /// What it sends: `fractionCompleted` as the progress (none while the Progress is
    /// indeterminate), its own `completedUnitCount` of `totalUnitCount` as unit counts (when the
    /// total is above 0), and `localizedAdditionalDescription` as the detail (when it is not
    /// empty); the state follows it: `paused` while it is paused, `done` when it finishes,
    /// `cancelled` when it is cancelled, and tracking ends with those two.
    ///
    /// How it watches: swift-corelibs-foundation's `Progress` (Linux) has no key-value observing
    /// and no change callback, so the tracker looks at it every `Options.trackingInterval` seconds
    /// (0.25: at most four updates a second) and sends only what changed since the last look;
    /// nothing at all while nothing changes, except a lease renewal when `staleAfter` is set. A
    /// last look is taken when tracking stops and when the client closes.
    ///
    /// Control requests: the task offers `cancel` (and `pause` while the Progress `isPausable`); a
    /// cancel request from the dashboard calls `progress.cancel()` (so its `cancellationHandler`
    /// runs), a pause request `pause()`, a resume request `resume()`.
    ///
    /// An invalid id cannot throw here: it is reported on ``errors`` and the returned tracking has
    /// already stopped.
    ///
    /// - Parameters:
    ///   - progress: the Progress to publish; it is read from the client's own queue, as Foundation
    ///     allows (`Progress` is `Sendable`).
    ///   - id: the task's id.
    ///   - title: its title (a new task's title is otherwise its id).
    ///   - parent: a task this one rolls up into (it must exist).
    ///   - staleAfter: a lease in seconds, renewed while tracking (nil: none, and an earlier one is cleared).
    /// - Returns: the tracking, whose `stop()` ends it.
    @discardableResult
    public func track(
        _ progress: Progress, as id: String, title: String? = nil, parent: String? = nil,
        staleAfter: Double? = nil
    ) -> ProgressTracking {
        var start = RingcastTask.freshFields(lease: staleAfter)
        if let title { start.append(("title", .string(title))) }
        if let parent { start.append(("parent", .string(parent))) }
        do {
            try core.check("update", id, start)
        } catch {
            core.report(error as? RingcastClientError ?? .invalid(code: "invalid_field", message: "\(error)", field: nil))
            return ProgressTracking(nil, id: id)
        }
        let tracker = ProgressTracker(progress, id: id, core: core, lease: staleAfter, interval: core.options.trackingInterval)
        tracker.begin(with: start)
        return ProgressTracking(tracker, id: id)
    }
}

/// The handle `track` returns: it stops the tracking. Any thread.
public final class ProgressTracking: Sendable {
    /// The task the Progress is published as.
    public let id: String
    private let tracker: ProgressTracker?

    init(_ tracker: ProgressTracker?, id: String) {
        self.tracker = tracker
        self.id = id
    }

    /// Whether the Progress is still published: false once it finished, was cancelled, or `stop()`
    /// was called (or the client closed).
    public var isTracking: Bool { tracker?.isTracking ?? false }

    /// Takes a last look at the Progress and sends what changed, then stops tracking; a task still
    /// running stays as it was last sent and offers no control requests any more. Calling it again
    /// does nothing.
    public func stop() { tracker?.stop() }
}

/// One tracked Progress: what was last sent, and the timer that looks again.
/// @unchecked Sendable: every `var` is guarded by `lock`, which is also held while the Progress is
/// read and its reading queued, so two looks never interleave; `progress` is Sendable and its
/// reads are Foundation's to make safe.
final class ProgressTracker: @unchecked Sendable {
    /// What one look at the Progress saw.
    struct Reading: Equatable {
        var fraction: Double?
        var completed: Int64?
        var total: Int64?
        var detail: String?
        var state: RingcastClient.State
        var pausable: Bool

        init(_ progress: Progress) {
            let fraction = progress.fractionCompleted
            self.fraction = progress.isIndeterminate || !fraction.isFinite ? nil : min(1, max(0, fraction))
            if progress.totalUnitCount > 0, progress.completedUnitCount >= 0 {
                completed = progress.completedUnitCount
                total = progress.totalUnitCount
            }
            let description: String? = progress.localizedAdditionalDescription
            if let description, !description.isEmpty { detail = RingcastTask.clip(description) }
            if progress.isCancelled {
                state = .cancelled
            } else if progress.isFinished {
                state = .done
            } else {
                state = progress.isPaused ? .paused : .running
            }
            pausable = progress.isPausable
        }

        var controls: [RingcastClient.ControlAction] { pausable ? [.cancel, .pause] : [.cancel] }
        var isTerminal: Bool { state == .done || state == .cancelled }

        /// The fields that differ from `previous` (all of them when there is none).
        func fields(since previous: Reading?) -> [(String, JSONValue)] {
            var fields: [(String, JSONValue)] = []
            if previous == nil || previous!.fraction != fraction { fields.append(("progress", fraction.map { .number($0) } ?? .null)) }
            if let completed, let total, previous?.completed != completed || previous?.total != total {
                fields += [("completed", .number(Double(completed))), ("total", .number(Double(total)))]
            }
            if previous == nil ? detail != nil : previous!.detail != detail { fields.append(("detail", detail.map { .string($0) } ?? .null)) }
            if (previous?.state ?? .running) != state { fields.append(("state", .string(state.rawValue))) }
            return fields
        }
    }

    let progress: Progress
    let id: String
    private let core: ClientCore
    private let lease: Double?
    private let interval: Double
    private let lock = NSLock()
    private var last: Reading?
    private var lastSent = Date()
    private var stopped = false
    private var ticker: Ticker?
    private var controlsToken: Int?
    private var closeHook: Int?

    init(_ progress: Progress, id: String, core: ClientCore, lease: Double?, interval: Double) {
        self.progress = progress
        self.id = id
        self.core = core
        self.lease = lease
        self.interval = max(0.01, interval)
    }

    var isTracking: Bool { lock.withLock { !stopped } }

    /// The first look, sent with the fields of a fresh start; then the timer.
    func begin(with start: [(String, JSONValue)]) {
        lock.withLock {
            look(start: start)
            guard !stopped else { return }
            // The timer and the hook hold the tracker (a tracking nobody keeps still tracks) until `end`.
            closeHook = core.onClose { self.stop() }
            ticker = Ticker(every: interval) { self.tick() }
        }
    }

    func stop() {
        lock.withLock {
            guard !stopped else { return }
            look()
            guard !stopped else { return }
            end(announce: true)
        }
    }

    private func tick() {
        lock.withLock {
            guard !stopped else { return }
            look()
        }
    }

    /// A control request for the task: handed to the Progress, then a look at once.
    private func obey(_ action: RingcastClient.ControlAction) {
        switch action {
        case .cancel: progress.cancel()
        case .pause: if progress.isPausable { progress.pause() }
        case .resume: progress.resume()
        }
        tick()
    }

    /// Under the lock: reads the Progress and queues what changed (and the controls it offers).
    private func look(start: [(String, JSONValue)] = []) {
        let reading = Reading(progress)
        var fields = start
        for (key, value) in reading.fields(since: last) {
            if let index = fields.firstIndex(where: { $0.0 == key }) { fields[index].1 = value } else { fields.append((key, value)) }
        }
        if fields.isEmpty, let lease, Date().timeIntervalSince(lastSent) >= lease / 3 {
            fields = []  // a renewal: an update with no fields keeps the lease
        } else if fields.isEmpty {
            return
        }
        guard core.enqueueNow("update", id, fields) else {
            // The client closed (or the id was refused): nothing more will be sent.
            end(announce: false)
            return
        }
        lastSent = Date()
        if reading.isTerminal {
            last = reading
            end(announce: false)
            return
        }
        if last?.controls != reading.controls {
            controlsToken = core.offerControls(reading.controls, for: id) { [weak self] action in self?.obey(action) }
        }
        last = reading
    }

    /// Under the lock: no more looks, no more requests.
    private func end(announce: Bool) {
        stopped = true
        ticker?.stop()
        ticker = nil
        if let controlsToken { core.withdrawControls(for: id, token: controlsToken, announce: announce) }
        if let closeHook { core.removeCloseHook(closeHook) }
        closeHook = nil
    }
}
