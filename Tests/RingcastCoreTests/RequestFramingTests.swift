import RingcastCore
import XCTest

/// How a request's body is delimited (RFC 9112 §6), and the chunked decoder the server reads a
/// request body with: every framing is decoded exactly or refused with the status the RFC names.
final class RequestFramingTests: XCTestCase {
    private func framing(
        _ method: String = "POST", length: String? = nil, coding: String? = nil, version: String = "HTTP/1.1"
    ) -> Result<RequestFraming, APIError> {
        do throws(APIError) {
            return .success(try RequestFraming.decide(method: method, contentLength: length, transferEncoding: coding, version: version))
        } catch {
            return .failure(error)
        }
    }

    func testLengthsChunkedAndNoBodyAreTold() {
        XCTAssertEqual(framing(length: "42"), .success(.length(42)))
        XCTAssertEqual(framing(length: " 0 "), .success(.length(0)))
        XCTAssertEqual(framing(length: "9999999999999999999"), .success(.length(Int.max)), "past any cap, as refused as the largest")
        XCTAssertEqual(framing(length: "0000000000000000042"), .success(.length(42)), "leading zeros within 19 digits")
        XCTAssertEqual(framing(length: "99999999999999999999999").failure?.status, 400, "more digits than lws reads")
        XCTAssertEqual(framing(coding: "chunked"), .success(.chunked))
        XCTAssertEqual(framing("PATCH", coding: " Chunked "), .success(.chunked))
        XCTAssertEqual(framing(), .success(.absent))
        XCTAssertEqual(framing("GET"), .success(.absent))
        XCTAssertEqual(framing("GET", length: "3"), .success(.length(3)))
    }

    func testEachBadFramingIsRefusedWithItsStatusAndField() {
        let cases: [(method: String, length: String?, coding: String?, version: String, status: Int, field: String)] = [
            ("POST", "-1", nil, "HTTP/1.1", 400, "Content-Length"),
            ("POST", "abc", nil, "HTTP/1.1", 400, "Content-Length"),
            ("POST", "", nil, "HTTP/1.1", 400, "Content-Length"),
            ("POST", "+5", nil, "HTTP/1.1", 400, "Content-Length"),
            ("POST", "0x10", nil, "HTTP/1.1", 400, "Content-Length"),
            ("POST", "5, 5", nil, "HTTP/1.1", 400, "Content-Length"),
            ("POST", "5", "chunked", "HTTP/1.1", 400, "Content-Length"),
            ("POST", nil, "gzip", "HTTP/1.1", 400, "Transfer-Encoding"),
            ("POST", nil, "chunked, gzip", "HTTP/1.1", 400, "Transfer-Encoding"),
            ("POST", nil, "chunked, chunked", "HTTP/1.1", 400, "Transfer-Encoding"),
            ("POST", nil, "", "HTTP/1.1", 400, "Transfer-Encoding"),
            ("POST", nil, "gzip, chunked", "HTTP/1.1", 501, "Transfer-Encoding"),
            ("PUT", nil, "identity, chunked", "HTTP/1.1", 501, "Transfer-Encoding"),
            ("POST", nil, "chunked", "HTTP/1.0", 400, "Transfer-Encoding"),
            ("DELETE", nil, "chunked", "HTTP/1.1", 400, "Transfer-Encoding"),
            ("GET", nil, "chunked", "HTTP/1.1", 400, "Transfer-Encoding"),
        ]
        for item in cases {
            let label = "\(item.method) length \(item.length ?? "none") coding \(item.coding ?? "none") \(item.version)"
            guard case .failure(let error) = framing(item.method, length: item.length, coding: item.coding, version: item.version) else {
                XCTFail("\(label) was taken")
                continue
            }
            XCTAssertEqual(error.status, item.status, "\(label): \(error)")
            XCTAssertEqual(error.field, item.field, label)
            XCTAssertFalse(error.message.isEmpty, label)
        }
    }

    private func decodeChunks(_ text: String, cap: Int = 64, piece: Int) throws(ChunkedBodyError) -> (body: String?, rest: String) {
        var decoder = ChunkedBodyDecoder(maxBodyBytes: cap)
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            decoder.append(bytes[offset..<min(bytes.count, offset + piece)])
            offset += piece
            if let body = try decoder.next(closed: false) {
                return (String(decoding: body, as: UTF8.self), String(decoding: decoder.pending, as: UTF8.self))
            }
        }
        return (nil, String(decoding: decoder.pending, as: UTF8.self))
    }

    func testAChunkedBodyIsTheSameHoweverItIsSplitAndWhatFollowsStays() throws {
        let text = "5;name=value\r\n{\"a\":\r\n1\r\n1\r\n1\r\n}\r\n0\r\nTrailer: yes\r\n\r\nNEXT"
        for piece in [1, 2, 3, 7, text.utf8.count] {
            let decoded = try decodeChunks(text, piece: piece)
            XCTAssertEqual(decoded.body, "{\"a\":1}", "\(piece)-byte pieces")
            XCTAssertTrue("NEXT".hasPrefix(decoded.rest), "what followed the body, as far as it had come: \(decoded.rest)")
        }
        XCTAssertEqual(try decodeChunks(text, piece: text.utf8.count).rest, "NEXT")
        XCTAssertNil(try decodeChunks("5\r\nhel", piece: 1).body, "not done before its last chunk")
    }

    func testLiesAreReasonsAndTheCapCountsDecodedBytes() throws {
        let malformed = ["-5\r\nhello\r\n0\r\n\r\n", "zz\r\n", "\r\n", "0x5\r\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n"]
        for text in malformed {
            XCTAssertThrowsError(try decodeChunks(text, piece: 3), text) { error in
                XCTAssertEqual((error as? ChunkedBodyError)?.tooLarge, false, "\(text): \(error)")
            }
        }
        XCTAssertThrowsError(try decodeChunks(String(repeating: "1", count: 2000) + "\r\n", piece: 100)) { error in
            XCTAssertTrue("\(error)".contains("chunk-size line over"), "\(error)")
        }
        for text in ["7fffffffffffffff\r\n", "ffffffffffffffffffffffff\r\n", "41\r\n"] {
            XCTAssertThrowsError(try decodeChunks(text, piece: 5), text) { error in
                XCTAssertEqual((error as? ChunkedBodyError)?.tooLarge, true, "\(text): \(error)")
            }
        }
        // 64 bytes decoded in many chunks is within a cap of 64; the 65th byte is not.
        let sixtyFour = String(repeating: "8\r\n12345678\r\n", count: 8)
        XCTAssertEqual(try decodeChunks(sixtyFour + "0\r\n\r\n", piece: 9).body?.count, 64)
        XCTAssertThrowsError(try decodeChunks(sixtyFour + "1\r\nx\r\n0\r\n\r\n", piece: 9)) { error in
            XCTAssertEqual((error as? ChunkedBodyError)?.tooLarge, true, "\(error)")
        }
        var closedEarly = ChunkedBodyDecoder(maxBodyBytes: 64)
        closedEarly.append(Array("5\r\nhel".utf8))
        XCTAssertThrowsError(try closedEarly.next(closed: true))
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
