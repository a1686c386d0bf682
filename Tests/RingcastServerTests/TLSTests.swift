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

    /// One handshake by openssl s_client with these options; its status and what it printed.
    private func handshake(_ port: Int, _ options: String) throws -> (status: Int32, output: String) {
        try run("/bin/sh", ["-c", "echo | timeout 10 /usr/bin/openssl s_client -connect 127.0.0.1:\(port) \(options) 2>&1"])
    }

    func testOnlyForwardSecretAEADSuitesAreOfferedUnlessTheConfigSaysOtherwise() throws {
        let server = try TestServer { $0.tls = TLSFiles(cert: self.cert, key: self.key) }
        for suite in ["AES128-SHA", "ECDHE-RSA-AES128-SHA", "AES256-GCM-SHA384"] {
            let refused = try handshake(server.port, "-tls1_2 -cipher \(suite)")
            XCTAssertNotEqual(refused.status, 0, "\(suite) on TLS 1.2: \(refused.output)")
            XCTAssertTrue(refused.output.contains("handshake failure"), refused.output)
        }
        let aead = try handshake(server.port, "-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256")
        XCTAssertEqual(aead.status, 0, aead.output)
        XCTAssertTrue(aead.output.contains("TLSv1.2, Cipher is ECDHE-RSA-AES128-GCM-SHA256"), aead.output)
        let tls13 = try handshake(server.port, "-tls1_3")
        XCTAssertEqual(tls13.status, 0, tls13.output)
        XCTAssertTrue(tls13.output.contains("TLSv1.3, Cipher is TLS_"), tls13.output)

        let chosen = try TestServer { $0.tls = TLSFiles(cert: self.cert, key: self.key, ciphers: "ECDHE-RSA-AES128-SHA") }
        let old = try handshake(chosen.port, "-tls1_2 -cipher ECDHE-RSA-AES128-SHA")
        XCTAssertEqual(old.status, 0, "tls.ciphers changes the list: \(old.output)")
    }

    /// Over TLS every answer carries HSTS, and the sign-in cookie is `__Host-` prefixed (only it is
    /// read: a planted `ringcast_token` is no token); plain http has neither (CONFIG.md says why).
    func testOverTLSAnswersCarryHSTSAndTheSignInCookieIsHostPrefixed() throws {
        let token = "reader-over-tls-0123456789"
        let server = try TestServer {
            $0.tls = TLSFiles(cert: self.cert, key: self.key)
            $0.access = AccessPolicy(readers: [.reader(name: "r", token: token, patterns: WatchSet([Glob("*")]))], anonymousRead: .nobody)
        }
        let base = "https://127.0.0.1:\(server.port)"
        for path in ["/healthz", "/", "/api/tasks/nothing"] {
            let head = try curl(["-o", "/dev/null", "-D", "-", base + path])
            XCTAssertTrue(head.output.lowercased().contains("strict-transport-security: max-age=31536000"), "\(path): \(head.output)")
        }
        let signIn = try curl(["-D", "-", "-H", "Content-Type: application/json", "-d", #"{"token":"\#(token)"}"#, base + "/api/session"])
        XCTAssertTrue(signIn.output.contains("set-cookie: __Host-ringcast_token=\(token); Path=/; HttpOnly; SameSite=Strict; Secure"), signIn.output)
        let list = "-o /dev/null -w %{http_code} \(base)/api/tasks"
        XCTAssertEqual(try curl(list.split(separator: " ").map(String.init) + ["-b", "__Host-ringcast_token=\(token)"]).output, "200")
        XCTAssertEqual(try curl(list.split(separator: " ").map(String.init) + ["-b", "ringcast_token=\(token)"]).output, "401")
        XCTAssertEqual(
            try curl(list.split(separator: " ").map(String.init) + ["-b", "ringcast_token=bogus; __Host-ringcast_token=\(token)"]).output, "200",
            "a planted cookie beside it locks no one out")

        let plain = try TestServer()
        XCTAssertNil(try plain.http().request("GET", "/healthz").headers["strict-transport-security"])
    }

    func testTLSCiphersIsAStringListOrTheConfigSaysWhatToWrite() throws {
        let config = try ServerConfig.parse(Array(#"{"tls": {"cert": "c.pem", "key": "k.pem", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}}"#.utf8))
        XCTAssertEqual(config.tls?.ciphers, "ECDHE-RSA-AES128-GCM-SHA256")
        XCTAssertEqual(try ServerConfig.parse(Array(#"{"tls": {"cert": "c.pem", "key": "k.pem"}}"#.utf8)).tls?.ciphers, TLSFiles.intermediateCiphers)
        XCTAssertThrowsError(try ServerConfig.parse(Array(#"{"tls": {"cert": "c.pem", "key": "k.pem", "ciphers": 3}}"#.utf8))) { error in
            XCTAssertTrue("\(error)".contains("\"tls.ciphers\" must be an OpenSSL cipher list"), "\(error)")
        }
    }

    private func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) { try runToEnd(path, arguments) }
}
