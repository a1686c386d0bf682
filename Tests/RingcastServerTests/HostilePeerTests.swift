import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

@testable import RingcastServer

/// Peers that lie, on loopback: every answer below once trapped the process (a negative slice, an
/// overflowing chunk size) or held an attempt or its memory without a bound. Each must now be a
/// failed attempt with a reason, the server still up, and a restart with the delivery owed too.
final class HostilePeerTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-hostile-peers") }
    override func tearDown() { folder?.remove() }

    private let lies: [(name: String, lie: HostileReceiver.Lie, reason: String)] = [
        // libcurl refuses this head before any callback sees the line, so the reason names the header, not its value.
        ("Content-Length -1", .raw("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), "Invalid Content-Length"),
        ("a huge Content-Length", .raw("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n"), "not a length"),
        ("chunk size -5", .raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n"), "chunk size \"-5\""),
        (
            "chunk size 7fffffffffffffff", .raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nhello\r\n"),
            "chunk size \"7fffffffffffffff\""
        ),
        ("an endless body", .endlessBody, "body over 8192 bytes"),
        ("a drip", .drip(interval: 0.2), "within 1.0 s"),
        ("a hang", .hang, "within 1.0 s"),
        ("a reset mid-answer", .resetMidAnswer, "127.0.0.1"),
    ]

    func testEveryLieIsAFailedExchangeWithAReasonWithinTheDeadline() throws {
        for (name, lie, reason) in lies {
            let receiver = try HostileReceiver(lie)
            let client = HTTPClient(host: "127.0.0.1", port: receiver.port, timeoutSeconds: 1, maxBodyBytes: 8192)
            let started = Date()
            XCTAssertThrowsError(try client.request("POST", "/hook", json: "{}"), name) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(name): \(error)")
            }
            // The deadline is the whole exchange's: a drip of a byte every 0.2 s used to hold it for 40 s.
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, name)
            receiver.stop()
        }
    }

    func testFramingNumbersAreDigitsOnlyNeverNegativeAndBounded() {
        XCTAssertEqual(HTTPAnswerDecoder.bounded("1024".utf8, radix: 10, limit: 4096), 1024)
        XCTAssertEqual(HTTPAnswerDecoder.bounded("ff".utf8, radix: 16, limit: 4096), 255)
        for text in ["", "-1", "+1", " 1", "1e3", "0x10", "99999999999999999999", "4097"] {
            XCTAssertNil(HTTPAnswerDecoder.bounded(text.utf8, radix: 10, limit: 4096), text)
        }
        for text in ["-5", "7fffffffffffffff", "ffffffffffffffffff", "g"] {
            XCTAssertNil(HTTPAnswerDecoder.bounded(text.utf8, radix: 16, limit: 1 << 20), text)
        }
    }

    private func server(_ receiver: HostileReceiver, storage: String) throws -> TestServer {
        let persistence = try SQLitePersistence(path: storage, logger: .silent)
        return try TestServer(persistence: persistence) { config in
            config.publicDir = emptyPublicDirectory
            config.webhooks = [
                WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s",
                    maxAttempts: 50, timeoutSeconds: 1)
            ]
        }
    }

    private func residentBytes() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    func testAReceiverThatLiesNeverTakesTheServerDownNorARestartWithTheDeliveryOwed() throws {
        for (index, (name, lie, _)) in lies.enumerated() {
            let receiver = try HostileReceiver(lie)
            let storage = folder.file("owed-\(index).db").path
            let before = residentBytes()
            var first: TestServer? = try server(receiver, storage: storage)
            try first!.post("/api/tasks/ci.build", #"{"state":"failed","detail":"exit 2"}"#)
            // A second attempt means the first failed and the server lived on to try again.
            XCTAssertTrue(eventually(timeout: 30) { receiver.attempts >= 2 }, "\(name): retried")
            XCTAssertEqual(try first!.http().request("GET", "/healthz").status, 200, name)
            first = nil

            let attemptsBefore = receiver.attempts
            let second = try server(receiver, storage: storage)
            XCTAssertTrue(
                eventually(timeout: 30) { receiver.attempts > attemptsBefore }, "\(name): the owed delivery was tried again after the restart")
            XCTAssertEqual(try second.http().request("GET", "/healthz").status, 200, "\(name): up after the restart")
            // An endless body is read no further than the cap: memory does not follow the receiver.
            // Under a sanitizer (Tests/sanitizers/run sets TSAN_OPTIONS for both) its shadow of every
            // byte the two servers and libcurl touch counts in resident memory too: 86 MiB seen under
            // the thread sanitizer where the plain run stays under 64.
            let sanitized = ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil
            XCTAssertLessThan(residentBytes() - before, (sanitized ? 160 : 64) << 20, "\(name): resident memory")
            receiver.stop()
        }
    }

    // MARK: A receiver that never answers

    private func boundedServer(_ receiver: HostileReceiver, storage: String, maxOutbox: Int) throws -> TestServer {
        let persistence = try SQLitePersistence(path: storage, logger: .silent)
        return try TestServer(persistence: persistence) { config in
            config.publicDir = emptyPublicDirectory
            config.webhooks = [
                WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", maxAttempts: 50, timeoutSeconds: 60,
                    maxOutbox: maxOutbox, concurrency: 2)
            ]
        }
    }

    private func metrics(_ server: TestServer) throws -> PrometheusScrape {
        try PrometheusScrape(server.http().request("GET", "/metrics").text)
    }

    /// Rows in the stored outbox, read by another connection to the file.
    private func storedOutbox(_ path: String) throws -> Int {
        var count = -1
        try SQLiteDatabase(path: path).prepare("SELECT count(*) FROM webhook_outbox").forEachRow { count = Int($0.int64(0)) }
        return count
    }

    func testAHungReceiverFillsItsOutboxToTheBoundAndNoFurtherWhilePublishesAreAnswered() throws {
        let receiver = try HostileReceiver(.hang)
        defer { receiver.stop() }
        let storage = folder.file("bounded.db").path
        var server: TestServer? = try boundedServer(receiver, storage: storage, maxOutbox: 8)
        let client = server!.http()
        let published = 40
        for n in 0..<published {
            let answer = try client.request("POST", "/api/tasks/ci.job-\(n)", json: #"{"state":"failed","detail":"exit 1"}"#)
            XCTAssertEqual(answer.status, 200, "publish \(n) is answered while the receiver hangs: \(answer.text)")
        }
        let hook = ["hook": "0"]
        XCTAssertTrue(
            try eventually(timeout: 30) { try metrics(server!).value("ringcast_webhook_dropped_total", hook) == Double(published - 8) },
            "each delivery past maxOutbox drops one")
        XCTAssertEqual(try metrics(server!).value("ringcast_webhook_outbox"), 8, "the bound holds")
        XCTAssertTrue(try eventually(timeout: 30) { try storedOutbox(storage) == 8 }, "and in storage: \((try? storedOutbox(storage)) ?? -1)")
        XCTAssertTrue(eventually(timeout: 30) { receiver.attempts == 2 }, "two slots, both held by the hang")
        XCTAssertEqual(receiver.attempts, 2, "nothing else was attempted: the rest wait for a slot")
        let ready = try JSONParser.parse(client.request("GET", "/readyz").body)
        guard case .array(let hooks)? = ready["webhooks"], let status = hooks.first else { return XCTFail("/readyz lists no hook: \(ready)") }
        XCTAssertEqual(status["owed"], .number(8))
        XCTAssertEqual(status["inFlight"], .number(2))
        XCTAssertEqual(status["circuit"], .string("closed"), "a hang has not failed yet")
        XCTAssertEqual(ready["ready"], .bool(true))
        XCTAssertEqual(try client.request("POST", "/api/tasks/ci.late", json: #"{"state":"failed"}"#).status, 200, "still answered")
        server = nil

        // A restart with a smaller bound brings back no more than it: the newest, the rest counted as drops.
        let restarted = try boundedServer(receiver, storage: storage, maxOutbox: 3)
        XCTAssertEqual(try metrics(restarted).value("ringcast_webhook_outbox"), 3)
        XCTAssertEqual(try metrics(restarted).value("ringcast_webhook_dropped_total", hook), 5, "8 owed at the stop, 3 kept")
        XCTAssertTrue(try eventually(timeout: 30) { try storedOutbox(storage) == 3 }, "storage follows: \((try? storedOutbox(storage)) ?? -1)")
        XCTAssertEqual(try restarted.http().request("GET", "/healthz").status, 200)
    }

    func testAReceiverThatKeepsFailingOpensTheCircuitAndNothingMoreIsSentUntilTheProbe() throws {
        let receiver = try HostileReceiver(.raw("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"))
        defer { receiver.stop() }
        let server = try TestServer { config in
            config.publicDir = emptyPublicDirectory
            config.webhooks = [
                WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", maxAttempts: 50, timeoutSeconds: 5,
                    concurrency: 1, circuitFailures: 3, circuitOpenSeconds: 3600)
            ]
        }
        for n in 0..<5 { try server.post("/api/tasks/ci.job-\(n)", #"{"state":"failed"}"#) }
        let hook = ["hook": "0"]
        XCTAssertTrue(try eventually(timeout: 30) { try metrics(server).value("ringcast_webhook_circuit_state", hook) == 2 }, "open")
        XCTAssertEqual(try metrics(server).value("ringcast_webhook_circuit_opens_total", hook), 1)
        XCTAssertEqual(receiver.attempts, 3, "one slot: the third failure in a row opened it, and nothing was sent after")
        let ready = try JSONParser.parse(server.http().request("GET", "/readyz").body)
        guard case .array(let hooks)? = ready["webhooks"], let status = hooks.first else { return XCTFail("/readyz lists no hook: \(ready)") }
        XCTAssertEqual(status["circuit"], .string("open"))
        XCTAssertEqual(status["failuresInARow"], .number(3))
        XCTAssertEqual(status["owed"], .number(5), "nothing is given up while it is open")
        XCTAssertNotNil(status["probeAt"])
        XCTAssertEqual(ready["ready"], .bool(true), "a receiver's trouble is not the server's")
    }

    func testOneAttemptThatHangsHoldsOneSlotAndTheRestAreDelivered() throws {
        let receiver = try HostileReceiver(.hangFirst(thenAnswer: "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"))
        defer { receiver.stop() }
        let server = try TestServer { config in
            config.publicDir = emptyPublicDirectory
            config.webhooks = [
                WebhookRule(
                    url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", timeoutSeconds: 120, concurrency: 2)
            ]
        }
        try server.post("/api/tasks/ci.first", #"{"state":"failed"}"#)
        XCTAssertTrue(eventually(timeout: 30) { receiver.attempts == 1 }, "the first attempt is out, and hangs")
        for n in 0..<4 { try server.post("/api/tasks/ci.next-\(n)", #"{"state":"failed"}"#) }
        XCTAssertTrue(
            try eventually(timeout: 30) { try metrics(server).value("ringcast_webhook_deliveries_total") == 4 },
            "the other slot delivers the rest while the first attempt hangs (its deadline is 120 s)")
        XCTAssertEqual(try metrics(server).value("ringcast_webhook_outbox"), 1, "only the hung one is owed")
    }
}
