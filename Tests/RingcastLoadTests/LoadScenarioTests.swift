import Foundation
import RingcastCore
import RingcastLoad
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// The shapes of a bad day in the load tester: watchers closing and coming back as dashboards do
/// (churn, a storm), and a run that reports its own progress as a task. Real server on loopback.
final class LoadScenarioTests: XCTestCase {
    private func server() throws -> TestServer {
        try TestServer { $0.publicDir = emptyPublicDirectory }
    }

    private func options(_ server: TestServer, _ change: (inout LoadTestOptions) -> Void) -> LoadTestOptions {
        var options = LoadTestOptions(url: ServerURL(server.httpURL)!)
        options.connectTimeout = 5
        options.drainTimeout = 20
        change(&options)
        return options
    }

    func testChurnClosesWatchersAtItsRateAndEachComesBackResumingWithNothingLost() throws {
        let server = try self.server()
        let result = try LoadTester(
            options: options(server) {
                $0.clients = 30
                $0.threads = 2
                $0.rate = 40
                $0.duration = 3
                $0.churnPerSecond = 10
            }
        ).execute()
        let r = try XCTUnwrap(result.reconnects)
        // 10 a second for 3 s; generous either side for a loaded machine.
        XCTAssertGreaterThanOrEqual(r.closed, 15, result.table)
        XCTAssertLessThanOrEqual(r.closed, 40, result.table)
        XCTAssertEqual(r.back, r.closed, "every closed watcher came back: \(result.table)")
        XCTAssertEqual(r.stillAway, 0)
        XCTAssertEqual(Int(r.backTimes.count), r.back, "one time per return")
        XCTAssertLessThan(r.backTimes.max, 15_500_000, "within the back-off's ceiling and a handshake")
        XCTAssertNil(r.stormWatchers)
        XCTAssertEqual(result.dropped, 0, "closed by the run is not dropped by the server")
        XCTAssertEqual(result.connected, 30)
        // Away, a watcher misses updates; resuming with since, its snapshot holds them: nothing
        // is lost, and each update either arrived or was in a resume snapshot, never both.
        XCTAssertGreaterThan(r.resumedUpdates, 0, result.table)
        XCTAssertEqual(result.delivered + r.resumedUpdates, result.expected, result.table)
        XCTAssertEqual(result.loss, 0, result.table)
        XCTAssertEqual(result.finalValueSeenBy, 30)
        XCTAssertTrue(result.table.contains("churn: 10 a second, \(r.closed) closed; \(r.back) back"), result.table)
    }

    func testAStormClosesEveryWatcherAtOnceAndTimesUntilAllAreLiveAgain() throws {
        let server = try self.server()
        let result = try LoadTester(
            options: options(server) {
                $0.clients = 80
                $0.rate = 30
                $0.duration = 2
                $0.storm = true
            }
        ).execute()
        let r = try XCTUnwrap(result.reconnects)
        XCTAssertEqual(r.stormWatchers, 80, result.table)
        XCTAssertEqual(r.closed, 80)
        XCTAssertEqual(r.back, 80)
        XCTAssertEqual(r.stillAway, 0)
        let allLive = try XCTUnwrap(r.stormSeconds, result.table)
        // All live again when the slowest was: the storm's time is its longest return.
        XCTAssertEqual(allLive, Double(r.backTimes.max) / 1e6, accuracy: 0.002)
        XCTAssertLessThan(allLive, 15.5)
        XCTAssertEqual(result.loss, 0, result.table)
        XCTAssertEqual(result.delivered + r.resumedUpdates, result.expected, result.table)

        // The JSON carries the figures and the times' histogram; two runs merge into their sum.
        let json = try JSONParser.parse(JSONWriter.encode(result.json))
        XCTAssertEqual(json["reconnects"]?["stormWatchers"], .number(80))
        XCTAssertEqual(json["reconnects"]?["back"], .number(80))
        guard case .number(let p99)? = json["reconnects"]?["backMs"]?["p99"] else { return XCTFail("no back p99 in \(json)") }
        XCTAssertEqual(p99, r.backMilliseconds(99)!, accuracy: 0.001)
        let read = try LoadResult(json: json, source: "run.json")
        let merged = LoadResult.merge([read, read])
        XCTAssertEqual(merged.reconnects?.stormWatchers, 160)
        XCTAssertEqual(merged.reconnects?.backTimes.count, 160)
        XCTAssertEqual(merged.reconnects?.backMilliseconds(99), r.backMilliseconds(99))
        XCTAssertEqual(merged.reconnects?.stormSeconds ?? 0, allLive, accuracy: 0.002)
        XCTAssertEqual(merged.loss, 0)
    }

    func testReportToPublishesTheRunsProgressAsATaskThatEndsDoneOrFailed() throws {
        let server = try self.server()
        let board = try self.server()
        _ = try LoadTester(
            options: options(server) {
                $0.clients = 5
                $0.messages = 40
                $0.rate = 20
                $0.reportTo = (board.httpURL, "load.selftest")
            }
        ).execute()
        let task = try XCTUnwrap(try board.task("load.selftest"), "the run's task is on the other server")
        XCTAssertEqual(task["state"], .string("done"))
        XCTAssertEqual(task["progress"], .number(1))
        XCTAssertEqual(task["title"], .string("ringcast load"))
        guard case .string(let detail)? = task["detail"] else { return XCTFail("no detail in \(task)") }
        XCTAssertTrue(detail.hasPrefix("delivered 200 of 200, loss 0, p50 "), detail)

        // A run whose bound held ends its task failed, naming the bound.
        _ = try LoadTester(
            options: options(server) {
                $0.clients = 2
                $0.messages = 5
                $0.rate = 0
                $0.failIf = try? LoadThresholds.parse("p99>1us")
                $0.reportTo = (board.httpURL, "load.gated")
            }
        ).execute()
        let gated = try XCTUnwrap(try board.task("load.gated"))
        XCTAssertEqual(gated["state"], .string("failed"))
        guard case .string(let reason)? = gated["detail"] else { return XCTFail("no detail in \(gated)") }
        XCTAssertTrue(reason.contains("failed --fail-if: p99>1us"), reason)
    }

    func testScenarioOptionsAUserCanGetWrongAreRefusedWithAMessage() {
        let url = ServerURL("http://127.0.0.1:9")!
        func refused(_ change: (inout LoadTestOptions) -> Void, _ saying: String) {
            var options = LoadTestOptions(url: url)
            change(&options)
            XCTAssertThrowsError(try options.validate()) { XCTAssertTrue("\($0)".contains(saying), "\($0)") }
        }
        refused({ $0.churnPerSecond = -1 }, "--churn must be watchers a second")
        refused(
            {
                $0.churnPerSecond = 5
                $0.storm = true
            }, "--churn and --storm are separate scenarios")
        refused({ $0.reportTo = ("http://127.0.0.1:8080", "-bad") }, "'-bad' is not a task id")
        refused({ $0.reportTo = ("ftp:x", "load.a") }, "--report-to takes a server's address and a task id")
    }
}
