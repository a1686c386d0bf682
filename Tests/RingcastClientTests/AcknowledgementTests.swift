import Foundation
import RingcastClient
import RingcastCore
import RingcastServer
import RingcastTestSupport
import XCTest

/// `flush()` returns when the server says what came before is kept, not merely written.
final class AcknowledgementTests: XCTestCase {
    func testAFlushReturnsOnceEvenPlainProgressIsInTheStorageFile() async throws {
        let folder = try TemporaryFolder("ringcast-client-ack")
        defer { folder.remove() }
        let path = folder.file("ringcast.db").path
        let server = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent))
        let rc = try RingcastClient(url: server.httpURL)
        try await rc.update("kept.plain", progress: 0.37, title: "Plain")
        try await rc.flush(timeout: 10)

        // Plain progress is written behind; the acknowledgement waited for it.
        let reader = try SQLitePersistence(path: path, logger: .silent)
        let stored = reader.load()?.tasks.first { $0.id == "kept.plain" }
        XCTAssertEqual(stored?.progress, 0.37)
        XCTAssertEqual(stored?.title, "Plain")
        await rc.close()
    }

    func testFlushWaitsForTheFlushedAnswerAndAClosedConnectionFailsIt() async throws {
        let fake = try FakeServer()
        let rc = try RingcastClient(url: fake.url, options: quickReconnects)
        try await rc.update("ack.a", progress: 0.5)
        try await rc.flush(timeout: 5)
        let first = fake.received
        XCTAssertEqual(first.map { $0["type"] }, [.string("update"), .string("flush")], "the marker follows the events, alone")

        fake.answersFlush = false
        try await rc.update("ack.a", progress: 0.6)
        let ended = Inbox<Bool>()
        let waiting = Task { () -> RingcastClientError? in
            defer { ended.append(contentsOf: [true]) }
            do {
                try await rc.flush(timeout: 10)
                return nil
            } catch { return error as? RingcastClientError }
        }
        fake.wait { $0.filter { $0["type"] == .string("flush") }.count == 2 }
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertTrue(ended.all.isEmpty, "no flushed has come: the flush still waits")
        fake.dropConnections()
        let outcome = await waiting.value
        guard case .connection? = outcome else { return XCTFail("a flush whose connection closed unanswered: \(String(describing: outcome))") }

        // Later flushes answer for what follows, on the next connection.
        fake.answersFlush = true
        XCTAssertTrue(eventually { rc.isConnected && fake.connections == 1 })
        try await rc.update("ack.b", progress: 0.1)
        try await rc.flush(timeout: 5)
        await rc.close()
    }

    func testAProtocolOneServerIsSentNoFlushAndAFlushEndsWhenWritten() async throws {
        let fake = try FakeServer(protocolVersion: 1)
        let rc = try RingcastClient(url: fake.url)
        try await rc.update("old.server", progress: 0.5)
        try await rc.flush(timeout: 5)
        try await rc.update("old.server", progress: 0.7)
        await rc.close()
        let types = fake.wait { $0.count >= 2 }.map { $0["type"] }
        XCTAssertEqual(types, [.string("update"), .string("update")])
    }

    func testNothingIsWrittenBeforeTheServersHello() async throws {
        // The hello says which protocol the server speaks, so whether it takes `flush` at all.
        let fake = try FakeServer(greetsAtOnce: false)
        let rc = try RingcastClient(url: fake.url)
        try await rc.update("hello.first", progress: 0.2)
        XCTAssertTrue(eventually { fake.connections == 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertTrue(fake.received.isEmpty, "nothing was written before hello: \(fake.received)")
        XCTAssertFalse(rc.isConnected)
        fake.greet()
        try await rc.flush(timeout: 5)
        XCTAssertEqual(fake.received.first?["id"], .string("hello.first"))
        XCTAssertEqual(rc.statistics.connections, 1)
        await rc.close()
    }
}
