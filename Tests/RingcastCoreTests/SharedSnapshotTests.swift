import RingcastCore
import XCTest

/// A snapshot is encoded once per pattern set and resume point at a seq, and every watcher that
/// asks for the same one before the next change is handed those bytes.
final class SharedSnapshotTests: XCTestCase {
    private func ids(_ snapshot: [UInt8]) -> [String] {
        (json(snapshot)["tasks"]?.arrayValue ?? []).compactMap {
            if case .string(let id)? = $0["id"] { return id }
            return nil
        }
    }

    func testASnapshotSharedAtOneSeqIsReplacedByTheStateAtTheNext() throws {
        let store = TaskStore(epoch: "e")
        for i in 0..<50 { try store.update("job\(i)", #"{"progress":0.1}"#, now: t0) }
        let all = try WatchSet.parse(nil).get()
        let first = store.encodeSnapshot(matching: all, now: t0)
        let second = store.encodeSnapshot(matching: all, now: t0 + 5)
        XCTAssertEqual(store.reusedSnapshotCount, 1, "the second watcher at seq 50 got the first one's bytes")
        XCTAssertEqual(second, first)
        XCTAssertEqual(json(first)["seq"], .number(50))

        try store.update("job7", #"{"progress":0.9}"#, now: t0 + 10)
        let after = json(store.encodeSnapshot(matching: all, now: t0 + 10))
        XCTAssertEqual(store.reusedSnapshotCount, 1, "a change ends the sharing: the next snapshot is encoded anew")
        XCTAssertEqual(after["seq"], .number(51))
        let job7 = after["tasks"]?.arrayValue?.first { $0["id"] == .string("job7") }
        XCTAssertEqual(job7?["progress"], .number(0.9))
        XCTAssertEqual(after["tasks"]?.arrayValue?.count, 50)

        _ = try store.apply(.remove(id: "job3"), now: t0 + 20)
        let afterRemoval = store.encodeSnapshot(matching: all, now: t0 + 20)
        XCTAssertFalse(ids(afterRemoval).contains("job3"))
        XCTAssertEqual(json(afterRemoval)["seq"], .number(52))
    }

    func testDifferentPatternsAndResumePointsEachGetTheirOwn() throws {
        let store = TaskStore(epoch: "e")
        try store.update("ci.build", "{}", now: t0)  // 1
        try store.update("deploy.web", "{}", now: t0)  // 2
        try store.update("ci.test", "{}", now: t0)  // 3
        let ci = try WatchSet.parse("ci.*").get()
        let deploy = try WatchSet.parse("deploy.*").get()
        let ciSnapshot = store.encodeSnapshot(matching: ci, now: t0)
        let deploySnapshot = store.encodeSnapshot(matching: deploy, now: t0)
        XCTAssertEqual(ids(ciSnapshot), ["ci.build", "ci.test"])
        XCTAssertEqual(ids(deploySnapshot), ["deploy.web"])
        XCTAssertEqual(store.reusedSnapshotCount, 0)
        XCTAssertEqual(store.encodeSnapshot(matching: ci, now: t0), ciSnapshot)
        XCTAssertEqual(store.encodeSnapshot(matching: deploy, now: t0), deploySnapshot)
        XCTAssertEqual(store.reusedSnapshotCount, 2)

        // A resume point is a snapshot of its own: the changes after it, not the full one.
        let since2 = json(store.encodeSnapshot(matching: ci, since: 2, now: t0))
        XCTAssertEqual(since2["full"], .bool(false))
        XCTAssertEqual(since2["tasks"]?.arrayValue?.map { $0["id"] }, [.string("ci.test")])
        XCTAssertEqual(json(store.encodeSnapshot(matching: ci, now: t0))["full"], .bool(true))
        XCTAssertEqual(json(store.encodeSnapshot(matching: ci, since: 2, now: t0)), since2)
        XCTAssertEqual(store.reusedSnapshotCount, 4, "the full one and the one since 2 each shared once more")
    }

    func testAReplacedStateAtTheSameSeqIsNotAnsweredFromTheOldOne() throws {
        let store = TaskStore(epoch: "e")
        try store.update("before", "{}", now: t0)
        let all = try WatchSet.parse(nil).get()
        XCTAssertEqual(ids(store.encodeSnapshot(matching: all, now: t0)), ["before"])
        var other = TaskRecord(id: "after", now: t0)
        other.seq = 1
        store.replace(with: PersistedState(epoch: "e", seq: 1, tasks: [other]))
        XCTAssertEqual(ids(store.encodeSnapshot(matching: all, now: t0)), ["after"])
    }
}
