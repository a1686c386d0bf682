import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// A flood of the longest log lines there are, over many tasks, into `ringcast serve`: the
/// server's resident memory (from /proc) stays within `maxLogBytes` and a fixed allowance, where
/// each task's own limit alone would hold twelve times the budget.
final class LogBudgetTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-log-budget") }
    override func tearDown() { folder?.remove() }

    /// 2 000 four-byte characters: the longest line the server keeps (it cuts longer ones).
    static let worstLine = String(repeating: "𝕏", count: 2000)
    static let budget = 8 << 20
    /// What the rest of the process may grow by during the flood: request buffers, the tasks
    /// themselves, allocator slack.
    static let allowance = 32 << 20

    private func residentBytes(of pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    func testAFloodOfTheLongestLinesOverManyTasksStaysWithinTheBudget() throws {
        let config = folder.file("config.json")
        try Data(
            #"{"host": "127.0.0.1", "port": 0, "publicDir": "\#(repositoryRoot)/Public", "logBytes": 65536, "maxLogBytes": \#(LogBudgetTests.budget)}"#
                .utf8
        ).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        let pid = served.process.processIdentifier
        let client = HTTPClient(host: "127.0.0.1", port: served.port)
        let body = JSONWriter.encode(.object([("lines", .array(Array(repeating: .string(LogBudgetTests.worstLine), count: 9)))]))
        func flood(_ ids: Range<Int>) throws {
            for n in ids {
                XCTAssertEqual(try client.request("POST", "/api/tasks/flood.\(n)", json: "{}").status, 200)
                let answer = try client.request("POST", "/api/tasks/flood.\(n)/log", body: body)
                XCTAssertEqual(answer.status, 200, answer.text)
            }
        }
        func logBytes() throws -> Double? { try PrometheusScrape(client.request("GET", "/metrics").text).value("ringcast_log_bytes") }

        // Warm up every path first, within the budget, so the baseline holds the code and its buffers.
        try flood(0..<50)
        let baseline = residentBytes(of: pid)
        let tasks = 1500
        try flood(50..<tasks)
        let after = residentBytes(of: pid)
        let held = try XCTUnwrap(try logBytes())
        let perTaskOnly = Double(tasks) * 65536
        print(
            "log flood: \(tasks) tasks × 9 lines of 8000 bytes (\(tasks * body.count / 1_000_000) MB sent); maxLogBytes \(LogBudgetTests.budget >> 20) MiB; "
                + "log_bytes \(Int(held)); RSS \(baseline >> 20) MiB after the warm-up, \(after >> 20) MiB after the flood "
                + "(+\((after - baseline) >> 20) MiB; logBytes alone would hold \(Int(perTaskOnly) >> 20) MiB)")
        XCTAssertLessThanOrEqual(held, Double(LogBudgetTests.budget), "log_bytes within maxLogBytes")
        XCTAssertGreaterThan(held, Double(LogBudgetTests.budget) * 0.9, "the budget is full: the oldest lines were evicted, not refused")
        XCTAssertLessThan(
            after - baseline, LogBudgetTests.budget + LogBudgetTests.allowance,
            "resident memory grew by \((after - baseline) >> 20) MiB for \(LogBudgetTests.budget >> 20) MiB of logs")
        // The newest task keeps its tail; the oldest lost its lines to the newer ones.
        let newest = try JSONParser.parse(client.request("GET", "/api/tasks/flood.\(tasks - 1)/log").body)
        guard case .array(let newestLines)? = newest["lines"] else { return XCTFail("no lines: \(newest)") }
        // Each line counts its 8 000 bytes and 96 of bookkeeping: 8 fit in 64 KiB.
        XCTAssertEqual(newestLines.count, 8, "logBytes: as many whole lines as fit")
        XCTAssertEqual(try JSONParser.parse(client.request("GET", "/api/tasks/flood.0/log").body)["lines"], .array([]))
        XCTAssertEqual(try JSONParser.parse(client.request("GET", "/api/tasks/flood.0/log").body)["logCount"], .number(9))
        XCTAssertEqual(served.stop(), 0)
    }
}
