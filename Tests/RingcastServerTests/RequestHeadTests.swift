import Foundation
import RingcastCore
import RingcastTestSupport
import XCTest

/// A request head past its limits gets an answer where libwebsockets 4.1.6 lets one be given: a
/// path, query argument or header of 8 KiB or more is 414 or 431 with the error body (lws 4.1.6
/// closed any head past 4 KiB without a word); past 16 KiB in all lws still closes without one.
final class RequestHeadTests: XCTestCase {
    /// What the server answers one raw request, read until it closes (nil: it closed without a byte).
    private func answer(_ server: TestServer, _ request: String) throws -> HTTPAnswer? {
        let socket = try RawSocket(port: server.port)
        try? socket.send(request)
        let received = socket.receive()
        XCTAssertTrue(received.closed, "the connection stays open after \(request.prefix(60))")
        guard !received.bytes.isEmpty else { return nil }
        var decoder = HTTPAnswerDecoder(maxBodyBytes: 1 << 16)
        decoder.append(received.bytes)
        return try decoder.next(closed: true)
    }

    func testALongPathQueryOrHeaderIs414Or431AndTooMuchInAllIsClosed() throws {
        let server = try TestServer()
        let long = String(repeating: "a", count: 9000)
        let cases: [(label: String, request: String, status: Int, code: String, field: String?)] = [
            ("a path of 9 000 bytes", "GET /api/tasks/\(long) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, "uri_too_long", nil),
            (
                "a path of 100 000 bytes", "GET /api/tasks/\(String(repeating: long, count: 11)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414,
                "uri_too_long", nil
            ),
            ("a static file's path", "GET /\(long).js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, "uri_too_long", nil),
            ("a query argument", "GET /api/tasks?watch=\(long) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, "uri_too_long", nil),
            (
                "a POST's path, its body unread",
                "POST /api/tasks/\(long) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18\r\n\r\n{\"state\":\"failed\"}", 414,
                "uri_too_long", nil
            ),
            (
                "Authorization", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(long)\r\n\r\n", 431, "header_too_large",
                "authorization"
            ),
            ("Cookie", "GET /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ringcast_token=\(long)\r\n\r\n", 431, "header_too_large", "cookie"),
        ]
        for item in cases {
            let seq = try server.seq()
            guard let answer = try answer(server, item.request) else {
                XCTFail("\(item.label): closed without an answer")
                continue
            }
            XCTAssertEqual(answer.status, item.status, "\(item.label): \(String(decoding: answer.body, as: UTF8.self))")
            let error = try JSONParser.parse(answer.body)
            XCTAssertEqual(error["error"], .string(item.code), item.label)
            XCTAssertEqual(error["field"], item.field.map(JSONValue.string) ?? .null, item.label)
            guard case .string(let message)? = error["message"] else { return XCTFail("\(item.label): no message") }
            XCTAssertTrue(message.contains("8192 bytes or more"), message)
            XCTAssertEqual(try server.seq(), seq, "\(item.label) changed something")
        }

        // Under the limits, a head of more than lws's own 4 KiB is served.
        let seven = String(repeating: "b", count: 7000)
        let served = try XCTUnwrap(
            try answer(server, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Trace: \(seven)\r\nCookie: a=\(seven)\r\n\r\n"))
        XCTAssertEqual(served.status, 200)
        let watch = (0..<800).map { "ci.\($0)" }.joined(separator: ",")
        XCTAssertGreaterThan(watch.utf8.count, 4096)
        let listed = try XCTUnwrap(try answer(server, "GET /api/tasks?watch=\(watch) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))
        // Read whole and answered by the API itself: the watch list's own cap (32 patterns) refuses it.
        XCTAssertEqual(listed.status, 400, String(decoding: listed.body, as: UTF8.self))
        XCTAssertEqual(try JSONParser.parse(listed.body)["error"], .string("invalid_pattern"))

        // Past 16 KiB in all, in pieces each under the limit, lws closes the connection without a word.
        let many = (0..<20).map { "X-Part-\($0): \(String(repeating: "c", count: 1000))\r\n" }.joined()
        XCTAssertNil(try answer(server, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\(many)\r\n"))
        XCTAssertEqual(try server.http().request("GET", "/healthz").status, 200, "the server serves on")
    }
}
