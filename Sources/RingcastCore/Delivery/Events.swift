/// The kinds of event the server pushes on `/ws`.
public enum EventType: String, Sendable {
    case progress, tick, show, hide, state, remove, heartbeat
    /// Lines appended to a task's log (with the task's fields, like every task event).
    case log

    /// Events that carry a transition a watcher must see even when it is behind.
    public var isSticky: Bool {
        switch self {
        case .show, .hide, .state, .remove: return true
        case .progress, .tick, .heartbeat, .log: return false
        }
    }

    /// Events that carry nothing but their task's state, so a later event of the same task (which
    /// carries the whole state too) may replace them inside a coalescing window (`flushMilliseconds`).
    /// Sticky events never are, nor `log` (its lines are news of their own), nor heartbeats.
    public var isReplaceable: Bool { self == .progress || self == .tick }
}

/// One event, encoded once: every watcher is handed these same bytes. Immutable, so any thread may read it.
public final class OutboundEvent: Sendable {
    public let type: EventType
    /// 0 for events outside the task sequence (heartbeats).
    public let seq: UInt64
    /// Empty for events that belong to no task.
    public let id: String
    public let bytes: [UInt8]

    public init(type: EventType, seq: UInt64, id: String, bytes: [UInt8]) {
        self.type = type
        self.seq = seq
        self.id = id
        self.bytes = bytes
    }

    static func task(_ type: EventType, _ record: TaskRecord, now: Double, extraFields: ((inout JSONWriter) -> Void)? = nil) -> OutboundEvent {
        var writer = JSONWriter(capacity: 320)
        writer.beginObject()
        writer.key("type")
        writer.string(type.rawValue)
        record.writeFields(into: &writer, now: now)
        extraFields?(&writer)
        if type == .tick, let timer = record.timer {
            let elapsed = timer.elapsedSeconds(tick: timer.ticksEmitted)
            writer.key("remaining")
            writer.number(roundedSeconds(timer.seconds - elapsed))
            writer.key("elapsed")
            writer.number(roundedSeconds(elapsed))
            writer.key("now")
            writer.number(now.rounded())
        }
        writer.endObject()
        return OutboundEvent(type: type, seq: record.seq, id: record.id, bytes: writer.bytes)
    }

    /// `by`: who asked for the removal (nil when the server retired the task itself).
    static func removal(id: String, seq: UInt64, by: String? = nil) -> OutboundEvent {
        var writer = JSONWriter(capacity: 64)
        writer.beginObject()
        writer.key("type")
        writer.string("remove")
        writer.key("seq")
        writer.number(Int(seq))
        writer.key("id")
        writer.string(id)
        if let by {
            writer.key("by")
            writer.string(by)
        }
        writer.endObject()
        return OutboundEvent(type: .remove, seq: seq, id: id, bytes: writer.bytes)
    }

    public static func heartbeat(now: Double) -> OutboundEvent {
        var writer = JSONWriter(capacity: 48)
        writer.beginObject()
        writer.key("type")
        writer.string("heartbeat")
        writer.key("now")
        writer.number(now.rounded())
        writer.endObject()
        return OutboundEvent(type: .heartbeat, seq: 0, id: "", bytes: writer.bytes)
    }
}
