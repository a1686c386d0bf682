/// Who to wake when a subscription has something to send: the server's connection.
public protocol FanOutWriter: AnyObject {
    /// Orders a writeable callback.
    func requestWrite()
    /// New events for a watcher with no write on order (`FanOut.flush`): the writer takes it to
    /// write to without a writeable callback (the server: when the loop's round ends); false when
    /// it cannot, and a callback is ordered instead.
    func queueWriteAtRoundEnd() -> Bool
}

extension FanOutWriter {
    public func queueWriteAtRoundEnd() -> Bool { false }
}

/// A fixed ring of the latest events, indexed by an ever-growing position.
struct EventRing {
    private var slots: [OutboundEvent?]
    private(set) var head = 0

    init(capacity: Int) { slots = Array(repeating: nil, count: capacity) }

    var capacity: Int { slots.count }
    /// The oldest position still held.
    var tail: Int { max(0, head - slots.count) }

    mutating func append(_ event: OutboundEvent) {
        slots[head % slots.count] = event
        head += 1
    }

    subscript(position: Int) -> OutboundEvent { slots[position % slots.count]! }
}

/// Watchers with the same patterns share one log, so each event is matched once per pattern set,
/// not once per watcher.
///
/// On `@exclusivity(unchecked)` here and in every type of the delivery path: each of these vars
/// belongs to one service thread and no access to one spans a call that could reach it again, so
/// the runtime's dynamic exclusivity checks (measured at a fifth of the user-space instructions
/// of a delivery) buy nothing; the compiler's static checks still apply.
final class FanOutGroup {
    let watch: WatchSet
    @exclusivity(unchecked) var log: EventRing
    @exclusivity(unchecked) var members: [Subscription] = []
    /// How many members have a writeable callback on order: when all have, a flush skips the group.
    @exclusivity(unchecked) var writesRequested = 0
    @exclusivity(unchecked) var isDirty = false
    /// The stamp of the last event appended, so a group matching an event by several patterns takes it once.
    @exclusivity(unchecked) var lastStamp = 0
    /// The last array frame a member was given, so the others at the same place get the same bytes
    /// (a coalescing window's release reaches every member at one cursor).
    @exclusivity(unchecked) var sharedFrame: SharedFrame?

    init(watch: WatchSet, capacity: Int) {
        self.watch = watch
        log = EventRing(capacity: capacity)
    }
}

/// An array frame built for one member of a group, for the others at the same place: valid while
/// the log has not moved (`head`), for a member at `start` that has seen no event in it.
struct SharedFrame {
    let start: Int
    let head: Int
    /// The cursor after the frame's events.
    let next: Int
    /// The lowest task seq in the frame: a member whose lastSeq is below it skips none of them.
    let lowestSeq: UInt64
    let highestSeq: UInt64
    let bytes: [UInt8]
    let events: Int
    /// Members that may still take it; at 0 it is let go.
    var takers: Int
}

/// One watcher's place in the fan-out: a cursor into its group's log, never a queue of its own.
/// A watcher that falls further behind than the log holds is sent the latest state of each task
/// changed since the last seq it saw (a resync), so a slow watcher costs nothing that grows.
/// Touched only on the service thread.
public final class Subscription {
    public let watch: WatchSet
    let group: FanOutGroup
    @exclusivity(unchecked) fileprivate var indexInGroup = 0
    @exclusivity(unchecked) fileprivate var cursor: Int
    /// The seq of the newest task event this watcher has been sent.
    @exclusivity(unchecked) var lastSeq: UInt64
    /// `lastSeq` for other modules: read directly there, it would pay a dynamic exclusivity check
    /// on every delivery (`@exclusivity(unchecked)` holds only inside this module).
    public var newestSeqSent: UInt64 { lastSeq }
    /// Frames for this watcher alone (hello, snapshot, errors), sent before shared events.
    @exclusivity(unchecked) private var direct: [[UInt8]] = []
    public static let maxDirectFrames = 64
    @exclusivity(unchecked) public private(set) var droppedDirectFrames = 0
    /// Whether a writeable callback is on order; the server reports each one with `writeableCallbackBegan`.
    @exclusivity(unchecked) public private(set) var writeRequested = false
    /// Held strongly until `unsubscribe`, which breaks the cycle with the connection.
    @exclusivity(unchecked) public internal(set) var writer: FanOutWriter?
    /// The state it knew was replaced: its next frame is a full snapshot.
    @exclusivity(unchecked) var needsFullResync = false
    /// Each frame one event, never an array: a stream names each event's type and seq on its own.
    @exclusivity(unchecked) public var singleEvents = false

    fileprivate init(watch: WatchSet, group: FanOutGroup, lastSeq: UInt64) {
        self.watch = watch
        self.group = group
        cursor = group.log.head
        self.lastSeq = lastSeq
    }

    public var hasPending: Bool { !direct.isEmpty || cursor < group.log.head || needsFullResync }

    /// Queues a frame for this watcher only; past the limit the oldest are dropped (they are errors
    /// a flooding client provoked, not state).
    public func sendDirect(_ frame: [UInt8]) {
        if direct.count >= Subscription.maxDirectFrames {
            direct.removeFirst()
            droppedDirectFrames += 1
        }
        direct.append(frame)
        requestWriteIfNeeded()
    }

    func requestWriteIfNeeded() {
        guard !writeRequested, hasPending else { return }
        requestWrite()
    }

    /// Orders a writeable callback even with nothing pending (to send a close, say).
    public func requestWrite() {
        guard let writer else { return }
        if !writeRequested {
            writeRequested = true
            group.writesRequested += 1
        }
        writer.requestWrite()
    }

    /// The ordered writeable callback has come: the next change needs a new order.
    public func writeableCallbackBegan() {
        guard writeRequested else { return }
        writeRequested = false
        group.writesRequested -= 1
    }

    fileprivate func takeDirect() -> [UInt8]? { direct.isEmpty ? nil : direct.removeFirst() }

    /// The frames for this watcher alone not yet sent, taken away: a watcher that starts over
    /// in the fan-out (it signed in) keeps them, in order, before its new snapshot.
    public func takeDirectFrames() -> [[UInt8]] {
        defer { direct.removeAll() }
        return direct
    }
}

/// What a writeable watcher should send next.
public enum FramePlan {
    /// One event's shared bytes, or several joined as a JSON array.
    case frame([UInt8], events: Int)
    /// The watcher fell out of the log: send it the changes since `since` from the store (nil: a
    /// full snapshot, when the state it knew is gone).
    case resync(since: UInt64?)
}

/// Hands every published event to the watchers whose patterns match it; an event costs work in
/// proportion to the pattern sets it matches (`PatternIndex`). Not thread-safe: the service thread owns it.
public final class FanOut {
    public let logCapacity: Int
    public let maxEventsPerFrame: Int
    public let maxBytesPerFrame: Int
    @exclusivity(unchecked) private var groups: [WatchSet: FanOutGroup] = [:]
    @exclusivity(unchecked) private var patterns = PatternIndex<FanOutGroup>()
    /// Counts published events, to stamp them.
    @exclusivity(unchecked) private var stamp = 0
    @exclusivity(unchecked) private var dirtyGroups: [FanOutGroup] = []
    @exclusivity(unchecked) public private(set) var subscriberCount = 0
    @exclusivity(unchecked) public private(set) var resyncCount = 0
    /// Patterns the matcher ran for: those whose literal ends an event's id fits, and those with a
    /// wildcard at both ends. A watcher whose patterns fit no published id adds nothing here.
    @exclusivity(unchecked) public private(set) var patternChecks = 0
    /// Events held by the open coalescing window (`hold`), not yet in any log.
    @exclusivity(unchecked) private var window = CoalescingWindow()

    public init(logCapacity: Int = 4096, maxEventsPerFrame: Int = 256, maxBytesPerFrame: Int = 64 * 1024) {
        precondition(logCapacity > 0 && maxEventsPerFrame > 0)
        self.logCapacity = logCapacity
        self.maxEventsPerFrame = maxEventsPerFrame
        self.maxBytesPerFrame = maxBytesPerFrame
    }

    /// A group and its members hold each other (`members`, `Subscription.group`), and a member its
    /// writer, until `unsubscribe`: a fan-out dropped with watchers still subscribed lets go of them
    /// here, or they would outlive it for good.
    deinit {
        for group in groups.values {
            for member in group.members { member.writer = nil }
            group.members.removeAll()
        }
    }

    public var groupCount: Int { groups.count }

    public func forEachSubscription(_ body: (Subscription) -> Void) {
        for group in groups.values {
            for member in group.members { body(member) }
        }
    }

    /// Starts a watcher at the current end of the log; what it must see first goes in with `sendDirect`.
    public func subscribe(_ watch: WatchSet, lastSeq: UInt64, writer: FanOutWriter) -> Subscription {
        let group: FanOutGroup
        if let existing = groups[watch] {
            group = existing
        } else {
            group = FanOutGroup(watch: watch, capacity: logCapacity)
            groups[watch] = group
            patterns.insert(group, for: watch.globs)
        }
        let subscription = Subscription(watch: watch, group: group, lastSeq: lastSeq)
        subscription.writer = writer
        subscription.indexInGroup = group.members.count
        group.members.append(subscription)
        subscriberCount += 1
        return subscription
    }

    public func unsubscribe(_ subscription: Subscription) {
        let group = subscription.group
        let index = subscription.indexInGroup
        guard index < group.members.count, group.members[index] === subscription else { return }
        let last = group.members.removeLast()
        if last !== subscription {
            group.members[index] = last
            last.indexInGroup = index
        }
        subscription.writeableCallbackBegan()
        subscription.writer = nil
        subscriberCount -= 1
        if group.members.isEmpty {
            groups.removeValue(forKey: group.watch)
            patterns.remove(group, for: group.watch.globs)
        }
    }

    /// Appends each event to the log of every pattern set that matches it. Writes are requested
    /// later, in `flush`, once for however many events arrived in between.
    public func publish(_ events: [OutboundEvent]) {
        for event in events {
            stamp += 1
            let stamp = stamp
            patternChecks += patterns.forEachMatch(event.id) { group in
                guard group.lastStamp != stamp else { return }
                group.lastStamp = stamp
                append(event, to: group)
            }
        }
    }

    // MARK: The coalescing window (flushMilliseconds)

    /// Holds events for the open coalescing window instead of publishing them: a progress or tick
    /// event is replaced by a later event of the same task held before the window is released;
    /// sticky events are kept (`CoalescingWindow`). The owner arms a timer when the window opens
    /// (`isHolding` turns true) and calls `releaseWindow` when it fires.
    public func hold(_ events: [OutboundEvent]) {
        for event in events { window.add(event) }
    }

    /// Whether a coalescing window holds events.
    public var isHolding: Bool { !window.isEmpty }

    /// How many events the open window holds.
    public var heldCount: Int { window.count }

    /// Events a later event of the same task replaced in a window, since the start.
    public var coalescedCount: Int { window.replacedTotal }

    /// Publishes what the window holds, in seq order, and closes it; `flush` then asks for writes.
    /// Returns whether there was anything.
    @discardableResult
    public func releaseWindow() -> Bool {
        guard !window.isEmpty else { return false }
        publish(window.take())
        return true
    }

    /// An event for every watcher, whatever it watches (heartbeats).
    public func broadcast(_ event: OutboundEvent) {
        for group in groups.values { append(event, to: group) }
    }

    private func append(_ event: OutboundEvent, to group: FanOutGroup) {
        group.log.append(event)
        if !group.isDirty {
            group.isDirty = true
            dirtyGroups.append(group)
        }
    }

    public var needsFlush: Bool { !dirtyGroups.isEmpty }

    /// Hands each watcher that has something new, and no write on order, to its writer, which
    /// takes it to write to without a callback if it can; the others get a writeable callback ordered.
    public func flush() {
        let dirty = dirtyGroups
        dirtyGroups.removeAll(keepingCapacity: true)
        for group in dirty {
            group.isDirty = false
            // A busy group (every watcher still writing) costs nothing however fast events come.
            guard group.writesRequested < group.members.count else { continue }
            for member in group.members where !member.writeRequested && member.hasPending {
                guard let writer = member.writer else { continue }
                if !writer.queueWriteAtRoundEnd() { member.requestWrite() }
            }
        }
    }

    /// The next frame for a watcher that just became writeable, or nil when it is up to date.
    /// Events no newer than what the watcher has (its snapshot was taken after them) are skipped.
    public func nextFrame(for subscription: Subscription) -> FramePlan? {
        if let direct = subscription.takeDirect() { return .frame(direct, events: 1) }
        let log = subscription.group.log
        if subscription.needsFullResync {
            subscription.needsFullResync = false
            subscription.cursor = log.head
            resyncCount += 1
            return .resync(since: nil)
        }
        if subscription.cursor < log.tail, subscription.cursor < log.head {
            subscription.cursor = log.head
            resyncCount += 1
            return .resync(since: subscription.lastSeq)
        }
        while subscription.cursor < log.head, log[subscription.cursor].isAlreadySent(to: subscription) { subscription.cursor += 1 }
        guard subscription.cursor < log.head else { return nil }
        let first = log[subscription.cursor]
        if subscription.cursor + 1 == log.head || maxEventsPerFrame == 1 || subscription.singleEvents {
            subscription.cursor += 1
            subscription.lastSeq = max(subscription.lastSeq, first.seq)
            return .frame(first.bytes, events: 1)
        }
        let group = subscription.group
        if let shared = group.sharedFrame {
            if shared.start == subscription.cursor, shared.head == log.head, subscription.lastSeq < shared.lowestSeq {
                subscription.cursor = shared.next
                subscription.lastSeq = max(subscription.lastSeq, shared.highestSeq)
                if shared.takers > 1 { group.sharedFrame!.takers -= 1 } else { group.sharedFrame = nil }
                return .frame(shared.bytes, events: shared.events)
            }
            // The log moved on: no member can be handed it any more.
            if shared.head != log.head { group.sharedFrame = nil }
        }
        let start = subscription.cursor
        var frame: [UInt8] = [UInt8(ascii: "[")]
        frame.reserveCapacity(min(maxBytesPerFrame, (log.head - subscription.cursor) * (first.bytes.count + 1)) + 2)
        var count = 0
        var skipped = false
        var lowestSeq = UInt64.max
        var highestSeq: UInt64 = 0
        while subscription.cursor < log.head, count < maxEventsPerFrame {
            let event = log[subscription.cursor]
            if event.isAlreadySent(to: subscription) {
                subscription.cursor += 1
                skipped = true
                continue
            }
            if count > 0, frame.count + event.bytes.count + 2 > maxBytesPerFrame { break }
            if count > 0 { frame.append(UInt8(ascii: ",")) }
            frame.append(contentsOf: event.bytes)
            subscription.cursor += 1
            subscription.lastSeq = max(subscription.lastSeq, event.seq)
            if event.seq != 0 {
                lowestSeq = min(lowestSeq, event.seq)
                highestSeq = max(highestSeq, event.seq)
            }
            count += 1
        }
        if count == 1 { return .frame(first.bytes, events: 1) }
        frame.append(UInt8(ascii: "]"))
        // The same bytes for the group's other members at this place, if it has others; a frame
        // that skipped events this member had seen is this member's alone.
        if !skipped, group.members.count > 1 {
            group.sharedFrame = SharedFrame(
                start: start, head: log.head, next: subscription.cursor, lowestSeq: lowestSeq,
                highestSeq: highestSeq, bytes: frame, events: count,
                takers: group.members.count - 1)
        }
        return .frame(frame, events: count)
    }

    /// The state was replaced (a cluster node reloaded it): every watcher gets a full snapshot next.
    public func resyncEveryone() {
        for group in groups.values {
            for member in group.members {
                member.needsFullResync = true
                member.requestWriteIfNeeded()
            }
        }
    }

    /// After a resync the watcher has seen everything up to `seq`.
    public func markResynced(_ subscription: Subscription, seq: UInt64) {
        subscription.lastSeq = seq
    }
}

extension OutboundEvent {
    /// A task event no newer than the watcher's last seq (a heartbeat, seq 0, never is).
    fileprivate func isAlreadySent(to subscription: Subscription) -> Bool { seq != 0 && seq <= subscription.lastSeq }
}
