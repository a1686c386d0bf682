import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

final class HTTPTests: XCTestCase {
    func testEachKindOfInvalidRequestGetsItsErrorAndTheServerKeepsServing() throws {
        let server = try TestServer { $0.maxMessageBytes = 4096 }
        let client = server.http()
        try server.post("/api/timers/real", #"{"seconds":60}"#)
        try server.post("/api/tasks/plain", #"{"progress":0.1}"#)
        let cases: [(method: String, path: String, body: String?, status: Int, code: String, field: String?)] = [
            ("POST", "/api/tasks/a", "{not json", 400, "invalid_json", nil),
            ("POST", "/api/tasks/a", #"{"progress":"half"}"#, 422, "invalid_field", "progress"),
            ("POST", "/api/tasks/a", #"{"progress":1.5}"#, 422, "invalid_field", "progress"),
            ("POST", "/api/tasks/a", #"{"state":"exploded"}"#, 422, "invalid_field", "state"),
            ("POST", "/api/tasks/a", #"{"progres":0.5}"#, 422, "unknown_field", "progres"),
            ("POST", "/api/tasks/a", "[1,2]", 400, "invalid_json", nil),
            ("POST", "/api/tasks/-bad", "{}", 400, "invalid_id", "id"),
            ("POST", "/api/tasks/" + String(repeating: "x", count: 129), "{}", 400, "invalid_id", "id"),
            ("GET", "/api/tasks/missing", nil, 404, "not_found", "id"),
            ("POST", "/api/tasks/missing/hide", "{}", 404, "not_found", "id"),
            ("DELETE", "/api/tasks/missing", nil, 404, "not_found", "id"),
            ("POST", "/api/timers/t", #"{"interval":1}"#, 422, "missing_field", "seconds"),
            ("POST", "/api/timers/t", #"{"seconds":-3}"#, 422, "invalid_field", "seconds"),
            ("POST", "/api/timers/plain/pause", nil, 409, "not_a_timer", "id"),
            ("POST", "/api/timers/real/explode", nil, 404, "not_found", nil),
            ("GET", "/api/events", nil, 405, "method_not_allowed", nil),
            ("DELETE", "/api/tasks", nil, 405, "method_not_allowed", nil),
            ("GET", "/api/nothing", nil, 404, "not_found", nil),
            ("POST", "/api/events", #"[{"type":"update","id":"ok"},{"type":"warp","id":"x"}]"#, 400, "invalid_event", "events[1].type"),
            ("POST", "/api/events", #"[{"type":"update","id":"ok","progress":true}]"#, 422, "invalid_field", "events[0].progress"),
            ("POST", "/api/tasks/a", "{\"title\":\"" + String(repeating: "y", count: 5000) + "\"}", 413, "body_too_large", nil),
        ]
        for item in cases {
            let response = try client.request(item.method, item.path, body: item.body.map { Array($0.utf8) })
            let label = "\(item.method) \(item.path.prefix(60)) \(item.body?.prefix(60) ?? "")"
            XCTAssertEqual(response.status, item.status, "\(label): \(response.text)")
            let body = try JSONParser.parse(response.body)
            XCTAssertEqual(body["error"], .string(item.code), label)
            guard case .string(let message)? = body["message"] else {
                XCTFail("\(label): no message")
                continue
            }
            XCTAssertFalse(message.isEmpty)
            XCTAssertEqual(body["field"], item.field.map(JSONValue.string) ?? .null, label)
            XCTAssertEqual(response.headers["content-type"], "application/json")

            // The next valid request, on the same kept-alive connection, still works.
            let ok = try client.request("POST", "/api/tasks/after", json: #"{"progress":0.5}"#)
            XCTAssertEqual(ok.status, 200, "after \(label): \(ok.text)")
        }
        // A malformed batch applied nothing.
        XCTAssertEqual(try client.request("GET", "/api/tasks/ok").status, 404)
    }

    /// A body-less POST sent with `Content-Length: 0` (as clients send it) is applied once, not twice.
    func testAnEmptyPostIsAppliedOnce() throws {
        let server = try TestServer()
        try server.post("/api/timers/tea", #"{"seconds":60}"#)
        let before = try server.seq()
        let cancel = try RawSocket(port: server.port).exchange(
            Array("POST /api/timers/tea/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".utf8))
        XCTAssertEqual(cancel.status, 200, cancel.text)
        XCTAssertEqual(try server.seq(), before + 1)
    }

    func testTaskLifecycleOverHTTP() throws {
        let server = try TestServer()
        let client = server.http()
        var answer = try server.post("/api/tasks/ci.build-42", #"{"title":"Build 42","completed":0,"total":200}"#)
        XCTAssertEqual(answer["seq"], .number(1))
        XCTAssertEqual(answer["task"]?["progress"], .number(0))
        Thread.sleep(forTimeInterval: 0.1)
        answer = try server.post("/api/tasks/ci.build-42", #"{"completed":50,"detail":"compiling"}"#)
        XCTAssertEqual(answer["task"]?["progress"], .number(0.25))
        XCTAssertEqual(answer["task"]?["title"], .string("Build 42"), "fields not given are kept")
        XCTAssertEqual(answer["task"]?["detail"], .string("compiling"))
        guard case .number(let rate)? = answer["task"]?["rate"], case .number(let eta)? = answer["task"]?["eta"] else {
            return XCTFail("a running determinate task gets rate and eta: \(answer)")
        }
        XCTAssertGreaterThan(rate, 0.5)
        XCTAssertEqual(eta, 0.75 / rate, accuracy: 1e-6)
        answer = try server.post("/api/tasks/ci.build-42", #"{"progress":null}"#)
        XCTAssertEqual(answer["task"]?["progress"], .null, "null makes a task indeterminate")
        XCTAssertNil(answer["task"]?["eta"])

        let got = try client.request("GET", "/api/tasks/ci.build-42")
        XCTAssertEqual(got.status, 200)
        XCTAssertEqual(try JSONParser.parse(got.body)["detail"], .string("compiling"))

        let batch = try client.request(
            "POST", "/api/events",
            json: #"[{"type":"update","id":"b.1","progress":0.3},{"type":"show","id":"b.2","hideAfter":5},{"type":"hide","id":"nope"}]"#)
        XCTAssertEqual(batch.status, 200)
        let batchAnswer = try JSONParser.parse(batch.body)
        XCTAssertEqual(batchAnswer["applied"], .number(2))
        guard case .array(let errors)? = batchAnswer["errors"] else { return XCTFail("no errors list") }
        XCTAssertEqual(errors.first?["index"], .number(2))
        XCTAssertEqual(errors.first?["error"], .string("not_found"))

        let list = try JSONParser.parse(try client.request("GET", "/api/tasks").body)
        XCTAssertEqual(list["epoch"], .string(server.server.epoch))
        guard case .array(let tasks)? = list["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(tasks.count, 3)
        let filtered = try JSONParser.parse(try client.request("GET", "/api/tasks?watch=b.*").body)
        guard case .array(let only)? = filtered["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(only.count, 2)

        let removed = try client.request("DELETE", "/api/tasks/b.1")
        XCTAssertEqual(removed.status, 200)
        XCTAssertEqual(try JSONParser.parse(removed.body)["removed"], .string("b.1"))
        XCTAssertEqual(try client.request("GET", "/api/tasks/b.1").status, 404)

        let health = try client.request("GET", "/healthz")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(try JSONParser.parse(health.body)["ok"], .bool(true))
    }

    func testStaticFilesHaveContentTypesAndCachingAndNothingOutsidePublicIsServed() throws {
        let server = try TestServer()
        let client = server.http()
        let index = try client.request("GET", "/")
        XCTAssertEqual(index.status, 200)
        XCTAssertEqual(index.headers["content-type"], "text/html")
        XCTAssertTrue(index.text.lowercased().contains("<!doctype html>"))
        XCTAssertNotNil(index.headers["cache-control"])
        XCTAssertNotNil(index.headers["etag"])
        XCTAssertNotNil(index.headers["content-security-policy"])
        let stylesheet = try client.request("GET", "/style.css")
        XCTAssertEqual(stylesheet.status, 200)
        XCTAssertEqual(stylesheet.headers["content-type"], "text/css")

        let attempts = [
            "/config.json", "/../config.json", "/%2e%2e/config.json", "/%2E%2E/config.json", "/..%2fconfig.json",
            "/%2e%2e%2fconfig.json", "/js/../../config.json", "/./../config.json", "/....//config.json",
            "/%252e%252e/config.json", "/..\\config.json", "/Package.swift", "/../Package.swift", "/../../../../etc/passwd",
        ]
        for path in attempts {
            let raw = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            let response = try RawSocket(port: server.port).exchange(raw)
            XCTAssertTrue([400, 403, 404].contains(response.status), "\(path) answered \(response.status)")
            XCTAssertFalse(response.text.contains("\"publicDir\""), "\(path) leaked config.json")
            XCTAssertFalse(response.text.contains("PackageDescription"), "\(path) leaked Package.swift")
            XCTAssertFalse(response.text.contains("root:"), "\(path) leaked /etc/passwd")
        }
    }

    func testListensOnlyOnTheConfiguredAddress() throws {
        let server = try TestServer()
        let listeners = try listeningSockets(port: server.port)
        XCTAssertEqual(listeners.count, server.server.threads, "one listening socket per service thread (SO_REUSEPORT)")
        XCTAssertEqual(Set(listeners), ["127.0.0.1"], "the server must bind 127.0.0.1 alone, not every interface")
    }

    func testMutationsFromAnotherSiteAreRefused() throws {
        let server = try TestServer { $0.allowedOrigins = ["http://allowed.example"] }
        let client = server.http()
        let refused = try client.request("POST", "/api/tasks/x", json: "{}", headers: [("Origin", "http://evil.example")])
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(try JSONParser.parse(refused.body)["error"], .string("forbidden"))
        XCTAssertEqual(try client.request("POST", "/api/tasks/x", json: "{}", headers: [("Origin", "http://allowed.example")]).status, 200)
        XCTAssertEqual(try client.request("POST", "/api/tasks/x", json: "{}", headers: [("Origin", "http://127.0.0.1:\(server.port)")]).status, 200)

        let stranger = TestWatcher(server.wsURL, headers: [("Origin", "http://evil.example")])
        XCTAssertTrue(stranger.waitForClose())
        XCTAssertTrue(stranger.received.isEmpty)
        let friend = TestWatcher(server.wsURL, headers: [("Origin", "http://allowed.example")])
        friend.waitForSnapshot()
    }
}

/// DNS rebinding against a real server: a page on another name that resolves to 127.0.0.1 sends
/// its own name as Host, and gets 421 before anything is routed (POST and DELETE).
final class HostCheckTests: XCTestCase {
    private func send(_ request: String, to port: Int) throws -> String {
        let socket = try RawSocket(port: port, timeoutSeconds: 5)
        try socket.send(request)
        return String(decoding: socket.receiveSome().bytes, as: UTF8.self)
    }

    func testARebindingPageCanNeitherPublishNorDeleteNorWatch() throws {
        let server = try TestServer { $0.allowedHosts = ["progress.example.org"] }
        try server.post("/api/tasks/x", #"{"progress":0.25}"#)
        let evil = "Host: evil.example:\(server.port)\r\nOrigin: http://evil.example:\(server.port)"
        let body = #"{"progress":0.5}"#
        let publish = try send(
            "POST /api/tasks/x HTTP/1.1\r\n\(evil)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)",
            to: server.port)
        XCTAssertTrue(publish.hasPrefix("HTTP/1.1 421"), publish)
        XCTAssertTrue(publish.contains("misdirected_request") && publish.contains("allowedHosts"), publish)
        let delete = try send("DELETE /api/tasks/x HTTP/1.1\r\n\(evil)\r\n\r\n", to: server.port)
        XCTAssertTrue(delete.hasPrefix("HTTP/1.1 421"), delete)
        let page = try send("GET / HTTP/1.1\r\n\(evil)\r\n\r\n", to: server.port)
        XCTAssertTrue(page.hasPrefix("HTTP/1.1 421"), "static files too: \(page.prefix(40))")
        XCTAssertEqual(try server.task("x")?["progress"], .number(0.25), "the task was neither changed nor deleted")

        let upgrade =
            "GET /ws HTTP/1.1\r\nHost: %@\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        let refused = try send(upgrade.replacingOccurrences(of: "%@", with: "evil.example:\(server.port)"), to: server.port)
        XCTAssertFalse(refused.hasPrefix("HTTP/1.1 101"), refused)

        // The names that pass: an allowedHosts entry, localhost, a loopback literal.
        for host in ["progress.example.org:\(server.port)", "localhost:\(server.port)", "127.0.0.1:\(server.port)", "[::1]:\(server.port)"] {
            let answer = try send(
                "POST /api/tasks/x HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)",
                to: server.port)
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200"), "\(host): \(answer.prefix(60))")
            let accepted = try send(upgrade.replacingOccurrences(of: "%@", with: host), to: server.port)
            XCTAssertTrue(accepted.hasPrefix("HTTP/1.1 101"), "\(host): \(accepted.prefix(60))")
        }
    }
}

/// The local addresses with a socket listening on `port`, from the kernel's own tables.
func listeningSockets(port: Int) throws -> [String] {
    var addresses: [String] = []
    for fields in kernelTCPRows() {
        guard fields.count > 3, fields[3] == "0A" else { continue }
        let local = fields[1].split(separator: ":")
        guard local.count == 2, Int(local[1], radix: 16) == port else { continue }
        addresses.append(decodeProcAddress(String(local[0])))
    }
    return addresses
}

private func decodeProcAddress(_ hex: String) -> String {
    guard hex.count == 8, let value = UInt32(hex, radix: 16) else { return hex == String(repeating: "0", count: 32) ? "::" : "ipv6:\(hex)" }
    return [value & 0xFF, (value >> 8) & 0xFF, (value >> 16) & 0xFF, value >> 24].map(String.init).joined(separator: ".")
}

final class ParentTests: XCTestCase {
    func testAParentShowsItsChildrenWeightedByUnits() throws {
        let server = try TestServer()
        let watcher = TestWatcher(server.wsURL + "?watch=release")
        watcher.waitForSnapshot()
        try server.post("/api/tasks/release", #"{"title":"Release 3.1"}"#)
        try server.post("/api/tasks/release.build", #"{"parent":"release","completed":30,"total":100}"#)
        let afterTwo = try server.post("/api/tasks/release.docs", #"{"parent":"release","completed":10,"total":20}"#)
        XCTAssertEqual(afterTwo["task"]?["parent"], .string("release"))
        var parent = try JSONParser.parse(try server.http().request("GET", "/api/tasks/release").body)
        XCTAssertEqual(parent["completed"], .number(40))
        XCTAssertEqual(parent["total"], .number(120))
        XCTAssertEqual(parent["progress"], .number(40.0 / 120))
        let rolled = watcher.wait { $0.contains { $0.id == "release" && $0.number("completed") == 40 } }
        XCTAssertFalse(rolled.contains { $0.id == "release.build" }, "the parent's watcher hears of the parent, not its children")

        try server.post("/api/tasks/release.build", #"{"state":"done"}"#)
        parent = try JSONParser.parse(try server.http().request("GET", "/api/tasks/release").body)
        XCTAssertEqual(parent["progress"], .number(110.0 / 120), "a done child counts in full")

        XCTAssertEqual(try server.http().request("DELETE", "/api/tasks/release.docs").status, 200)
        parent = try JSONParser.parse(try server.http().request("GET", "/api/tasks/release").body)
        XCTAssertEqual(parent["progress"], .number(1))

        try server.post("/api/tasks/release", #"{"progress":0.5}"#)
        try server.post("/api/tasks/release.build", #"{"progress":0.2}"#)
        parent = try JSONParser.parse(try server.http().request("GET", "/api/tasks/release").body)
        XCTAssertEqual(parent["progress"], .number(0.5), "progress set on the parent itself wins over its children")
    }
}

final class MetricsTests: XCTestCase {
    func testMetricsCountTheServersWorkInPrometheusText() throws {
        let server = try TestServer()
        let watchers = (0..<3).map { _ in TestWatcher(server.wsURL) }
        watchers.forEach { $0.waitForSnapshot() }
        try server.post("/api/tasks/m.1", #"{"progress":0.5}"#)
        watchers.forEach { watcher in watcher.wait { $0.contains { $0.id == "m.1" } } }
        XCTAssertEqual(try server.http().request("POST", "/api/tasks/m.1", json: "{bad").status, 400)
        let response = try server.http().request("GET", "/metrics")
        XCTAssertEqual(response.status, 200)
        XCTAssertTrue(response.headers["content-type"]?.hasPrefix("text/plain") ?? false)
        var values: [String: Int] = [:]
        for line in response.text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            values[String(parts[0])] = Int(parts[1])
        }
        XCTAssertEqual(values["ringcast_watchers"], 3)
        XCTAssertEqual(values["ringcast_tasks"], 1)
        XCTAssertEqual(values["ringcast_events_published_total"], 1)
        XCTAssertEqual(values["ringcast_http_errors_total"], 1)
        XCTAssertEqual(values["ringcast_events_sent_total"], 3 * 3, "hello, snapshot and the event, to each of three")
        XCTAssertTrue(response.text.contains("# TYPE ringcast_frames_sent_total counter"))
    }
}
