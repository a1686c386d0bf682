import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// One client holding every connection it can, against a server run with few file descriptors:
/// the limits (derived from the open-file limit) leave room for everyone else, and at the limit
/// itself the server pauses accepting instead of trying again on every turn of its loop.
final class ConnectionLimitTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-limits") }
    override func tearDown() { folder?.remove() }

    /// The server's limit; the hostile client (127.0.0.2) tries more connections than that.
    private let openFileLimit = 256
    private let attempts = 300

    private func serve(_ settings: String) throws -> (ServeProcess, log: URL) {
        let config = folder.file("config.json")
        // Idle raw sockets are held for the whole test, not closed as slow handshakes.
        try Data(
            #"{"port":0,"publicDir":"\#(repositoryRoot)/Public","logLevel":"info","handshakeTimeoutSeconds":120\#(settings)}"#.utf8
        ).write(to: config)
        let log = folder.file("serve.log")
        return (try ServeProcess(["--config", config.path], errorLog: log, openFileLimit: openFileLimit), log)
    }

    /// Connects `attempts` times from 127.0.0.2 and holds what connected; the server may close some.
    private func flood(_ port: Int) throws -> [RawSocket] {
        try (0..<attempts).map { _ in try RawSocket(port: port, timeoutSeconds: 2, source: "127.0.0.2") }
    }

    /// The server's CPU, as a share of one core, over `seconds` of wall time.
    private func cpuShare(of pid: pid_t, over seconds: Double) -> Double {
        let start = (cpuSeconds(of: pid), Date())
        Thread.sleep(forTimeInterval: seconds)
        return (cpuSeconds(of: pid) - start.0) / Date().timeIntervalSince(start.1)
    }

    private func lines(of log: URL, containing text: String) -> [Substring] {
        let content = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return content.split(separator: "\n").filter { $0.contains(text) }
    }

    func testOneClientAtTheOpenFileLimitLeavesHealthzToAnotherAndTheServerIdle() throws {
        let (served, log) = try serve("")
        let held = try flood(served.port)
        defer { withExtendedLifetime(held) {} }
        Thread.sleep(forTimeInterval: 1)
        let share = cpuShare(of: served.process.processIdentifier, over: 3)
        print("server CPU while one client holds its connections (defaults, nofile \(openFileLimit)): \(share * 100) % of a core")
        XCTAssertLessThan(share, 0.10, "the server is idle while the connections are held")

        let other = HTTPClient(host: "127.0.0.1", port: served.port, timeoutSeconds: 5)
        XCTAssertEqual(try other.request("GET", "/healthz").status, 200, "another client is answered")
        let metrics = try PrometheusScrape(try other.request("GET", "/metrics").text)
        let refused = try XCTUnwrap(metrics.value("ringcast_connections_refused_total"))
        print("the flood: \(Int(refused)) of \(attempts) connections refused at accept; \(lines(of: log, containing: "refused").first ?? "")")
        XCTAssertGreaterThan(refused, 0, "the flood passed its per-address share")
        XCTAssertLessThan(Int(refused), attempts)
        XCTAssertEqual(metrics.value("ringcast_accept_paused_total"), 0, "the limits kept the server off the open-file limit")
        let refusals = lines(of: log, containing: "refused a connection from 127.0.0.2")
        XCTAssertEqual(refusals.count, 1, "one line for the whole flood: \(refusals)")
        XCTAssertTrue(refusals.first?.contains("maxConnectionsPerAddress") == true, "\(refusals)")
        XCTAssertEqual(served.stop(), 0)
    }

    func testAtTheOpenFileLimitAcceptingPausesWithOneLineAndResumesWhenDescriptorsFree() throws {
        // Limits above what the descriptors allow: the server reaches the open-file limit itself.
        let (served, log) = try serve(#","maxConnections":100000,"maxConnectionsPerAddress":0"#)
        XCTAssertEqual(lines(of: log, containing: "the open-file limit (\(openFileLimit)) leaves room for").count, 1, "warned at start")
        var held = try flood(served.port)
        Thread.sleep(forTimeInterval: 1)
        let share = cpuShare(of: served.process.processIdentifier, over: 3)
        print("server CPU while paused at the open-file limit (nofile \(openFileLimit)): \(share * 100) % of a core")
        XCTAssertLessThan(share, 0.10, "no accept retried on every turn of the loop")
        XCTAssertEqual(lines(of: log, containing: "accepting paused").count, 1, "one line: \(lines(of: log, containing: "accepting paused"))")
        print(lines(of: log, containing: "accepting paused").first ?? "")

        held.removeAll()
        let other = HTTPClient(host: "127.0.0.1", port: served.port, timeoutSeconds: 5)
        XCTAssertTrue(
            eventually(timeout: 10) { (try? other.request("GET", "/healthz").status) == 200 }, "accepting resumed once the sockets closed")
        let metrics = try PrometheusScrape(try other.request("GET", "/metrics").text)
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(metrics.value("ringcast_accept_paused_total")), 1)
        XCTAssertEqual(metrics.value("ringcast_accept_paused"), 0, "not paused now")
        XCTAssertEqual(lines(of: log, containing: "accepting paused").count, 1, "still one line")
        XCTAssertEqual(served.stop(), 0)
    }
}
