import Foundation
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Every command against a server with `tls`, its certificate signed by a CA the test makes with
/// openssl: trusted through --cacert, RINGCAST_CA_FILE or SSL_CERT_FILE; refused, with the reason
/// named and exit status 1, when the certificate is from an unknown CA, for another host or expired;
/// taken unchecked, with a warning, under --insecure.
final class TLSCommandTests: XCTestCase {
    private var certificates: TestCertificates!

    override func setUpWithError() throws {
        try MissingBinary.check()
        certificates = try TestCertificates()
    }

    override func tearDown() { certificates?.remove() }

    private func server(_ files: TLSFiles) throws -> TestServer {
        try producerServer { $0.tls = files }
    }

    private func url(_ server: TestServer) -> String { "https://127.0.0.1:\(server.port)" }

    /// The API over https, trusting the test's CA (or, to look into a server whose certificate is
    /// refused on purpose, anything).
    private func api(_ server: TestServer, insecure: Bool = false) -> HTTPClient {
        HTTPClient(host: "127.0.0.1", port: server.port, secure: true, tls: TLSSettings(caFile: certificates.caFile, insecure: insecure))
    }

    private func task(_ server: TestServer, _ id: String, insecure: Bool = false) throws -> JSONValue? {
        let answer = try api(server, insecure: insecure).request("GET", "/api/tasks/\(id)")
        return answer.status == 200 ? try JSONParser.parse(answer.body) : nil
    }

    /// Each command once, as a user would type it; `id` keeps the runs of one trust apart.
    private func commands(_ id: String) -> [(arguments: [String], stdin: String)] {
        [
            (["push", "\(id).push", "--progress", "42%"], ""),
            (["show", "\(id).show", "--detail", "Saving"], ""),
            (["hide", "\(id).show"], ""),
            (["timer", "\(id).timer", "--seconds", "60"], ""),
            (["ls"], ""),
            (["pipe", "\(id).pipe", "--done-at-eof"], "step 1 40%\nstep 2 90%\n"),
            (["run", "\(id).run", "--", "sh", "-c", "echo ran"], ""),
            (["rm", "\(id).timer"], ""),
            (["load", "--clients", "3", "--messages", "20", "--rate", "50", "--connect-timeout", "5", "--drain-timeout", "10"], ""),
        ]
    }

    /// The options go before `run`'s `--`: what follows it is the command's own.
    private func with(_ arguments: [String], _ options: [String]) -> [String] {
        guard let dashes = arguments.firstIndex(of: "--") else { return arguments + options }
        return Array(arguments[..<dashes]) + options + Array(arguments[dashes...])
    }

    private func runAll(
        _ server: TestServer, id: String, options: [String], environment: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line
    )
        throws -> [RingcastProcess.Result]
    {
        try commands(id).map { arguments, stdin in
            let result = try RingcastProcess.run(with(arguments, ["--server", url(server)] + options), stdin: stdin, environment: environment)
            XCTAssertEqual(result.status, 0, "\(arguments.prefix(2).joined(separator: " ")) \(options): \(result.stderr)", file: file, line: line)
            return result
        }
    }

    func testEveryCommandWorksOverHTTPSWithTheCAGivenEachWay() throws {
        let server = try server(certificates.good)
        let ways: [(id: String, options: [String], environment: [String: String])] = [
            ("flag", ["--cacert", certificates.caFile], [:]),
            ("env", [], ["RINGCAST_CA_FILE": certificates.caFile]),
            ("store", [], ["SSL_CERT_FILE": certificates.caFile]),
        ]
        for way in ways {
            let results = try runAll(server, id: way.id, options: way.options, environment: way.environment)
            XCTAssertTrue(results.allSatisfy { !$0.stderr.contains("warning") }, "no warning when verified: \(results.map(\.stderr))")
            XCTAssertEqual(try task(server, "\(way.id).push")?["progress"], .number(0.42), way.id)
            XCTAssertEqual(try task(server, "\(way.id).pipe")?["state"], .string("done"), way.id)
            XCTAssertEqual(try task(server, "\(way.id).run")?["state"], .string("done"), way.id)
            XCTAssertNil(try task(server, "\(way.id).timer"), "\(way.id): rm removed it")
            XCTAssertTrue(results[4].stdout.contains("\(way.id).push"), "ls: \(results[4].stdout)")
            XCTAssertTrue(results[6].stdout.contains("ran"), "run: \(results[6].stdout)")
            XCTAssertTrue(results[8].stdout.contains("the last update seen by 3 of 3 watchers"), "load over wss: \(results[8].stdout)")
        }
    }

    func testLsWatchRedrawsOverHTTPSAndEndsAtOnceWhenRefused() throws {
        let server = try server(certificates.good)
        XCTAssertEqual(try api(server).request("POST", "/api/tasks/ci.watched", json: #"{"progress":0.1}"#).status, 200)
        let watching = try RingcastProcess(["ls", "--watch", "--server", url(server), "--cacert", certificates.caFile])
        let pid = watching.process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + 60) { if watching.process.isRunning { kill(pid, SIGKILL) } }
        // ls --watch polls over HTTP: a few of its looks pass in these seconds.
        Thread.sleep(forTimeInterval: 2)
        XCTAssertEqual(try api(server).request("POST", "/api/tasks/ci.watched", json: #"{"progress":0.7}"#).status, 200)
        Thread.sleep(forTimeInterval: 3)
        kill(pid, SIGINT)
        let result = watching.wait()
        XCTAssertEqual(result.status, 0, "Ctrl-C is how it ends: \(result.stderr)")
        XCTAssertTrue(result.stdout.contains("10%") && result.stdout.contains("70%"), "redrawn over https: \(result.stdout)")

        let refused = try self.server(certificates.wrongHost)
        let ended = try RingcastProcess.run(["ls", "--watch", "--server", url(refused), "--cacert", certificates.caFile])
        XCTAssertEqual(ended.status, 1, ended.stderr)
        XCTAssertTrue(ended.stderr.contains("wrong host"), ended.stderr)
    }

    func testACancelRequestReachesRunOverWSS() throws {
        let server = try server(certificates.good)
        let run = try RingcastProcess(
            ["run", "copy", "--server", url(server), "--cacert", certificates.caFile, "--", "sh", "-c", "echo started; exec sleep 60"])
        let pid = run.process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + 60) { if run.process.isRunning { kill(pid, SIGKILL) } }
        XCTAssertTrue(
            try eventually(timeout: 10) {
                try task(server, "copy")?["controls"] == .array([.string("cancel"), .string("pause"), .string("resume")])
            },
            "the task's controls came over the publishing WebSocket")
        XCTAssertEqual(try api(server).request("POST", "/api/tasks/copy/cancel", json: "{}").status, 200)
        let result = run.wait()
        XCTAssertEqual(result.status, 130, "the request came back over wss: \(result.stderr)")
        XCTAssertEqual(try task(server, "copy")?["state"], .string("cancelled"))
    }

    func testEachCommandFailsNamingWhyTheCertificateIsRefused() throws {
        let cases: [(files: TLSFiles, reason: String)] = [
            (certificates.unknownCA, "unknown CA"), (certificates.wrongHost, "wrong host"), (certificates.expired, "has expired"),
        ]
        for (files, reason) in cases {
            let server = try server(files)
            for (arguments, stdin) in commands("refused") {
                let result = try RingcastProcess.run(with(arguments, ["--server", url(server), "--cacert", certificates.caFile]), stdin: stdin)
                let name = "\(arguments.prefix(2).joined(separator: " ")) against \(reason)"
                XCTAssertEqual(result.status, 1, "\(name): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains(reason), "\(name): \(result.stderr)")
                XCTAssertFalse(result.stdout.contains("ran"), "\(name): the command is not run when the server cannot be reached")
            }
            let listed = try api(server, insecure: true).request("GET", "/api/tasks").text
            XCTAssertFalse(listed.contains("refused."), "nothing reached the server: \(listed)")
        }
    }

    func testInsecureTakesAnyCertificateAndWarnsOnEveryUse() throws {
        let server = try server(certificates.expired)
        let results = try runAll(server, id: "insecure", options: ["--insecure"])
        for result in results {
            XCTAssertTrue(result.stderr.contains("warning: --insecure"), "every use warns: \(result.stderr)")
        }
        XCTAssertEqual(try task(server, "insecure.push", insecure: true)?["progress"], .number(0.42))
        XCTAssertThrowsError(try task(server, "insecure.push"), "without it, the same server is refused") { error in
            XCTAssertEqual((error as? ClientError)?.kind, .expired, "\(error)")
        }
    }
}
