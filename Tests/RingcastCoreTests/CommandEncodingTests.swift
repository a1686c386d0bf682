import XCTest

@testable import RingcastCore

/// A cluster writes commands to its shared log and every node reads them back: the round trip must
/// lose nothing, every field and every "clear this field" included.
final class CommandEncodingTests: XCTestCase {
    /// A value for every field an update may carry. A field added to TaskPatch without one here fails
    /// the test below: add it here, and to `Command.encodedEvent`.
    private let sampleFields: [String: JSONValue] = [
        "title": .string("Build"), "detail": .string("compiling"), "progress": .number(0.25), "completed": .number(5),
        "total": .number(20), "state": .string("paused"), "visible": .bool(false), "hideAfter": .number(3),
        "modal": .bool(true), "parent": .string("ci"), "staleAfter": .number(30),
        "controls": .array([.string("cancel"), .string("pause")]), "abandonAfter": .number(600),
        "kind": .string("ci.build"),
        "url": .string("https://ci.example.com/runs/42"),
    ]

    private func roundTrip(_ event: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let command = try Command.parse(event: JSONParser.parse(event))
        let again = try Command.parse(event: command.encodedEvent)
        XCTAssertEqual(again, command, event, file: file, line: line)
    }

    func testEveryFieldOfAnUpdateSurvivesTheLog() throws {
        for field in TaskPatch.fields {
            XCTAssertNotNil(sampleFields[field], "TaskPatch has a field '\(field)' this test does not know: give it a sample and encode it")
        }
        let full = JSONValue.object(
            [("type", .string("update")), ("id", .string("ci.build"))] + TaskPatch.fields.compactMap { key in sampleFields[key].map { (key, $0) } })
        let command = try Command.parse(event: full)
        XCTAssertEqual(try Command.parse(event: command.encodedEvent), command)
        guard case .object(let members) = command.encodedEvent else { return XCTFail("not an object") }
        XCTAssertEqual(Set(members.map(\.0)), Set(["type", "id"] + TaskPatch.fields), "every field is written")
    }

    func testClearingAFieldIsNotLeavingItAlone() throws {
        try roundTrip(
            #"{"type":"update","id":"a","detail":null,"progress":null,"completed":null,"total":null,"hideAfter":null,"parent":null,"staleAfter":null}"#
        )
        try roundTrip(#"{"type":"update","id":"a","kind":null}"#)
        let cleared = try Command.parse(event: JSONParser.parse(#"{"type":"update","id":"a","progress":null}"#))
        guard case .update(_, let patch) = try Command.parse(event: cleared.encodedEvent) else { return XCTFail("not an update") }
        XCTAssertEqual(patch.progress, .some(nil), "null makes a task indeterminate; absent leaves it")
        XCTAssertNil(patch.detail)
    }

    func testEveryKindOfCommand() throws {
        try roundTrip(#"{"type":"show","id":"save","hideAfter":2,"modal":true,"detail":"Saving"}"#)
        try roundTrip(#"{"type":"show","id":"save"}"#)
        try roundTrip(#"{"type":"hide","id":"save"}"#)
        try roundTrip(#"{"type":"timer","id":"tea","seconds":180,"interval":0.5,"title":"Tea","hideAfter":5,"startAt":1700000000000}"#)
        for type in ["pause", "resume", "cancel", "remove"] { try roundTrip(#"{"type":"\#(type)","id":"tea"}"#) }
        try roundTrip(#"{"type":"log","id":"job","lines":["one","two"]}"#)
        for action in TaskControl.allCases {
            let request = Command.requestControl(id: "job", action: action)
            XCTAssertEqual(try Command.parse(logged: request.encodedEvent), request)
            XCTAssertThrowsError(try Command.parse(event: request.encodedEvent), "a publisher cannot send a control request as an event")
        }
    }
}

/// Whole log entries, as a node writes them and every node reads them back.
final class LogEntryTests: XCTestCase {
    private func readBack(_ entry: LogEntry, file: StaticString = #filePath, line: UInt = #line) throws -> LogEntry {
        let again = try XCTUnwrap(LogEntry(decoding: entry.encoded()), "entry not read back", file: file, line: line)
        XCTAssertEqual(again.node, entry.node, file: file, line: line)
        XCTAssertEqual(again.token, entry.token, file: file, line: line)
        XCTAssertEqual(again.worker, entry.worker, file: file, line: line)
        XCTAssertEqual(again.now, entry.now, file: file, line: line)
        return again
    }

    func testEveryShapeOfARequestsAnswerSurvivesTheLog() throws {
        let commands: [Command] = [.remove(id: "a"), .requestControl(id: "a", action: .cancel)]
        for answer in [RequestPlan.Answer.task, .batch, .control] {
            let entry = LogEntry(node: "n1", token: 7, worker: 1, now: 1_700_000_000_000, kind: .request(commands, answer, .server))
            guard case .request(let read, let shape, _) = try readBack(entry).kind else { return XCTFail("not a request") }
            XCTAssertEqual(read, commands)
            // A control request answered as a batch would lose "delivered" and gain "applied".
            XCTAssertEqual(shape, answer)
        }
    }

    func testAMessageKeepsItsPlacesItsFlushAndItsSocket() throws {
        var plan = MessagePlan()
        plan.isBatch = true
        plan.commands = [(0, .remove(id: "a")), (2, .remove(id: "b"))]
        plan.flush = .some("ref-1")
        plan.socketKey = 42
        guard case .message(let read) = try readBack(LogEntry(node: "n", token: 1, worker: 0, now: 1, kind: .message(plan))).kind else {
            return XCTFail("not a message")
        }
        XCTAssertEqual(read.commands.map(\.index), [0, 2])
        XCTAssertEqual(read.commands.map(\.command), [.remove(id: "a"), .remove(id: "b")])
        XCTAssertTrue(read.isBatch)
        XCTAssertEqual(read.flush, .some("ref-1"))
        XCTAssertEqual(read.socketKey, 42, "the asking node notes its socket as the tasks' publisher")

        plan.socketKey = 0
        plan.flush = nil
        guard case .message(let bare) = try readBack(LogEntry(node: "n", token: 1, worker: 0, now: 1, kind: .message(plan))).kind else {
            return XCTFail("not a message")
        }
        XCTAssertEqual(bare.socketKey, 0)
        XCTAssertNil(bare.flush)
    }

    func testADueEntryAndAnUnknownKind() throws {
        guard case .due = try readBack(LogEntry(node: "n", token: 0, worker: 0, now: 5, kind: .due)).kind else { return XCTFail("not due") }
        XCTAssertNil(LogEntry(decoding: Array(#"{"n":"n","k":0,"w":0,"t":1,"x":"newer"}"#.utf8)), "a newer node's entry is skipped")
    }
}
