import XCTest

@testable import RingcastCore

/// Finished work is forgotten on purpose, and the live set has a cap.
final class RetentionTests: XCTestCase {
    private let day = 86_400_000.0

    func testFinishedAndHiddenTasksAreRemovedTheirRetentionAfterTheirLastChange() throws {
        let persistence = RecordingPersistence()
        let store = TaskStore(persistence: persistence, epoch: "keep", retentionSeconds: 60)
        try store.update("done", #"{"state":"done"}"#, now: t0)
        try store.update("failed", #"{"state":"failed"}"#, now: t0 + 10)
        try store.update("hidden", #"{"visible":false}"#, now: t0 + 20)
        try store.update("running", #"{"progress":0.5}"#, now: t0)
        try store.update("late", #"{"progress":0.5}"#, now: t0)
        try store.update("late", #"{"state":"cancelled"}"#, now: t0 + 30_000)

        XCTAssertEqual(store.nextDeadline(), t0 + 60_000)
        XCTAssertTrue(store.runDue(now: t0 + 59_999).isEmpty)
        let first = store.runDue(now: t0 + 60_000)
        XCTAssertEqual(first.map(\.type), [.remove])
        XCTAssertEqual(first.map(\.id), ["done"])
        let next = store.runDue(now: t0 + 60_020)
        XCTAssertEqual(Set(next.map(\.id)), ["failed", "hidden"])
        XCTAssertTrue(next.allSatisfy { $0.type == .remove })
        XCTAssertNotNil(store.task("late"), "touched later: its clock started later")
        XCTAssertEqual(store.runDue(now: t0 + 90_000).map(\.id), ["late"])
        XCTAssertEqual(Set(store.tasks.keys), ["running"], "a running task is never forgotten")
        XCTAssertEqual(store.retiredCount, 4)
        XCTAssertEqual(Set(persistence.removed.map(\.0)), ["done", "failed", "hidden", "late"], "gone from storage too")
        let changes = try XCTUnwrap(store.changes(since: 6, matching: WatchSet([Glob("*")])))
        XCTAssertEqual(Set(changes.removed), ["done", "failed", "hidden", "late"], "a resuming watcher hears of each removal")
    }

    func testAParentGoesOnlyAfterItsChildren() throws {
        let store = TaskStore(epoch: "keep", retentionSeconds: 60)
        try store.update("parent", #"{"state":"done"}"#, now: t0)
        try store.update("child", #"{"parent":"parent","progress":0.2}"#, now: t0)
        XCTAssertTrue(store.runDue(now: t0 + 120_000).isEmpty, "a running child keeps its parent")
        try store.update("child", #"{"state":"done"}"#, now: t0 + 120_000)
        let removed = store.runDue(now: t0 + 180_000)
        XCTAssertTrue(removed.contains { $0.id == "child" && $0.type == .remove })
        // With the child gone, the parent's own retention is long over.
        let parent = store.runDue(now: store.nextDeadline() ?? t0)
        XCTAssertTrue((removed + parent).contains { $0.id == "parent" && $0.type == .remove }, "\((removed + parent).map(\.id))")
        XCTAssertTrue(store.tasks.isEmpty)
    }

    func testAParentThatWouldMakeACycleIsRefusedNamingIt() throws {
        let store = TaskStore(epoch: "keep", retentionSeconds: 60)
        try store.update("a", #"{"progress":0.1}"#, now: t0)
        try store.update("b", #"{"parent":"a"}"#, now: t0)
        try store.update("c", #"{"parent":"b"}"#, now: t0)
        for (id, parent) in [("a", "c"), ("a", "b"), ("b", "c")] {
            XCTAssertThrowsError(try store.update(id, #"{"parent":"\#(parent)"}"#, now: t0), "\(id) under \(parent)") { error in
                let error = error as! APIError
                XCTAssertEqual(error.code, .invalidField)
                XCTAssertEqual(error.field, "parent")
                XCTAssertTrue(error.message.contains("cycle"), error.message)
            }
        }
        XCTAssertNil(store.task("a")?.parent, "nothing changed")
        XCTAssertNoThrow(try store.update("c", #"{"parent":"a"}"#, now: t0), "moving within the tree is no cycle")
        XCTAssertNoThrow(try store.update("d", #"{"parent":"d"}"#, now: t0), "a task naming itself is taken as no parent, as before")

        let api = API(store: TaskStore(epoch: "keep"))
        _ = api.handle(APIRequest(method: "POST", path: "/api/tasks/x", body: Array(#"{"parent":"y"}"#.utf8)), now: t0)
        let refused = api.handle(APIRequest(method: "POST", path: "/api/tasks/y", body: Array(#"{"parent":"x"}"#.utf8)), now: t0)
        XCTAssertEqual(refused.status, 422)
        XCTAssertEqual(json(refused.body)["field"], .string("parent"))
    }

    /// A cycle of parents already in storage (written by a version that took them) must not keep
    /// its tasks for good: each is held only by children that are not also its ancestors.
    func testACycleOfParentsInStorageIsStillRetired() throws {
        let persistence = RecordingPersistence()
        var tasks: [TaskRecord] = []
        for (id, parent) in [("a", "b"), ("b", "c"), ("c", "a"), ("kid", "a")] {
            var task = TaskRecord(id: id, now: t0)
            task.parent = parent
            task.state = id == "kid" ? .running : .done
            tasks.append(task)
        }
        persistence.initial = PersistedState(epoch: "keep", seq: 9, tasks: tasks)
        let store = TaskStore(persistence: persistence, retentionSeconds: 60)
        let first = store.runDue(now: t0 + day)
        XCTAssertEqual(Set(first.filter { $0.type == .remove }.map(\.id)), ["b", "c"], "a has a child outside the cycle")
        try store.update("kid", #"{"state":"done"}"#, now: t0 + day)
        var removed: [String] = []
        for _ in 0..<4 {
            guard let next = store.nextDeadline() else { break }
            removed += store.runDue(now: max(next, t0 + 2 * day)).filter { $0.type == .remove }.map(\.id)
        }
        XCTAssertEqual(Set(removed), ["kid", "a"])
        XCTAssertTrue(store.tasks.isEmpty)
    }

    func testRetentionHoldsAcrossARestart() throws {
        let persistence = RecordingPersistence()
        let first = TaskStore(persistence: persistence, epoch: "keep", retentionSeconds: 60)
        try first.update("done", #"{"state":"done"}"#, now: t0)
        persistence.initial = PersistedState(epoch: first.epoch, seq: first.seq, tasks: Array(first.tasks.values))
        let second = TaskStore(persistence: persistence, retentionSeconds: 60)
        XCTAssertEqual(second.nextDeadline(), t0 + 60_000)
        XCTAssertEqual(second.runDue(now: t0 + day).map(\.id), ["done"])
    }

    func testMaxTasksRefusesNewTasksAndKeepsEverythingHeld() throws {
        let store = TaskStore(epoch: "cap", maxTasks: 3)
        for id in ["a", "b", "c"] { try store.update(id, #"{"progress":0.1}"#, now: t0) }
        XCTAssertThrowsError(try store.update("d", #"{"progress":0.1}"#, now: t0)) { error in
            let error = error as! APIError
            XCTAssertEqual(error.code, .tooManyTasks)
            XCTAssertEqual(error.status, 409)
            XCTAssertTrue(error.message.contains("maxTasks"), error.message)
        }
        XCTAssertThrowsError(try store.apply(.show(id: "d", options: ShowOptions()), now: t0))
        XCTAssertThrowsError(try store.startTimer("d", seconds: 5, interval: 1, now: t0))
        XCTAssertNoThrow(try store.update("a", #"{"progress":0.9}"#, now: t0), "a task already held still takes updates")
        XCTAssertEqual(store.tasks.count, 3)
        XCTAssertEqual(store.task("a")?.progress, 0.9)
        _ = try store.apply(.remove(id: "b"), now: t0)
        XCTAssertNoThrow(try store.update("d", #"{"progress":0.1}"#, now: t0), "room again once one is removed")

        let api = API(store: TaskStore(epoch: "cap", maxTasks: 1))
        _ = api.handle(APIRequest(method: "POST", path: "/api/tasks/one", body: []), now: t0)
        let refused = api.handle(
            APIRequest(
                method: "POST", path: "/api/events",
                body: Array(#"[{"type":"update","id":"two"},{"type":"update","id":"one","progress":0.5}]"#.utf8)), now: t0)
        XCTAssertEqual(refused.status, 200)
        XCTAssertEqual(json(refused.body)["applied"], .number(1), "the rest of a batch still applies")
        XCTAssertEqual(json(refused.body)["errors"]?.arrayValue?.first?["error"], .string("too_many_tasks"))
    }
}
