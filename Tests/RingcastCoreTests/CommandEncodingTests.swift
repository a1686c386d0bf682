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
