import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

@testable import RingcastServer

/// "An answer means it is kept", when storage cannot keep anything: a change that must be
/// committed first is refused with `storage_failed` over HTTP and over a WebSocket alike (they take
/// one path to the state), and a `flush` is never acknowledged with `flushed`.
final class StorageFailureTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-storage-failure") }
    override func tearDown() { folder?.remove() }

    func testAChangeStorageCannotKeepIsRefusedOnBothTransports() throws {
        let path = folder.file("locked.db").path
        let server = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent, busyTimeoutMilliseconds: 100)) {
            $0.publicDir = emptyPublicDirectory
        }
        let publisher = TestWatcher(server.wsURL + "?mode=publish")
        publisher.wait { $0.contains { $0.type == "hello" } }

        // Another process holds the write lock: every commit waits SQLite's busy timeout (shortened
        // here), then fails after its retries.
        let other = try SQLiteDatabase(path: path)
        try other.execute("BEGIN IMMEDIATE")
        publisher.connection.send(#"{"type":"update","id":"sf.ws","state":"done"}"#)
        publisher.connection.send(#"{"type":"flush","ref":"after-done"}"#)
        let answer = try HTTPClient(host: "127.0.0.1", port: server.port, timeoutSeconds: 60).request(
            "POST", "/api/tasks/sf.http", json: #"{"state":"failed"}"#)
        XCTAssertEqual(answer.status, 503, answer.text)
        XCTAssertEqual(try JSONParser.parse(answer.body)["error"], .string("storage_failed"), answer.text)

        let refusals = publisher.wait(timeout: 60) { $0.filter { $0.string("error") == "storage_failed" }.count >= 2 }
        XCTAssertEqual(
            refusals.filter { $0.string("error") == "storage_failed" }.count, 2,
            "the update and the flush that waited for it are refused: \(refusals.map(\.event))")
        XCTAssertFalse(refusals.contains { $0.type == "flushed" }, "nothing was kept, so nothing says it was")
        try other.execute("ROLLBACK")
    }
}
