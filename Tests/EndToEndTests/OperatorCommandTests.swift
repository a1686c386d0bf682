import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// The built executable as an operator meets it: its version, checking a config without starting,
/// the environment over the file, and the start-up and stop lines in text and JSON.
final class OperatorCommandTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-operator") }
    override func tearDown() { folder?.remove() }

    func testTheVersionFromBothSpellingsAndFromTheServer() throws {
        let short = try RingcastProcess.run(["--version"])
        XCTAssertEqual(short.status, 0)
        XCTAssertEqual(short.stdout, "ringcast \(RingcastVersion.version)\n")
        let long = try RingcastProcess.run(["version"])
        XCTAssertEqual(long.status, 0)
        XCTAssertTrue(long.stdout.hasPrefix("ringcast \(RingcastVersion.version)\nprotocol \(ProtocolInfo.version)\n"), long.stdout)
        XCTAssertTrue(long.stdout.contains("libwebsockets 4."), long.stdout)
        XCTAssertTrue(try RingcastProcess.run(["help"]).stdout.contains("\n  config "), "the root help lists config")
    }

    func testConfigCheckSaysWhatServeWouldAndStartsNothing() throws {
        let good = folder.file("good.json")
        try Data(#"{"port": 0, "storage": "data/x.db"} // a comment"#.utf8).write(to: good)
        let checked = try RingcastProcess.run(["config", "check", good.path])
        XCTAssertEqual(checked.status, 0, checked.stderr)
        XCTAssertTrue(checked.stdout.hasPrefix("\(good.path): ok"), checked.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.file("data").path), "checking opens no storage")

        let bad = folder.file("bad.json")
        try Data(#"{"port": 0, "heartbeatSeconds": "15"}"#.utf8).write(to: bad)
        let refused = try RingcastProcess.run(["config", "check", bad.path])
        let served = try RingcastProcess.run(["serve", "--config", bad.path])
        XCTAssertEqual(refused.status, 2)
        XCTAssertEqual(served.status, 2)
        XCTAssertEqual(refused.stderrLines.count, 1)
        XCTAssertEqual(
            refused.stderr.replacingOccurrences(of: "ringcast: config: ", with: ""),
            served.stderr.replacingOccurrences(of: "ringcast: serve: ", with: ""), "the same one line")
        XCTAssertTrue(refused.stderr.contains(#""heartbeatSeconds""#), refused.stderr)

        let environment = try RingcastProcess.run(["config", "check", good.path], environment: ["RINGCAST_PORT": "eighty"])
        XCTAssertEqual(environment.status, 2)
        XCTAssertEqual(environment.stderr, "ringcast: config: RINGCAST_PORT must be a port number from 0 to 65535, not 'eighty'\n")

        let example = try RingcastProcess.run(["config", "example"])
        XCTAssertEqual(example.status, 0)
        let copy = folder.file("example.json")
        try Data(example.stdout.utf8).write(to: copy)
        XCTAssertEqual(try RingcastProcess.run(["config", "check", copy.path]).status, 0, "the example is a configuration that checks")
    }

    func testTheEnvironmentOverridesTheFileAndTheStartLineSaysWhereEachValueCameFrom() throws {
        let config = folder.file("config.json")
        try Data(#"{"host": "127.0.0.2", "port": 8080, "publicDir": "\#(repositoryRoot)/Public", "logLevel": "error", "threads": 2}"#.utf8).write(
            to: config)
        let log = folder.file("stderr.log")
        let served = try ServeProcess(
            ["--config", config.path, "--log-format", "json"],
            environment: [
                "RINGCAST_HOST": "127.0.0.1", "RINGCAST_PORT": "0", "RINGCAST_STORAGE": "state/ringcast.db", "RINGCAST_LOG_LEVEL": "info",
            ], errorLog: log)
        XCTAssertTrue(
            served.firstLine.hasPrefix("listening on http://127.0.0.1:"), "RINGCAST_HOST and RINGCAST_PORT win over the file: \(served.firstLine)")
        let client = HTTPClient(host: "127.0.0.1", port: served.port)
        XCTAssertEqual(try client.request("POST", "/api/tasks/env.kept", json: #"{"state":"done"}"#).status, 200)
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder.file("state/ringcast.db").path), "RINGCAST_STORAGE, from the config's folder")
        XCTAssertEqual(served.stop(), 0)

        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map { try JSONParser.parse(String($0)) }
        let start = try XCTUnwrap(lines.first { $0["event"] == .string("start") }, "\(lines)")
        XCTAssertEqual(start["level"], .string("info"), "RINGCAST_LOG_LEVEL won over the file's error")
        XCTAssertEqual(start["version"], .string(RingcastVersion.version))
        XCTAssertEqual(start["threads"], .number(2), "as the file says")
        XCTAssertEqual(start["settings"]?["threads"], .string("file"))
        XCTAssertEqual(start["storage"], .string("sqlite " + folder.file("state/ringcast.db").standardizedFileURL.path))
        XCTAssertEqual(start["config"], .string(config.standardizedFileURL.path))
        XCTAssertEqual(start["settings"]?["port"], .string("RINGCAST_PORT"))
        XCTAssertEqual(start["settings"]?["publicDir"], .string("file"))
        XCTAssertEqual(start["settings"]?["logFormat"], .string("--log-format"))
        XCTAssertEqual(start["settings"]?["maxTasks"], .string("default"))
        if case .string(let time)? = start["time"] { XCTAssertTrue(time.hasSuffix("Z") && time.count == 24, time) } else { XCTFail("no time") }
        XCTAssertTrue(
            lines.contains { line in
                guard line["event"] == .string("stop"), case .string(let message)? = line["message"] else { return false }
                return message.contains("SIGTERM")
            }, "the stop line names the signal")
        XCTAssertEqual(lines.last?["event"], .string("stopped"))

        // --port wins over RINGCAST_PORT; text lines say the same in words.
        let textLog = folder.file("text.log")
        let again = try ServeProcess(
            ["--config", config.path, "--port", "0"], environment: ["RINGCAST_PORT": "1", "RINGCAST_LOG_LEVEL": "info"],
            errorLog: textLog)
        XCTAssertNotEqual(again.port, 1)
        XCTAssertEqual(again.stop(), 0)
        let text = try String(contentsOf: textLog, encoding: .utf8)
        XCTAssertTrue(text.contains("[info] ringcast \(RingcastVersion.version) serving http://127.0.0.2:"), text)
        XCTAssertTrue(text.contains("port from --port"), text)
        XCTAssertTrue(text.contains("storage memory, 2 service threads"), text)
    }

    func testTheStartLineOfANodeOnRedisNamesRedis() throws {
        let redis = try RedisProcess()
        let config = folder.file("redis.json")
        try Data(#"{"host": "127.0.0.1", "port": 0, "publicDir": "\#(repositoryRoot)/Public", "storage": "\#(redis.url)/0"}"#.utf8).write(to: config)
        let log = folder.file("redis-start.log")
        let served = try ServeProcess(["--config", config.path], environment: ["RINGCAST_LOG_LEVEL": "info"], errorLog: log)
        XCTAssertEqual(served.stop(), 0)
        let text = try String(contentsOf: log, encoding: .utf8)
        XCTAssertTrue(text.contains("storage \(redis.url)/0, "), text)
        XCTAssertFalse(text.contains("sqlite"), text)
    }
}
