import Foundation
import RingcastCore
import RingcastLWS
import RingcastTestSupport
import XCTest

/// permessage-deflate (config `compression`): agreed only when the server offers it and the client
/// asks, and a watcher that agreed to it gets the same events as one that did not.
final class CompressionTests: XCTestCase {
    private static let compressingClients = try! WebSocketClientContext(offersCompression: true)

    /// The 101 answer's head and the first bytes after it, for an upgrade that asks for permessage-deflate.
    private func upgradeAskingForDeflate(port: Int) throws -> (head: String, firstByte: UInt8?) {
        let socket = try RawSocket(port: port)
        try socket.send(
            "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                + "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n")
        let head = String(decoding: socket.receive(until: Array("\r\n\r\n".utf8)), as: UTF8.self)
        return (head, socket.receiveSome().bytes.first)
    }

    func testDeflateIsAgreedWhenOfferedAndNotOtherwise() throws {
        let on = try TestServer { $0.compression = true }
        let agreed = try upgradeAskingForDeflate(port: on.port)
        XCTAssertTrue(agreed.head.hasPrefix("HTTP/1.1 101"), agreed.head)
        XCTAssertTrue(agreed.head.lowercased().contains("sec-websocket-extensions: permessage-deflate"), agreed.head)
        XCTAssertEqual(agreed.firstByte.map { $0 & 0x40 }, 0x40, "the hello is a compressed frame (RSV1 set)")

        let off = try TestServer()
        let plain = try upgradeAskingForDeflate(port: off.port)
        XCTAssertTrue(plain.head.hasPrefix("HTTP/1.1 101"), plain.head)
        XCTAssertFalse(plain.head.lowercased().contains("permessage-deflate"), plain.head)
        XCTAssertEqual(plain.firstByte.map { $0 & 0x40 }, 0, "compression is off by default")
    }

    func testCompressedAndPlainWatchersGetTheSameSnapshotAndEvents() throws {
        let server = try TestServer { $0.compression = true }
        // A snapshot far larger than one piece of lws's deflater, so it leaves over several callbacks.
        let detail = String(repeating: "a line of a build log that repeats ", count: 25)
        for i in 0..<300 { try server.post("/api/tasks/held\(i)", #"{"progress":0.5,"detail":"\#(detail) \#(i)"}"#) }
        let plain = TestWatcher(server.wsURL)
        let compressed = TestWatcher(server.wsURL, context: Self.compressingClients)
        let plainSnapshot = plain.waitForSnapshot().snapshot
        let compressedSnapshot = compressed.waitForSnapshot().snapshot
        XCTAssertEqual(compressedSnapshot.event, plainSnapshot.event)
        guard case .array(let tasks)? = compressedSnapshot.event["tasks"] else { return XCTFail("no tasks") }
        XCTAssertEqual(tasks.count, 300)

        for i in 0..<40 { try server.post("/api/tasks/held\(i % 7)", #"{"progress":\#(Double(i) / 100)}"#) }
        try server.post("/api/tasks/last", #"{"progress":1,"detail":"\#(detail)"}"#)
        func updates(_ watcher: TestWatcher) -> [String] {
            watcher.wait { $0.contains { $0.id == "last" } }.filter { $0.type != "snapshot" && $0.type != "hello" && $0.type != "heartbeat" }
                .map { "\($0.id ?? "") \($0.type ?? "") \($0.number("seq") ?? -1) \($0.number("progress") ?? -1)" }
        }
        let plainUpdates = updates(plain)
        XCTAssertEqual(plainUpdates.count, 41)
        XCTAssertEqual(updates(compressed), plainUpdates)
    }
}
