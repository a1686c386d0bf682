/// The events of one open coalescing window (`flushMilliseconds`), before they reach the fan-out's
/// logs: the latest event of each task changed in it, and every sticky one.
///
/// An event that only carries its task's state (`EventType.isReplaceable`: progress, tick) is
/// dropped when a later event of the same task arrives in the same window, since that one carries
/// the whole state too. Nothing else is ever dropped: show, hide, state, remove and log events stay,
/// each in its place. What is left keeps seq order, so every watcher still sees seq increase, and
/// since every watcher of every pattern set gets the same survivors, it is done once per service
/// thread rather than once per watcher. Service thread only, like the `FanOut` that holds it.
struct CoalescingWindow {
    /// The window's events in seq order; nil where a later event of the same task replaced one.
    private var slots: [OutboundEvent?] = []
    /// Where the latest replaceable event of each task sits in `slots`.
    private var replaceable: [String: Int] = [:]
    /// Events in `slots` that were not replaced.
    private(set) var count = 0
    /// Events dropped for a later one of the same task, since the start.
    private(set) var replacedTotal = 0

    var isEmpty: Bool { count == 0 }

    mutating func add(_ event: OutboundEvent) {
        // Events outside the task sequence (none come here today) pass untouched.
        if event.seq != 0, !event.id.isEmpty {
            if let earlier = replaceable[event.id] {
                slots[earlier] = nil
                count -= 1
                replacedTotal += 1
            }
            if event.type.isReplaceable {
                replaceable[event.id] = slots.count
            } else if !replaceable.isEmpty {
                replaceable.removeValue(forKey: event.id)
            }
        }
        slots.append(event)
        count += 1
    }

    /// What the window holds, in seq order, and a new empty window (storage kept for the next).
    mutating func take() -> [OutboundEvent] {
        var events: [OutboundEvent] = []
        events.reserveCapacity(count)
        for case let event? in slots { events.append(event) }
        slots.removeAll(keepingCapacity: true)
        replaceable.removeAll(keepingCapacity: true)
        count = 0
        return events
    }
}
