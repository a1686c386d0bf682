import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// The Swift client against a server with `tls`, its certificate from a CA the test makes: updates
/// land over wss when the CA is trusted (`Options.caFile`), and a certificate for another host is
/// a connection error on `rc.errors` that says so.
final class ClientTLSTests: XCTestCase {
    private var certificates: TestCertificates!

    override func setUpWithError() throws { certificates = try TestCertificates() }
    override func tearDown() { certificates?.remove() }

    private func task(_ server: TestServer, _ id: String) throws -> JSONValue? {
        let client = HTTPClient(host: "127.0.0.1", port: server.port, secure: true, tls: TLSSettings(caFile: certificates.caFile))
        let answer = try client.request("GET", "/api/tasks/\(id)")
        return answer.status == 200 ? try JSONParser.parse(answer.body) : nil
    }

    func testUpdatesLandOverWSSWithThePrivateCAAndAWrongHostIsNamed() async throws {
        let server = try producerServer { $0.tls = self.certificates.good }
        var options = RingcastClient.Options()
        options.caFile = certificates.caFile
        let rc = try RingcastClient(url: "https://127.0.0.1:\(server.port)", options: options)
        try await rc.update("secure.job", progress: 0.4, title: "Secure")
        try await rc.flush(timeout: 10)
        XCTAssertEqual(try task(server, "secure.job")?["progress"], .number(0.4))
        await rc.close()

        let refused = try producerServer { $0.tls = self.certificates.wrongHost }
        let wrong = try RingcastClient(url: "https://127.0.0.1:\(refused.port)", options: options)
        let errors = Collector(wrong.errors)
        try await wrong.update("never", progress: 0.1)
        let got = errors.wait { !$0.isEmpty }
        XCTAssertTrue(got.contains { "\($0)".contains("wrong host") }, "\(got)")
        await wrong.close()
    }
}
