import XCTest

@testable import RingcastCore

final class StreamProtocolTests: XCTestCase {
    func testFramingComesFromFormatThenAccept() throws {
        XCTAssertEqual(try StreamRequest.parse([:], accept: nil, lastEventID: nil).get().framing, .eventStream)
        XCTAssertEqual(try StreamRequest.parse([:], accept: "application/x-ndjson", lastEventID: nil).get().framing, .jsonLines)
        XCTAssertEqual(try StreamRequest.parse(["format": "sse"], accept: "application/x-ndjson", lastEventID: nil).get().framing, .eventStream)
        XCTAssertEqual(try StreamRequest.parse(["format": "jsonl"], accept: nil, lastEventID: nil).get().framing, .jsonLines)
        guard case .failure(let error) = StreamRequest.parse(["format": "xml"], accept: nil, lastEventID: nil) else { return XCTFail("xml") }
        XCTAssertEqual(error.field, "format")
        guard case .failure(let mode) = StreamRequest.parse(["mode": "publish"], accept: nil, lastEventID: nil) else { return XCTFail("publish") }
        XCTAssertEqual(mode.field, "mode")
    }

    func testLastEventIDResumesAsSinceDoes() throws {
        let resumed = try StreamRequest.parse(["watch": "ci.*", "since": "e1:3"], accept: nil, lastEventID: "e1:9").get()
        XCTAssertEqual(resumed.socket.since, "e1:9", "the reconnection's id is newer than the URL's since")
        XCTAssertEqual(resumed.socket.resumeSeq(in: "e1"), 9)
        XCTAssertNil(resumed.socket.resumeSeq(in: "e2"), "another epoch: a full snapshot")
        XCTAssertEqual(try StreamRequest.parse(["since": "e1:3"], accept: nil, lastEventID: "").get().socket.since, "e1:3")
    }

    func testEventsAreFramedWithTheirTypeAndID() {
        var out: [UInt8] = []
        StreamEncoder.append(
            Array(#"{"type":"progress","id":"a"}"#.utf8), epoch: Array("e1".utf8), seq: 4, framing: .eventStream, heartbeatEvents: false, to: &out)
        StreamEncoder.append(
            Array(#"{"type":"heartbeat","now":1}"#.utf8), epoch: Array("e1".utf8), seq: 4, framing: .eventStream, heartbeatEvents: false, to: &out)
        StreamEncoder.append(
            Array(#"{"type":"heartbeat","now":1}"#.utf8), epoch: Array("e1".utf8), seq: 4, framing: .eventStream, heartbeatEvents: true, to: &out)
        XCTAssertEqual(
            String(decoding: out, as: UTF8.self),
            "id: e1:4\nevent: progress\ndata: {\"type\":\"progress\",\"id\":\"a\"}\n\n: heartbeat\n\nevent: heartbeat\ndata: {\"type\":\"heartbeat\",\"now\":1}\n\n"
        )
        var lines: [UInt8] = []
        StreamEncoder.append(
            Array(#"{"type":"hello"}"#.utf8), epoch: Array("e1".utf8), seq: 0, framing: .jsonLines, heartbeatEvents: false, to: &lines)
        XCTAssertEqual(String(decoding: lines, as: UTF8.self), "{\"type\":\"hello\"}\n")
        XCTAssertEqual(String(decoding: StreamEncoder.chunk(Array("0123456789abcdefg".utf8)[...]), as: UTF8.self), "11\r\n0123456789abcdefg\r\n")
    }
}
