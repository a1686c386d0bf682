import XCTest

@testable import RingcastCore

private final class CountingWriter: FanOutWriter {
    var requests = 0
    func requestWrite() { requests += 1 }
}

/// The coalescing window (`flushMilliseconds`): what a window keeps, and what each watcher is sent
/// when it is released. No clock: the server's timer is the caller of `releaseWindow`.
final class CoalescingTests: XCTestCase {
    private func event(_ id: String, _ seq: UInt64, _ type: EventType = .progress) -> OutboundEvent {
        OutboundEvent(type: type, seq: seq, id: id, bytes: Array(#"{"type":"\#(type.rawValue)","seq":\#(seq),"id":"\#(id)"}"#.utf8))
    }

    private func watch(_ list: String) -> WatchSet { try! WatchSet.parse(list).get() }

    /// Every frame a subscription would be sent now, each as the (id, seq, type) of its events.
    private func frames(_ fanOut: FanOut, _ subscription: Subscription) -> [[String]] {
        var frames: [[String]] = []
        while let plan = fanOut.nextFrame(for: subscription) {
            guard case .frame(let bytes, let count) = plan else {
                XCTFail("unexpected resync")
                break
            }
            let value = json(bytes)
            let events = value.arrayValue ?? [value]
            XCTAssertEqual(events.count, count)
            frames.append(
                events.map { item in
                    if case .string(let type)? = item["type"], case .string(let id)? = item["id"], case .number(let seq)? = item["seq"] {
                        return "\(type) \(id)@\(Int(seq))"
                    }
                    return text(JSONWriter.encode(item))
                })
        }
        return frames
    }

    private func seqs(_ events: [OutboundEvent]) -> [UInt64] { events.map(\.seq) }

    func testAWindowKeepsTheLatestEventOfEachTaskInSeqOrder() {
        var window = CoalescingWindow()
        for e in [event("a", 1), event("b", 2), event("a", 3), event("c", 4), event("b", 5), event("a", 6, .tick)] { window.add(e) }
        XCTAssertEqual(window.count, 3)
        XCTAssertEqual(window.replacedTotal, 3)
        XCTAssertEqual(seqs(window.take()), [4, 5, 6], "c@4, b@5 and a's tick@6: the latest of each, in seq order")
        XCTAssertTrue(window.isEmpty)
        window.add(event("a", 7))
        XCTAssertEqual(seqs(window.take()), [7], "a new window knows nothing of the last one")
        XCTAssertEqual(window.replacedTotal, 3)
    }

    func testStickyEventsAreNeverReplacedButReplaceTheProgressBeforeThem() {
        var window = CoalescingWindow()
        let held = [
            event("a", 1), event("a", 2, .state),  // progress, then done: the progress goes
            event("a", 3), event("a", 4),  // progress after done (a task may run again)
            event("b", 5, .show), event("b", 6, .hide), event("b", 7), event("b", 8, .show),
            event("a", 9, .remove),  // replaces a@4, itself stays
            event("c", 10, .state), event("c", 11, .state),
        ]
        for e in held { window.add(e) }
        XCTAssertEqual(seqs(window.take()), [2, 5, 6, 8, 9, 10, 11])
    }

    func testLogEventsAreKeptForTheirLines() {
        var window = CoalescingWindow()
        for e in [event("a", 1), event("a", 2, .log), event("a", 3, .log), event("a", 4), event("a", 5)] { window.add(e) }
        XCTAssertEqual(seqs(window.take()), [2, 3, 5], "both logs stay; each later event carries the state the progress before it had")
    }

    func testNothingIsSentUntilTheWindowIsReleasedThenOneFrame() {
        let fanOut = FanOut()
        let writer = CountingWriter()
        let watcher = fanOut.subscribe(watch("*"), lastSeq: 0, writer: writer)
        XCTAssertFalse(fanOut.isHolding)
        fanOut.hold([event("a", 1), event("b", 2)])
        fanOut.hold([event("a", 3), event("a", 4, .state), event("b", 5)])
        XCTAssertTrue(fanOut.isHolding)
        XCTAssertEqual(fanOut.heldCount, 2, "a@1 and a@3 gave way to a's state, b@2 to b@5")
        fanOut.flush()
        XCTAssertEqual(writer.requests, 0, "a held event asks for no write")
        XCTAssertFalse(watcher.hasPending)
        XCTAssertTrue(fanOut.releaseWindow())
        XCTAssertFalse(fanOut.isHolding)
        fanOut.flush()
        XCTAssertEqual(writer.requests, 1)
        XCTAssertEqual(frames(fanOut, watcher), [["state a@4", "progress b@5"]])
        XCTAssertEqual(watcher.lastSeq, 5)
        XCTAssertEqual(fanOut.coalescedCount, 3)
        XCTAssertFalse(fanOut.releaseWindow(), "an empty window releases nothing")
    }

    func testEveryWatcherOfAPatternSetIsHandedTheSameBytes() {
        let fanOut = FanOut()
        let members = (0..<3).map { _ in fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter()) }
        let other = fanOut.subscribe(watch("a"), lastSeq: 0, writer: CountingWriter())
        fanOut.hold([event("a", 1), event("b", 2), event("a", 3)])
        fanOut.releaseWindow()
        var buffers: [UnsafeRawPointer?] = []
        for member in members {
            guard case .frame(let bytes, let count)? = fanOut.nextFrame(for: member) else { return XCTFail("no frame") }
            XCTAssertEqual(count, 2)
            XCTAssertEqual(text(bytes), #"[{"type":"progress","seq":2,"id":"b"},{"type":"progress","seq":3,"id":"a"}]"#)
            buffers.append(bytes.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) })
            XCTAssertEqual(member.lastSeq, 3)
            XCTAssertNil(fanOut.nextFrame(for: member))
        }
        XCTAssertEqual(Set(buffers).count, 1, "the frame is joined once for the pattern set, not once per watcher")
        XCTAssertEqual(frames(fanOut, other), [["progress a@3"]])
    }

    func testASharedFrameGoesOnlyToWatchersAtTheSamePlaceThatHaveSeenNoneOfIt() {
        let fanOut = FanOut()
        let first = fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        let ahead = fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        fanOut.publish([event("a", 1)])
        XCTAssertEqual(frames(fanOut, ahead), [["progress a@1"]])
        fanOut.publish([event("b", 2), event("c", 3)])
        XCTAssertEqual(frames(fanOut, first), [["progress a@1", "progress b@2", "progress c@3"]])
        XCTAssertEqual(frames(fanOut, ahead), [["progress b@2", "progress c@3"]], "from its own place")

        // A watcher whose snapshot already had seq 4, at the same place as one that had not.
        let fresh = fanOut.subscribe(watch("*"), lastSeq: 3, writer: CountingWriter())
        let snapshotHad4 = fanOut.subscribe(watch("*"), lastSeq: 4, writer: CountingWriter())
        fanOut.broadcast(OutboundEvent.heartbeat(now: t0))
        fanOut.publish([event("d", 4), event("e", 5)])
        XCTAssertEqual(frames(fanOut, fresh), [[#"{"type":"heartbeat","now":1700000000000}"#, "progress d@4", "progress e@5"]])
        XCTAssertEqual(frames(fanOut, snapshotHad4), [[#"{"type":"heartbeat","now":1700000000000}"#, "progress e@5"]], "never d@4 twice")
        XCTAssertEqual(snapshotHad4.lastSeq, 5)

        // Once the log moves on, the frame joined for `fresh` is not handed out any more.
        fanOut.publish([event("f", 6)])
        let caughtUp = [#"{"type":"heartbeat","now":1700000000000}"#, "progress d@4", "progress e@5", "progress f@6"]
        XCTAssertEqual(frames(fanOut, ahead), [caughtUp])
        XCTAssertEqual(frames(fanOut, first), [caughtUp])
    }

    func testAWatcherThatJoinsDuringAWindowSkipsWhatItsSnapshotHad() {
        let fanOut = FanOut()
        let early = fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        fanOut.hold([event("a", 1), event("b", 2)])
        // Its snapshot was taken at seq 2, while a@1 and b@2 were held.
        let joined = fanOut.subscribe(watch("*"), lastSeq: 2, writer: CountingWriter())
        fanOut.hold([event("a", 3)])
        fanOut.releaseWindow()
        XCTAssertEqual(frames(fanOut, early), [["progress b@2", "progress a@3"]])
        XCTAssertEqual(frames(fanOut, joined), [["progress a@3"]])
    }

    /// Random windows of random events over a few tasks: every watcher sees seq increase, every
    /// sticky event, and ends with the latest event of every task; a window's events reach each
    /// watcher that keeps up in one frame.
    func testRandomWindowsLoseNoStickyEventAndEndWithTheLatestOfEveryTask() {
        var random = SeededGenerator(seed: 10)
        let types: [EventType] = [.progress, .progress, .progress, .progress, .tick, .state, .show, .hide, .log, .remove]
        let fanOut = FanOut(logCapacity: 4096, maxEventsPerFrame: 256)
        let watchers = [watch("*"), watch("*"), watch("t1,t2"), watch("t3*")].map { fanOut.subscribe($0, lastSeq: 0, writer: CountingWriter()) }
        var seen: [[(id: String, seq: UInt64, type: String)]] = Array(repeating: [], count: watchers.count)
        var published: [OutboundEvent] = []
        var seq: UInt64 = 0
        for _ in 0..<300 {
            for _ in 0..<Int(random.next() % 12) {
                seq += 1
                let type = types[Int(random.next() % UInt64(types.count))]
                let e = event("t\(random.next() % 5)", seq, type)
                published.append(e)
                fanOut.hold([e])
            }
            let windowHad = fanOut.heldCount
            fanOut.releaseWindow()
            for (index, watcher) in watchers.enumerated() {
                let got = frames(fanOut, watcher)
                XCTAssertLessThanOrEqual(got.count, 1, "one frame per window for a watcher that keeps up")
                XCTAssertLessThanOrEqual(got.first?.count ?? 0, windowHad)
                for text in got.joined() {
                    let parts = text.split(separator: " ")
                    let idSeq = parts[1].split(separator: "@")
                    seen[index].append((String(idSeq[0]), UInt64(idSeq[1])!, String(parts[0])))
                }
            }
        }
        for (index, watcher) in watchers.enumerated() {
            let mine = published.filter { watcher.watch.matches($0.id) }
            let got = seen[index]
            XCTAssertEqual(got.map(\.seq), got.map(\.seq).sorted(), "seq increases for watcher \(index)")
            XCTAssertEqual(Set(got.map(\.seq)).count, got.count, "no event twice")
            let stickySent = mine.filter { $0.type.isSticky || $0.type == .log }.map(\.seq)
            XCTAssertEqual(stickySent.filter { s in !got.contains { $0.seq == s } }, [], "every sticky and log event reached watcher \(index)")
            var latestSent: [String: UInt64] = [:]
            var latestSeen: [String: UInt64] = [:]
            for e in mine { latestSent[e.id] = e.seq }
            for e in got { latestSeen[e.id] = e.seq }
            XCTAssertEqual(latestSeen, latestSent, "watcher \(index) ends with the latest event of every task")
            XCTAssertLessThan(got.count, mine.count, "something was coalesced")
        }
        XCTAssertGreaterThan(fanOut.coalescedCount, 0)
    }
}
