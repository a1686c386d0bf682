import Foundation
import RingcastCore
import XCTest

/// Tests/tools/webhook_receiver.py in a process of its own: a real HTTP receiver that verifies
/// each delivery's signature with Python's hmac and can refuse the first deliveries (or all, until
/// `accept()`). Each request it answered arrives here as a `Delivery`.
/// @unchecked Sendable: what it reads goes to the Inbox; the process and pipes are set up once in init.
package final class WebhookReceiver: @unchecked Sendable {
    package struct Delivery: Sendable {
        package let n: Int
        package let path: String
        package let delivery: String
        package let signature: String
        /// Python's `hmac.compare_digest(signature, "sha256=" + hmac.new(secret, body, sha256).hexdigest())`.
        package let valid: Bool
        package let status: Int
        package let body: JSONValue
        package let at: Double
        /// The sender's port: the same for every delivery on one kept connection.
        package let peer: Int
    }

    package static let script = repositoryRoot + "/Tests/tools/webhook_receiver.py"
    package let port: Int
    private let process = Process()
    private let input = Pipe()
    private let inbox = Inbox<Delivery>()

    /// - Parameters: `refuse`: answer 503 to that many deliveries first; `refuseAll`: to every one until `accept()`.
    /// `tls`: speak https with this certificate; `clientCA`: and ask senders for one this CA signed.
    package init(secret: String, refuse: Int = 0, refuseAll: Bool = false, port: Int = 0, tls: TLSFiles? = nil, clientCA: String? = nil) throws {
        secure = tls != nil
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", WebhookReceiver.script, "--secret", secret, "--refuse", String(refuse), "--port", String(port)]
            + (refuseAll ? ["--refuse-all"] : []) + (tls.map { ["--cert", $0.cert, "--key", $0.key] } ?? [])
            + (clientCA.map { ["--client-ca", $0] } ?? [])
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let handle = output.fileHandleForReading
        let first = readLine(from: handle)
        guard case .number(let port)? = try? JSONParser.parse(first)["listening"] else {
            process.terminate()
            throw RawSocketError("the webhook receiver did not start (python3 \(WebhookReceiver.script)): \(first)")
        }
        self.port = Int(port)
        let inbox = self.inbox
        Thread.detachNewThread {
            while true {
                let line = readLine(from: handle)
                guard !line.isEmpty, let record = try? JSONParser.parse(line) else { break }
                func string(_ key: String) -> String {
                    if case .string(let s)? = record[key] { return s }
                    return ""
                }
                func number(_ key: String) -> Int {
                    if case .number(let n)? = record[key] { return Int(n) }
                    return 0
                }
                inbox.append(contentsOf: [
                    Delivery(
                        n: number("n"), path: string("path"), delivery: string("delivery"),
                        signature: string("signature"), valid: record["valid"] == .bool(true),
                        status: number("status"), body: record["body"] ?? .null, at: nowMs(), peer: number("peer"))
                ])
            }
            inbox.close()
        }
    }

    deinit {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    private let secure: Bool
    package var url: String { "\(secure ? "https" : "http")://127.0.0.1:\(port)/hook" }
    package var deliveries: [Delivery] { inbox.all }

    /// From now on, answer 200.
    package func accept() { input.fileHandleForWriting.write(Data("accept\n".utf8)) }

    @discardableResult
    package func wait(
        timeout: Double = 10, file: StaticString = #filePath, line: UInt = #line,
        until predicate: ([Delivery]) -> Bool
    ) -> [Delivery] {
        inbox.wait(
            timeout: timeout, describe: { $0.map { "\($0.n) \($0.delivery) \($0.status)" }.description }, file: file, line: line,
            until: predicate)
    }
}
