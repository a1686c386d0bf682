import RingcastCore
import XCTest

@testable import ringcast

/// `ringcast config example` is a file to start from; `config check` validates as `serve` does.
final class ConfigCommandTests: XCTestCase {
    func testTheExampleIsAConfigurationOfEveryDefault() throws {
        let example = ConfigCommand.example
        let config = try ServerConfig.parse(Array(example.utf8), source: "example")
        XCTAssertEqual(config, ServerConfig(), "every value the example shows is the default: the reference and the parser agree")
        let nested = ServerConfig.nestedKeys.values.flatMap { $0 }
        let missing = (ServerConfig.keys + nested).filter { !example.contains("\"\($0)\"") }
        XCTAssertEqual(missing, [], "the example names every setting (tls and a publisher's keys in comments)")
        XCTAssertTrue(example.split(separator: "\n").allSatisfy { $0.count <= 100 }, "lines fit a terminal")
    }

    func testCheckTakesOneFileAndExampleNone() {
        func usage(_ arguments: [String]) -> String? {
            do {
                _ = try ConfigCommand(validating: ParsedOptions(arguments, options: ConfigCommand.allGroups.flatMap(\.options)))
                return nil
            } catch {
                return error.description
            }
        }
        XCTAssertEqual(usage([]), "say what to do: `ringcast config check FILE` or `ringcast config example`")
        XCTAssertEqual(usage(["chek", "a.json"]), "unknown action 'chek': say `ringcast config check FILE` or `ringcast config example`")
        XCTAssertEqual(usage(["example", "x"]), "unexpected argument 'x'")
        XCTAssertEqual(
            usage(["check", "/nonexistent/ringcast.json"]), "cannot read the config file '/nonexistent/ringcast.json': give one with --config FILE")
        XCTAssertNil(usage(["example"]))
    }

    func testTheVersionLine() {
        XCTAssertEqual(VersionCommand.line, "ringcast \(RingcastVersion.version)")
    }
}
