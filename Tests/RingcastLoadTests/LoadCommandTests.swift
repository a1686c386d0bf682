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

    func testTwoProcessesStartedTogetherAgainstOneServerMergeIntoTheirSum() throws {
        let server = try self.server()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("load-merge-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let startAt = Int(Date().timeIntervalSince1970) + 5
        let arguments = [
            "load", "--server", server.httpURL, "--quiet", "--connect-timeout", "5", "--drain-timeout", "10", "--json",
            "--start-at", "\(startAt)", "--messages", "30", "--rate", "100",
        ]
        let first = try RingcastProcess(arguments + ["--clients", "6"])
        let second = try RingcastProcess(arguments + ["--clients", "4"])
        let results = [first.wait(), second.wait()]
        var runs: [JSONValue] = []
        for (index, result) in results.enumerated() {
            XCTAssertEqual(result.status, 0, result.stderr)
            let file = directory.appendingPathComponent("run\(index).json")
            try result.stdout.write(to: file, atomically: true, encoding: .utf8)
            runs.append(try JSONParser.parse(Array(result.stdout.utf8)))
            let began = try XCTUnwrap(runs[index]["publishBegan"]?.numberValue)
            XCTAssertGreaterThanOrEqual(began, Double(startAt), "no publishing before --start-at")
        }
        let began = runs.compactMap { $0["publishBegan"]?.numberValue }
        XCTAssertLessThan(abs(began[0] - began[1]), 2, "both began at --start-at, give or take a loaded machine")
        XCTAssertEqual(runs[0]["delivered"], .number(180))
        XCTAssertEqual(runs[1]["delivered"], .number(120))

        let report = directory.appendingPathComponent("merged.html")
        let merge = try RingcastProcess.run(
            [
                "load", "merge", directory.appendingPathComponent("run0.json").path, directory.appendingPathComponent("run1.json").path, "--json",
                "--html", report.path,
            ])
        XCTAssertEqual(merge.status, 0, merge.stderr)
        let merged = try JSONParser.parse(Array(merge.stdout.utf8))
        XCTAssertEqual(merged["connected"], .number(10))
        XCTAssertEqual(merged["published"], .number(60))
        XCTAssertEqual(merged["expected"], .number(300))
        XCTAssertEqual(merged["delivered"], .number(300))
        XCTAssertEqual(merged["loss"], .number(0))
        XCTAssertEqual(merged["runs"], .array([runs[0]["run"]!, runs[1]["run"]!]))
        XCTAssertEqual(merged["latencyHistogram"]?["count"], .number(300))
        // The merged percentiles are those of the two histograms added, here in the test.
        let parsed = try runs.map { try LoadResult(json: $0, source: "run") }
        var union = parsed[0].histogram
        union.add(parsed[1].histogram)
        XCTAssertEqual(merged["latencyMs"]?["p99"], .number(Double(union.percentile(99)!) / 1000))
        XCTAssertEqual(merged["latencyMs"]?["p50"], .number(Double(union.percentile(50)!) / 1000))
        XCTAssertEqual(merged["latencyMs"]?["max"], .number(Double(max(parsed[0].histogram.max, parsed[1].histogram.max)) / 1000))
        XCTAssertTrue(try String(contentsOf: report, encoding: .utf8).contains("merged"), "the page is written from the merge")

        // A merge takes its verdict too, and refuses a run's options.
        let gated = try RingcastProcess.run(["load", "merge", directory.appendingPathComponent("run0.json").path, "--fail-if", "loss>0,p50>1us"])
        XCTAssertEqual(gated.status, 3, gated.stderr)
        XCTAssertTrue(gated.stderr.contains("failed --fail-if p50>1us"), gated.stderr)
        let wrong = try RingcastProcess.run(["load", "merge", directory.appendingPathComponent("run0.json").path, "--clients", "5"])
        XCTAssertEqual(wrong.status, 2)
        XCTAssertTrue(wrong.stderr.contains("--clients describes a run, not a merge"), wrong.stderr)
    }

    func testStartAtTakesUnixOrISOTimeAndRefusesThePast() throws {
        for (time, hint) in [
            ("2000-01-01T00:00:00Z", "in the past"), ("946684800", "in the past"), ("tomorrow", "takes Unix seconds"),
        ] {
            let result = try RingcastProcess.run(["load", "--server", "http://127.0.0.1:9", "--start-at", time])
            XCTAssertEqual(result.status, 2, time)
            XCTAssertTrue(result.stderr.contains("--start-at"), result.stderr)
            XCTAssertTrue(result.stderr.contains(hint), "\(time): \(result.stderr)")
        }
    }

    func testReportToTakesAServerAndATaskIdAndTheRunShowsThere() throws {
        let server = try self.server()
        let board = try self.server()
        let result = try load(server, ["--clients", "3", "--messages", "10", "--rate", "0", "--report-to", board.httpURL, "load.cli"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let task = try XCTUnwrap(try board.task("load.cli"), "the run's own task is on the board")
        XCTAssertEqual(task["state"], .string("done"))

        let missing = try load(server, ["--clients", "3", "--messages", "10", "--report-to", board.httpURL])
        XCTAssertEqual(missing.status, 2, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("--report-to takes a server and a task id"), missing.stderr)
    }
}
