import Foundation
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

/// What a client writes in a forwarding header never makes it loopback: every form a hostile
/// client might send, straight to a server that trusts the loopback peer sending it.
final class ForwardedAddressTests: XCTestCase {
    /// Forms of a forwarding header a client may write itself, none of which names a loopback client.
    static let hostileForms: [(String, String)] = [
        ("X-Forwarded-For", "x"), ("X-Forwarded-For", "1.2.3"), ("X-Forwarded-For", "x, 203.0.113.7"),
        ("X-Forwarded-For", "unknown, 127.0.0.1, 203.0.113.7"), ("X-Forwarded-For", ""), ("X-Forwarded-For", "127.0.0.1:x"),
        ("Forwarded", "for=127.0.0.1"), ("Forwarded", "proto=https;host=ringcast.example"), ("Forwarded", "for=127.0.0.1, by=x"),
    ]

    func testEveryHostileFormFromATrustedPeerIsARemoteClient() throws {
        let server = try TestServer { $0.trustedProxies = ["127.0.0.1"] }
        // The proxy naming a client on this machine: believed.
        let local = [("X-Forwarded-For", "127.0.0.1")]
        XCTAssertEqual(try server.http().request("POST", "/api/tasks/ci.build", json: #"{"title":"Build"}"#, headers: local).status, 200)
        try assertLoopback(port: server.port, headers: local)
        try assertLoopback(port: server.port, headers: [("X-Forwarded-For", "203.0.113.7, 127.0.0.5, 127.0.0.1")], "the rightmost untrusted entry")

        for form in Self.hostileForms { try assertRemote(port: server.port, headers: [form], "\(form)") }
        // The normal chains: a remote client, and a remote client behind a second proxy.
        try assertRemote(port: server.port, headers: [("X-Forwarded-For", "203.0.113.7")], "a remote client")
        try assertRemote(port: server.port, headers: [("X-Forwarded-For", "127.0.0.1, 203.0.113.7, 127.0.0.1")], "behind two proxies")
        // A trusted proxy that names no one: remote, not the proxy's own loopback address.
        try assertRemote(port: server.port, headers: [], "no forwarding header")
        // Both headers: only X-Forwarded-For counts, so a client's Forwarded cannot win.
        try assertRemote(port: server.port, headers: [("X-Forwarded-For", "203.0.113.7"), ("Forwarded", "for=127.0.0.1")], "both")
    }

    func testWithForwardedConfiguredOnlyItsForElementsCount() throws {
        let server = try TestServer {
            $0.trustedProxies = ["127.0.0.0/8"]
            $0.forwardedHeader = .forwarded
        }
        try assertLoopback(port: server.port, headers: [("Forwarded", #"for="[::1]:4711";proto=https"#)])
        try assertLoopback(port: server.port, headers: [("Forwarded", "for=127.0.0.1, for=127.0.0.5")], "trusted hops only: the leftmost")
        for headers in [
            [("Forwarded", "for=203.0.113.7")], [("Forwarded", "for=203.0.113.7, for=127.0.0.5")], [("Forwarded", "proto=https")],
            [("Forwarded", "for=unknown")], [("Forwarded", "for=_hidden")],
            [("X-Forwarded-For", "127.0.0.1")], [("Forwarded", "for=127.0.0.1;proto=http, proto=https")],
        ] {
            try assertRemote(port: server.port, headers: headers, "\(headers)")
        }
    }

    func testAnUntrustedPeerIsItsOwnAddressWhateverItWrites() throws {
        let server = try TestServer { $0.trustedProxies = ["127.0.0.2"] }
        try assertLoopback(port: server.port, headers: [("X-Forwarded-For", "203.0.113.7")], "127.0.0.1 is no proxy here")
    }
}

/// Ringcast behind Debian's nginx, configured with the README's recipe (its `map` and `location`
/// taken from README.md as written), a client reaching nginx from another machine (the address
/// nginx learns from a PROXY protocol line, as behind a TCP balancer: no traffic leaves loopback)
/// is remote whatever forwarding header it sends; a client on this machine stays loopback.
final class NginxProxyTests: XCTestCase {
    func testEveryHostileFormThroughTheReadmesNginxRecipeIsARemoteClient() throws {
        let server = try TestServer { $0.trustedProxies = ["127.0.0.2"] }
        XCTAssertEqual(try server.http().request("POST", "/api/tasks/ci.build", json: #"{"title":"Build"}"#).status, 200)
        let nginx = try NginxProcess(upstreamPort: server.port)
        defer { nginx.stop() }

        // A client on this machine, through nginx: loopback, so the recipe's header is believed.
        try assertLoopback(port: nginx.port, headers: [])
        try assertLoopback(port: nginx.balancedPort, headers: [], remoteAddress: "127.0.0.9")
        // A client elsewhere, with nothing, and with each hostile form.
        try assertRemote(port: nginx.balancedPort, headers: [], remoteAddress: "203.0.113.7", "no header")
        for form in ForwardedAddressTests.hostileForms + [
            ("X-Forwarded-For", "127.0.0.1"), ("X-Forwarded-For", "127.0.0.1, 127.0.0.2"), ("Forwarded", "for=\"[::1]\""),
        ] {
            try assertRemote(port: nginx.balancedPort, headers: [form], remoteAddress: "203.0.113.7", "\(form) through nginx")
        }
        try assertRemote(
            port: nginx.balancedPort, headers: [("X-Forwarded-For", "127.0.0.1"), ("Forwarded", "for=127.0.0.1")], remoteAddress: "203.0.113.7",
            "both through nginx")
        // A space before a header's colon (RFC 9112 §5.1), which lws cannot see, nginx refuses itself.
        XCTAssertEqual(
            try status(port: nginx.port, "POST", "/api/tasks/ci.spaced", headers: [("Transfer-Encoding ", "chunked")], body: nil), 400)
        XCTAssertNil(try server.task("ci.spaced"))
    }
}

// MARK: - Asking as a client would

/// A status line's code, from a request written by hand (after a PROXY protocol line that names
/// the client, when `remoteAddress` is given).
private func status(
    port: Int, _ method: String, _ path: String, headers: [(String, String)], body: String? = nil, remoteAddress: String? = nil
) throws -> Int {
    let socket = try RawSocket(port: port)
    var text = proxyLine(remoteAddress, port: port) + "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
    text += "\r\n" + (body ?? "")
    try socket.send(text)
    let head = String(decoding: socket.receive(until: Array("\r\n".utf8)), as: UTF8.self)
    guard head.hasPrefix("HTTP/1.1 "), let code = Int(head.dropFirst(9).prefix(3)) else { throw RawSocketFailure("no status line: \(head)") }
    return code
}

/// What a watcher is sent in its first moments: the text of the frames until an `error` or a
/// `snapshot` has come (or nothing more comes).
private func watcherFrames(port: Int, headers: [(String, String)], remoteAddress: String? = nil) throws -> String {
    let socket = try RawSocket(port: port, timeoutSeconds: 3)
    var text = proxyLine(remoteAddress, port: port) + "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    text += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    try socket.send(text + "\r\n")
    let head = String(decoding: socket.receive(until: Array("\r\n\r\n".utf8)), as: UTF8.self)
    guard head.hasPrefix("HTTP/1.1 101") else { throw RawSocketFailure("no upgrade: \(head)") }
    var received: [UInt8] = []
    for _ in 0..<50 {
        let text = String(decoding: received, as: UTF8.self)
        if text.contains(#""type":"error""#) || text.contains(#""type":"snapshot""#) { break }
        let (bytes, closed) = socket.receiveSome()
        received += bytes
        if bytes.isEmpty || closed { break }
    }
    return String(decoding: received, as: UTF8.self)
}

private func proxyLine(_ remoteAddress: String?, port: Int) -> String {
    remoteAddress.map { "PROXY TCP4 \($0) 127.0.0.1 40000 \(port)\r\n" } ?? ""
}

/// Nothing without a token: no task list, no publishing, no /metrics, no snapshot on /ws.
private func assertRemote(
    port: Int, headers: [(String, String)], remoteAddress: String? = nil, _ message: String = "", file: StaticString = #filePath,
    line: UInt = #line
) throws {
    XCTAssertEqual(try status(port: port, "GET", "/api/tasks", headers: headers, remoteAddress: remoteAddress), 401, message, file: file, line: line)
    XCTAssertEqual(
        try status(port: port, "GET", "/api/tasks/ci.build", headers: headers, remoteAddress: remoteAddress), 401, message, file: file, line: line)
    XCTAssertEqual(
        try status(port: port, "POST", "/api/tasks/ci.build", headers: headers, body: #"{"state":"failed"}"#, remoteAddress: remoteAddress), 401,
        message, file: file, line: line)
    XCTAssertTrue(
        [401, 403].contains(try status(port: port, "GET", "/metrics", headers: headers, remoteAddress: remoteAddress)), message, file: file,
        line: line)
    let frames = try watcherFrames(port: port, headers: headers, remoteAddress: remoteAddress)
    XCTAssertFalse(frames.contains("snapshot"), "\(message): \(frames)", file: file, line: line)
    XCTAssertTrue(frames.contains(#""error":"unauthorized""#), "\(message): \(frames)", file: file, line: line)
}

/// Everything anonymous loopback may: the task list and a task's snapshot on /ws.
private func assertLoopback(
    port: Int, headers: [(String, String)], remoteAddress: String? = nil, _ message: String = "", file: StaticString = #filePath,
    line: UInt = #line
) throws {
    XCTAssertEqual(try status(port: port, "GET", "/api/tasks", headers: headers, remoteAddress: remoteAddress), 200, message, file: file, line: line)
    XCTAssertEqual(try status(port: port, "GET", "/metrics", headers: headers, remoteAddress: remoteAddress), 200, message, file: file, line: line)
    let frames = try watcherFrames(port: port, headers: headers, remoteAddress: remoteAddress)
    XCTAssertTrue(frames.contains(#""type":"snapshot""#), "\(message): \(frames)", file: file, line: line)
}

private struct RawSocketFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
