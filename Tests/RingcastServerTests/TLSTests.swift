import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastServer
import RingcastTestSupport
import XCTest

/// `"tls"` serves https:// and wss:// on the one port, with a certificate made by openssl.
final class TLSTests: XCTestCase {
    private var folder: TemporaryFolder!
    private var cert: String { folder.file("cert.pem").path }
    private var key: String { folder.file("key.pem").path }

    override func setUpWithError() throws {
        folder = try TemporaryFolder("ringcast-tls")
        let made = try run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ])
        XCTAssertEqual(made.status, 0, "openssl could not make a certificate: \(made.output)")
    }

    override func tearDown() { folder?.remove() }

    func testPublishOverHTTPSAndWatchOverWSS() throws {
        let server = try TestServer { $0.tls = TLSFiles(cert: self.cert, key: self.key) }
        XCTAssertEqual(server.server.url, "https://127.0.0.1:\(server.port)")
        let clients = try WebSocketClientContext(trustedCertificates: cert)
        defer { clients.shutdown() }
        let watcher = TestWatcher("wss://127.0.0.1:\(server.port)/ws?watch=secure.*", context: clients)
        watcher.waitForSnapshot()

        let published = try curl(["-d", #"{"progress":0.25,"title":"Secure"}"#, "https://127.0.0.1:\(server.port)/api/tasks/secure.job"])
        XCTAssertEqual(published.status, 0, published.output)
        XCTAssertTrue(published.output.contains(#""progress":0.25"#), published.output)
        watcher.wait { $0.contains { $0.id == "secure.job" && $0.number("progress") == 0.25 } }

        let health = try curl(["https://127.0.0.1:\(server.port)/healthz"])
        XCTAssertTrue(health.output.contains(#""ok":true"#), health.output)
        let plain = try curl(["--max-time", "5", "http://127.0.0.1:\(server.port)/healthz"])
        XCTAssertNotEqual(plain.status, 0, "plain http on the TLS port gets no answer: \(plain.output)")
    }

    func testAMissingOrUnreadableFileStopsTheServerNamingIt() throws {
        XCTAssertThrowsError(try TestServer { $0.tls = TLSFiles(cert: self.folder.file("absent.pem").path, key: self.key) }) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("tls.cert") && text.contains("absent.pem") && text.contains("does not exist"), text)
        }
        let garbage = folder.file("garbage.pem")
        try Data("not a certificate".utf8).write(to: garbage)
        XCTAssertThrowsError(try TestServer { $0.tls = TLSFiles(cert: garbage.path, key: self.key) }) { error in
            XCTAssertTrue("\(error)".contains("garbage.pem"), "\(error)")
        }
    }

    /// curl, trusting the test's own certificate.
    private func curl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try run("/usr/bin/curl", ["-sS", "--cacert", cert] + arguments)
    }

    private func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) { try runToEnd(path, arguments) }
}
