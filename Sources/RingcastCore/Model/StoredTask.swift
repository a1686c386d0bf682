/// A task as storage keeps it: the protocol's fields plus what the server needs to carry on after a
/// restart (when the lease started, whether progress is the task's own, how far a timer has ticked).
extension TaskRecord {
    public func encodedForStorage() -> [UInt8] {
        var writer = JSONWriter(capacity: 384)
        writer.beginObject()
        writeFields(into: &writer, now: updatedAt)
        writer.key("stored")
        writer.beginObject()
        writer.key("publishedAt")
        writer.number(publishedAt)
        writer.key("updatedAt")
        writer.number(updatedAt)
        writer.key("ownProgress")
        writer.bool(hasOwnProgress)
        if rateEstimator != RateEstimator() {
            writer.key("rateState")
            writer.beginArray()
            for value in rateEstimator.stored { writer.number(value) }
            writer.endArray()
        }
        if let stalledAt {
            writer.key("stalledAt")
            writer.number(stalledAt)
        }
        writeHistoryStorage(into: &writer)
        writeTimelineStorage(into: &writer)
        if let owner {
            writer.key("owner")
            writer.string(owner)
        }
        if let hideAt {
            writer.key("hideAt")
            writer.number(hideAt)
        }
        if let timer {
            writer.key("startedAt")
            writer.number(timer.startedAt)
            if let pausedAt = timer.pausedAt {
                writer.key("pausedAt")
                writer.number(pausedAt)
            }
            writer.key("ticks")
            writer.number(timer.ticksEmitted)
            if let hideAfter = timer.hideAfter {
                writer.key("timerHideAfter")
                writer.number(hideAfter)
            }
        }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    /// Why a stored task was not restored: what was wrong with it, and its id when it has one.
    public struct RestoreError: Error, Equatable, Sendable {
        public let id: String?
        public let reason: String
    }

    /// The task `encodedForStorage` wrote, or nil when the bytes are not one (`restoring` says why).
    public init?(stored bytes: [UInt8]) {
        guard case .success(let task) = TaskRecord.restoring(bytes) else { return nil }
        self = task
    }

    /// The task `encodedForStorage` wrote, checked as an update through the API is (TaskPatch and
    /// TimerStart's own rules), with every instant and count range-checked: a storage file is
    /// outside input too (edited, damaged, or from a build with looser rules), and a row with a
    /// 20 MB title or progress 1e308 must not be served, nor a 1e300 reach an integer conversion.
    public static func restoring(_ bytes: [UInt8]) -> Result<TaskRecord, RestoreError> {
        guard let json = try? JSONParser.parse(bytes), case .object = json else {
            return .failure(RestoreError(id: nil, reason: "not a JSON object"))
        }
        guard case .string(let id)? = json["id"], TaskID.isValid(id) else { return .failure(RestoreError(id: nil, reason: "no valid \"id\"")) }
        if let reason = problem(with: json) { return .failure(RestoreError(id: id, reason: reason)) }
        return .success(TaskRecord(checked: json, id: id))
    }

    /// What makes a stored task's JSON unfit to serve, or nil.
    private static func problem(with json: JSONValue) -> String? {
        guard let stored = json["stored"], case .object = stored else { return "no \"stored\" object" }
        guard case .string(let stateName)? = json["state"], TaskState(rawValue: stateName) != nil else { return "no valid \"state\"" }
        guard let seq = json.number("seq"), (0...JSONWriter.maxExactInteger).contains(seq), seq == seq.rounded() else {
            return "\"seq\" is not a whole number from 0 to 2^53"
        }
        // The fields an update may set, by the update's own rules (state and hideAfter are
        // stored in other forms: a state only the server sets, hideAt).
        guard case .object(let members) = json else { return "not a JSON object" }
        let settable = members.filter { TaskPatch.fields.contains($0.0) && $0.0 != "state" && $0.0 != "hideAfter" }
        do throws(APIError) {
            _ = try TaskPatch.parse(.object(settable))
            if let timer = json["timer"] {
                _ = try TimerStart.parse(.object([("seconds", timer["seconds"] ?? .null), ("interval", timer["interval"] ?? .null)]))
            }
        } catch {
            return error.message
        }
        for key in ["updatedAt", "publishedAt"] {
            guard let instant = stored.number(key), UnixTime.isSane(milliseconds: instant) else {
                return "stored.\(key) is not an instant from 1970 through 9999"
            }
        }
        for key in ["runStartedAt", "stalledAt", "startedAt", "pausedAt"] where stored[key] != nil {
            guard let instant = stored.number(key), UnixTime.isSane(milliseconds: instant) else {
                return "stored.\(key) is not an instant from 1970 through 9999"
            }
        }
        // Deadlines are instants plus spans the API bounds: finite and after 1970 is what they must be.
        for key in ["hideAt", "slowAfter", "timerHideAfter"] where stored[key] != nil {
            guard let value = stored.number(key), value.isFinite, value >= 0 else { return "stored.\(key) is not a finite, positive number" }
        }
        for (key, value) in [("rate", json["rate"]), ("eta", json["eta"]), ("expectedSeconds", json["expectedSeconds"])] {
            guard let value else { continue }
            guard case .number(let n) = value, n.isFinite, n >= 0 else { return "\"\(key)\" is not a finite number of at least 0" }
        }
        for (key, value) in [("ticks", stored["ticks"]), ("logCount", json["logCount"])] {
            guard let value else { continue }
            guard case .number(let n) = value, n == n.rounded(), (0...JSONWriter.maxExactInteger).contains(n) else {
                return "\"\(key)\" is not a whole number from 0 to 2^53"
            }
        }
        if case .array(let values)? = stored["rateState"], !values.allSatisfy({ $0.numberValue?.isFinite == true }) {
            return "stored.rateState holds a value that is not a finite number"
        }
        return nil
    }

    /// The task of a JSON object `problem(with:)` found nothing wrong with.
    private init(checked json: JSONValue, id: String) {
        let stored = json["stored"]!
        self.init(id: id, now: stored.number("updatedAt")!)
        self.publishedAt = stored.number("publishedAt")!
        self.state = TaskState(rawValue: json["state"]!.stringValue!)!
        self.seq = UInt64(json.number("seq")!)
        if case .string(let title)? = json["title"] { self.title = title }
        if case .string(let detail)? = json["detail"] { self.detail = detail }
        progress = json.number("progress")
        completed = json.number("completed")
        total = json.number("total")
        if case .bool(let visible)? = json["visible"] { self.visible = visible }
        if case .bool(let modal)? = json["modal"] { self.modal = modal }
        hideAt = stored.number("hideAt")
        rate = json.number("rate")
        eta = json.number("eta")
        if case .string(let parent)? = json["parent"] { self.parent = parent }
        staleAfter = json.number("staleAfter")
        if case .bool(true)? = stored["ownProgress"] { hasOwnProgress = true }
        if case .array(let values)? = stored["rateState"] {
            let numbers = values.compactMap { value -> Double? in
                if case .number(let n) = value { return n }
                return nil
            }
            if let estimator = RateEstimator(stored: numbers) { rateEstimator = estimator }
        }
        readFollowUpFields(json, stored: stored)
        if case .string(let owner)? = stored["owner"] { self.owner = owner }
        if case .string(let by)? = json["by"] { self.by = by }
        if case .string(let url)? = json["url"] { self.url = url }
        readTimelineStorage(stored)
        readHistoryFields(json, stored: stored)
        if let timerFields = json["timer"], let seconds = timerFields.number("seconds"), let interval = timerFields.number("interval"),
            let startedAt = stored.number("startedAt")
        {
            var timer = TimerSpec(
                seconds: seconds, interval: interval, startedAt: startedAt, pausedAt: stored.number("pausedAt"),
                ticksEmitted: stored.number("ticks").flatMap(Int.init(exactly:)) ?? 0)
            timer.hideAfter = stored.number("timerHideAfter")
            self.timer = timer
        }
    }
}

extension JSONValue {
    /// The member `key` when it is a number.
    func number(_ key: String) -> Double? {
        if case .number(let value)? = self[key] { return value }
        return nil
    }
}
