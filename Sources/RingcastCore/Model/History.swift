/// ETA from history. Tasks of one `kind` — named by the publisher, else the id
/// without its trailing number (`ci.build-42` → `ci.build`) — remember how long their last
/// `KindHistory.runsKept` runs took from start to `done`. A run that begins (a new task, or one set
/// running again after it had finished) takes its kind's median as `expectedSeconds`, and its 90th
/// percentile as the point past which it is flagged `slow`; until its own rate settles, its ETA is
/// the median less the time it has run (an indeterminate task's too).
///
/// Everything here is applied through `TaskStore.apply`, with the command's time: the same runs,
/// in the same order, give every node of a cluster the same history. Medians and percentiles are
/// taken over sorted copies, never over a dictionary's order. Service thread only (the store's).
public enum TaskKind {
    /// `ci.build-42` → `ci.build`, `nightly7` → `nightly`; an id without a trailing number is its
    /// own kind, and so is an id that is nothing but a number.
    public static func defaultKind(of id: String) -> String {
        var bytes = Array(id.utf8)
        let length = bytes.count
        while let last = bytes.last, last >= UInt8(ascii: "0"), last <= UInt8(ascii: "9") { bytes.removeLast() }
        guard bytes.count < length else { return id }
        while let last = bytes.last, last == UInt8(ascii: "-") || last == UInt8(ascii: "_") || last == UInt8(ascii: ".") { bytes.removeLast() }
        return bytes.isEmpty ? id : String(decoding: bytes, as: UTF8.self)
    }

    /// A kind a publisher names: the characters and length of a task id.
    static func parse(_ text: String?) throws(APIError) -> String? {
        guard let text else { return nil }
        guard TaskID.isValid(text) else {
            throw APIError(
                .invalidField, "kind '\(text.prefix(140))' is not valid: like a task id, 1–128 letters, digits, '.', '_' or '-'", field: "kind")
        }
        return text
    }
}

/// The lengths of one kind's last finished runs.
public struct KindRuns: Equatable, Sendable {
    /// Seconds from start to done, oldest first; at most `KindHistory.runsKept`.
    public var seconds: [Double]
    /// When the newest of them finished (Unix ms): past `KindHistory.maxKinds`, the kind finished
    /// longest ago is forgotten first.
    public var lastFinishedAt: Double

    public init(seconds: [Double], lastFinishedAt: Double) {
        self.seconds = seconds
        self.lastFinishedAt = lastFinishedAt
    }

    /// Runs read back from storage or a checkpoint, which are outside input: only durations from
    /// 0 to `UnixTime.longestSpan` are kept (a 1e308 would make every run of the kind "slow"
    /// forever), the newest `KindHistory.runsKept`; nil when the finish time is no instant.
    public static func restored(_ items: [JSONValue], lastFinishedAt: Double) -> KindRuns? {
        guard UnixTime.isSane(milliseconds: lastFinishedAt) else { return nil }
        let seconds = items.compactMap { item -> Double? in
            guard case .number(let value) = item, (0...UnixTime.longestSpan / 1000).contains(value) else { return nil }
            return value
        }
        guard !seconds.isEmpty else { return nil }
        return KindRuns(seconds: Array(seconds.suffix(KindHistory.runsKept)), lastFinishedAt: lastFinishedAt)
    }

    /// The middle run (the mean of the two middle ones for an even count).
    public var median: Double? {
        let sorted = seconds.sorted()
        guard !sorted.isEmpty else { return nil }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The 90th percentile by nearest rank: the ⌈0.9·n⌉-th shortest run.
    public var p90: Double? {
        let sorted = seconds.sorted()
        guard !sorted.isEmpty else { return nil }
        return sorted[(9 * sorted.count + 9) / 10 - 1]
    }
}

/// Every kind's runs. Grows by at most `maxKinds` kinds of `runsKept` numbers.
public struct KindHistory: Sendable {
    public static let runsKept = 20
    public static let maxKinds = 1000
    /// Runs a kind needs before its tasks may be flagged slow: one or two runs say little of what
    /// is unusual.
    public static let runsBeforeSlow = 3

    public private(set) var kinds: [String: KindRuns]

    public init(_ kinds: [String: KindRuns] = [:]) { self.kinds = kinds }

    /// Adds a finished run; returns what storage must write (a kind forgotten to make room: nil).
    mutating func record(_ seconds: Double, kind: String, at now: Double) -> [(kind: String, runs: KindRuns?)] {
        var runs = kinds[kind] ?? KindRuns(seconds: [], lastFinishedAt: now)
        runs.seconds.append(roundedSeconds(seconds))
        if runs.seconds.count > KindHistory.runsKept { runs.seconds.removeFirst(runs.seconds.count - KindHistory.runsKept) }
        runs.lastFinishedAt = now
        kinds[kind] = runs
        var changes: [(kind: String, runs: KindRuns?)] = [(kind, runs)]
        if kinds.count > KindHistory.maxKinds {
            // The kind finished longest ago goes; ties by name, so every node forgets the same one.
            let oldest = kinds.min { ($0.value.lastFinishedAt, $0.key) < ($1.value.lastFinishedAt, $1.key) }!.key
            kinds.removeValue(forKey: oldest)
            changes.append((oldest, nil))
        }
        return changes
    }

    /// `{"kinds": [{"kind", "runs", "median", "p90", "last", "lastFinishedAt"}, …]}`, by kind;
    /// only those `shown` lets through.
    public func encoded(only shown: (String) -> Bool = { _ in true }) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 + kinds.count * 96)
        writer.beginObject()
        writer.key("kinds")
        writer.beginArray()
        for (kind, runs) in kinds.sorted(by: { $0.key < $1.key }) where shown(kind) {
            writer.beginObject()
            writer.key("kind")
            writer.string(kind)
            writer.key("runs")
            writer.number(runs.seconds.count)
            if let median = runs.median {
                writer.key("median")
                writer.number(roundedSeconds(median))
            }
            if let p90 = runs.p90 {
                writer.key("p90")
                writer.number(p90)
            }
            if let last = runs.seconds.last {
                writer.key("last")
                writer.number(last)
            }
            writer.key("durations")
            writer.beginArray()
            for seconds in runs.seconds { writer.number(seconds) }
            writer.endArray()
            writer.key("lastFinishedAt")
            writer.number(runs.lastFinishedAt.rounded())
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }
}

extension TaskRecord {
    /// The kind its runs count for: the publisher's, else the id without its trailing number.
    public var resolvedKind: String { kind ?? TaskKind.defaultKind(of: id) }

    /// The public fields, each left out while unset: `kind` (only when the publisher named one),
    /// `expectedSeconds`, `slow`.
    func writeHistoryFields(into writer: inout JSONWriter) {
        if let kind {
            writer.key("kind")
            writer.string(kind)
        }
        if let expectedSeconds {
            writer.key("expectedSeconds")
            writer.number(expectedSeconds)
        }
        if slow {
            writer.key("slow")
            writer.bool(true)
        }
    }

    /// Inside `encodedForStorage`'s `stored` object: when the run began, and when it turns slow.
    func writeHistoryStorage(into writer: inout JSONWriter) {
        writer.key("runStartedAt")
        writer.number(runStartedAt)
        if let slowAfter {
            writer.key("slowAfter")
            writer.number(slowAfter)
        }
    }

    mutating func readHistoryFields(_ json: JSONValue, stored: JSONValue) {
        if case .string(let kind)? = json["kind"], TaskID.isValid(kind) { self.kind = kind }
        expectedSeconds = json.number("expectedSeconds")
        if case .bool(true)? = json["slow"] { slow = true }
        // A task stored before this field existed: its run is taken to have begun at its last change.
        runStartedAt = stored.number("runStartedAt") ?? updatedAt
        slowAfter = stored.number("slowAfter")
    }
}

extension TaskStore {
    /// A publisher named the task's kind (nil: back to the default); a run under way takes the new
    /// kind's expectation.
    func setKind(_ task: inout TaskRecord, _ kind: String?) {
        task.kind = kind
        if !task.state.isTerminal { takeExpectation(&task) }
    }

    /// The median and the slow mark of the task's kind, as the history holds them now.
    func takeExpectation(_ task: inout TaskRecord) {
        guard task.timer == nil, let runs = history.kinds[task.resolvedKind], let median = runs.median else {
            task.expectedSeconds = nil
            task.slowAfter = nil
            return
        }
        task.expectedSeconds = roundedSeconds(median)
        task.slowAfter = runs.seconds.count >= KindHistory.runsBeforeSlow ? runs.p90 : nil
    }

    /// What every commit keeps true of history's fields: a run begins when a task is created
    /// unfinished or leaves a finished state; a run that ends `done` is remembered by its kind; a
    /// running task past its kind's 90th percentile is `slow`; until its own rate has settled, its
    /// ETA is what its kind usually takes less what it has run. Timers know their length: they
    /// are left alone.
    func settleHistoryFields(_ task: inout TaskRecord, from oldState: TaskState?, now: Double) {
        guard task.timer == nil else { return }
        let begins = oldState.map { $0.isTerminal && !task.state.isTerminal } ?? !task.state.isTerminal
        if begins {
            task.runStartedAt = now
            task.slow = false
            takeExpectation(&task)
        }
        if task.state == .done, let oldState, !oldState.isTerminal, now > task.runStartedAt {
            for change in history.record((now - task.runStartedAt) / 1000, kind: task.resolvedKind, at: now) {
                persistence.saveHistory(kind: change.kind, runs: change.runs)
            }
        }
        if task.state.isTerminal {
            task.slow = false
            return
        }
        guard task.state == .running else { return }
        if !task.slow, let slowAfter = task.slowAfter, now >= task.runStartedAt + slowAfter * 1000 { task.slow = true }
        guard let expected = task.expectedSeconds else { return }
        if task.progress != nil, task.rateEstimator.hasSettled, task.eta != nil { return }
        let left = expected - (now - task.runStartedAt) / 1000
        if left > 0 {
            task.eta = roundedSeconds(left)
        } else {
            // Past what it usually takes: its own rate's guess, however unsettled, or none.
            task.eta = task.progress.flatMap { RateEstimator.eta(progress: $0, rate: task.rate) }
        }
    }

    /// When a running task turns slow (Unix ms): its deadline, so the flag is set on time even
    /// when nothing else about the task changes.
    func slowness(of task: TaskRecord) -> Double? {
        guard task.state == .running, !task.slow, task.timer == nil, let slowAfter = task.slowAfter else { return nil }
        return task.runStartedAt + slowAfter * 1000
    }
}
