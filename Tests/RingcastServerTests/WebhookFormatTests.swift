import Foundation
import RingcastTestSupport
import XCTest

@testable import RingcastCore
@testable import RingcastServer

/// A hook's `format`: each body as the service's incoming-webhook documentation shapes it, field by
/// field, read by a local receiver. Slack: `{"text"}` in mrkdwn (`<url|title>`, & < > escaped);
/// Discord: `{"content", "allowed_mentions"}` in markdown (`[title](url)`, at most 2000 characters); ntfy: JSON published
/// at the server's root, `{"topic", "title", "message", "priority", "tags", "click"}`.
final class WebhookFormatTests: XCTestCase {
    private func keys(_ value: JSONValue) -> [String] {
        guard case .object(let members) = value else { return [] }
        return members.map(\.0).sorted()
    }

    func testEachFormatsBodyIsTheServicesDocumentedShape() throws {
        let receiver = try WebhookReceiver(secret: "s")
        let base = "http://127.0.0.1:\(receiver.port)"
        let server = try TestServer { config in
            config.publicDir = emptyPublicDirectory
            config.webhooks = [WebhookFormat.slack, .discord, .ntfy].map { format in
                var rule = WebhookRule(
                    url: format == .ntfy ? base + "/ci-builds" : base + "/\(format.rawValue)", patterns: WatchSet([Glob("ci.*")]),
                    states: [.failed, .done], secret: "s", concurrency: 1)
                rule.format = format
                rule.pageBase = "https://ringcast.example/"
                return rule
            }
        }
        try server.post("/api/tasks/ci.build-7", #"{"title":"Build <7> & co","state":"failed","detail":"exit 2"}"#)
        let deliveries = receiver.wait(timeout: 30) { $0.count >= 3 }
        func body(_ path: String) throws -> JSONValue { try XCTUnwrap(deliveries.first { $0.path == path }, "\(path): \(deliveries)").body }
        let link = "https://ringcast.example/tasks/ci.build-7"

        let slack = try body("/slack")
        XCTAssertEqual(keys(slack), ["text"])
        guard case .string(let text)? = slack["text"] else { return XCTFail("\(slack)") }
        XCTAssertTrue(text.hasPrefix("<\(link)|Build &lt;7&gt; &amp; co> failed after "), text)
        XCTAssertTrue(text.hasSuffix("s: exit 2"), text)
        XCTAssertFalse(text.contains("\n"), "one line")

        let discord = try body("/discord")
        XCTAssertEqual(keys(discord), ["allowed_mentions", "content"])
        XCTAssertEqual(discord["allowed_mentions"]?["parse"], .array([]), "a title pings nobody")
        guard case .string(let content)? = discord["content"] else { return XCTFail("\(discord)") }
        XCTAssertTrue(content.hasPrefix("[Build <7> & co](\(link)) failed after "), content)
        XCTAssertTrue(content.hasSuffix("s: exit 2"), content)
        XCTAssertLessThanOrEqual(content.count, 2000)

        // ntfy's JSON is published to the server's root; the topic is the hook URL's path.
        let ntfy = try body("/")
        XCTAssertEqual(keys(ntfy), ["click", "message", "priority", "tags", "title", "topic"])
        XCTAssertEqual(ntfy["topic"], .string("ci-builds"))
        XCTAssertEqual(ntfy["title"], .string("Build <7> & co"))
        guard case .string(let message)? = ntfy["message"] else { return XCTFail("\(ntfy)") }
        XCTAssertTrue(message.hasPrefix("failed after ") && message.hasSuffix("s: exit 2"), message)
        XCTAssertEqual(ntfy["priority"], .number(4), "a failure is high priority (4)")
        XCTAssertEqual(ntfy["tags"], .array([.string("x")]))
        XCTAssertEqual(ntfy["click"], .string(link))

        try server.post("/api/tasks/ci.lint", #"{"title":"Lint","state":"done"}"#)
        let more = receiver.wait(timeout: 30) { $0.count >= 6 }
        let done = try XCTUnwrap(more.dropFirst(3).first { $0.path == "/" }).body
        XCTAssertEqual(done["priority"], .number(3), "done is the default priority")
        XCTAssertEqual(done["tags"], .array([.string("white_check_mark")]))
        XCTAssertTrue(more.allSatisfy(\.valid), "each is signed all the same (X-Ringcast-Signature)")
    }

    func testHowLongARunTookIsSaidAsTheCommandLineSaysIt() {
        XCTAssertEqual(WebhookMessage.duration(42), "42s")
        XCTAssertEqual(WebhookMessage.duration(185), "3m05s")
        XCTAssertEqual(WebhookMessage.duration(3720), "1h02m")
        XCTAssertEqual(WebhookMessage.topic("https://ntfy.sh/ci-builds?x=1"), "ci-builds")
        XCTAssertEqual(WebhookMessage.topic("https://ntfy.sh/"), "")
    }
}
