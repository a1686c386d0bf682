import XCTest

@testable import RingcastCore

private final class CountingWriter: FanOutWriter {
    var requests = 0
    func requestWrite() { requests += 1 }
}

/// A writer that sends at once when `canWrite` says so, draining its subscription as the server's would.
private final class EagerWriter: FanOutWriter {
    var canWrite = true
    var requests = 0
    var frames: [String] = []
    weak var fanOut: FanOut?
    var subscription: Subscription?
    func requestWrite() { requests += 1 }
    func queueWriteAtRoundEnd() -> Bool {
        guard canWrite, let fanOut, let subscription else { return false }
        while let plan = fanOut.nextFrame(for: subscription) {
            guard case .frame(let bytes, _) = plan else { break }
            frames.append(String(decoding: bytes, as: UTF8.self))
        }
        return true
    }
}

final class FanOutTests: XCTestCase {
    func testAFlushWritesAtOnceToWatchersWhoseWritersCanAndOrdersCallbacksForTheRest() {
        let fanOut = FanOut()
        let eager = EagerWriter()
        let blocked = EagerWriter()
        let waiting = EagerWriter()
        blocked.canWrite = false
        for writer in [eager, blocked, waiting] {
            writer.fanOut = fanOut
            writer.subscription = fanOut.subscribe(watch("*"), lastSeq: 0, writer: writer)
        }
        // One already has a callback on order (its hello, say): its frames wait for that callback.
        waiting.subscription!.requestWrite()
        XCTAssertEqual(waiting.requests, 1)

        fanOut.publish([event("a", seq: 1)])
        fanOut.flush()
        XCTAssertEqual(eager.frames, [#"{"type":"progress","seq":1,"id":"a"}"#])
        XCTAssertEqual(eager.requests, 0, "a watcher written to at once needs no callback")
        XCTAssertFalse(eager.subscription!.hasPending)
        XCTAssertEqual(blocked.frames, [])
        XCTAssertEqual(blocked.requests, 1, "a writer that cannot write now gets a callback ordered")
        XCTAssertTrue(blocked.subscription!.writeRequested)
        XCTAssertEqual(waiting.frames, [], "a watcher with a callback on order is not written to ahead of it")
        XCTAssertEqual(waiting.requests, 1)

        fanOut.publish([event("a", seq: 2)])
        fanOut.flush()
        XCTAssertEqual(eager.frames.count, 2)
        XCTAssertEqual(blocked.requests, 1, "its callback is still on order")
        XCTAssertEqual(drain(fanOut, blocked.subscription!).count, 1, "it gets both events in one frame when its callback comes")
        XCTAssertEqual(blocked.subscription!.lastSeq, 2)
    }

    private func event(_ id: String, seq: UInt64, type: EventType = .progress) -> OutboundEvent {
        OutboundEvent(type: type, seq: seq, id: id, bytes: Array(#"{"type":"\#(type.rawValue)","seq":\#(seq),"id":"\#(id)"}"#.utf8))
    }

    private func watch(_ list: String) -> WatchSet { try! WatchSet.parse(list).get() }

    /// Drains a subscription: every frame's text, as the server would send them.
    private func drain(_ fanOut: FanOut, _ subscription: Subscription) -> [String] {
        var frames: [String] = []
        while let plan = fanOut.nextFrame(for: subscription) {
            guard case .frame(let bytes, _) = plan else {
                XCTFail("unexpected resync")
                break
            }
            frames.append(text(bytes))
        }
        return frames
    }

    private func baseAddress(_ bytes: [UInt8]) -> UnsafeRawPointer? {
        bytes.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) }
    }

    func testEventsReachOnlyMatchingPatternGroups() {
        let fanOut = FanOut()
        let ciWriter = CountingWriter()
        let deployWriter = CountingWriter()
        let allWriter = CountingWriter()
        let ci = fanOut.subscribe(watch("ci.*"), lastSeq: 0, writer: ciWriter)
        let ci2 = fanOut.subscribe(watch("ci.*"), lastSeq: 0, writer: CountingWriter())
        let deploy = fanOut.subscribe(watch("deploy.*"), lastSeq: 0, writer: deployWriter)
        let all = fanOut.subscribe(watch("*"), lastSeq: 0, writer: allWriter)
        XCTAssertEqual(fanOut.groupCount, 3, "same patterns share one group")
        XCTAssertEqual(fanOut.subscriberCount, 4)

        fanOut.publish([event("ci.build", seq: 1)])
        XCTAssertTrue(fanOut.needsFlush)
        XCTAssertEqual(ciWriter.requests, 0, "writes are requested at flush, not per event")
        fanOut.flush()
        XCTAssertFalse(fanOut.needsFlush)
        XCTAssertEqual(ciWriter.requests, 1)
        XCTAssertEqual(allWriter.requests, 1)
        XCTAssertEqual(deployWriter.requests, 0)
        XCTAssertFalse(deploy.hasPending)
        XCTAssertEqual(drain(fanOut, ci), [#"{"type":"progress","seq":1,"id":"ci.build"}"#])
        XCTAssertEqual(drain(fanOut, ci2), [#"{"type":"progress","seq":1,"id":"ci.build"}"#])
        XCTAssertEqual(drain(fanOut, all).count, 1)
        XCTAssertEqual(drain(fanOut, deploy), [])
        XCTAssertEqual(ci.lastSeq, 1)
        XCTAssertEqual(deploy.lastSeq, 0)
    }

    /// Twenty idle watchers, each with as many near-miss patterns (`*aaaa…aZ…`) as a watch list may
    /// hold: publishing ids none of their literal ends fits runs the matcher for none of them, so
    /// they add nothing to a publish but a few hash lookups; the watcher of `ci.*` still gets every
    /// event, and an id one of them does fit is checked against that one pattern alone.
    func testIdleWatchersOfNearMissPatternsCostUnrelatedEventsNoMatching() {
        let fanOut = FanOut()
        let filler = String(repeating: "a", count: 24)
        var idle: [Subscription] = []
        for watcher in 0..<20 {
            let list = (0..<WatchSet.maxPatterns).map { "*\(filler)Z\(watcher)n\($0)" }.joined(separator: ",")
            idle.append(fanOut.subscribe(watch(list), lastSeq: 0, writer: CountingWriter()))
        }
        XCTAssertEqual(fanOut.groupCount, 20)
        let ci = fanOut.subscribe(watch("ci.*"), lastSeq: 0, writer: CountingWriter())
        let ids = ["ci." + String(repeating: "a", count: 100), "ci.build-7", "ci." + filler + "Z3n"]
        var seq: UInt64 = 0
        for round in 0..<50 {
            seq += 1
            fanOut.publish([event(ids[round % ids.count], seq: seq)])
        }
        XCTAssertEqual(fanOut.patternChecks, 50, "only ci.* is checked, once per event")
        XCTAssertEqual(drain(fanOut, ci).joined().components(separatedBy: #""id":"ci."#).count - 1, 50)
        for subscription in idle { XCTAssertFalse(subscription.hasPending) }

        seq += 1
        fanOut.publish([event("x" + filler + "Z3n7", seq: seq)])
        XCTAssertEqual(fanOut.patternChecks, 51, "the one pattern filed under the id's last bytes")
        XCTAssertTrue(idle[3].hasPending)
        XCTAssertFalse(ci.hasPending)
    }

    func testEveryWatcherGetsTheSameBytes() {
        let fanOut = FanOut()
        let subscriptions = (0..<5).map { _ in fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter()) }
        let other = fanOut.subscribe(watch("job.*,x"), lastSeq: 0, writer: CountingWriter())
        let shared = event("job.1", seq: 1)
        fanOut.publish([shared])
        for subscription in subscriptions + [other] {
            guard case .frame(let bytes, let events)? = fanOut.nextFrame(for: subscription) else { return XCTFail("no frame") }
            XCTAssertEqual(events, 1)
            XCTAssertEqual(bytes, shared.bytes)
            XCTAssertEqual(baseAddress(bytes), baseAddress(shared.bytes), "the encoded buffer itself is shared, not copied")
        }
    }

    func testABehindWatcherGetsABatchAsAJSONArray() throws {
        let fanOut = FanOut()
        let subscription = fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        fanOut.publish((1...3).map { event("t\($0)", seq: UInt64($0)) })
        guard case .frame(let bytes, let events)? = fanOut.nextFrame(for: subscription) else { return XCTFail("no frame") }
        XCTAssertEqual(events, 3)
        XCTAssertEqual(
            text(bytes), #"[{"type":"progress","seq":1,"id":"t1"},{"type":"progress","seq":2,"id":"t2"},{"type":"progress","seq":3,"id":"t3"}]"#)
        XCTAssertEqual(json(bytes).arrayValue?.count, 3)
        XCTAssertEqual(subscription.lastSeq, 3)
        XCTAssertNil(fanOut.nextFrame(for: subscription))
        XCTAssertFalse(subscription.hasPending)
    }

    func testBatchesRespectTheEventAndByteLimits() {
        let fanOut = FanOut(maxEventsPerFrame: 2)
        let subscription = fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        fanOut.publish((1...5).map { event("t\($0)", seq: UInt64($0)) })
        let frames = drain(fanOut, subscription)
        XCTAssertEqual(frames.map { json($0).arrayValue?.count ?? 1 }, [2, 2, 1])
        XCTAssertEqual(frames.last, #"{"type":"progress","seq":5,"id":"t5"}"#, "a lone event is sent bare")

        let one = event("t1", seq: 1).bytes.count  // 37 bytes each
        let small = FanOut(maxBytesPerFrame: 2 * one + 3)
        let watcher = small.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        small.publish((1...5).map { event("t\($0)", seq: UInt64($0)) })
        let limited = drain(small, watcher)
        XCTAssertEqual(limited.map { json($0).arrayValue?.count ?? 1 }, [2, 2, 1])
        XCTAssertTrue(limited.allSatisfy { $0.utf8.count <= 2 * one + 3 })

        let tiny = FanOut(maxBytesPerFrame: 10)
        let lone = tiny.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        tiny.publish([event("a", seq: 1), event("b", seq: 2)])
        XCTAssertEqual(drain(tiny, lone).count, 2, "an event larger than the limit still goes, alone")
    }

    func testOverflowingTheLogAsksForAResync() {
        let fanOut = FanOut(logCapacity: 4)
        let slow = fanOut.subscribe(watch("*"), lastSeq: 7, writer: CountingWriter())
        let fast = fanOut.subscribe(watch("*"), lastSeq: 7, writer: CountingWriter())
        fanOut.publish((8...10).map { event("t\($0)", seq: UInt64($0)) })
        XCTAssertEqual(drain(fanOut, fast).count, 1)
        XCTAssertEqual(fast.lastSeq, 10)
        fanOut.publish((11...13).map { event("t\($0)", seq: UInt64($0)) })  // slow is 6 behind a log of 4
        guard case .resync(let since)? = fanOut.nextFrame(for: slow) else { return XCTFail("expected a resync") }
        XCTAssertEqual(since, 7, "resync from the last seq the watcher saw")
        XCTAssertEqual(fanOut.resyncCount, 1)
        XCTAssertNil(fanOut.nextFrame(for: slow), "the resync covers everything in the log")
        fanOut.markResynced(slow, seq: 13)
        XCTAssertEqual(slow.lastSeq, 13)
        fanOut.publish([event("t14", seq: 14)])
        XCTAssertEqual(drain(fanOut, slow), [#"{"type":"progress","seq":14,"id":"t14"}"#])
        XCTAssertEqual(drain(fanOut, fast).map { json($0).arrayValue?.count }, [4], "the fast one stayed in the log: 11…14 in one frame")
        XCTAssertEqual(fanOut.resyncCount, 1)
    }

    func testExactlyFullLogNeedsNoResync() {
        let fanOut = FanOut(logCapacity: 4)
        let subscription = fanOut.subscribe(watch("*"), lastSeq: 0, writer: CountingWriter())
        fanOut.publish((1...4).map { event("t\($0)", seq: UInt64($0)) })
        guard case .frame(_, let events)? = fanOut.nextFrame(for: subscription) else { return XCTFail("expected a frame") }
        XCTAssertEqual(events, 4)
    }

    func testWriteRequestsAreCoalesced() {
        let fanOut = FanOut()
        let writer = CountingWriter()
        let subscription = fanOut.subscribe(watch("*"), lastSeq: 0, writer: writer)
        fanOut.publish([event("a", seq: 1)])
        fanOut.flush()
        fanOut.publish([event("a", seq: 2)])
        fanOut.flush()
        XCTAssertEqual(writer.requests, 1, "one outstanding request is enough")
        XCTAssertEqual(drain(fanOut, subscription).count, 1)
        subscription.writeableCallbackBegan()  // the server reports it in its writeable callback
        fanOut.flush()
        XCTAssertEqual(writer.requests, 1, "nothing new, no request")
        fanOut.publish([event("a", seq: 3)])
        fanOut.flush()
        XCTAssertEqual(writer.requests, 2)
    }

    func testDirectFramesGoFirstAndAreBounded() {
        let fanOut = FanOut()
        let writer = CountingWriter()
        let subscription = fanOut.subscribe(watch("*"), lastSeq: 0, writer: writer)
        fanOut.publish([event("a", seq: 1)])
        subscription.sendDirect(Array("hello".utf8))
        XCTAssertEqual(writer.requests, 1, "a direct frame asks for a write at once")
        XCTAssertEqual(drain(fanOut, subscription), ["hello", #"{"type":"progress","seq":1,"id":"a"}"#])
        for i in 0..<(Subscription.maxDirectFrames + 3) { subscription.sendDirect(Array("e\(i)".utf8)) }
        XCTAssertEqual(subscription.droppedDirectFrames, 3)
        let frames = drain(fanOut, subscription)
        XCTAssertEqual(frames.count, Subscription.maxDirectFrames)
        XCTAssertEqual(frames.first, "e3", "the oldest were dropped")
    }

    func testBroadcastReachesEveryGroupWithoutMovingSeq() {
        let fanOut = FanOut()
        let a = fanOut.subscribe(watch("a.*"), lastSeq: 5, writer: CountingWriter())
        let b = fanOut.subscribe(watch("b.*"), lastSeq: 5, writer: CountingWriter())
        fanOut.broadcast(OutboundEvent.heartbeat(now: t0))
        for subscription in [a, b] {
            XCTAssertEqual(drain(fanOut, subscription), [#"{"type":"heartbeat","now":1700000000000}"#])
            XCTAssertEqual(subscription.lastSeq, 5)
        }
    }

    func testUnsubscribe() {
        let fanOut = FanOut()
        let goneWriter = CountingWriter()
        let stayWriter = CountingWriter()
        let gone = fanOut.subscribe(watch("*"), lastSeq: 0, writer: goneWriter)
        let stay = fanOut.subscribe(watch("*"), lastSeq: 0, writer: stayWriter)
        let alone = fanOut.subscribe(watch("x.*"), lastSeq: 0, writer: CountingWriter())
        fanOut.unsubscribe(gone)
        fanOut.unsubscribe(gone)  // twice is harmless
        XCTAssertEqual(fanOut.subscriberCount, 2)
        XCTAssertEqual(fanOut.groupCount, 2)
        fanOut.publish([event("a", seq: 1)])
        fanOut.flush()
        XCTAssertEqual(goneWriter.requests, 0)
        XCTAssertEqual(stayWriter.requests, 1)
        XCTAssertEqual(drain(fanOut, stay).count, 1)
        fanOut.unsubscribe(alone)
        XCTAssertEqual(fanOut.groupCount, 1, "an empty group is dropped")
        fanOut.unsubscribe(stay)
        XCTAssertEqual(fanOut.groupCount, 0)
        XCTAssertEqual(fanOut.subscriberCount, 0)
    }

    func testUnsubscribingFromTheMiddleKeepsTheOthers() {
        let fanOut = FanOut()
        let writers = (0..<4).map { _ in CountingWriter() }
        let subscriptions = writers.map { fanOut.subscribe(watch("*"), lastSeq: 0, writer: $0) }
        fanOut.unsubscribe(subscriptions[1])
        fanOut.unsubscribe(subscriptions[0])
        fanOut.publish([event("a", seq: 1)])
        fanOut.flush()
        XCTAssertEqual(writers.map(\.requests), [0, 0, 1, 1])
        fanOut.unsubscribe(subscriptions[3])
        fanOut.unsubscribe(subscriptions[2])
        XCTAssertEqual(fanOut.subscriberCount, 0)
    }

    func testStoreEventsThroughTheFanOut() throws {
        // End to end in the core: a store change, encoded once, reaches a watcher as the store encoded it.
        let store = TaskStore(epoch: "e")
        let fanOut = FanOut()
        let subscription = fanOut.subscribe(watch("ci.*"), lastSeq: store.seq, writer: CountingWriter())
        let change = try store.update("ci.build", #"{"progress": 0.25}"#, now: t0)
        fanOut.publish(change.events)
        fanOut.publish(try store.update("web.x", "{}", now: t0).events)
        guard case .frame(let bytes, _)? = fanOut.nextFrame(for: subscription) else { return XCTFail("no frame") }
        XCTAssertEqual(baseAddress(bytes), baseAddress(change.events[0].bytes))
        XCTAssertEqual(json(bytes)["progress"], .number(0.25))
        XCTAssertNil(fanOut.nextFrame(for: subscription), "web.x is not watched")
        XCTAssertEqual(subscription.lastSeq, 1)
    }

    func testEventRingKeepsTheLatest() {
        var ring = EventRing(capacity: 3)
        XCTAssertEqual(ring.tail, 0)
        for seq in 1...5 { ring.append(event("t", seq: UInt64(seq))) }
        XCTAssertEqual(ring.head, 5)
        XCTAssertEqual(ring.tail, 2)
        XCTAssertEqual((ring.tail..<ring.head).map { ring[$0].seq }, [3, 4, 5])
    }
}
