import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// `flushMilliseconds`: a real server, a WebSocket publisher sending fast, real watchers counting frames.
final class CoalescingServerTests: XCTestCase {
    private static let tasks = (0..<8).map { "burst.t\($0)" }
    private static let terminal = ["done", "failed", "cancelled"]

    /// What a burst published: how many of each sticky change, per task.
    private struct Burst {
        var start = 0.0
        var hides: [String: Int] = [:]
        var shows: [String: Int] = [:]
        var finalState: [String: String] = [:]
        var updates = 0
    }

    /// 2 000 progress updates round-robin over 8 tasks, hides and shows among them, then a
    /// terminal state for each task and a last hide for two, sent as fast as a WebSocket takes
    /// frames of 10 events; returns once the server acknowledged every one.
    private func publishBurst(_ server: TestServer, file: StaticString = #filePath, line: UInt = #line) -> Burst {
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait(file: file, line: line) { $0.contains { $0.type == "hello" } }
        var burst = Burst()
        var events: [String] = []
        var hidden: String?
        for i in 0..<2000 {
            let id = Self.tasks[i % Self.tasks.count]
            events.append(#"{"type":"update","id":"\#(id)","progress":\#(Double(i + 1) / 2000)}"#)
            burst.updates += 1
            if i % 250 == 7 {
                events.append(#"{"type":"hide","id":"\#(id)"}"#)
                burst.hides[id, default: 0] += 1
                hidden = id
            } else if i % 250 == 57, let shown = hidden {
                events.append(#"{"type":"show","id":"\#(shown)"}"#)
                burst.shows[shown, default: 0] += 1
            }
        }
        for (index, id) in Self.tasks.enumerated() {
            let state = Self.terminal[index % Self.terminal.count]
            events.append(#"{"type":"update","id":"\#(id)","state":"\#(state)"}"#)
            burst.finalState[id] = state
        }
        for id in [Self.tasks[0], Self.tasks[3]] {
            events.append(#"{"type":"hide","id":"\#(id)"}"#)
            burst.hides[id, default: 0] += 1
        }
        burst.start = nowMs()
        for chunk in stride(from: 0, to: events.count, by: 10) {
            publisher.connection.send("[" + events[chunk..<min(chunk + 10, events.count)].joined(separator: ",") + "]")
        }
        publisher.connection.send(#"{"type":"flush","ref":"end"}"#)
        let replies = publisher.wait(timeout: 30, file: file, line: line) { $0.contains { $0.type == "flushed" } }
        XCTAssertFalse(
            replies.contains { $0.type == "error" }, "the server refused an event: \(replies.filter { $0.type == "error" }.map(\.event))", file: file,
            line: line)
        return burst
    }

    /// The server's tasks of the burst, by id.
    private func finalTasks(_ server: TestServer) throws -> [String: JSONValue] {
        let list = try JSONParser.parse(try server.http().request("GET", "/api/tasks?watch=burst.*").body)
        var tasks: [String: JSONValue] = [:]
        for task in list["tasks"]?.arrayValue ?? [] {
            if case .string(let id)? = task["id"] { tasks[id] = task }
        }
        return tasks
    }

    /// Waits until `watcher` has each task's latest seq; returns its events of the burst.
    private func burstEvents(
        _ watcher: TestWatcher, ids: [String], final: [String: JSONValue],
        file: StaticString = #filePath, line: UInt = #line
    ) -> [Received] {
        let wanted = ids.map { final[$0]?["seq"] }
        return watcher.wait(timeout: 20, file: file, line: line) { events in
            ids.indices.allSatisfy { index in events.contains { $0.id == ids[index] && $0.event["seq"] == wanted[index] } }
        }.filter { $0.id?.hasPrefix("burst.") == true }
    }

    private func metric(_ server: TestServer, _ name: String) throws -> Double? {
        let text = try server.http().request("GET", "/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix("ringcast_\(name) ") }
        return line.flatMap { Double($0.split(separator: " ")[1]) }
    }

    func testAWindowSendsEachWatcherAtMostAFramePerWindowWithTheLatestOfEveryTaskAndEveryStickyChange() throws {
        let window = 50.0
        let server = try TestServer { config in
            config.flushMilliseconds = Int(window)
            config.heartbeatSeconds = 600
        }
        let everything = (0..<4).map { _ in TestWatcher(server.wsURL + "?watch=burst.*") }
        let one = TestWatcher(server.wsURL + "?watch=burst.t3")
        for watcher in everything + [one] { watcher.waitForSnapshot() }

        let burst = publishBurst(server)
        let final = try finalTasks(server)
        XCTAssertEqual(final.count, Self.tasks.count)
        for (watcher, ids) in everything.map({ ($0, Self.tasks) }) + [(one, ["burst.t3"])] {
            let events = burstEvents(watcher, ids: ids, final: final)
            let seqs = events.compactMap { $0.number("seq") }
            XCTAssertEqual(seqs, seqs.sorted(), "seq increases")
            XCTAssertEqual(Set(seqs).count, seqs.count, "no event twice")

            // Coalesced: at most one frame per window, and in each window at most the latest
            // progress of each task (windows last at least `window`: a loaded machine makes
            // them longer, and so the bounds looser, never tighter).
            let frames = Set(events.map(\.frame)).count
            let elapsed = (events.map(\.at).max() ?? burst.start) - burst.start
            let windows = elapsed / window + 2
            XCTAssertLessThanOrEqual(Double(frames), windows, "\(frames) frames in \(elapsed.rounded()) ms of \(window) ms windows")
            let updates = burst.updates / Self.tasks.count * ids.count
            XCTAssertLessThan(events.count, updates, "updates to the same task were merged")

            for id in ids {
                let mine = events.filter { $0.id == id }
                let progress = mine.filter { $0.type == "progress" }.count
                XCTAssertLessThanOrEqual(Double(progress), windows, "\(id): \(progress) progress events in \(elapsed.rounded()) ms")
                XCTAssertEqual(mine.filter { $0.type == "hide" }.count, burst.hides[id] ?? 0, "every hide of \(id)")
                XCTAssertEqual(mine.filter { $0.type == "show" }.count, burst.shows[id] ?? 0, "every show of \(id)")
                XCTAssertEqual(
                    mine.filter { $0.type == "state" }.compactMap { $0.string("state") }, [burst.finalState[id]!], "the terminal state of \(id)")
                // The last event is the task exactly as the server holds it.
                let last = try XCTUnwrap(mine.last)
                let task = try XCTUnwrap(final[id])
                for field in ["seq", "progress", "state", "visible", "modal", "title"] {
                    XCTAssertEqual(last.event[field], task[field], "\(id).\(field)")
                }
            }
        }
        XCTAssertGreaterThan(try metric(server, "events_coalesced_total") ?? 0, 0)
    }

    func testWithoutAWindowEveryEventIsSentAsBefore() throws {
        let server = try TestServer { $0.heartbeatSeconds = 600 }
        let watcher = TestWatcher(server.wsURL + "?watch=burst.*")
        watcher.waitForSnapshot()
        let before = try server.seq()
        let burst = publishBurst(server)
        let final = try finalTasks(server)
        let events = burstEvents(watcher, ids: Self.tasks, final: final)
        let changes = Int(try server.seq() - before)
        XCTAssertEqual(events.count, changes, "every change reached the watcher")
        XCTAssertEqual(events.compactMap { $0.number("seq") }, (1...changes).map { before + Double($0) })
        XCTAssertEqual(events.filter { $0.type == "progress" }.count, burst.updates, "every intermediate value")
        XCTAssertEqual(try metric(server, "events_coalesced_total"), 0)
    }

    func testResumingWithASeqInsideACoalescedWindowMissesNothing() throws {
        let server = try TestServer { config in
            config.flushMilliseconds = 1000
            config.heartbeatSeconds = 600
        }
        let first = TestWatcher(server.wsURL)
        let (hello, _) = first.waitForSnapshot()
        let epoch = try XCTUnwrap(hello.string("epoch"))
        // One window: x twice, y, x again. The watcher is sent y@3 and x@4 only.
        try server.post(
            "/api/events",
            #"[{"type":"update","id":"x","progress":0.1},{"type":"update","id":"x","progress":0.2},{"type":"update","id":"y","progress":0.5},{"type":"update","id":"x","progress":0.3}]"#
        )
        let got = first.wait { $0.contains { $0.id == "x" } }.filter { $0.id != nil && $0.type != "snapshot" }
        XCTAssertEqual(got.compactMap { $0.number("seq") }, [3, 4])
        XCTAssertEqual(got.last?.number("progress"), 0.3)
        first.connection.close()

        // Resuming from seq 1 or 2, which it never saw, still brings the latest of both.
        for since in [1, 2] {
            let resumed = TestWatcher(server.wsURL + "?since=\(epoch):\(since)")
            let snapshot = resumed.waitForSnapshot().snapshot
            XCTAssertEqual(snapshot.event["full"], .bool(false))
            let tasks = snapshot.event["tasks"]?.arrayValue ?? []
            XCTAssertEqual(tasks.compactMap { $0["id"]?.stringValue }.sorted(), ["x", "y"])
            XCTAssertEqual(tasks.first { $0["id"] == .string("x") }?["progress"], .number(0.3))
        }

        // A watcher that resumes while a window holds changes gets them in its snapshot, and then
        // not again when the window is released; what comes later still comes.
        let resumedSeq = 4
        try server.post("/api/tasks/x", #"{"progress":0.9}"#)
        try server.post("/api/tasks/y", #"{"state":"done"}"#)
        let during = TestWatcher(server.wsURL + "?since=\(epoch):\(resumedSeq)")
        let snapshot = during.waitForSnapshot().snapshot
        let tasks = snapshot.event["tasks"]?.arrayValue ?? []
        XCTAssertEqual(tasks.first { $0["id"] == .string("x") }?["progress"], .number(0.9))
        XCTAssertEqual(tasks.first { $0["id"] == .string("y") }?["state"], .string("done"))
        try server.post("/api/tasks/z", #"{"progress":0.1}"#)
        let later = during.wait { $0.contains { $0.id == "z" } }.filter { $0.type != "snapshot" && $0.id != nil }
        XCTAssertEqual(later.map(\.id), ["z"], "x and y came in the snapshot, not again")
        XCTAssertGreaterThan(later.first?.number("seq") ?? 0, snapshot.number("seq") ?? .infinity)
    }

    func testStoppingTheServerSendsWhatAWindowHolds() throws {
        let server = try TestServer { config in
            config.flushMilliseconds = 1000
            config.heartbeatSeconds = 600
        }
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        // One request, so one window holds both, however slow the machine.
        try server.post("/api/events", #"[{"type":"update","id":"held","progress":0.5},{"type":"update","id":"held","state":"done"}]"#)
        server.server.stop()
        XCTAssertTrue(watcher.waitForClose(timeout: 3))
        XCTAssertEqual(watcher.events(for: "held").map(\.type), ["state"], "the window went out before the close")
        XCTAssertEqual(watcher.connection.peerCloseCode, 1001)
    }
}
