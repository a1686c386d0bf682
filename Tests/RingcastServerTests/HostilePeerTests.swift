import Foundation
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Peers that lie, on loopback: every answer below once trapped the process (a negative slice, an
/// overflowing chunk size) or held an attempt or its memory without a bound. Each must now be a
/// failed attempt with a reason, the server still up, and a restart with the delivery owed too.
final class HostilePeerTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-hostile-peers") }
    override func tearDown() { folder?.remove() }

    private let lies: [(name: String, lie: HostileReceiver.Lie, reason: String)] = [
        ("Content-Length -1", .raw("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), "Content-Length \"-1\""),
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
            XCTAssertLessThan(residentBytes() - before, 64 << 20, "\(name): resident memory")
            receiver.stop()
        }
    }
}
