import Foundation
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

/// Several service threads share the port; an event published on any thread reaches watchers on every one.
final class ThreadTests: XCTestCase {
    func testTwoServiceThreadsDeliverToWatchersOnBothThreads() throws {
        let server = try TestServer { $0.threads = 2 }
        XCTAssertEqual(server.server.threads, 2)
        let watchers = (0..<40).map { _ in TestWatcher(server.wsURL + "?watch=spread.*") }
        for watcher in watchers { watcher.waitForSnapshot() }
        XCTAssertTrue(eventually(timeout: 5) { server.server.watchersByThread.reduce(0, +) == 40 })
        let spread = server.server.watchersByThread
        XCTAssertTrue(spread.allSatisfy { $0 > 0 }, "the kernel spread 40 connections over both listeners: \(spread)")

        // Publish from several connections (each lands on one thread or the other) in a known order.
        let clients = (0..<6).map { _ in server.http() }
        for step in 1...60 {
            XCTAssertEqual(
                try clients[step % clients.count].request("POST", "/api/tasks/spread.job", json: #"{"completed":\#(step),"total":60}"#).status, 200)
        }
        for (index, watcher) in watchers.enumerated() {
            let seen = watcher.wait { events in events.contains { $0.id == "spread.job" && $0.number("completed") == 60 } }
            let steps = seen.filter { $0.id == "spread.job" }.compactMap { $0.number("completed") }
            XCTAssertEqual(steps, steps.sorted(), "watcher \(index) saw the updates in order")
            let seqs = seen.filter { $0.id == "spread.job" }.compactMap { $0.number("seq") }
            XCTAssertEqual(seqs, seqs.sorted(), "watcher \(index) saw seq ascending")
        }
        let health = try JSONParser.parse(try server.http().request("GET", "/healthz").body)
        XCTAssertEqual(health["watchers"], .number(40), "health sums every thread's watchers")
    }

    func testOneThreadServesToo() throws {
        let server = try TestServer { $0.threads = 1 }
        XCTAssertEqual(server.server.threads, 1)
        let watcher = TestWatcher(server.wsURL)
        watcher.waitForSnapshot()
        try server.post("/api/tasks/single", #"{"progress":0.5}"#)
        watcher.wait { $0.contains { $0.id == "single" && $0.number("progress") == 0.5 } }
        XCTAssertEqual(server.server.watchersByThread, [1])
    }
}
