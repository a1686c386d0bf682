import XCTest

@testable import RingcastCore

/// The bodies of `format: slack | discord | ntfy`, field by field against each service's documented
/// incoming-webhook shape, and the config entries that choose them.
final class WebhookFormatTests: XCTestCase {
    private let link = "https://ringcast.example.com"

    private func task(_ state: TaskState, title: String = "Build 42", startedSecondsAgo: Double = 65, detail: String? = nil) -> TaskRecord {
        var task = TaskRecord(id: "ci.build-42", now: 1_000_000)
        task.title = title
        task.state = state
        task.detail = detail
        task.runStartedAt = 1_000_000 - startedSecondsAgo * 1000
        return task
    }

    private func body(_ format: WebhookFormat, _ task: TaskRecord, topic: String? = nil) throws -> JSONValue {
        try JSONParser.parse(XCTUnwrap(WebhookMessage.body(format, task: task, topic: topic, publicURL: link, now: 1_000_000)))
    }

    private func keys(_ value: JSONValue) -> [String] {
        guard case .object(let members) = value else { return [] }
        return members.map(\.0)
    }

    /// Slack: `{"text": …}` in mrkdwn; a link is `<url|text>`, and &, <, > are escaped.
    func testSlack() throws {
        let body = try body(.slack, task(.failed, title: "Deploy <web> & db", detail: "exit 2"))
        XCTAssertEqual(keys(body), ["text"])
        let text = try XCTUnwrap(body["text"]?.stringValue)
        XCTAssertEqual(
            text, "❌ *Deploy &lt;web&gt; &amp; db* failed · took 1:05 · <https://ringcast.example.com/task.html?id=ci.build-42|ci.build-42>\n> exit 2"
        )
    }

    /// Discord: `content` (at most 2 000 characters) and `allowed_mentions` that pings nobody.
    func testDiscord() throws {
        let body = try body(.discord, task(.done, title: "@everyone *bold* build"))
        XCTAssertEqual(keys(body), ["content", "allowed_mentions"])
        XCTAssertEqual(body["allowed_mentions"]?["parse"], .array([]))
        XCTAssertEqual(
            body["content"]?.stringValue,
            #"✅ **\@everyone \*bold\* build** done · took 1:05 · [ci.build-42](<https://ringcast.example.com/task.html?id=ci.build-42>)"#)
        let long = try self.body(.discord, task(.done, title: String(repeating: "x", count: 200), detail: String(repeating: "y", count: 5000)))
        XCTAssertLessThanOrEqual(try XCTUnwrap(long["content"]?.stringValue).unicodeScalars.count, 2000)
    }

    /// ntfy's publish-as-JSON: topic, title, message, priority 1–5, tags (emoji names), click.
    func testNtfy() throws {
        let body = try body(.ntfy, task(.stalled, startedSecondsAgo: 3725), topic: "ci-builds")
        XCTAssertEqual(keys(body), ["topic", "title", "message", "priority", "tags", "click"])
        XCTAssertEqual(body["topic"], .string("ci-builds"))
        XCTAssertEqual(body["title"], .string("Build 42 stalled (no update from its publisher)"))
        XCTAssertEqual(body["message"], .string("running for 1:02:05"))
        XCTAssertEqual(body["priority"], .number(4))
        XCTAssertEqual(body["tags"], .array([.string("warning"), .string("stalled")]))
        XCTAssertEqual(body["click"], .string("https://ringcast.example.com/task.html?id=ci.build-42"))
        XCTAssertEqual(try self.body(.ntfy, task(.done), topic: "t")["priority"], .number(3))
    }

    func testAMultiLineTitleIsOneLineAndATimeFromNowhereIsNoCrash() throws {
        var strange = task(.done, title: "line one\nline two\u{7}")
        strange.runStartedAt = .nan
        let text = try XCTUnwrap(try body(.slack, strange)["text"]?.stringValue)
        XCTAssertTrue(text.hasPrefix("✅ *line one line two * done · took 0:00"), text)
    }

    func testTheConfigEntries() throws {
        let config = try ServerConfig.parse(
            Array(
                #"""
                {"publicURL": "https://ringcast.example.com/",
                 "webhooks": [{"url": "http://127.0.0.1:9000/services/T0/B0/x", "format": "slack"},
                              {"url": "http://127.0.0.1:9000/api/webhooks/1/abc", "format": "discord", "secret": "also-signed"},
                              {"url": "http://127.0.0.1:9000/ci-builds", "format": "ntfy"}]}
                """#.utf8))
        XCTAssertEqual(config.publicURL, "https://ringcast.example.com")
        XCTAssertEqual(config.webhooks.map(\.format), [.slack, .discord, .ntfy])
        XCTAssertEqual(config.webhooks[0].secret, [], "Slack verifies no signature: none is needed")
        XCTAssertEqual(config.webhooks[1].secret, Array("also-signed".utf8))
        XCTAssertEqual(config.webhooks[2].ntfyTopic, "ci-builds")
        XCTAssertEqual(config.webhooks[2].postURL, "http://127.0.0.1:9000/", "ntfy takes JSON at its root")
        XCTAssertEqual(config.webhooks[0].postURL, config.webhooks[0].url)

        for (text, fragment) in [
            (#"{"webhooks": [{"url": "http://127.0.0.1:9000/h", "format": "teams"}]}"#, "format must be one of ringcast, slack, discord, ntfy"),
            (#"{"webhooks": [{"url": "http://127.0.0.1:9000/h"}]}"#, "secret"),
            (#"{"webhooks": [{"url": "http://127.0.0.1:9000/", "format": "ntfy"}]}"#, "names no ntfy topic"),
            (#"{"webhooks": [{"url": "http://127.0.0.1:9000/a/b", "format": "ntfy"}]}"#, "names no ntfy topic"),
            (#"{"publicURL": "ringcast.example.com"}"#, "publicURL"),
        ] {
            XCTAssertThrowsError(try ServerConfig.parse(Array(text.utf8)), text) { error in
                XCTAssertTrue("\(error)".contains(fragment), "\(error) should say \(fragment)")
            }
        }
        XCTAssertEqual(ServerConfig().dashboardURL, "http://127.0.0.1:8080")
    }
}
