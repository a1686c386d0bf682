import XCTest

@testable import ringcast

/// The option table: one source for what a command accepts and for what its help says.
final class OptionTableTests: XCTestCase {
    private let table: [Option] = [
        .value("server", "URL", "the server", environment: "RINGCAST_URL", default: "http://127.0.0.1:8080", aliases: ["url"]),
        .value("title", "T", "a title"),
        .flag("modal", "cover the page"),
    ]

    func testValuesFlagsPositionalsAndPassthrough() throws {
        let parsed = try ParsedOptions(
            ["job", "--title", "Build", "--modal", "--server=http://h:1", "--", "make", "-j"],
            options: table, takesPassthrough: true)
        XCTAssertEqual(parsed.positional, ["job"])
        XCTAssertEqual(parsed.value("title"), "Build")
        XCTAssertTrue(parsed.flag("modal"))
        XCTAssertEqual(parsed.value("server"), "http://h:1")
        XCTAssertEqual(parsed.passthrough, ["make", "-j"])
        XCTAssertTrue(parsed.isGiven("title"))
        XCTAssertFalse(try ParsedOptions([], options: table).isGiven("title"))
    }

    func testWhatTheTableDoesNotListIsAUsageError() {
        func refusal(_ arguments: [String], passthrough: Bool = false) -> String? {
            do {
                _ = try ParsedOptions(arguments, options: table, takesPassthrough: passthrough)
                return nil
            } catch { return error.description }
        }
        XCTAssertEqual(refusal(["--bogus"]), "unknown option --bogus")
        XCTAssertEqual(refusal(["--title"]), "--title needs a value")
        XCTAssertEqual(refusal(["--modal=yes"]), "--modal takes no value")
        XCTAssertEqual(refusal(["--", "echo"]), "'--' is only for `ringcast run`")
        XCTAssertNil(refusal(["--", "echo"], passthrough: true))
    }

    func testTheCommandLineWinsOverTheEnvironmentWhichWinsOverTheDefault() throws {
        let environment = ["RINGCAST_URL": "http://from-env:2"]
        let given = try ParsedOptions(["--server", "http://given:1"], options: table, environment: environment)
        XCTAssertEqual(given.value("server"), "http://given:1")
        XCTAssertEqual(given.source("server"), "--server")
        let fromEnvironment = try ParsedOptions([], options: table, environment: environment)
        XCTAssertEqual(fromEnvironment.value("server"), "http://from-env:2")
        XCTAssertEqual(fromEnvironment.source("server"), "RINGCAST_URL")
        let empty = try ParsedOptions([], options: table, environment: ["RINGCAST_URL": ""])
        XCTAssertEqual(empty.value("server"), "http://127.0.0.1:8080", "an empty variable counts as unset")
        XCTAssertEqual(empty.source("server"), "the default")
        XCTAssertNil(empty.value("title"))
    }

    func testAnAliasIsTheSameOptionAndMessagesSayHowItWasSpelled() throws {
        let parsed = try ParsedOptions(["--url", "http://old:3"], options: table)
        XCTAssertEqual(parsed.value("server"), "http://old:3")
        XCTAssertEqual(parsed.source("server"), "--url")
        let load = try ParsedOptions(["--url", "http://old:3"], options: LoadCommand.allGroups.flatMap(\.options))
        XCTAssertEqual(load.value("server"), "http://old:3", "load keeps --url for the scripts that use it")
    }

    func testTypedValuesSayWhatIsWrong() throws {
        let options: [Option] = [.value("clients", "N", "watchers"), .value("rate", "R", "per second"), .value("hide-after", "S", "later")]
        let parsed = try ParsedOptions(["--clients", "many", "--rate", "inf", "--hide-after", "0"], options: options)
        XCTAssertThrowsError(try parsed.integer("clients")) { XCTAssertEqual("\($0)", "--clients takes a whole number, not 'many'") }
        XCTAssertThrowsError(try parsed.decimal("rate")) { XCTAssertEqual("\($0)", "--rate takes a number, not 'inf'") }
        XCTAssertThrowsError(try parsed.seconds("hide-after")) { XCTAssertEqual("\($0)", "--hide-after wants seconds, at least 0.001, not '0'") }
    }

    func testEveryCommandsHelpIsItsTableAndNamesNoOptionItLacks() throws {
        var names = Set<String>()
        for command in CommandLineTool.commands {
            XCTAssertTrue(names.insert(command.name).inserted, "two commands are called \(command.name)")
            let help = command.help
            let options = command.allGroups.flatMap(\.options)
            XCTAssertTrue(help.hasPrefix("usage: "), command.name)
            XCTAssertTrue(help.contains("ringcast \(command.name)"), command.name)
            XCTAssertEqual(options.last?.name, "help", "\(command.name): --help closes the table")
            XCTAssertEqual(Set(options.map(\.name)).count, options.count, "\(command.name) lists an option twice")
            let accepted = Set(options.flatMap { [$0.name] + $0.aliases })
            for option in options {
                XCTAssertTrue(help.contains("\n  " + option.synopsis + " "), "\(command.name) --help lacks \(option.synopsis)")
            }
            // Every --word the help mentions (usage line, prose, option help) is one the command takes.
            let mentioned = help.split { !($0.isLetter || $0.isNumber || $0 == "-") }.filter { $0.hasPrefix("--") && $0.count > 2 }
            for word in mentioned {
                XCTAssertTrue(accepted.contains(String(word.dropFirst(2))), "\(command.name) --help mentions \(word), which it does not take")
            }
            for line in help.split(separator: "\n") where line.hasPrefix("  --") || line.hasPrefix("        ") {
                XCTAssertLessThanOrEqual(line.count, HelpText.width, "\(command.name): a help line is too long: \(line)")
            }
            XCTAssertTrue(CommandLineTool.usage.contains("\n  \(command.name) "), "the root help lacks \(command.name)")
        }
    }

    func testHelpShowsDefaultsAndEnvironmentWithTheirOption() {
        let help = HelpText.render(usage: ["ringcast x"], discussion: "", groups: [OptionGroup("options", table)], epilogue: "")
        XCTAssertTrue(help.contains("--server URL  the server (default: $RINGCAST_URL, else http://127.0.0.1:8080); also --url"), help)
        XCTAssertTrue(help.contains("--modal       cover the page"), help)
        XCTAssertEqual(HelpText.wrap("one two three four", width: 9), ["one two", "three", "four"])
    }
}
