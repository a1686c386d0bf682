import RingcastCore
import XCTest

/// The answer decoder the HTTP client reads with: the same answer however its bytes are split,
/// what follows it kept for the next, and every lie a reason instead of a trap.
final class HTTPAnswerTests: XCTestCase {
    private func decode(_ text: String, cap: Int = 1024, pieces: Int = 1, closed: Bool = true) throws(HTTPAnswerError) -> HTTPAnswer? {
        var decoder = HTTPAnswerDecoder(maxBodyBytes: cap)
        let bytes = Array(text.utf8)
        let size = max(1, (bytes.count + pieces - 1) / pieces)
        var offset = 0
        while offset < bytes.count {
            decoder.append(bytes[offset..<min(bytes.count, offset + size)])
            offset += size
            if offset < bytes.count, let early = try decoder.next(closed: false) { return early }
        }
        return try decoder.next(closed: closed)
    }

    func testLengthChunkedAndUntilCloseBodiesAreTheSameHoweverTheBytesAreSplit() throws {
        let answers = [
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=1\r\nhe\r\n3\r\nllo\r\n0\r\nTrailer: t\r\n\r\n",
            "HTTP/1.0 200 OK\r\n\r\nhello",
        ]
        for text in answers {
            for pieces in [1, 2, 7, text.utf8.count] {
                let answer = try XCTUnwrap(try decode(text, pieces: pieces), "\(pieces) pieces of \(text)")
                XCTAssertEqual(answer.status, 200)
                XCTAssertEqual(String(decoding: answer.body, as: UTF8.self), "hello", "\(pieces) pieces of \(text)")
            }
        }
        XCTAssertEqual(try decode(answers[0])?.headers["x-a"], "b")
        XCTAssertEqual(try decode(answers[2])?.endedByClose, true)
        XCTAssertNil(try decode(answers[2], closed: false), "a body that runs to the close is not done before it")
    }

    func testWhatFollowsAnAnswerIsKeptForTheNextAndNoBodyAnswersHaveNone() throws {
        var decoder = HTTPAnswerDecoder(maxBodyBytes: 64)
        decoder.append(Array("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok".utf8))
        let first = try XCTUnwrap(try decoder.next(closed: false))
        XCTAssertEqual(first.status, 204)
        XCTAssertEqual(first.body, [])
        let second = try XCTUnwrap(try decoder.next(closed: false))
        XCTAssertEqual(second.status, 201)
        XCTAssertEqual(String(decoding: second.body, as: UTF8.self), "ok")
        XCTAssertEqual(decoder.pending, [])
    }

    func testEveryLieIsAReasonNeverATrap() {
        let lies: [(String, String)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length \"-1\""),
            ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "not a length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n", "the body's cap"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n", "chunk size \"-5\""),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n", "chunk size \"7fffffffffffffff\""),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhelo\r\n", "not followed by CRLF"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", "beside"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "does not decode"),
            ("HTTP/1.1 2000 OK\r\n\r\n", "status line"),
            ("SSH-2.0-OpenSSH\r\n\r\n", "status line"),
            ("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "x", count: 1025), "a body over 1024 bytes"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "closed 5 bytes before"),
            ("HTTP/1.1 200 OK\r\nX: " + String(repeating: "y", count: 70_000), "a head over"),
        ]
        for (text, reason) in lies {
            XCTAssertThrowsError(try decode(text), text.prefix(60).description) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(text.prefix(60)): \(error)")
            }
        }
    }
}
