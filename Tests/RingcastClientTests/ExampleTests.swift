import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// The package in Examples/etl, built by `make test` (`make example`) against this checkout, run
/// against a real server: what it leaves on the server is read back here.
final class ExampleTests: XCTestCase {
    /// Where `swift build --package-path Examples/etl` puts its executables (RINGCAST_EXAMPLES_BIN overrides).
    static let binaries: String = {
        if let given = ProcessInfo.processInfo.environment["RINGCAST_EXAMPLES_BIN"], !given.isEmpty { return given }
        return repositoryRoot + "/Examples/etl/.build/debug"
    }()

    /// Runs one of the example's executables with RINGCAST_URL set; fails, never skips, when it was not built.
    private func run(_ name: String, against server: TestServer, file: StaticString = #filePath, line: UInt = #line) throws -> (
        status: Int32, output: String
    ) {
        let path = ExampleTests.binaries + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            XCTFail("no executable at \(path): build the example first (make example, or make test)", file: file, line: line)
            return (-1, "")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        var environment = ProcessInfo.processInfo.environment
        environment["RINGCAST_URL"] = server.httpURL
        environment["RINGCAST_TOKEN"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "\(name) failed: \(text)", file: file, line: line)
        return (process.terminationStatus, text)
    }

    private func field(_ server: TestServer, _ id: String, _ key: String) throws -> JSONValue? { try server.task(id)?[key] }

    func testTheMustShowProgramLeavesItsFourTasks() throws {
        let server = try producerServer()
        guard try run("must-show", against: server).status == 0 else { return }
        XCTAssertEqual(try field(server, "ex.loop", "state"), .string("done"))
        XCTAssertEqual(try field(server, "ex.loop", "progress"), .number(1))
        XCTAssertEqual(try field(server, "ex.scoped", "state"), .string("done"))
        XCTAssertEqual(try field(server, "ex.scoped", "title"), .string("Scoped"))
        XCTAssertEqual(try field(server, "ex.throws", "state"), .string("failed"))
        guard case .string(let detail)? = try field(server, "ex.throws", "detail") else { return XCTFail("ex.throws has no detail") }
        XCTAssertTrue(detail.contains("boom"), detail)
        XCTAssertEqual(try field(server, "ex.copy", "state"), .string("done"))
        XCTAssertEqual(try field(server, "ex.copy", "completed"), .number(10))
        XCTAssertEqual(try field(server, "ex.copy", "total"), .number(10))
        XCTAssertEqual(try field(server, "ex.copy", "title"), .string("Copy"))
    }

    func testTheETLExampleReportsEveryStep() throws {
        let server = try producerServer()
        let (status, output) = try run("etl", against: server)
        guard status == 0 else { return }
        XCTAssertTrue(output.contains("etl: loaded 500 rows"), output)
        XCTAssertTrue(output.contains("etl: validate failed: column 'amount' is missing"), output)

        XCTAssertEqual(try field(server, "etl.download", "state"), .string("done"))
        XCTAssertEqual(try field(server, "etl.download", "detail"), .string("returns.csv"))
        XCTAssertEqual(try field(server, "etl.run", "state"), .string("done"))
        XCTAssertEqual(try field(server, "etl.run", "title"), .string("Nightly ETL"))
        XCTAssertEqual(try field(server, "etl.run", "progress"), .number(1))
        XCTAssertEqual(try field(server, "etl.run", "total"), .number(4), "children of weights 1, 2 and 1")
        for (child, weight) in [("extract", 1.0), ("transform", 2.0), ("load", 1.0)] {
            XCTAssertEqual(try field(server, "etl.run.\(child)", "parent"), .string("etl.run"))
            XCTAssertEqual(try field(server, "etl.run.\(child)", "state"), .string("done"), child)
            XCTAssertEqual(try field(server, "etl.run.\(child)", "total"), .number(weight), child)
        }
        XCTAssertEqual(try field(server, "etl.run.load", "detail"), .string("500 rows written"))
        XCTAssertEqual(try field(server, "etl.validate", "state"), .string("failed"))
        XCTAssertEqual(try field(server, "etl.validate", "detail"), .string("column 'amount' is missing in returns.csv"))
        XCTAssertEqual(try field(server, "etl.archive", "state"), .string("done"))
        XCTAssertEqual(try field(server, "etl.archive", "completed"), .number(8))
    }
}
