import RingcastCore
import XCTest

final class StoredTaskTests: XCTestCase {
    func testATaskRoundTripsThroughItsStorageEncoding() throws {
        let store = TaskStore()
        let now = 1_764_489_600_000.0
        _ = try store.apply(.update(id: "p", patch: TaskPatch()), now: now)
        var patch = TaskPatch()
        patch.title = "Build \"42\" — ünï"
        patch.detail = .some("compiling\nline two")
        patch.completed = .some(30)
        patch.total = .some(120)
        patch.parent = .some("p")
        patch.staleAfter = .some(30)
        patch.hideAfter = .some(90)
        _ = try store.apply(.update(id: "ci.build", patch: patch), now: now)
        patch = TaskPatch()
        patch.completed = .some(60)
        _ = try store.apply(.update(id: "ci.build", patch: patch), now: now + 2000)
        _ = try store.apply(.startTimer(id: "tea", spec: TimerStart(seconds: 180, interval: 1, hideAfter: 5)), now: now)
        _ = store.runDue(now: now + 3500)
        _ = try store.apply(.pauseTimer(id: "tea"), now: now + 3600)

        for id in ["ci.build", "tea", "p"] {
            let task = try XCTUnwrap(store.task(id))
            let restored = try XCTUnwrap(TaskRecord(stored: task.encodedForStorage()), id)
            XCTAssertEqual(restored.encodedForStorage(), task.encodedForStorage(), id)
            XCTAssertEqual(restored.encodedObject(now: now), task.encodedObject(now: now), id)
        }
        let tea = try XCTUnwrap(TaskRecord(stored: try XCTUnwrap(store.task("tea")).encodedForStorage()))
        XCTAssertEqual(tea.timer?.ticksEmitted, 3)
        XCTAssertEqual(tea.timer?.pausedAt, now + 3600)
        XCTAssertEqual(tea.timer?.hideAfter, 5)
        XCTAssertEqual(tea.state, .paused)
    }

    func testBytesThatAreNoStoredTaskAreRefused() {
        XCTAssertNil(TaskRecord(stored: Array("{}".utf8)))
        XCTAssertNil(TaskRecord(stored: Array("not json".utf8)))
        XCTAssertNil(TaskRecord(stored: Array(#"{"id":"-bad","state":"running","seq":1,"stored":{"updatedAt":1,"publishedAt":1}}"#.utf8)))
        XCTAssertNil(TaskRecord(stored: Array(#"{"id":"ok","state":"exploded","seq":1,"stored":{"updatedAt":1,"publishedAt":1}}"#.utf8)))
        XCTAssertNotNil(
            TaskRecord(stored: Array(#"{"id":"ok","state":"running","seq":1,"progress":null,"stored":{"updatedAt":1,"publishedAt":1}}"#.utf8)))
    }
}
