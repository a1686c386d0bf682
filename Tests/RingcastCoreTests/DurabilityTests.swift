import XCTest

@testable import RingcastCore

/// Which changes storage must commit before anything about them leaves: every change that sets a
/// state, shows, hides or touches a timer — whatever event it makes — and never plain progress.
final class DurabilityTests: XCTestCase {
    func testEveryStickyChangeIsUrgentWhateverEventItMakes() throws {
        let persistence = RecordingPersistence()
        let store = TaskStore(persistence: persistence, epoch: "durable")
        func urgent(_ body: () throws -> Void) rethrows -> Bool {
            persistence.urgentSaves = []
            try body()
            return !persistence.urgentSaves.isEmpty
        }
        XCTAssertTrue(try urgent { try store.update("born.done", #"{"state":"done"}"#, now: t0) }, "a task created done (a progress event) is kept")
        XCTAssertTrue(try urgent { try store.update("born.failed", #"{"state":"failed","progress":0.3}"#, now: t0) })
        XCTAssertTrue(try urgent { try store.update("born.hidden", #"{"visible":false}"#, now: t0) })
        XCTAssertTrue(try urgent { try store.update("born.timed", #"{"hideAfter":5}"#, now: t0) })
        XCTAssertTrue(try urgent { try store.update("born.modal", #"{"modal":true}"#, now: t0) })
        XCTAssertFalse(try urgent { try store.update("job", #"{"progress":0.1,"title":"Job"}"#, now: t0) }, "a new running task is plain progress")
        XCTAssertFalse(try urgent { try store.update("job", #"{"progress":0.2,"detail":"more"}"#, now: t0 + 1) })
        XCTAssertTrue(try urgent { try store.update("job", #"{"state":"paused"}"#, now: t0 + 2) })
        XCTAssertTrue(try urgent { try store.update("job", #"{"state":"running"}"#, now: t0 + 3) })
        XCTAssertTrue(try urgent { try store.update("job", #"{"progress":0.5,"state":"done"}"#, now: t0 + 4) })
        XCTAssertTrue(try urgent { _ = try store.apply(.show(id: "job", options: ShowOptions()), now: t0 + 5) })
        XCTAssertTrue(try urgent { _ = try store.apply(.hide(id: "job"), now: t0 + 6) })
        XCTAssertTrue(try urgent { try store.startTimer("tea", seconds: 1, interval: 0.5, now: t0) })
        XCTAssertFalse(try urgent { _ = store.runDue(now: t0 + 500) }, "a tick in the middle is derived, not kept")
        XCTAssertTrue(try urgent { _ = store.runDue(now: t0 + 1000) }, "the last tick ends the timer")
        XCTAssertTrue(
            try urgent {
                try store.update("lease", #"{"progress":0.1,"staleAfter":1}"#, now: t0)
                _ = store.runDue(now: t0 + 1000)
            },
            "a lease running out is a state")
        let removalsBefore = persistence.removed.count
        _ = try store.apply(.remove(id: "job"), now: t0 + 7)
        XCTAssertEqual(persistence.removed.count, removalsBefore + 1, "removals always reach storage")
    }
}
