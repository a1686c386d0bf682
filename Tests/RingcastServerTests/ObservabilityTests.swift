import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

@testable import RingcastServer

/// What an operator watches, against a real server with real traffic: /metrics read by the
/// Prometheus text-format rules, its counters moving, the Grafana dashboard's queries naming what
/// exists, and /readyz following storage as it stops and starts answering.
final class ObservabilityTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-observability") }
    override func tearDown() { folder?.remove() }

    private func scrape(_ server: TestServer, file: StaticString = #filePath, line: UInt = #line) throws -> PrometheusScrape {
        let response = try server.http().request("GET", "/metrics")
        XCTAssertEqual(response.status, 200, file: file, line: line)
        XCTAssertEqual(response.headers["content-type"], "text/plain; version=0.0.4", file: file, line: line)
        return try PrometheusScrape(response.text)
    }

    func testMetricsFollowTheTextFormatAndMoveWithRealTraffic() throws {
        let storage = try SQLitePersistence(path: folder.file("metrics.db").path, logger: .silent)
        let server = try TestServer(persistence: storage) { config in
            config.publicDir = emptyPublicDirectory
            config.retentionSeconds = 1
            config.maxMessageBytes = 1024
        }
        let before = try scrape(server)
        XCTAssertEqual(before.value("ringcast_build_info", ["version": RingcastVersion.version, "protocol": String(ProtocolInfo.version)]), 1)
        XCTAssertEqual(before.families["ringcast_publish_to_write_seconds"]?.type, "histogram")

        let watcher = TestWatcher(server.wsURL + "?watch=obs.*")
        watcher.waitForSnapshot()
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }
        for step in 1...5 { try server.post("/api/tasks/obs.http", #"{"progress":\#(Double(step) / 10)}"#) }
        publisher.connection.send(#"[{"type":"update","id":"obs.socket","progress":0.5},{"type":"update","id":"obs.socket","state":"done"}]"#)
        watcher.wait { $0.contains { $0.id == "obs.socket" && $0.string("state") == "done" } && $0.filter { $0.id == "obs.http" }.count == 5 }
        // Refusals, by reason: a body over maxMessageBytes, and a Host that names no host of ours.
        XCTAssertEqual(
            try server.http().request("POST", "/api/tasks/obs.big", json: #"{"detail":"\#(String(repeating: "x", count: 2000))"}"#).status, 413)
        let stranger = try RawSocket(port: server.port)
        try stranger.send("GET /healthz HTTP/1.1\r\nHost: rebound.example\r\n\r\n")
        XCTAssertTrue(String(decoding: stranger.receive(until: Array("\r\n\r\n".utf8)), as: UTF8.self).hasPrefix("HTTP/1.1 421"))

        // A thread adds its frame figures every WorkerFigures.reportSeconds (not on the delivery path).
        XCTAssertTrue(
            try eventually {
                try scrape(server).value("ringcast_publish_to_write_seconds_count") ?? 0 > before.value("ringcast_publish_to_write_seconds_count")
                    ?? 0
            })
        let after = try scrape(server)
        func grew(_ name: String, _ labels: [String: String] = [:], by amount: Double = 1, file: StaticString = #filePath, line: UInt = #line) {
            let old = before.value(name, labels) ?? 0
            let new = after.value(name, labels) ?? -1
            XCTAssertGreaterThanOrEqual(new - old, amount, "\(name)\(labels) went from \(old) to \(new)", file: file, line: line)
        }
        grew("ringcast_http_requests_total", by: 6)
        grew("ringcast_events_published_total", by: 7)
        grew("ringcast_events_sent_total", by: 7)
        grew("ringcast_frames_sent_total")
        grew("ringcast_bytes_sent_total", ["kind": "websocket"], by: 100)
        grew("ringcast_bytes_sent_total", ["kind": "http"], by: 100)
        grew("ringcast_connections_accepted_total", by: 3)
        grew("ringcast_websockets_opened_total", ["kind": "watcher"])
        grew("ringcast_websockets_opened_total", ["kind": "publisher"])
        grew("ringcast_events_per_frame_count")
        grew("ringcast_publish_to_write_seconds_count")
        grew("ringcast_storage_commit_seconds_count")
        grew("ringcast_refusals_total", ["reason": "oversize"])
        grew("ringcast_refusals_total", ["reason": "host"])
        XCTAssertEqual(after.value("ringcast_connections", ["kind": "watcher"]), 1)
        XCTAssertEqual(after.value("ringcast_connections", ["kind": "publisher"]), 1)
        XCTAssertGreaterThanOrEqual(after.value("ringcast_connections", ["kind": "http"]) ?? 0, 1, "the scrape's own")
        XCTAssertEqual(after.value("ringcast_tasks_by_state", ["state": "done"]), 1)
        XCTAssertEqual(after.value("ringcast_tasks_by_state", ["state": "running"]), 1)
        XCTAssertEqual(after.value("ringcast_ready", ["check": "storage"]), 1)
        XCTAssertEqual(after.value("ringcast_storage_commit_failures_total"), 0)
        let latency = after.value("ringcast_publish_to_write_seconds_sum") ?? -1
        XCTAssertTrue(latency >= 0 && latency < 60, "a sum of seconds, not of milliseconds: \(latency)")

        // The done task outlives its one second of retention, then goes.
        XCTAssertTrue(try eventually(timeout: 15) { try scrape(server).value("ringcast_tasks_retired_total") ?? 0 >= 1 })
        publisher.connection.close()
        XCTAssertTrue(
            try eventually { try scrape(server).value("ringcast_connections", ["kind": "publisher"]) == 0 }, "a closed socket leaves the gauge")

        // The Grafana dashboard asks only for what the server exports.
        let dashboard = try String(contentsOfFile: repositoryRoot + "/docs/grafana-dashboard.json", encoding: .utf8)
        _ = try JSONParser.parse(Array(dashboard.utf8))
        let used = Set(dashboard.matches(of: /ringcast_[a-z_]+/).map { String($0.output) })
        let exported = Set(after.families.keys)
        let unknown = used.filter { name in
            !exported.contains(name)
                && !["_bucket", "_sum", "_count"].contains { name.hasSuffix($0) && exported.contains(String(name.dropLast($0.count))) }
        }
        XCTAssertEqual(unknown, [], "docs/grafana-dashboard.json queries metrics /metrics does not export")
        XCTAssertGreaterThan(used.count, 15, "the dashboard shows what there is")
    }

    func testReadyzFollowsStorageAsItStopsAndStartsAnswering() throws {
        let path = folder.file("ready.db").path
        final class Lines: @unchecked Sendable {  // appended from the service thread, read under the lock
            private let lock = NSLock()
            private var items: [String] = []
            func append(_ line: String) { lock.withLock { items.append(line) } }
            var all: [String] { lock.withLock { items } }
        }
        let lines = Lines()
        let server = try TestServer(
            persistence: try SQLitePersistence(path: path, logger: .silent),
            logger: Logger(level: .info) { lines.append($0) }
        ) { $0.publicDir = emptyPublicDirectory }
        func readyz() throws -> (status: Int, body: JSONValue) {
            let response = try server.http().request("GET", "/readyz")
            return (response.status, try JSONParser.parse(response.body))
        }
        XCTAssertTrue(try eventually(timeout: 10) { try readyz().status == 200 })
        XCTAssertEqual(try readyz().body["checks"]?["storage"]?["ready"], .bool(true))
        XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200)

        // Another process holds the write lock: the writer's trivial commit fails, and /readyz says why.
        let other = try SQLiteDatabase(path: path)
        try other.execute("BEGIN IMMEDIATE")
        // (SQLite waits its busy timeout, 5 s, before it says so.)
        XCTAssertTrue(
            try eventually(timeout: 30) {
                let answer = try readyz()
                guard answer.status == 503, case .string(let reason)? = answer.body["reason"] else { return false }
                return reason.contains("database is locked")
            }, "storage that cannot take a commit is not ready, and /readyz says why: \((try? readyz()).map { "\($0)" } ?? "no answer")")
        XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200, "alive all the same")
        XCTAssertTrue(try eventually { try scrape(server).value("ringcast_ready", ["check": "storage"]) == 0 })

        try other.execute("ROLLBACK")
        XCTAssertTrue(try eventually(timeout: 30) { try readyz().status == 200 }, "ready again once storage answers")
        XCTAssertTrue(eventually { lines.all.contains { $0.contains("storage answers again") } }, "\(lines.all)")
        XCTAssertTrue(lines.all.contains { $0.hasPrefix("[error] not ready: storage: ") && $0.contains("database is locked") }, "\(lines.all)")
    }

    func testMemoryStorageIsAlwaysReady() throws {
        let server = try producerServer()
        XCTAssertTrue(try eventually { try server.http().request("GET", "/readyz").status == 200 })
    }
}
