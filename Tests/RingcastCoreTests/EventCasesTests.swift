import Foundation
import RingcastCore
import XCTest

/// The event field rules of Tests/fixtures/event-cases.json, the file the Python and Node clients'
/// tests read too: what the server's parser says of each event is what the file says.
final class EventCasesTests: XCTestCase {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures/event-cases.json")

    /// `{"repeat": "x", "times": 3}` stands for "xxx" (and `{"repeat": ["x"], …}` for a list), so
    /// the file can name a 10 001-line log without holding one.
    static func expanded(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            if let unit = value["repeat"], let times = value["times"]?.numberValue {
                switch unit {
                case .string(let text): return .string(String(repeating: text, count: Int(times)))
                case .array(let items): return .array(Array(repeating: items, count: Int(times)).flatMap { $0 })
                default: return value
                }
            }
            return .object(members.map { ($0.0, expanded($0.1)) })
        case .array(let items): return .array(items.map(expanded))
        default: return value
        }
    }

    func testEveryCaseIsAnsweredAsTheFileSays() throws {
        let document = try JSONParser.parse(Array(Data(contentsOf: Self.file)))
        let cases = try XCTUnwrap(document["cases"]?.arrayValue)
        XCTAssertGreaterThan(cases.count, 50)
        for entry in cases {
            let event = Self.expanded(try XCTUnwrap(entry["event"]))
            let shown = String(decoding: JSONWriter.encode(try XCTUnwrap(entry["event"])), as: UTF8.self).prefix(160)
            do {
                _ = try Command.parse(event: event)
                XCTAssertEqual(entry["ok"], .bool(true), "accepted, but the file expects \(entry["error"]?.stringValue ?? "?"): \(shown)")
            } catch {
                XCTAssertEqual(entry["error"]?.stringValue, error.code.rawValue, "\(error.message): \(shown)")
                XCTAssertEqual(entry["field"]?.stringValue, error.field, "\(shown)")
            }
        }
    }
}
