import Foundation
import RingcastCore
import RingcastLoad
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// `ringcast load` as a user runs it: the built executable against a real server on loopback.
final class LoadCommandTests: XCTestCase {
    private func server() throws -> TestServer {
        try TestServer { $0.publicDir = emptyPublicDirectory }
    }

    private func load(_ server: TestServer, _ arguments: [String]) throws -> RingcastProcess.Result {
        try RingcastProcess.run(
            ["load", "--server", server.httpURL, "--quiet", "--connect-timeout", "5", "--drain-timeout", "10"] + arguments)
    }

    func testARunThatPassesAFailIfBoundExitsThreeNamingItAndTheReportMarksIt() throws {
        let server = try self.server()
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("load-\(UUID().uuidString).html")
        defer { try? FileManager.default.removeItem(at: report) }
        // No delivery over loopback takes a microsecond or less: p99>1us holds, loss>0 does not.
        let result = try load(
            server, ["--clients", "5", "--messages", "20", "--rate", "0", "--fail-if", "p99>1us, loss>0", "--report", report.path])
        XCTAssertEqual(result.status, 3, result.stderr)
        XCTAssertEqual(result.stderrLines.count, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("failed --fail-if p99>1us (p99 was "), result.stderr)
        XCTAssertFalse(result.stderr.contains("loss>0"), "only the bound that held is named: \(result.stderr)")
        XCTAssertTrue(result.stdout.contains("verdict"), result.stdout)
        XCTAssertTrue(result.stdout.contains("FAILED --fail-if: p99>1us"), result.stdout)
        let page = try String(contentsOf: report, encoding: .utf8)
        XCTAssertTrue(page.contains("<p class=\"verdict failed\">Failed --fail-if: p99&gt;1us"), "the page marks the bound")
    }

    func testARunWithinItsBoundsExitsZero() throws {
        let server = try self.server()
        let result = try load(server, ["--clients", "5", "--messages", "20", "--rate", "0", "--json", "--fail-if", "p99>60s,loss>0,failed>0"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let json = try JSONParser.parse(Array(result.stdout.utf8))
        XCTAssertEqual(json["delivered"], .number(100))
        XCTAssertEqual(json["failIf"], .string("p99>60s,loss>0,failed>0"))
        XCTAssertEqual(json["breached"], .array([]))
    }

    func testABadBoundIsRefusedBeforeTheRunSayingWhatToWrite() throws {
        // No server at all: the bound is checked before anything is sent.
        for (bounds, hint) in [
            ("p99>50", "needs its unit"), ("latency>5ms", "unknown metric"), ("loss", "no comparison"), ("failed>x", "not a number"),
        ] {
            let result = try RingcastProcess.run(["load", "--server", "http://127.0.0.1:9", "--fail-if", bounds])
            XCTAssertEqual(result.status, 2, bounds)
            XCTAssertTrue(result.stderr.contains(hint), "\(bounds): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("--fail-if"), result.stderr)
        }
    }
}
