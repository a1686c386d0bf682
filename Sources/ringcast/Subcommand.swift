import Foundation
import RingcastCore

/// The shape of every `ringcast` command: what its help says, its option table, one validation
/// step that turns the arguments into the command's values (or a usage error saying what to type
/// instead), and the work itself.
protocol Subcommand {
    static var name: String { get }
    /// One line for `ringcast help`.
    static var summary: String { get }
    /// The usage line(s), each after `usage: `.
    static var usage: [String] { get }
    /// What the command does, for its `--help`.
    static var discussion: String { get }
    /// The command's options by heading; `--help` is added to the last group.
    static var optionGroups: [OptionGroup] { get }
    /// Printed after the options (exit statuses and the like).
    static var epilogue: String { get }
    /// Whether everything after `--` is the command's (only `run`).
    static var takesPassthrough: Bool { get }

    /// The one validation step: every check on the arguments, before anything is sent or started.
    init(validating options: ParsedOptions) throws(UsageError)

    /// Does the work; returns the exit status (0, or a status of its own such as `run`'s).
    func run() throws(CommandFailure) -> Int32
}

/// A runtime failure (the server is unreachable, or refused the request): exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Subcommand {
    static var epilogue: String { "" }
    static var takesPassthrough: Bool { false }

    /// The groups as parsed and shown: `--help` closes the last one.
    static var allGroups: [OptionGroup] {
        var groups = optionGroups
        let last = groups.popLast() ?? OptionGroup("options", [])
        return groups + [OptionGroup(last.title, last.options + [.help])]
    }

    static var help: String {
        HelpText.render(usage: usage, discussion: discussion, groups: allGroups, epilogue: epilogue)
    }

    /// Help, or parse, validate and run: 0 or the command's status; 2 for a usage error, 1 for a
    /// failure, each with one line on stderr.
    static func main(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32 {
        let own = takesPassthrough ? Array(arguments.prefix { $0 != "--" }) : arguments
        if own.contains("--help") || own.contains("-h") {
            print(help)
            return 0
        }
        let command: Self
        do {
            let options = try ParsedOptions(
                arguments, options: allGroups.flatMap(\.options), takesPassthrough: takesPassthrough,
                environment: environment)
            command = try Self(validating: options)
        } catch {
            fail("\(name): \(error)" + (error.pointsAtHelp ? "; see `ringcast \(name) --help`" : ""))
            return 2
        }
        do {
            return try command.run()
        } catch {
            fail("\(name): \(error)")
            return 1
        }
    }
}

/// `ringcast [COMMAND] [OPTIONS]`: the root, which names the commands and hands over to one.
enum CommandLineTool {
    /// Every command, in the order the root help lists them.
    static var commands: [any Subcommand.Type] {
        [
            ServeCommand.self, PushCommand.self, ShowCommand.self, HideCommand.self, TimerCommand.self, RemoveCommand.self,
            ListCommand.self, WaitCommand.self, WatchCommand.self, RunCommand.self, PipeCommand.self, LoadCommand.self, ConfigCommand.self,
            VersionCommand.self,
        ]
    }

    static var usage: String {
        let names = commands.map { ($0.name, $0.summary) } + [("help", "show this help; `ringcast COMMAND --help` shows a command's options")]
        let width = names.map(\.0.count).max()! + 4
        return """
            ringcast: a live-progress server and its tools.

            usage: ringcast [COMMAND] [OPTIONS]

            commands:
            \(names.map { "  " + $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n"))

            The producer commands and load talk to --server URL (or $RINGCAST_URL, default
            \(ConnectionOptions.defaultServer)) with --token TOKEN (or $RINGCAST_TOKEN). Exit status: 0 done,
            1 failed (the server could not be reached or refused), 2 a wrong argument; `run` exits with its
            command's status, `wait` and `watch` with how the tasks ended (see their --help).
            """
    }

    static func run(_ arguments: [String]) -> Int32 {
        guard let name = arguments.first, !name.hasPrefix("-") else {
            if arguments.contains("--help") || arguments.contains("-h") {
                print(usage)
                return 0
            }
            if arguments.first == "--version" {
                print(VersionCommand.line)
                return 0
            }
            return ServeCommand.main(arguments)
        }
        let rest = Array(arguments.dropFirst())
        if name == "help" {
            guard let topic = rest.first else {
                print(usage)
                return 0
            }
            return command(topic).map {
                print($0.help)
                return 0
            } ?? unknown(topic)
        }
        return command(name)?.main(rest) ?? unknown(name)
    }

    private static func command(_ name: String) -> (any Subcommand.Type)? { commands.first { $0.name == name } }

    private static func unknown(_ name: String) -> Int32 {
        fail("unknown command '\(name)'; run `ringcast help` for the list")
        return 2
    }
}

/// Prints a one-line error to stderr, cleaned: it may quote what a server or a publisher wrote.
func fail(_ message: String) {
    FileHandle.standardError.write(Data("ringcast: \(TerminalText.clean(message))\n".utf8))
}
