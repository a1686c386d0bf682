import Foundation
import XCTest

@testable import RingcastCore

/// Every setting is documented, comments are allowed, and the environment overrides the file with
/// an error that names the variable; each value remembers where it came from.
final class ConfigReferenceTests: XCTestCase {
    private static let configDocument = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/CONFIG.md")

    /// Every key the parser takes, nested ones as `tls.cert` and `publishers[].tokenEnv`.
    private var everyKey: [String] {
        ServerConfig.keys + ServerConfig.nestedKeys.sorted { $0.key < $1.key }.flatMap { parent, keys in keys.map { "\(parent).\($0)" } }
    }

    func testDocsConfigNamesEverySetting() throws {
        let document = try String(contentsOf: ConfigReferenceTests.configDocument, encoding: .utf8)
        // A setting is named as `key` in the document's text (a heading, a table cell, a sentence).
        let missing = everyKey.filter { !document.contains("`\($0)`") }
        XCTAssertEqual(missing, [], "docs/CONFIG.md does not name these settings: document each (type, default, meaning, example)")
        for (variable, _) in ServerConfig.environmentOverrides {
            XCTAssertTrue(document.contains("`\(variable)`"), "docs/CONFIG.md does not name \(variable)")
        }
    }

    func testEveryNestedKeyBelongsToASetting() {
        for parent in ServerConfig.nestedKeys.keys {
            let key = parent.hasSuffix("[]") ? String(parent.dropLast(2)) : parent
            XCTAssertTrue(ServerConfig.keys.contains(key), "\(parent) is no setting")
        }
    }

    func testTheExampleReferenceCoversEverySettingOnce() {
        XCTAssertEqual(
            ServerConfig.reference.map(\.key).sorted(), ServerConfig.keys.sorted(),
            "ServerConfig.reference (what `ringcast config example` prints) must list every key of ServerConfig.keys once")
    }

    func testCommentsAreBlankedOutAndOffsetsStillPointIntoTheFile() throws {
        let file = """
            // the port
            {"port": 9000, // trailing
             "host": "a//b", "publicDir": "x\\"//y"}
            """
        let config = try ServerConfig.parse(Array(file.utf8), source: "c.json")
        XCTAssertEqual(config.port, 9000)
        XCTAssertEqual(config.host, "a//b", "// inside a string is not a comment")
        XCTAssertEqual(config.publicDir, #"x"//y"#)
        XCTAssertThrowsError(try ServerConfig.parse(Array("// x\n{\"port\": 80,}".utf8), source: "c.json")) { error in
            XCTAssertEqual("\(error)", "c.json: invalid JSON at byte 17: expected a string key", "the byte offset of the file as written")
        }
    }

    func testLogFormatIsTextOrJSON() throws {
        XCTAssertEqual(try ServerConfig.parse(Array(#"{"logFormat": "json"}"#.utf8)).logFormat, .json)
        XCTAssertEqual(ServerConfig().logFormat, .text)
        XCTAssertThrowsError(try ServerConfig.parse(Array(#"{"logFormat": "xml"}"#.utf8), source: "c.json")) { error in
            XCTAssertEqual("\(error)", #"c.json: "logFormat" must be one of text, json, not string"#)
        }
    }

    func testAPublisherWithAnUnknownKeyIsRefusedNotIgnored() {
        let file = #"{"publishers": [{"name": "ci", "token": "0123456789abcdef0", "patterns": ["ci.*"], "pattern": "x"}]}"#
        XCTAssertThrowsError(try ServerConfig.parse(Array(file.utf8), source: "c.json")) { error in
            XCTAssertTrue("\(error)".hasPrefix(#"c.json: publishers[0] has no setting "pattern""#), "\(error)")
        }
    }

    // MARK: The environment, and where each value came from

    private let file = Array(#"{"host": "0.0.0.0", "port": 9000, "storage": "data/a.db"}"#.utf8)

    func testTheEnvironmentOverridesTheFile() throws {
        let loaded = try ServerConfig.load(
            file, source: "c.json",
            environment: [
                "RINGCAST_PORT": "9100", "RINGCAST_STORAGE": "/var/lib/ringcast/ringcast.db", "RINGCAST_LOG_LEVEL": "debug", "RINGCAST_HOST": "",
            ])
        XCTAssertEqual(loaded.config.port, 9100)
        XCTAssertEqual(loaded.config.storage, "/var/lib/ringcast/ringcast.db")
        XCTAssertEqual(loaded.config.logLevel, .debug)
        XCTAssertEqual(loaded.config.host, "0.0.0.0", "an empty variable is not set")
        XCTAssertEqual(loaded.origin(of: "port"), .environment("RINGCAST_PORT"))
        XCTAssertEqual(loaded.origin(of: "host"), .file)
        XCTAssertEqual(loaded.origin(of: "maxTasks"), .defaultValue)
        XCTAssertEqual(
            loaded.summary,
            "port from RINGCAST_PORT; logLevel from RINGCAST_LOG_LEVEL; storage from RINGCAST_STORAGE; from the file: host; the rest default")
        XCTAssertEqual(loaded.originsJSON["storage"], .string("RINGCAST_STORAGE"))
    }

    func testABadVariableIsNamedWithTheFieldAndTheValue() {
        func message(_ environment: [String: String]) -> String {
            do {
                _ = try ServerConfig.load(file, source: "c.json", environment: environment)
                return "accepted"
            } catch {
                return error.description
            }
        }
        XCTAssertEqual(message(["RINGCAST_PORT": "http"]), "RINGCAST_PORT must be a port number from 0 to 65535, not 'http'")
        XCTAssertEqual(
            message(["RINGCAST_PORT": "70000"]), #"RINGCAST_PORT: "port" must be a port number from 0 to 65535 (0 picks a free port), not 70000"#)
        XCTAssertEqual(
            message(["RINGCAST_LOG_LEVEL": "loud"]), #"RINGCAST_LOG_LEVEL: "logLevel" must be one of debug, info, warning, error, not 'loud'"#)
    }
}
