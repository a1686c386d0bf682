import Foundation
import RingcastCore

extension RingcastClient {
    /// Runs `body` as the Ringcast task `id`, and ends the task the way the body ends: `done` when
    /// it returns, `failed` with the error's description as the detail when it throws, `cancelled`
    /// when it throws while the surrounding Swift task is cancelled (or throws `CancellationError`).
    ///
    /// ```swift
    /// let rows = try await rc.withTask("etl.import", title: "Import") { task in
    ///     try await task.update(progress: 0.5)
    ///     return 42
    /// }
    /// ```
    ///
    /// At the start the task is made fresh: running, visible, its detail and any pending hide
    /// cleared, its lease set. Progress it had from an earlier run stays until the body sends its
    /// own, so that a task whose progress comes from its children (``RingcastTask/child(_:title:weight:)``)
    /// keeps rolling them up. While the body runs, the lease (`staleAfter`) is renewed every third of
    /// it, as `ringcast run` does: if the process dies, the task turns `stalled` on the dashboard.
    ///
    /// With `cancellable`, the task offers `cancel` to the dashboard, and a cancel request cancels
    /// the Swift task running the body (cooperatively, as `Task.cancel()` does: `Task.sleep` and
    /// other cancellable work throw `CancellationError`, `Task.isCancelled` turns true, and
    /// ``RingcastTask/isCancelRequested`` says so); a body that throws then ends the task
    /// `cancelled`, one that returns anyway ends it `done`.
    ///
    /// At the end, children still running end with their parent (`done` when it is done, else
    /// `cancelled`), then `withTask` waits (at most `Options.acknowledgementTimeout` seconds) for
    /// the server to acknowledge the final state as kept. Whatever happens to the dashboard, the
    /// body's result or error is what `withTask` returns or throws; a final state that could not be
    /// confirmed is reported on ``errors``.
    ///
    /// - Parameters:
    ///   - id: the task's id.
    ///   - title: its title (a new task's title is otherwise its id).
    ///   - parent: a task this one rolls up into (it must exist).
    ///   - staleAfter: the lease in seconds (nil: none, and an earlier one is cleared).
    ///   - cancellable: whether the dashboard may cancel it.
    ///   - isolation: where the body runs: the caller's actor, so the body need not be `Sendable`.
    ///   - body: the work, given the task to report progress on.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws; before the body runs, ``RingcastClientError/invalid(code:message:field:)``
    ///   for an invalid id or lease and ``RingcastClientError/closed`` after `close()`.
    public func withTask<T>(
        _ id: String, title: String? = nil, parent: String? = nil, staleAfter: Double? = 10, cancellable: Bool = true,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (RingcastTask) async throws -> T
    ) async throws -> T {
        let scope = TaskScope(lease: staleAfter)
        var fields = RingcastTask.freshFields(lease: staleAfter)
        if let title { fields.append(("title", .string(title))) }
        if let parent { fields.append(("parent", .string(parent))) }
        try await core.enqueue("update", id, fields)
        let task = RingcastTask(id: id, core: core, scope: scope, weight: nil)
        withUnsafeCurrentTask { scope.running = $0 }
        let token =
            cancellable
            ? core.offerControls([.cancel], for: id) { action in
                if action == .cancel { scope.requestCancel() }
            } : nil
        let keeper = staleAfter.map { lease in
            Ticker(every: lease / 3) { [core] in for id in [id] + scope.liveChildren { core.enqueueNow("update", id, []) } }
        }
        func end(_ state: State, detail: String?) async {
            scope.close()
            keeper?.stop()
            if let token { core.withdrawControls(for: id, token: token, announce: false) }
            await task.end(state, detail: detail)
            do {
                try await core.flush(durable: true, timeout: core.options.acknowledgementTimeout)
            } catch {
                core.report(error as? RingcastClientError ?? .connection("\(error)"))
            }
        }
        do {
            let result = try await body(task)
            await end(.done, detail: nil)
            return result
        } catch {
            if error is CancellationError || Task.isCancelled {
                await end(.cancelled, detail: nil)
            } else {
                await end(.failed, detail: RingcastTask.describe(error))
            }
            throw error
        }
    }
}

/// A task being worked on inside ``RingcastClient/withTask(_:title:parent:staleAfter:cancellable:isolation:_:)``,
/// or a child of one: report its progress, give it children, end it early.
///
/// A child's progress rolls up into its parent by weight: a child publishes its progress as unit
/// counts out of its weight (progress 0.5 of weight 2 is 1 of 2), so the server's exact unit
/// roll-up gives the parent the weighted sum of its children, as Foundation's `Progress` does with
/// pending unit counts. A parent rolls its children up only while it has never been sent progress
/// of its own; the progress a task is sent always wins.
///
/// Any thread may use it; it is only valid while its `withTask` runs (afterwards its calls do nothing).
public final class RingcastTask: Sendable {
    /// The task's id (a child's is its parent's id, a dot, and its name).
    public let id: String
    private let core: ClientCore
    private let scope: TaskScope
    /// A child's weight in its parent; nil for the task of `withTask`.
    private let weight: Double?

    init(id: String, core: ClientCore, scope: TaskScope, weight: Double?) {
        self.id = id
        self.core = core
        self.scope = scope
        self.weight = weight
    }

    /// Whether the dashboard asked to cancel the task of `withTask` (the body's Swift task has then
    /// been cancelled too).
    public var isCancelRequested: Bool { scope.isCancelRequested }

    /// Reports a fraction from 0 to 1 of any floating-point type (`Double(done) / Double(all)`).
    /// - Throws: ``RingcastClientError/invalid(code:message:field:)`` for a value outside 0…1.
    public func update<Fraction: BinaryFloatingPoint>(progress: Fraction, detail: String? = nil) async throws {
        try await update(progress: ProgressValue(progress), detail: detail)
    }

    /// Reports progress (a fraction, unit counts or `.indeterminate`), a new title or a new detail;
    /// what is nil stays as it is.
    /// - Throws: ``RingcastClientError/invalid(code:message:field:)`` for a value the server would refuse.
    public func update(progress: ProgressValue? = nil, title: String? = nil, detail: String? = nil) async throws {
        let rest = RingcastClient.fields(title: title, detail: detail, state: nil, staleAfter: nil, parent: nil)
        let given = (progress?.fields ?? []) + rest
        guard let weight, let progress else { return try await send(given) }
        // Checked as given, then sent as a share of the child's weight.
        try core.check("update", id, given)
        let shared: [(String, JSONValue)]
        if let fraction = progress.fraction {
            shared = [("progress", .number(fraction)), ("completed", .number(fraction * weight)), ("total", .number(weight))]
        } else {
            shared = [("progress", .null), ("completed", .null)]
        }
        try await send(shared + rest)
    }

    /// Reports unit counts of any integer type (`completed: rows, total: 5_000`).
    /// - Throws: ``RingcastClientError/invalid(code:message:field:)`` for a negative count or a total of 0.
    public func update<Count: BinaryInteger>(completed: Count, total: Count, detail: String? = nil) async throws {
        try await update(progress: ProgressValue(completed: completed, total: total), detail: detail)
    }

    /// Creates a child task, `id.name`, running, whose progress rolls up into this one with
    /// `weight` (children of weights 2 and 1: the first counts twice). It ends when this task's
    /// `withTask` ends (done with it, or cancelled), or earlier with ``finish(_:detail:)``.
    ///
    /// A child carries its weight as unit counts, so its own children do not move its progress.
    /// - Throws: ``RingcastClientError/invalid(code:message:field:)`` for a weight that is not above 0
    ///   or a name that makes no valid id.
    public func child(_ name: String, title: String? = nil, weight: Double = 1) async throws -> RingcastTask {
        guard weight.isFinite, weight > 0 else {
            throw RingcastClientError.invalid(
                code: "invalid_field",
                message: "weight \(weight) is out of range: a number above 0 (children of weights 2 and 1: the first counts twice)", field: "weight")
        }
        let childID = "\(id).\(name)"
        var fields = RingcastTask.freshFields(lease: scope.lease)
        fields += [
            ("title", .string(title ?? name)), ("parent", .string(id)),
            ("progress", .number(0)), ("completed", .number(0)), ("total", .number(weight)),
        ]
        try core.check("update", childID, fields)
        let child = RingcastTask(id: childID, core: core, scope: scope, weight: weight)
        guard scope.adopt(childID) else { return child }
        do {
            try await core.enqueue("update", childID, fields)
        } catch {
            scope.markFinished(childID)
            throw error
        }
        return child
    }

    /// Ends this task now, in `state` (done by default), with `detail` if given. A child that is
    /// finished stays as it is when its parent ends; the task of `withTask` finished this way keeps
    /// this state when the body returns.
    public func finish(_ state: RingcastClient.State = .done, detail: String? = nil) async throws {
        var fields = RingcastClient.fields(title: nil, detail: detail, state: state, staleAfter: nil, parent: nil)
        if state == .done, let weight { fields += [("completed", .number(weight)), ("total", .number(weight))] }
        try core.check("update", id, fields)
        guard scope.markFinished(id, as: state) else { return }
        try await core.enqueue("update", id, fields)
    }

    private func send(_ fields: [(String, JSONValue)]) async throws {
        try core.check("update", id, fields)
        guard scope.isOpen else { return }
        try await core.enqueue("update", id, fields)
    }

    /// The end of `withTask`: children still running end with it, then the task itself (unless its
    /// body finished it already). Nothing here throws: a closed client has nothing left to tell.
    func end(_ state: RingcastClient.State, detail: String?) async {
        let (children, finishedAs) = scope.endAll(root: id)
        let ending = finishedAs ?? state
        for childID in children {
            try? await core.enqueue("update", childID, [("state", .string((ending == .done ? RingcastClient.State.done : .cancelled).rawValue))])
        }
        guard finishedAs == nil else { return }
        var fields: [(String, JSONValue)] = [("state", .string(state.rawValue))]
        if let detail { fields.append(("detail", .string(detail))) }
        try? await core.enqueue("update", id, fields)
    }

    /// What a fresh run sets, as `ringcast run` does: running, visible, no detail, no pending hide, the lease.
    static func freshFields(lease: Double?) -> [(String, JSONValue)] {
        [
            ("detail", .null), ("state", .string("running")), ("visible", .bool(true)), ("hideAfter", .null),
            ("staleAfter", lease.map { .number($0) } ?? .null),
        ]
    }

    /// An error as a task's detail: its description, within the server's 1000 characters.
    static func describe(_ error: Error) -> String {
        clip((error as? LocalizedError)?.errorDescription ?? String(describing: error))
    }

    /// `text` within the server's 1000 characters for a detail.
    static func clip(_ text: String) -> String { text.count <= 1000 ? text : String(text.prefix(999)) + "…" }
}

/// What one `withTask` shares with its tasks: the children still running, whether a cancel was
/// asked, and the Swift task running the body, to cancel on request.
/// @unchecked Sendable: every `var` is guarded by `lock`. `running` names the task that runs
/// `withTask`, which is alive while the scope is open: `close()` clears it, under the lock, before
/// `withTask` returns, and `requestCancel` uses it only under the lock.
final class TaskScope: @unchecked Sendable {
    let lease: Double?
    private let lock = NSLock()
    private var open = true
    private var cancelRequested = false
    private var children: [String] = []
    private var finished: [String: RingcastClient.State?] = [:]
    private var current: UnsafeCurrentTask?

    init(lease: Double?) { self.lease = lease }

    var running: UnsafeCurrentTask? {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }

    var isOpen: Bool { lock.withLock { open } }
    var isCancelRequested: Bool { lock.withLock { cancelRequested } }
    var liveChildren: [String] { lock.withLock { children.filter { finished[$0] == nil } } }

    func requestCancel() {
        lock.withLock {
            guard open else { return }
            cancelRequested = true
            current?.cancel()
        }
    }

    /// Records a new child; false once the scope has ended.
    func adopt(_ id: String) -> Bool {
        lock.withLock {
            guard open else { return false }
            if !children.contains(id) { children.append(id) }
            finished[id] = nil
            return true
        }
    }

    /// Records that `id` ended; false when it had already, or the scope is over.
    @discardableResult
    func markFinished(_ id: String, as state: RingcastClient.State? = nil) -> Bool {
        lock.withLock {
            guard open, finished[id] == nil else { return false }
            finished[id] = .some(state)
            return true
        }
    }

    /// The end of the body: the task may no longer be cancelled through this scope.
    func close() {
        lock.withLock {
            current = nil
            open = false
        }
    }

    /// The children still running, and the state the root was finished in, if it was.
    func endAll(root: String) -> ([String], RingcastClient.State?) {
        lock.withLock {
            let live = children.filter { finished[$0] == nil }
            return (live, finished[root] ?? nil)
        }
    }
}

/// A repeating timer on a global queue, for lease renewals and the tracker's samples.
/// @unchecked Sendable: the timer source is thread-safe; `cancel` may be called from any thread.
final class Ticker: @unchecked Sendable {
    private let source: DispatchSourceTimer

    init(every seconds: Double, queue: DispatchQueue = .global(), _ tick: @escaping @Sendable () -> Void) {
        source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(deadline: .now() + seconds, repeating: seconds, leeway: .milliseconds(Int(seconds * 100)))
        source.setEventHandler(handler: tick)
        source.resume()
    }

    deinit { source.cancel() }

    func stop() { source.cancel() }
}
