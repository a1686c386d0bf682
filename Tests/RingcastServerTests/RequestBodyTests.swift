import Foundation
import RingcastCore
import RingcastTestSupport
import XCTest

/// A request body is decoded or refused, never dropped: chunked bodies from real clients are applied
/// exactly as the same JSON sent with a Content-Length, and every framing the server cannot read
/// exactly gets its 4xx/5xx with the error body, applies nothing, and closes the connection.
final class RequestBodyTests: XCTestCase {
    private let update = #"{"title":"Build 42","state":"failed","detail":"linker error","progress":0.5}"#
    private let lines = #"{"lines":["compiling a.c","ld: undefined symbol"]}"#

    /// The task as a client compares it: without what differs by id and time.
    private func comparable(_ server: TestServer, _ id: String) throws -> [String: JSONValue] {
        guard case .object(let fields)? = try server.task(id) else { return [:] }
        var kept: [String: JSONValue] = [:]
        for (key, value) in fields where !["id", "updatedAt", "startedAt", "seq"].contains(key) { kept[key] = value }
        return kept
    }

    private func log(_ server: TestServer, _ id: String) throws -> JSONValue? {
        try JSONParser.parse(try server.http().request("GET", "/api/tasks/\(id)/log").body)["lines"]
    }

    func testChunkedBodiesFromPythonAndCurlAreAppliedAsTheSameJSONWithALength() throws {
        let server = try TestServer()
        try server.post("/api/tasks/sent.length", update)
        try server.post("/api/tasks/sent.length/log", lines)

        // Python's http.client sends a generator body chunked, one chunk a piece.
        let python = """
            import http.client, sys
            port, path, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
            def pieces():
                yield body[:7]
                yield body[7:]
            connection = http.client.HTTPConnection("127.0.0.1", port)
            connection.request("POST", path, body=pieces(), headers={"Content-Type": "application/json"})
            answer = connection.getresponse()
            print(answer.status, answer.getheader("Connection"), answer.read().decode())
            """
        for (path, body) in [("/api/tasks/sent.python", update), ("/api/tasks/sent.python/log", lines)] {
            let sent = try runToEnd("/usr/bin/env", ["python3", "-c", python, String(server.port), path, body])
            XCTAssertEqual(sent.status, 0, sent.output)
            XCTAssertTrue(sent.output.hasPrefix("200 close {"), "\(path): \(sent.output)")
        }
        for (path, body) in [("/api/tasks/sent.curl", update), ("/api/tasks/sent.curl/log", lines)] {
            let sent = try runToEnd(
                "/usr/bin/curl",
                ["-sS", "-v", "-H", "Transfer-Encoding: chunked", "-H", "Content-Type: application/json", "-d", body, server.httpURL + path])
            XCTAssertEqual(sent.status, 0, sent.output)
            XCTAssertTrue(sent.output.contains("> Transfer-Encoding: chunked"), "curl sent chunks: \(sent.output)")
            XCTAssertTrue(sent.output.contains("< HTTP/1.1 200 OK"), "\(path): \(sent.output)")
        }

        let expected = try comparable(server, "sent.length")
        XCTAssertEqual(expected["state"], .string("failed"))
        XCTAssertEqual(expected["detail"], .string("linker error"))
        XCTAssertEqual(expected["logCount"], .number(2))
        for id in ["sent.python", "sent.curl"] {
            XCTAssertEqual(try comparable(server, id), expected, id)
            XCTAssertEqual(try log(server, id), try log(server, "sent.length"), id)
        }
    }

    /// Sends one request as raw bytes and reads until the server closes: its answer, and whether it closed.
    private func exchange(_ server: TestServer, _ request: String) throws -> (answer: HTTPAnswer, closed: Bool) {
        let socket = try RawSocket(port: server.port)
        try? socket.send(request)  // the server may close before the whole of a refused body is in
        let received = socket.receive()
        var decoder = HTTPAnswerDecoder(maxBodyBytes: 1 << 16)
        decoder.append(received.bytes)
        let answer = try XCTUnwrap(try decoder.next(closed: true), "no answer to \(request.prefix(80))")
        return (answer, received.closed)
    }

    func testEachBadFramingIsRefusedWithTheErrorBodyAndNothingIsApplied() throws {
        let server = try TestServer { $0.maxMessageBytes = 4096 }
        try server.post("/api/tasks/kept", #"{"title":"Kept"}"#)
        let body = #"{"state":"failed","detail":"must not land"}"#
        let chunk = String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n"
        let big = String(repeating: "x", count: 3000)
        let cases: [(label: String, request: String, status: Int, code: String, field: String?)] = [
            (
                "Content-Length: -1", "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n" + body, 400, "invalid_request",
                "Content-Length"
            ),
            (
                "Content-Length: abc", "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n" + body, 400,
                "invalid_request", "Content-Length"
            ),
            (
                "Content-Length beside chunked",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk,
                400, "invalid_request", "Content-Length"
            ),
            (
                "gzip, chunked", "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunk, 501,
                "not_implemented", "Transfer-Encoding"
            ),
            (
                "gzip alone", "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n" + body, 400, "invalid_request",
                "Transfer-Encoding"
            ),
            (
                "chunked on HTTP/1.0", "POST /api/tasks/bad HTTP/1.0\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk, 400,
                "invalid_request",
                "Transfer-Encoding"
            ),
            (
                "a chunk size of -5", "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n" + body, 400,
                "invalid_request", "Transfer-Encoding"
            ),
            (
                "a chunk without its CRLF",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":1}\r\n0\r\n\r\n", 400,
                "invalid_request", "Transfer-Encoding"
            ),
            (
                "a chunk of 7fffffffffffffff",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n" + body, 413,
                "body_too_large", nil
            ),
            (
                "chunks past maxMessageBytes decoded",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nbb8\r\n\(big)\r\nbb8\r\n\(big)\r\n0\r\n\r\n",
                413,
                "body_too_large", nil
            ),
            (
                "a Content-Length of 20 digits",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 00000000000000000043\r\n\r\n" + body,
                400, "invalid_request", "Content-Length"
            ),
            (
                "a Content-Length past maxMessageBytes, its body sent",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 6000\r\n\r\n" + big + big, 413, "body_too_large", nil
            ),
            (
                "chunk lines ended by LF alone",
                "POST /api/tasks/bad HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\(String(body.utf8.count, radix: 16))\n\(body)\n0\n\n",
                400, "invalid_request", "Transfer-Encoding"
            ),
            ("a batch with no length at all", "POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 411, "length_required", nil),
            ("a log with no length at all", "POST /api/tasks/kept/log HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 411, "length_required", nil),
            (
                "a DELETE with chunks", "DELETE /api/tasks/kept HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
                "invalid_request", "Transfer-Encoding"
            ),
        ]
        for item in cases {
            let seq = try server.seq()
            let (answer, closed) = try exchange(server, item.request)
            XCTAssertEqual(answer.status, item.status, "\(item.label): \(String(decoding: answer.body, as: UTF8.self))")
            let error = try JSONParser.parse(answer.body)
            XCTAssertEqual(error["error"], .string(item.code), item.label)
            XCTAssertEqual(error["field"], item.field.map(JSONValue.string) ?? .null, item.label)
            guard case .string(let message)? = error["message"] else { return XCTFail("\(item.label): no message") }
            XCTAssertFalse(message.isEmpty, item.label)
            XCTAssertEqual(answer.headers["content-type"], "application/json", item.label)
            XCTAssertEqual(answer.headers["connection"], "close", item.label)
            XCTAssertTrue(closed, "\(item.label): the connection stays open after a framing it could not read")
            XCTAssertEqual(try server.seq(), seq, "\(item.label) changed something")
            XCTAssertNil(try server.task("bad"), item.label)
        }
        XCTAssertEqual(try log(server, "kept"), .array([]), "the log refused for its framing got no line")
        XCTAssertNotNil(try server.task("kept"), "the DELETE refused for its framing removed nothing")
    }

    func testABodyLessPostIsAppliedAndItsConnectionClosesWhileALengthKeepsItAlive() throws {
        let server = try TestServer()
        try server.post("/api/tasks/shown", #"{"title":"Shown"}"#)
        // `curl -X POST …/hide` sends neither length nor chunks: no body, as RFC 9112 says, and the
        // endpoint takes none.
        let (hidden, closed) = try exchange(server, "POST /api/tasks/shown/hide HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertEqual(hidden.status, 200, String(decoding: hidden.body, as: UTF8.self))
        XCTAssertEqual(hidden.headers["connection"], "close")
        XCTAssertTrue(closed)
        XCTAssertEqual(try server.task("shown")?["visible"], .bool(false))

        let socket = try RawSocket(port: server.port)
        for progress in ["0.25", "0.5"] {
            let body = #"{"progress":\#(progress)}"#
            try socket.send("POST /api/tasks/alive HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
            let answer = socket.receive(until: Array("}}".utf8))
            XCTAssertTrue(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200"), String(decoding: answer, as: UTF8.self))
            XCTAssertFalse(String(decoding: answer, as: UTF8.self).lowercased().contains("connection: close"))
        }
        XCTAssertEqual(try server.task("alive")?["progress"], .number(0.5), "the second request on the kept-alive connection was applied")
    }

    func testAChunkedBodyCutOffByItsClientAppliesNothing() throws {
        let server = try TestServer()
        let seq = try server.seq()
        do {
            let socket = try RawSocket(port: server.port, timeoutSeconds: 1)
            try socket.send("POST /api/tasks/cut HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"state\":\"failed\"")
            // Before its last chunk the request is not answered (it used to be, 200, with the body dropped).
            let early = socket.receiveSome()
            XCTAssertTrue(early.bytes.isEmpty && !early.closed, "answered before the body was in: \(String(decoding: early.bytes, as: UTF8.self))")
        }
        // The socket is closed; the server serves on.
        XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200)
        XCTAssertEqual(try server.seq(), seq)
        XCTAssertNil(try server.task("cut"))
    }
    /// A body is due whole within handshakeTimeoutSeconds of its head, however often its bytes
    /// come: one dripped a byte every half second is closed at that deadline, not held open for
    /// as long as the client keeps dripping, with a length or in chunks alike.
    func testABodyDrippedAByteAtATimeIsClosedAtItsDeadline() throws {
        let server = try TestServer { $0.handshakeTimeoutSeconds = 2 }
        for head in [
            "POST /api/tasks/drip.length HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n",
            "POST /api/tasks/drip.chunked HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nc8\r\n",
        ] {
            let socket = try RawSocket(port: server.port, timeoutSeconds: 0.5)
            try socket.send(head)
            let started = Date()
            var closed = false
            var dripped = 0
            // At most 20 s of dripping: the body (200 bytes) would take 100 s.
            while !closed, dripped < 40 {
                do { try socket.send("{") } catch { break }
                dripped += 1
                let (bytes, ended) = socket.receiveSome()  // waits the half second when nothing comes
                XCTAssertEqual(bytes, [], "nothing is answered to a body still arriving")
                closed = ended
            }
            let held = Date().timeIntervalSince(started)
            XCTAssertTrue(closed || dripped < 40, "\(head): still open after \(held) s of dripping")
            XCTAssertGreaterThanOrEqual(held, 1.5, "not before the deadline")
            XCTAssertLessThan(held, 6, "closed near the 2 s deadline")
        }
        XCTAssertNil(try server.task("drip.length"))
        XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200)

        // Many at once: every one is closed by the deadline, none held.
        let started = Date()
        let many = try (0..<30).map { index in
            let socket = try RawSocket(port: server.port, timeoutSeconds: 0.01)
            try socket.send("POST /api/tasks/drip.\(index) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200\r\n\r\n")
            return socket
        }
        var open = Set(many.indices)
        for _ in 0..<24 where !open.isEmpty {  // 12 s at most
            for index in open {
                if (try? many[index].send("{")) == nil || many[index].receiveSome().closed { open.remove(index) }
            }
            Thread.sleep(forTimeInterval: 0.5)
        }
        XCTAssertEqual(open, [], "still open after \(Date().timeIntervalSince(started)) s of dripping")
        XCTAssertLessThan(Date().timeIntervalSince(started), 8)
    }
    /// A length no body may have is answered when the head is read, not when the body has come (a
    /// client that announced it may never send it); the connection then closes at the deadline.
    func testALengthPastTheCapIsAnsweredBeforeItsBody() throws {
        let server = try TestServer {
            $0.maxMessageBytes = 4096
            $0.handshakeTimeoutSeconds = 5
        }
        for length in ["5000", "9999999999999999999"] {
            let socket = try RawSocket(port: server.port, timeoutSeconds: 3)
            try socket.send("POST /api/tasks/big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(length)\r\n\r\n{}")
            let head = String(decoding: socket.receive(until: Array("\r\n".utf8)), as: UTF8.self)
            XCTAssertTrue(head.hasPrefix("HTTP/1.1 413"), "Content-Length \(length): \(head)")
        }
        XCTAssertNil(try server.task("big"))
    }

    /// Leading zeros say nothing of a chunk's size: any number of them within the line is read as
    /// the digits after them.
    func testAChunkSizeWithLeadingZerosIsItsDigits() throws {
        let server = try TestServer { $0.maxMessageBytes = 4096 }
        let body = #"{"title":"Zeros"}"#
        let size = String(repeating: "0", count: 1000) + String(body.utf8.count, radix: 16)
        let (answer, _) = try exchange(
            server,
            "POST /api/tasks/zeros HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\n\(body)\r\n0000\r\n\r\n")
        XCTAssertEqual(answer.status, 200, String(decoding: answer.body, as: UTF8.self))
        XCTAssertEqual(try server.task("zeros")?["title"], .string("Zeros"))
    }
}
