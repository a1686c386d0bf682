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

    /// The task `encodedForStorage` wrote, or nil when the bytes are not one.
    public init?(stored bytes: [UInt8]) {
        guard let json = try? JSONParser.parse(bytes), case .string(let id)? = json["id"], TaskID.isValid(id),
            let stored = json["stored"], let updatedAt = stored.number("updatedAt"),
            let publishedAt = stored.number("publishedAt"),
            case .string(let stateName)? = json["state"], let state = TaskState(rawValue: stateName),
            let seq = json.number("seq")
        else { return nil }
        self.init(id: id, now: updatedAt)
        self.publishedAt = publishedAt
        self.state = state
        self.seq = UInt64(seq)
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
                ticksEmitted: Int(stored.number("ticks") ?? 0))
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
