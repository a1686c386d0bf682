import Foundation
import RingcastClient
import RingcastCore
import RingcastLoad
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// A watcher whose socket stops reading costs the server nothing that grows, and when it reads
/// again it has the latest state of every task, every terminal state and every hide.
final class StalledWatcherTests: XCTestCase {
    /// `ringcast serve` with its config in `folder`, publishing as fast as the test can. Its
    /// watchers stall on purpose, for as long as a sanitizer's build takes to publish: the write
    /// deadline that would close them (UnreadWatcherTests) is set out of the way.
    private func serveWithoutRateLimit(in folder: TemporaryFolder) throws -> ServeProcess {
        let config = folder.file("config.json")
        try Data(
            #"{"port":0,"publicDir":"\#(emptyPublicDirectory)","logLevel":"error","maxPublishRate":0,"writeTimeoutSeconds":3600}"#.utf8
        ).write(to: config)
        return try ServeProcess(["--config", config.path])
    }

    func testAWatcherThatStopsReadingWhile100000UpdatesArePublished() throws {
        let folder = try TemporaryFolder("ringcast-stalled")
        defer { folder.remove() }
        let served = try serveWithoutRateLimit(in: folder)
        let http = HTTPClient(host: "127.0.0.1", port: served.port)

        // A 4 KiB buffer from before connecting: shrunk afterwards, it would be smaller than the window
        // already offered, so the kernel drops what arrives past it, and the server's retransmissions back
        // off until catching up takes longer than the reads below wait (seen under the thread sanitizer).
        let stalled = try RawSocket(port: served.port, timeoutSeconds: 10, receiveBufferBytes: 4096)
        XCTAssertTrue(try stalled.upgrade("/ws?watch=slow.*").hasPrefix("HTTP/1.1 101"))

        let before = residentKiB(of: served.process.processIdentifier)
        let began = Date()
        // 100 000 updates to 1 000 tasks, 500 to a request. Along the way every tenth task ends
        // (done or failed) and every seventh is hidden; the last word on each is known here.
        var expected: [String: (completed: Double, state: String, visible: Bool)] = [:]
        let tasks = 1000
        let rounds = 100
        for round in 0..<rounds {
            for first in stride(from: 0, to: tasks, by: 500) {
                var events: [String] = []
                for index in first..<(first + 500) {
                    let id = "slow.\(index)"
                    var fields = #""completed":\#(round + 1),"total":\#(rounds)"#
                    var state = expected[id]?.state ?? "running"
                    var visible = expected[id]?.visible ?? true
                    if round == 50, index % 10 == 0 {
                        state = index % 20 == 0 ? "done" : "failed"
                        fields += #","state":"\#(state)""#
                    }
                    if round == 70, index % 7 == 0 {
                        visible = false
                        fields += #","visible":false"#
                    }
                    if state == "done" { expected[id] = (Double(rounds), state, visible) } else { expected[id] = (Double(round + 1), state, visible) }
                    events.append(#"{"type":"update","id":"\#(id)",\#(fields)}"#)
                }
                let answer = try http.request("POST", "/api/events", json: "[" + events.joined(separator: ",") + "]")
                XCTAssertEqual(answer.status, 200, answer.text)
            }
        }
        let grown = residentKiB(of: served.process.processIdentifier) - before
        print("stalled watcher: server RSS grew \(grown) KiB over 100 000 updates in \(Date().timeIntervalSince(began)) s")
        XCTAssertLessThan(grown, 32 * 1024, "the server's RSS grew \(grown) KiB while one watcher stalled")

        // Read again, with a window wide enough to catch up fast: everything the server now sends,
        // until the marker published last arrives.
        var wide: Int32 = 4 << 20
        setsockopt(stalled.descriptor, SOL_SOCKET, SO_RCVBUF, &wide, socklen_t(MemoryLayout<Int32>.size))
        XCTAssertEqual(try http.request("POST", "/api/tasks/slow.zz-end", json: "{}").status, 200)
        var stream: [UInt8] = []
        var state = WatcherState()
        var received = 0
        var textFrames = 0
        var ending = "the marker came"
        while state.tasks["slow.zz-end"] == nil {
            let (bytes, closed) = stalled.receiveSome()
            stream += bytes
            received += bytes.count
            let (frames, consumed) = RawSocket.completeMessages(in: stream)
            stream.removeFirst(consumed)
            for frame in frames where frame.opcode == 1 {
                try state.apply(frame.payload)
                textFrames += 1
            }
            if closed {
                ending = "the server closed the connection"
                break
            }
            if bytes.isEmpty {
                ending = "nothing came for 10 s"
                break
            }
        }
        XCTAssertNotNil(
            state.tasks["slow.zz-end"], "the watcher caught up with the marker: \(ending) after \(received) bytes, \(textFrames) text frames")
        XCTAssertGreaterThan(state.resyncs, 0, "it fell out of the log and was resynced by state")
        var wrong: [String] = []
        for (id, want) in expected {
            let got = state.tasks[id]
            if got?["completed"] != .number(want.completed) || got?["state"] != .string(want.state) || got?["visible"] != .bool(want.visible) {
                wrong.append("\(id): \(got.map { String(decoding: JSONWriter.encode($0), as: UTF8.self) } ?? "missing")")
            }
        }
        XCTAssertTrue(wrong.isEmpty, "\(wrong.count) tasks wrong after catching up, e.g. \(wrong.prefix(3))")
    }

    /// A watcher that half-closes (sends its FIN, goes on reading) while the server holds output for
    /// it that its socket did not take. libwebsockets 4.1.6 spins on that socket inside one service
    /// call for good, and answers nobody else; Ringcast does not read such a WebSocket until the
    /// output has gone. The server keeps answering, idle, and the watcher gets what it was owed.
    func testAWatcherThatHalfClosesWhileOutputIsHeldForItStopsNothing() throws {
        let folder = try TemporaryFolder("ringcast-half-closed")
        defer { folder.remove() }
        let served = try serveWithoutRateLimit(in: folder)
        let http = HTTPClient(host: "127.0.0.1", port: served.port, timeoutSeconds: 5)

        let watcher = try RawSocket(port: served.port, timeoutSeconds: 10, receiveBufferBytes: 4096)
        XCTAssertTrue(try watcher.upgrade("/ws?watch=held.*").hasPrefix("HTTP/1.1 101"))
        // Far more than a 4 KiB window and the server's send buffer take, so lws holds the rest.
        for round in 0..<20 {
            let events = (0..<500).map { #"{"type":"update","id":"held.\#($0)","completed":\#(round + 1),"total":20}"# }
            XCTAssertEqual(try http.request("POST", "/api/events", json: "[" + events.joined(separator: ",") + "]").status, 200)
        }
        // The server has written what the path takes: the watcher's buffer holds unread bytes and
        // the server's kernel holds more that the watcher's full window keeps back.
        XCTAssertTrue(
            eventually(timeout: 20) { watcher.unreadBytes > 0 && watcher.bytesHeldByPeer > 0 },
            "the server never filled the watcher's window: \(watcher.unreadBytes) bytes unread, \(watcher.bytesHeldByPeer) held")
        XCTAssertEqual(shutdown(watcher.descriptor, Int32(SHUT_WR)), 0)

        let pid = served.process.processIdentifier
        let before = try XCTUnwrap(ProcessSample.read(pid: pid))
        usleep(1_000_000)
        XCTAssertEqual(try http.request("GET", "/healthz").status, 200, "the server answers others while a watcher is half-closed")
        let after = try XCTUnwrap(ProcessSample.read(pid: pid))
        // The spin is a whole core; a server with nothing to do uses next to none (sanitized too).
        let busy = Double(after.cpuNanoseconds - before.cpuNanoseconds) / 1e9
        XCTAssertLessThan(busy, 0.5, "the server used \(busy) s of CPU in one second with nothing to do")

        var wide: Int32 = 4 << 20
        setsockopt(watcher.descriptor, SOL_SOCKET, SO_RCVBUF, &wide, socklen_t(MemoryLayout<Int32>.size))
        var received = 0
        var closed = false
        while !closed {
            let (bytes, ended) = watcher.receiveSome()
            received += bytes.count
            closed = ended
            if bytes.isEmpty { break }
        }
        XCTAssertTrue(closed, "the server closed the half-closed WebSocket once its output had gone (read \(received) bytes)")
        XCTAssertGreaterThan(received, 64 * 1024, "the watcher got the output that was held for it")
    }
}

/// What a watcher knows, folded from the frames it read: snapshots (full or since) and events.
private struct WatcherState {
    var tasks: [String: JSONValue] = [:]
    var resyncs = 0

    mutating func apply(_ payload: [UInt8]) throws {
        let message = try JSONParser.parse(payload)
        if case .array(let events) = message {
            for event in events { apply(event) }
        } else {
            apply(message)
        }
    }

    private mutating func apply(_ event: JSONValue) {
        guard case .string(let type)? = event["type"] else { return }
        switch type {
        case "snapshot":
            if event["full"] == .bool(true) { tasks = [:] } else { resyncs += 1 }
            if case .array(let list)? = event["tasks"] { for task in list { if case .string(let id)? = task["id"] { tasks[id] = task } } }
            if case .array(let removed)? = event["removed"] { for id in removed { if case .string(let id) = id { tasks[id] = nil } } }
        case "remove":
            if case .string(let id)? = event["id"] { tasks[id] = nil }
        case "heartbeat", "hello", "error":
            break
        default:
            if case .string(let id)? = event["id"] { tasks[id] = event }
        }
    }
}
