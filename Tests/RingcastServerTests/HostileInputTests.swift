import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

/// Bad input gets a clear error and hurts no one else. Every case runs against a real server while
/// a watcher on another connection keeps receiving: after each, an accepted update (a canary) must
/// reach it, and at the end it must have seen every canary, in order.
final class HostileInputTests: XCTestCase {
    private var server: TestServer!
    private var watcher: TestWatcher!
    private var canaries = 0
    private let log = LogLines()

    override func setUpWithError() throws {
        server = try TestServer(logger: Logger(level: .info) { [log] in log.append($0) }) { config in
            config.publicDir = emptyPublicDirectory
            config.maxMessageBytes = 64 * 1024
            config.handshakeTimeoutSeconds = 1
        }
        watcher = TestWatcher(server.wsURL + "?watch=canary")
        watcher.waitForSnapshot()
    }

    override func tearDown() {
        if let watcher {
            let seen = watcher.events(for: "canary").compactMap { $0.number("completed") }
            XCTAssertEqual(seen, (1...max(canaries, 1)).prefix(canaries).map(Double.init), "the watcher saw every accepted update, in order")
        }
        watcher = nil
        server = nil
    }

    /// An accepted update after a hostile one: it must reach the watcher on the other connection.
    private func canary(file: StaticString = #filePath, line: UInt = #line) throws {
        canaries += 1
        let expected = Double(canaries)
        try server.post("/api/tasks/canary", #"{"completed":\#(canaries),"total":100000}"#, file: file, line: line)
        watcher.wait(file: file, line: line) { $0.contains { $0.id == "canary" && $0.number("completed") == expected } }
    }

    private func assertError(_ response: HTTPResponse, _ status: Int, _ code: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(response.status, status, response.text, file: file, line: line)
        let body = try? JSONParser.parse(response.body)
        XCTAssertEqual(body?["error"], .string(code), response.text, file: file, line: line)
        if case .string(let message)? = body?["message"] {
            XCTAssertFalse(message.isEmpty, file: file, line: line)
        } else {
            XCTFail("no message", file: file, line: line)
        }
    }

    // MARK: HTTP bodies

    func testMalformedWrongAndOutOfRangeBodiesGetTheirOwnErrors() throws {
        let http = server.http()
        let cases: [(String, String, Int, String)] = [
            ("/api/tasks/x", "{\"progress\":", 400, "invalid_json"),
            ("/api/tasks/x", "{\"progress\":NaN}", 400, "invalid_json"),
            ("/api/tasks/x", "{\"progress\":Infinity}", 400, "invalid_json"),
            ("/api/tasks/x", "{\"progress\":\"half\"}", 422, "invalid_field"),
            ("/api/tasks/x", "{\"progress\":-0.1}", 422, "invalid_field"),
            ("/api/tasks/x", "{\"progress\":1.5}", 422, "invalid_field"),
            ("/api/tasks/x", "{\"progress\":1e400}", 400, "invalid_json"),
            ("/api/tasks/x", "{\"title\":7}", 422, "invalid_field"),
            ("/api/tasks/x", "{\"colour\":\"red\"}", 422, "unknown_field"),
            ("/api/tasks/x", "[1,2]", 400, "invalid_json"),
            ("/api/tasks/x", "\"\\ud800\"", 400, "invalid_json"),
            ("/api/tasks/x", String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000), 400, "invalid_json"),
            ("/api/events", #"[{"type":"explode","id":"x"}]"#, 400, "invalid_event"),
            ("/api/events", #"[{"type":"update"}]"#, 422, "missing_field"),
            ("/api/events", #"{"type":"update","id":"bad id"}"#, 400, "invalid_id"),
            ("/api/tasks/" + String(repeating: "a", count: 129), "{}", 400, "invalid_id"),
            ("/api/tasks/.hidden", "{}", 400, "invalid_id"),
            ("/api/tasks/caf%C3%A9", "{}", 400, "invalid_id"),
        ]
        for (path, body, status, code) in cases {
            assertError(try http.request("POST", path, json: body), status, code)
            try canary()
        }
        XCTAssertNil(try server.task("x"), "no refused body changed anything")
        // Invalid UTF-8 in a body.
        assertError(try http.request("POST", "/api/tasks/x", body: [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]), 400, "invalid_json")
        try canary()
    }

    func testABodyOverTheLimitIsRefusedWith413() throws {
        let big = "{\"title\":\"" + String(repeating: "x", count: 70 * 1024) + "\"}"
        assertError(try server.http().request("POST", "/api/tasks/x", json: big), 413, "body_too_large")
        try canary()
    }

    // MARK: WebSocket messages

    func testBadWebSocketMessagesGetErrorEventsOrTheRightCloseCode() throws {
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }
        for bad in ["{nope", #"{"type":"explode","id":"x"}"#, #"{"type":"update","id":"x","progress":2}"#, #"{"type":"update","id":"../x"}"#] {
            publisher.connection.send(bad)
        }
        publisher.wait { $0.filter { $0.type == "error" }.count == 4 }
        XCTAssertEqual(
            publisher.received.filter { $0.type == "error" }.compactMap { $0.string("error") },
            ["invalid_json", "invalid_event", "invalid_field", "invalid_id"])
        try canary()

        // A binary frame: an error event, and the socket stays.
        let binary = try RawSocket(port: server.port)
        XCTAssertTrue(try binary.upgrade("/ws?mode=publish").hasPrefix("HTTP/1.1 101"))
        try binary.send(RawSocket.frame(Array(#"{"type":"update","id":"canary.bin"}"#.utf8), opcode: 2))
        let answer = String(decoding: binary.receive(until: Array("not part of the protocol".utf8)), as: UTF8.self)
        XCTAssertTrue(answer.contains("binary frames are not part of the protocol"), answer)
        try canary()

        // Invalid UTF-8 in a text frame: close 1007.
        let invalid = try RawSocket(port: server.port)
        XCTAssertTrue(try invalid.upgrade("/ws?mode=publish").hasPrefix("HTTP/1.1 101"))
        try invalid.send(RawSocket.frame([0x7B, 0x22, 0xC3, 0x28, 0x22, 0x7D]))
        XCTAssertEqual(invalid.receiveCloseCode(), 1007, "invalid UTF-8 closes with 1007")
        try canary()
    }

    func testAMessageOverTheLimitIsRefusedWithoutBeingBuffered() throws {
        let socket = try RawSocket(port: server.port, timeoutSeconds: 10)
        XCTAssertTrue(try socket.upgrade("/ws?mode=publish").hasPrefix("HTTP/1.1 101"))
        _ = socket.receive(until: Array("}".utf8))  // hello
        let before = residentKiB()
        // 16 MiB in 256 fragments of 64 KiB against a 64 KiB limit.
        let piece = [UInt8](repeating: 0x20, count: 64 * 1024)
        try socket.send(RawSocket.frame(Array("[".utf8) + piece, final: false))
        let middle = RawSocket.frame(piece, opcode: 0, final: false)
        for _ in 0..<254 { try socket.send(middle) }
        try socket.send(RawSocket.frame(piece + Array("]".utf8), opcode: 0, final: true))
        let answer = String(decoding: socket.receive(until: Array("body_too_large".utf8)), as: UTF8.self)
        XCTAssertTrue(answer.contains("body_too_large"), "an error event names the limit: \(answer.suffix(200))")
        let grown = residentKiB() - before
        XCTAssertLessThan(grown, 8 * 1024, "16 MiB sent; the server kept \(grown) KiB of it (RSS)")
        try canary()
    }

    // MARK: Connections

    func testAHeaderFloodIsRefusedAndHurtsNoOne() throws {
        let flood = try RawSocket(port: server.port)
        var request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for index in 0..<4000 { request += "X-Flood-\(index): \(String(repeating: "y", count: 40))\r\n" }
        try? flood.send(request + "\r\n")
        let answer = flood.receive()
        let head = String(decoding: answer.bytes.prefix(40), as: UTF8.self)
        XCTAssertTrue(answer.closed, "a request of 200 KiB of headers is not served: \(head)")
        XCTAssertFalse(head.hasPrefix("HTTP/1.1 200"), head)
        try canary()
    }

    /// lws 4.1.6 spun for good on a POST pipelined after a POST with a body (the raw reference
    /// server does too), and lost the first answer of two pipelined GETs: such a connection is
    /// closed, and the server goes on serving everyone else.
    func testPipelinedRequestsCloseTheirConnectionAndFreezeNothing() throws {
        let post = "POST /api/tasks/piped HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 16\r\n\r\n{\"progress\":0.5}"
        let get = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        let getWithBody = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 16\r\n\r\n0123456789abcdef"
        for pipeline in [post + post, get + get, getWithBody + get, getWithBody + getWithBody] {
            let socket = try RawSocket(port: server.port, timeoutSeconds: 5)
            try socket.send(pipeline)
            XCTAssertTrue(socket.receive().closed, "a pipelining connection is closed: \(pipeline.prefix(30))")
            try canary()
        }
        // One request at a time on a kept-alive connection still works, a GET with a body among them.
        let keptAlive = try RawSocket(port: server.port, timeoutSeconds: 5)
        for request in [getWithBody, get, post] {
            try keptAlive.send(request)
            let answer = String(decoding: keptAlive.receiveSome().bytes, as: UTF8.self)
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200"), answer)
        }
        try canary()
    }

    /// lws ends the request line at a percent-encoded CR or LF, so the path that reached the API
    /// was a shorter one (`f%0Dx/hide` hid task `f`): refused whole instead.
    func testAPercentEncodedLineBreakInThePathIsRefusedNotShortened() throws {
        try server.post("/api/tasks/f", #"{"progress":0.25}"#)
        for target in ["/api/tasks/f%0Dx/hide", "/api/tasks/f%0Ax", "/api/tasks?watch=f%0Ax"] {
            let socket = try RawSocket(port: server.port, timeoutSeconds: 5)
            try socket.send("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            let answer = String(decoding: socket.receive().bytes, as: UTF8.self)
            XCTAssertTrue(answer.contains(" 400 ") && answer.contains("invalid_request"), answer)
        }
        let task = try server.task("f")
        XCTAssertEqual(task?["visible"], .bool(true), "task f was not hidden")
        XCTAssertEqual(task?["progress"], .number(0.25), "task f was not changed")
        try canary()
    }

    /// The query is split at the `=` byte: in `watch=🏻` the `=` and the modifier after it are one
    /// Character, and the watcher used to get every task instead of an error.
    func testAQueryValueStartingWithACombiningMarkKeepsItsName() throws {
        let response = try server.http().request("GET", "/api/tasks?watch=%F0%9F%8F%BB")
        assertError(response, 400, "invalid_pattern")
        try canary()
    }

    func testAHandshakeThatNeverFinishesIsTimedOut() throws {
        let stalled = try RawSocket(port: server.port, timeoutSeconds: 10)
        try stalled.send("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
        let began = Date()
        let answer = stalled.receive()
        let waited = Date().timeIntervalSince(began)
        XCTAssertTrue(answer.closed, "the server closed the half-made handshake")
        XCTAssertGreaterThanOrEqual(waited, 0.9, "not before handshakeTimeoutSeconds")
        XCTAssertLessThan(waited, 5, "timed out after about handshakeTimeoutSeconds (1 s here; 10 by default)")
        try canary()
    }

    func testFiveThousandConnectionsOpenedAndDroppedAbruptly() throws {
        var sockets: [RawSocket] = []
        for index in 0..<5000 {
            let socket = try RawSocket(port: server.port)
            switch index % 4 {
            case 0: try? socket.send("POST /api/tasks/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prog")
            case 1:
                try? socket.send(
                    "GET /ws?watch=* HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            case 2: try? socket.send("GET /healthz HTTP/1.1\r\nHo")
            default: break
            }
            sockets.append(socket)
            if sockets.count == 500 {
                for socket in sockets { socket.reset() }
                sockets = []
                try canary()
            }
        }
        for socket in sockets { socket.reset() }
        try canary()
        XCTAssertTrue(eventually(timeout: 10) { (try? server.http().request("GET", "/healthz").status) == 200 })
        let health = try JSONParser.parse(try server.http().request("GET", "/healthz").body)
        XCTAssertTrue(
            eventually(timeout: 10) {
                (try? JSONParser.parse(try server.http().request("GET", "/healthz").body))?["watchers"] == .number(1)
            }, "the dropped watchers are gone again: \(health)")
    }
}

/// Log lines collected from the server's logger, any thread.
final class LogLines: @unchecked Sendable {
    // @unchecked Sendable: `lines` is touched only under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// A publisher past `maxPublishRate` and an address past `maxConnectionsPerAddress`: refused, and
/// logged once per offender, not once per message.
final class LimitTests: XCTestCase {
    func testAPublisherPastItsRateIsRefusedAndLoggedOnce() throws {
        let log = LogLines()
        let server = try TestServer(logger: Logger(level: .info) { log.append($0) }) { config in
            config.publicDir = emptyPublicDirectory
            config.maxPublishRate = 50
        }
        let http = server.http()
        var statuses: [Int] = []
        var refused: HTTPResponse?
        for index in 0..<200 {
            let answer = try http.request("POST", "/api/tasks/flood", json: #"{"completed":\#(index),"total":200}"#)
            statuses.append(answer.status)
            if answer.status == 429, refused == nil { refused = answer }
        }
        XCTAssertEqual(statuses.prefix(50).filter { $0 == 200 }.count, 50, "a second's worth is allowed at once")
        XCTAssertTrue(statuses.contains(429), "past 50 events a second: 429")
        // The first refusal says why. (Not a request made after the loop: the allowance refills at
        // 50 a second, one every 20 ms, and a slow request, as under a sanitizer, may find one.)
        XCTAssertTrue(refused?.text.contains("maxPublishRate") == true, refused?.text ?? "no 429")
        XCTAssertEqual(log.all.filter { $0.contains("maxPublishRate") }.count, 1, "logged once, not per request: \(log.all)")
        // Another connection has an allowance of its own; reads are never limited.
        XCTAssertEqual(try server.http().request("POST", "/api/tasks/other", json: "{}").status, 200)
        XCTAssertEqual(try http.request("GET", "/api/tasks/flood").status, 200)

        // A WebSocket publisher past its rate is closed with 1008.
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }
        let batch = "[" + (0..<120).map { #"{"type":"update","id":"ws.flood","completed":\#($0),"total":200}"# }.joined(separator: ",") + "]"
        publisher.connection.send(batch)
        publisher.connection.send(#"{"type":"update","id":"ws.flood","completed":1,"total":200}"#)
        XCTAssertTrue(publisher.waitForClose(timeout: 5), "the socket was closed")
        XCTAssertEqual(publisher.connection.peerCloseCode, 1008)
    }

    func testAnAddressPastItsConnectionLimitIsRefusedAtAccept() throws {
        let log = LogLines()
        let server = try TestServer(logger: Logger(level: .info) { log.append($0) }) { config in
            config.publicDir = emptyPublicDirectory
            config.maxConnectionsPerAddress = 5
            config.limitLoopback = true
        }
        // Five kept-alive connections, each answered once, so the server has accepted every one
        // (with several service threads, accepts on different threads come in any order).
        let held = try (0..<5).map { _ -> RawSocket in
            let socket = try RawSocket(port: server.port)
            try socket.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            XCTAssertFalse(socket.receive(until: Array("}".utf8)).isEmpty, "connection within the limit is served")
            return socket
        }
        let sixth = try RawSocket(port: server.port, timeoutSeconds: 2)
        try? sixth.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let refused = sixth.receive()
        XCTAssertTrue(refused.closed && refused.bytes.isEmpty, "the sixth connection from 127.0.0.1 was closed at accept")
        XCTAssertTrue(log.all.contains { $0.contains("maxConnectionsPerAddress") }, "\(log.all)")
        for _ in 0..<20 {
            let extra = try RawSocket(port: server.port, timeoutSeconds: 1)
            XCTAssertTrue(extra.receive().closed)
        }
        XCTAssertEqual(log.all.filter { $0.contains("maxConnectionsPerAddress") }.count, 1, "logged once per offender: \(log.all)")
        for socket in held { socket.reset() }
        XCTAssertTrue(
            eventually(timeout: 5) { (try? server.http().request("GET", "/healthz").status) == 200 },
            "once they close, the address may connect again")
        let defaults = ServerConfig()
        XCTAssertNil(defaults.maxConnectionsPerAddress, "derived from the open-file limit")
        XCTAssertTrue(defaults.limitLoopback, "loopback is limited too: a local client may exhaust descriptors like any other")
        let limits = server.server.connectionLimits
        XCTAssertEqual(limits.perAddress, 5, "as set")
        XCTAssertLessThan(limits.total, 20_000, "below the open-file limit")
    }

    /// Unset limits follow the open-file limit: a total below it, with a reserve, and a share per
    /// address below the total.
    func testConnectionLimitsAreDerivedFromTheOpenFileLimit() {
        var config = ServerConfig()
        XCTAssertEqual(ConnectionLimits.derived(from: config, openFileLimit: 256, inUse: 40), ConnectionLimits(total: 148, perAddress: 74))
        XCTAssertEqual(
            ConnectionLimits.derived(from: config, openFileLimit: 20_000, inUse: 100), ConnectionLimits(total: 19_524, perAddress: 1024),
            "19 000 watchers fit at this machine's limit")
        // Each webhook attempt that may be in flight holds a descriptor of its own.
        var hooked = config
        hooked.webhooks = [WebhookRule(url: "http://127.0.0.1:9/h", secret: "s", concurrency: 16)]
        XCTAssertEqual(ConnectionLimits.derived(from: hooked, openFileLimit: 20_000, inUse: 100).total, 19_508)
        XCTAssertEqual(ConnectionLimits.derived(from: config, openFileLimit: nil, inUse: 100), ConnectionLimits(total: .max, perAddress: 1024))
        config.maxConnections = 50
        config.maxConnectionsPerAddress = 0
        XCTAssertEqual(ConnectionLimits.derived(from: config, openFileLimit: 256, inUse: 40), ConnectionLimits(total: 50, perAddress: 0))
    }
}
