import Foundation
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Debian's tinyproxy on loopback between the clients and the server (or a webhook's receiver):
/// the command line takes it from HTTPS_PROXY / HTTP_PROXY, NO_PROXY sends it direct, a hook's
/// `proxy` overrides the environment; its log shows each CONNECT.
final class ProxyTests: XCTestCase {
    private var certificates: TestCertificates!
    private var proxy: Process?
    private var proxyPort = 0
    private var proxyLog: URL { certificates.folder.file("tinyproxy.log") }

    override func setUpWithError() throws {
        try MissingBinary.check()
        certificates = try TestCertificates()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tinyproxy") else {
            throw TestCertificateError("tinyproxy is not installed: scripts/deps.sh test installs it")
        }
        proxyPort = closedLoopbackPort()
        let config = certificates.folder.file("tinyproxy.conf")
        // No ConnectPort line: CONNECT to any port (the test's servers are on ephemeral ones).
        try Data(
            """
            Port \(proxyPort)
            Listen 127.0.0.1
            Timeout 30
            LogFile "\(proxyLog.path)"
            LogLevel Connect
            MaxClients 50
            Allow 127.0.0.1

            """.utf8
        ).write(to: config)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tinyproxy")
        process.arguments = ["-d", "-c", config.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        proxy = process
        XCTAssertTrue(eventually(timeout: 10) { (try? RawSocket(port: proxyPort)) != nil }, "tinyproxy listens on \(proxyPort)")
    }

    override func tearDown() {
        if let proxy, proxy.isRunning {
            proxy.terminate()
            proxy.waitUntilExit()
        }
        certificates?.remove()
    }

    private var proxyURL: String { "http://127.0.0.1:\(proxyPort)" }

    /// The CONNECTs the proxy's log shows to this port.
    private func tunnels(to port: Int) -> Int {
        let log = (try? String(contentsOf: proxyLog, encoding: .utf8)) ?? ""
        return log.components(separatedBy: "\n").filter { $0.contains("CONNECT 127.0.0.1:\(port) ") }.count
    }

    func testTheCommandLineGoesThroughTheEnvironmentsProxyByConnectAndNoProxySendsItDirect() throws {
        let server = try producerServer { $0.tls = self.certificates.good }
        let https = "https://127.0.0.1:\(server.port)"
        let through = ["HTTPS_PROXY": proxyURL, "NO_PROXY": ""]
        let pushed = try RingcastProcess.run(
            ["push", "ci.proxied", "--progress", "30%", "--server", https, "--cacert", certificates.caFile], environment: through)
        XCTAssertEqual(pushed.status, 0, pushed.stderr)
        XCTAssertTrue(eventually(timeout: 5) { tunnels(to: server.port) == 1 }, "push went by CONNECT: \(tunnels(to: server.port))")

        // ls --watch polls over its kept connection: one tunnel for the whole watch.
        let watching = try RingcastProcess(["ls", "--watch", "--server", https, "--cacert", certificates.caFile], environment: through)
        Thread.sleep(forTimeInterval: 2)
        kill(watching.process.processIdentifier, SIGINT)
        let watched = watching.wait()
        XCTAssertEqual(watched.status, 0, watched.stderr)
        XCTAssertTrue(watched.stdout.contains("30%"), watched.stdout)
        XCTAssertTrue(eventually(timeout: 5) { tunnels(to: server.port) == 2 }, "ls --watch went by CONNECT: \(tunnels(to: server.port))")

        let direct = try RingcastProcess.run(
            ["push", "ci.proxied", "--progress", "60%", "--server", https, "--cacert", certificates.caFile],
            environment: ["HTTPS_PROXY": proxyURL, "NO_PROXY": "127.0.0.1"])
        XCTAssertEqual(direct.status, 0, direct.stderr)
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(tunnels(to: server.port), 2, "NO_PROXY sent it direct")

        // Plain http too, by the upper-case HTTP_PROXY libcurl alone would not take.
        let plain = try producerServer()
        let viaUpper = try RingcastProcess.run(
            ["push", "ci.plain", "--server", plain.httpURL], environment: ["HTTP_PROXY": proxyURL, "http_proxy": "", "NO_PROXY": ""])
        XCTAssertEqual(viaUpper.status, 0, viaUpper.stderr)
        XCTAssertTrue(eventually(timeout: 5) { tunnels(to: plain.port) == 1 }, "HTTP_PROXY was taken: \(tunnels(to: plain.port))")
    }

    func testAHooksProxyCarriesItsDeliveriesToAnHTTPSReceiver() throws {
        let receiver = try WebhookReceiver(secret: "s", tls: certificates.good)
        let server = try TestServer { config in
            config.publicDir = emptyPublicDirectory
            var rule = WebhookRule(url: receiver.url, patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "s", concurrency: 1)
            rule.caFile = self.certificates.caFile
            rule.proxy = self.proxyURL
            config.webhooks = [rule]
        }
        for n in 0..<2 { try server.post("/api/tasks/ci.job-\(n)", #"{"state":"failed"}"#) }
        let deliveries = receiver.wait(timeout: 30) { $0.count >= 2 }
        XCTAssertTrue(deliveries.allSatisfy(\.valid), "signed bodies that verify")
        XCTAssertEqual(tunnels(to: receiver.port), 1, "both deliveries through one CONNECT of the hook's proxy")
    }
}
