import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

final class WatcherTests: XCTestCase {
    func testHelloThenSnapshotOnConnect() throws {
        let server = try TestServer()
        try server.post("/api/tasks/ci.build", #"{"title":"Build","progress":0.25}"#)
        let watcher = TestWatcher(server.wsURL)
        let (hello, snapshot) = watcher.waitForSnapshot()
        XCTAssertEqual(hello.type, "hello")
        XCTAssertEqual(hello.number("protocol"), Double(ProtocolInfo.version))
        XCTAssertEqual(hello.string("epoch"), server.server.epoch)
        XCTAssertEqual(hello.number("seq"), 1)
        XCTAssertEqual(hello.number("now") ?? 0, nowMs(), accuracy: 2000)
        XCTAssertEqual(snapshot.string("epoch"), server.server.epoch)
        XCTAssertEqual(snapshot.event["full"], .bool(true))
        guard case .array(let tasks)? = snapshot.event["tasks"] else { return XCTFail("snapshot without tasks") }
        XCTAssertEqual(tasks.count, 1)
        XCTAssertEqual(tasks.first?["id"], .string("ci.build"))
        XCTAssertEqual(tasks.first?["progress"], .number(0.25))
    }

    func testUpdateReachesExactlyTheWatchersWhosePatternMatches() throws {
        let server = try TestServer()
        let everything = TestWatcher(server.wsURL)
        let ci = TestWatcher(server.wsURL + "?watch=ci.*")
        let two = TestWatcher(server.wsURL + "?watch=deploy.*,ci.build")
        let deploy = TestWatcher(server.wsURL + "?watch=deploy.*")
        for watcher in [everything, ci, two, deploy] { watcher.waitForSnapshot() }

        try server.post("/api/tasks/ci.build", #"{"progress":0.5}"#)
        for watcher in [everything, ci, two] {
            let got = watcher.wait { $0.contains { $0.id == "ci.build" } }.filter { $0.id == "ci.build" }
            XCTAssertEqual(got.count, 1)
            XCTAssertEqual(got.first?.type, "progress")
            XCTAssertEqual(got.first?.number("progress"), 0.5)
            XCTAssertEqual(got.first?.number("seq"), 1)
        }
        // A later event for deploy.* arriving without ci.build before it proves ci.build never came.
        try server.post("/api/tasks/deploy.web", #"{"progress":0.1}"#)
        let deployEvents = deploy.wait { $0.contains { $0.id == "deploy.web" } }
        XCTAssertFalse(deployEvents.contains { $0.id == "ci.build" })
        ci.wait { _ in true }
        XCTAssertFalse(ci.received.contains { $0.id == "deploy.web" })
        everything.wait { $0.contains { $0.id == "deploy.web" } }
    }

    func testShowWithHideAfterIsFollowedByHideWithoutAnotherRequest() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let answer = try server.post("/api/tasks/upload/show", #"{"hideAfter":1,"modal":true}"#)
        XCTAssertEqual(answer["task"]?["visible"], .bool(true))
        let events = watcher.wait(timeout: 3) { $0.contains { $0.type == "hide" && $0.id == "upload" } }
        let show = try XCTUnwrap(events.first { $0.type == "show" && $0.id == "upload" })
        let hide = try XCTUnwrap(events.first { $0.type == "hide" && $0.id == "upload" })
        XCTAssertEqual(show.event["modal"], .bool(true))
        let hideAt = try XCTUnwrap(show.number("hideAt"))
        XCTAssertEqual(hideAt - show.number("updatedAt")!, 1000, accuracy: 1)
        XCTAssertOnTime(hide.at, due: hideAt, early: 2, "hide came \(hide.at - show.at) ms after show")
        XCTAssertEqual(hide.event["visible"], .bool(false))
        XCTAssertEqual(hide.event["modal"], .bool(false))
    }

    func testShowAgainRestartsTheHideClock() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        try server.post("/api/tasks/spin/show", #"{"hideAfter":0.6}"#)
        Thread.sleep(forTimeInterval: 0.4)
        let restartedAt = nowMs()
        try server.post("/api/tasks/spin/show", #"{"hideAfter":0.6}"#)
        let hide = watcher.wait(timeout: 3) { $0.contains { $0.type == "hide" } }.first { $0.type == "hide" }!
        XCTAssertEqual(watcher.events(for: "spin", type: "hide").count, 1)
        XCTAssertOnTime(hide.at, due: restartedAt + 600, "hide after the second show")
    }

    func testTimerTicksWithoutDriftAndEndsDone() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let answer = try server.post("/api/timers/egg", #"{"seconds":2,"interval":0.05,"title":"Egg"}"#)
        guard case .number(let startedAt)? = answer["task"]?["timer"]?["startedAt"] else { return XCTFail("no startedAt in \(answer)") }
        let events = watcher.wait(timeout: 5) { $0.contains { $0.type == "state" && $0.id == "egg" } }
        let ticks = events.filter { $0.type == "tick" && $0.id == "egg" }
        XCTAssertEqual(ticks.count, 40)
        assertOnSchedule(ticks) { startedAt + Double($0 + 1) * 50 }
        for (index, tick) in ticks.enumerated() {
            let k = Double(index + 1)
            XCTAssertEqual(tick.number("elapsed")!, k * 0.05, accuracy: 0.0005)
            XCTAssertEqual(tick.number("remaining")!, 2 - k * 0.05, accuracy: 0.0005)
            XCTAssertEqual(tick.number("total"), 2)
            XCTAssertEqual(tick.number("progress")!, k / 40, accuracy: 1e-9)
        }
        XCTAssertEqual(ticks.last?.string("state"), "done")
        let state = events.last { $0.id == "egg" }!
        XCTAssertEqual(state.type, "state")
        XCTAssertEqual(state.string("state"), "done")
    }

    func testTwoTimersKeepTheirOwnPhases() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let first = try server.post("/api/timers/a", #"{"seconds":0.6,"interval":0.1}"#)
        Thread.sleep(forTimeInterval: 0.03)
        let second = try server.post("/api/timers/b", #"{"seconds":0.6,"interval":0.1}"#)
        guard case .number(let startA)? = first["task"]?["timer"]?["startedAt"],
            case .number(let startB)? = second["task"]?["timer"]?["startedAt"]
        else { return XCTFail("no startedAt") }
        XCTAssertEqual(startB - startA, 30, accuracy: 15)
        watcher.wait { events in ["a", "b"].allSatisfy { id in events.contains { $0.id == id && $0.type == "state" } } }
        for (id, start) in [("a", startA), ("b", startB)] {
            let ticks = watcher.events(for: id, type: "tick")
            XCTAssertEqual(ticks.count, 6)
            assertOnSchedule(ticks, id) { start + Double($0 + 1) * 100 }
        }
        // Each keeps its own phase: b's ticks leave the server as far after a's as b started after a.
        let phaseGaps = zip(watcher.events(for: "a", type: "tick"), watcher.events(for: "b", type: "tick")).compactMap { a, b in
            a.number("now").flatMap { sentA in b.number("now").map { $0 - sentA } }
        }
        XCTAssertEqual(phaseGaps.count, 6)
        XCTAssertEqual(median(phaseGaps), startB - startA, accuracy: 25, "phase gaps \(phaseGaps)")
    }

    func testPauseAndResumeShiftTheRemainingTicks() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let started = try server.post("/api/timers/brew", #"{"seconds":1,"interval":0.1}"#)
        guard case .number(let startedAt)? = started["task"]?["timer"]?["startedAt"] else { return XCTFail("no startedAt") }
        watcher.wait { $0.filter { $0.type == "tick" }.count >= 3 }
        let paused = try server.post("/api/timers/brew/pause")
        XCTAssertEqual(paused["task"]?["state"], .string("paused"))
        let ticksBeforePause = watcher.events(for: "brew", type: "tick").count
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(watcher.events(for: "brew", type: "tick").count, ticksBeforePause, "a paused timer ticked")
        let resumed = try server.post("/api/timers/brew/resume")
        guard case .number(let newStart)? = resumed["task"]?["timer"]?["startedAt"] else { return XCTFail("no startedAt") }
        XCTAssertGreaterThan(newStart - startedAt, 450, "resume must move the start by the pause's length")
        let events = watcher.wait(timeout: 3) { $0.contains { $0.type == "state" && $0.string("state") == "done" } }
        let ticks = events.filter { $0.type == "tick" }
        XCTAssertEqual(ticks.count, 10, "each tick once, none lost to the pause")
        assertOnSchedule(Array(ticks[ticksBeforePause...]), "after resume") { newStart + Double(ticksBeforePause + $0 + 1) * 100 }
        XCTAssertOnTime(ticks.last!.at, due: newStart + 1000, early: 2, "the last tick, a pause's length late")
    }

    func testResumeWithSinceSendsOnlyWhatChanged() throws {
        let server = try TestServer()
        try server.post("/api/tasks/old", #"{"progress":0.1}"#)
        try server.post("/api/tasks/gone", #"{"progress":0.2}"#)
        try server.post("/api/tasks/moving", #"{"progress":0.3}"#)
        let first = TestWatcher(server.wsURL)
        let (hello, _) = first.waitForSnapshot()
        let epoch = try XCTUnwrap(hello.string("epoch"))
        let seenSeq = Int(try XCTUnwrap(hello.number("seq")))
        first.connection.close()

        try server.post("/api/tasks/moving", #"{"progress":0.6}"#)
        try server.post("/api/tasks/new", #"{"progress":0.05}"#)
        XCTAssertEqual(try server.http().request("DELETE", "/api/tasks/gone").status, 200)

        let resumed = TestWatcher(server.wsURL + "?since=\(epoch):\(seenSeq)")
        let snapshot = resumed.waitForSnapshot().snapshot
        XCTAssertEqual(snapshot.event["full"], .bool(false))
        XCTAssertEqual(snapshot.number("since"), Double(seenSeq))
        guard case .array(let tasks)? = snapshot.event["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(tasks.compactMap { $0["id"] }, [.string("moving"), .string("new")])
        XCTAssertEqual(tasks.first?["progress"], .number(0.6))
        XCTAssertEqual(snapshot.event["removed"], .array([.string("gone")]))

        let otherEpoch = TestWatcher(server.wsURL + "?since=someotherepoch:\(seenSeq)")
        let full = otherEpoch.waitForSnapshot().snapshot
        XCTAssertEqual(full.event["full"], .bool(true))
        guard case .array(let all)? = full.event["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(
            all.compactMap { task -> String? in
                if case .string(let id)? = task["id"] { return id }
                return nil
            }.sorted(), ["moving", "new", "old"])
    }

    func testBadClientMessagesGetErrorEventsAndTheConnectionStays() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        watcher.connection.send("{not json")
        watcher.connection.send(#"{"type":"explode","id":"x"}"#)
        watcher.connection.send(
            #"[{"type":"update","id":"ok.1","progress":0.5},{"type":"update","id":"bad id"},{"type":"update","id":"ok.2","progress":7}]"#)
        let events = watcher.wait { $0.filter { $0.type == "error" }.count >= 4 && $0.contains { $0.id == "ok.1" } }
        let errors = events.filter { $0.type == "error" }
        XCTAssertEqual(errors.map { $0.string("error") }, ["invalid_json", "invalid_event", "invalid_id", "invalid_field"])
        XCTAssertEqual(errors[3].string("field"), "events[2].progress")
        XCTAssertFalse(watcher.closed)
        try server.post("/api/tasks/after", #"{"progress":0.9}"#)
        watcher.wait { $0.contains { $0.id == "after" } }
    }

    func testInvalidWatchPatternIsRefusedWithAnError() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL + "?watch=ci.%2F")
        let events = watcher.wait { $0.contains { $0.type == "error" } }
        XCTAssertEqual(events.first?.string("error"), "invalid_pattern")
        XCTAssertTrue(watcher.waitForClose())
    }

    /// Each pattern of a list costs every publish its literal ends do not rule out, so a list is
    /// capped; a longer one is refused naming the cap, and the watcher is closed.
    func testAWatchListOverTheCapIsRefusedNamingIt() throws {
        let server = try TestServer()
        let list = (0..<40).map { "*" + String(repeating: "a", count: 24) + "Z\($0)" }.joined(separator: ",")
        let watcher = TestWatcher(server.wsURL + "?watch=" + list)
        let events = watcher.wait { $0.contains { $0.type == "error" } }
        let error = events.first { $0.type == "error" }
        XCTAssertEqual(error?.string("error"), "invalid_pattern")
        XCTAssertEqual(error?.string("field"), "watch")
        XCTAssertTrue(error?.string("message")?.contains("at most 32 patterns of 1024 bytes") == true, "\(String(describing: error?.event))")
        XCTAssertFalse(events.contains { $0.type == "snapshot" })
        XCTAssertTrue(watcher.waitForClose())
        let most = (0..<32).map { "*" + String(repeating: "a", count: 24) + "Z\($0)" }.joined(separator: ",")
        let kept = TestWatcher(server.wsURL + "?watch=" + most)
        kept.waitForSnapshot()
        try server.post("/api/tasks/b" + String(repeating: "a", count: 24) + "Z7", #"{"progress":0.5}"#)
        kept.wait { $0.contains { $0.id == "b" + String(repeating: "a", count: 24) + "Z7" } }
    }

    func testSlowWatcherThatFallsBehindGetsTheLatestStateNotAQueue() throws {
        let server = try TestServer { $0.fanOutLogEvents = 16 }
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        var batch = "["
        for i in 1...500 { batch += #"{"type":"update","id":"hot","progress":\#(Double(i) / 500)},"# }
        batch += #"{"type":"update","id":"hot","state":"failed"}]"#
        try server.post("/api/events", batch)
        let events = watcher.wait { events in
            events.contains { $0.type == "snapshot" && $0.event["full"] == .bool(false) } || events.contains { $0.string("state") == "failed" }
        }
        let resync = events.last { $0.type == "snapshot" }!
        if resync.event["full"] == .bool(false), case .array(let tasks)? = resync.event["tasks"] {
            XCTAssertEqual(tasks.first?["state"], .string("failed"), "the terminal state must survive conflation")
        }
        XCTAssertLessThan(events.filter { $0.id == "hot" }.count, 501)
    }

    func testStoppingTheServerClosesWatchersCleanly() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        server.server.stop()
        XCTAssertTrue(watcher.waitForClose(timeout: 2))
        XCTAssertEqual(watcher.connection.peerCloseCode, 1001, "a close frame saying going away, not a dropped connection")
    }

    /// Twenty messages in one read of the publisher's socket reach a watcher as fewer frames than
    /// twenty: the server writes when the loop's round ends, not once per message. One service
    /// thread, so that publisher and watcher share the loop whose rounds are counted.
    func testWhatOneRoundOfTheLoopBringsLeavesInOneFramePerWatcher() throws {
        let server = try TestServer { $0.threads = 1 }
        let watcher = try RawSocket(port: server.port)
        XCTAssertTrue(try watcher.upgrade("/ws?watch=round.*").hasPrefix("HTTP/1.1 101"))
        var pending: [UInt8] = []
        /// The watcher's text frames, read until `done` holds of them all (or 10 s pass).
        func frames(until done: ([String]) -> Bool) -> [String] {
            var texts: [String] = []
            let deadline = Date().addingTimeInterval(10)
            while !done(texts), Date() < deadline {
                let (bytes, closed) = watcher.receiveSome()
                pending += bytes
                let (complete, consumed) = RawSocket.completeFrames(in: pending)
                pending.removeFirst(consumed)
                texts += complete.filter { $0.opcode == 1 }.map { String(decoding: $0.payload, as: UTF8.self) }
                if closed { break }
            }
            return texts
        }
        XCTAssertTrue(frames { $0.contains { $0.contains(#""type":"snapshot""#) } }.contains { $0.contains(#""type":"snapshot""#) })
        let publisher = try RawSocket(port: server.port)
        XCTAssertTrue(try publisher.upgrade("/ws?mode=publish").hasPrefix("HTTP/1.1 101"))
        _ = publisher.receive(until: Array(#""type":"hello""#.utf8))

        let ids = (1...20).map { "round.\($0)" }
        try publisher.send(ids.flatMap { RawSocket.frame(Array(#"{"type":"update","id":"\#($0)","progress":0.5}"#.utf8)) })
        func missing(_ texts: [String]) -> [String] {
            let all = texts.joined()
            return ids.filter { !all.contains(#""id":"\#($0)""#) }
        }
        let updates = frames { missing($0).isEmpty }
        XCTAssertEqual(missing(updates), [], "every update reached the watcher")
        XCTAssertLessThan(updates.count, ids.count / 2, "the updates one read brought left in a few frames, not one each: \(updates)")
    }

    func testPublishOnlySocketsHearOnlyTheirOwnRepliesAndErrorsNameTheTask() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }
        publisher.connection.send(#"[{"type":"update","id":"pub.1","progress":0.5},{"type":"update","id":"pub.2","progress":9}]"#)
        watcher.wait { $0.contains { $0.id == "pub.1" } }
        let error = publisher.wait { $0.contains { $0.type == "error" } }.first { $0.type == "error" }!
        XCTAssertEqual(error.id, "pub.2", "an error event names the task of the refused event")
        XCTAssertEqual(error.string("field"), "events[1].progress")
        XCTAssertFalse(publisher.received.contains { $0.type == "snapshot" || $0.id == "pub.1" })

        let confused = TestWatcher(server.wsURL + "?mode=shout")
        XCTAssertEqual(confused.wait { $0.contains { $0.type == "error" } }.first?.string("field"), "mode")
        XCTAssertTrue(confused.waitForClose())
    }
}

/// Asserts that `ticks` fell on their schedule (`due(i)`: when tick i, from 0, was due) as a
/// loaded machine can keep it: none left the server before it was due (the `now` in each tick) or
/// reached the watcher more than 500 ms after; the best-placed within 15 ms of its time and half
/// within 50 ms (the phase is right); and no drift: the least lateness over the last quarter of the
/// ticks is within 15 ms of the least over the first quarter, where a timer that counted intervals
/// in a loop would fall behind by its work per tick. A busy machine delays some ticks; it does not
/// make a late tick's successors late.
private func assertOnSchedule(
    _ ticks: [Received], _ label: String = "tick", file: StaticString = #filePath, line: UInt = #line,
    due: (Int) -> Double
) {
    guard !ticks.isEmpty else { return XCTFail("\(label): no ticks", file: file, line: line) }
    var lateness: [Double] = []
    for (index, tick) in ticks.enumerated() {
        guard let sent = tick.number("now") else {
            XCTFail("\(label) \(index + 1) carries no now", file: file, line: line)
            continue
        }
        XCTAssertOnTime(sent, due: due(index), early: 2, "\(label) \(index + 1) left the server", file: file, line: line)
        XCTAssertOnTime(tick.at, due: due(index), early: 2, "\(label) \(index + 1) reached the watcher", file: file, line: line)
        lateness.append(sent - due(index))
    }
    guard lateness.count == ticks.count else { return }
    XCTAssertLessThanOrEqual(lateness.min()!, 15, "\(label): no tick on time: \(lateness)", file: file, line: line)
    XCTAssertLessThanOrEqual(median(lateness), 50, "\(label): most ticks late: \(lateness)", file: file, line: line)
    let quarter = max(1, lateness.count / 4)
    let drift = lateness.suffix(quarter).min()! - lateness.prefix(quarter).min()!
    XCTAssertLessThanOrEqual(drift, 15, "\(label): the schedule drifted by \(drift) ms: \(lateness)", file: file, line: line)
}

private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
}

/// Snapshots shared by the watchers that connect at one seq, and resumes that send only what was missed.
final class SharedSnapshotWatcherTests: XCTestCase {
    private func ids(_ snapshot: Received) -> [String] {
        guard case .array(let tasks)? = snapshot.event["tasks"] else { return [] }
        return tasks.compactMap {
            if case .string(let id)? = $0["id"] { return id }
            return nil
        }
    }

    func testAWatcherConnectingWhileASnapshotIsSharedGetsTheStateAtItsSeq() throws {
        let server = try TestServer()
        for i in 0..<40 { try server.post("/api/tasks/job\(i)", #"{"progress":0.1}"#) }
        let first = TestWatcher(server.wsURL)
        let second = TestWatcher(server.wsURL)
        let (firstHello, firstSnapshot) = first.waitForSnapshot()
        let (secondHello, secondSnapshot) = second.waitForSnapshot()
        XCTAssertEqual(firstHello.number("seq"), 40)
        XCTAssertEqual(secondHello.number("seq"), 40)
        XCTAssertEqual(firstSnapshot.event, secondSnapshot.event, "two watchers at seq 40 hold the same state")
        XCTAssertEqual(ids(firstSnapshot).count, 40)

        try server.post("/api/tasks/job5", #"{"progress":0.8}"#)
        let third = TestWatcher(server.wsURL)
        let (thirdHello, thirdSnapshot) = third.waitForSnapshot()
        XCTAssertEqual(thirdHello.number("seq"), 41)
        XCTAssertEqual(thirdSnapshot.number("seq"), 41, "not the snapshot shared at seq 40")
        guard case .array(let tasks)? = thirdSnapshot.event["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(tasks.first { $0["id"] == .string("job5") }?["progress"], .number(0.8))
        // The two earlier watchers get the change as an event, the new one has it in its snapshot.
        for watcher in [first, second] {
            let got = watcher.wait { $0.contains { $0.id == "job5" && $0.type == "progress" } }
            XCTAssertEqual(got.filter { $0.id == "job5" }.last?.number("progress"), 0.8)
        }
        try server.post("/api/tasks/job6", #"{"progress":0.7}"#)
        let next = third.wait { $0.contains { $0.id == "job6" } }
        XCTAssertFalse(next.contains { $0.id == "job5" && $0.type == "progress" }, "the snapshot's change came again as an event")
    }

    func testWatchersWithDifferentPatternsEachGetTheirOwnSnapshot() throws {
        let server = try TestServer()
        try server.post("/api/tasks/ci.build", "{}")
        try server.post("/api/tasks/deploy.web", "{}")
        try server.post("/api/tasks/ci.test", "{}")
        let ci = TestWatcher(server.wsURL + "?watch=ci.*")
        let deploy = TestWatcher(server.wsURL + "?watch=deploy.*")
        let ciAgain = TestWatcher(server.wsURL + "?watch=ci.*")
        XCTAssertEqual(ids(ci.waitForSnapshot().snapshot).sorted(), ["ci.build", "ci.test"])
        XCTAssertEqual(ids(deploy.waitForSnapshot().snapshot), ["deploy.web"])
        XCTAssertEqual(ids(ciAgain.waitForSnapshot().snapshot).sorted(), ["ci.build", "ci.test"])
    }

    func testResumingInsideTheLogSendsOnlyWhatWasMissedNotASnapshotOfEverything() throws {
        let server = try TestServer()
        for i in 0..<300 { try server.post("/api/tasks/held\(i)", #"{"progress":0.5}"#) }
        let first = TestWatcher(server.wsURL)
        let (hello, full) = first.waitForSnapshot()
        XCTAssertEqual(ids(full).count, 300)
        let epoch = try XCTUnwrap(hello.string("epoch"))
        let seen = Int(try XCTUnwrap(hello.number("seq")))
        first.connection.close()

        try server.post("/api/tasks/held7", #"{"progress":0.75}"#)
        try server.post("/api/tasks/fresh", #"{"progress":0.01}"#)
        // Two watchers back from the same cut: each gets the two changes, nothing of the 298 others.
        for resumed in [TestWatcher(server.wsURL + "?since=\(epoch):\(seen)"), TestWatcher(server.wsURL + "?since=\(epoch):\(seen)")] {
            let snapshot = resumed.waitForSnapshot().snapshot
            XCTAssertEqual(snapshot.event["full"], .bool(false))
            XCTAssertEqual(snapshot.number("since"), Double(seen))
            XCTAssertEqual(ids(snapshot), ["held7", "fresh"])
            XCTAssertEqual(resumed.received.filter { $0.type == "snapshot" }.count, 1)
        }
    }
}
