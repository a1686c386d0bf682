import Foundation
import Ringcast
import RingcastCore

/// `ringcast COMMAND [OPTIONS]`: a root command with subcommands, each with its own help.
enum CommandLineTool {
    static let usage = """
    ringcast: a live-progress server and its tools.

    usage: ringcast [COMMAND] [OPTIONS]

    commands:
      serve     run the server (the default)
      push      create or update a task: ringcast push ci.build --progress 42%
      show      show a task, optionally for a while: ringcast show save --hide-after 3
      hide      hide a task
      timer     start, pause, resume or cancel a countdown: ringcast timer tea --seconds 180
      rm        remove a task
      ls        list the tasks as a table
      run       a spinner while a command runs, then done or failed: ringcast run build -- make
      pipe      progress read from another program's output: make 2>&1 | ringcast pipe build
      load      load-test a server: many watchers, latency measured at each: ringcast load --clients 1000
      help      show this help; `ringcast COMMAND --help` shows a command's options

    The producer commands talk to --server URL (or $RINGCAST_URL, default http://127.0.0.1:8080)
    with --token TOKEN (or $RINGCAST_TOKEN). Exit status: 0 done, 1 failed (the server could not
    be reached or refused), 2 a wrong argument; `run` exits with its command's status.
    """

    /// The producer commands, by name.
    static let producers: [String: any ProducerCommand.Type] = [
        "push": PushCommand.self, "show": ShowCommand.self, "hide": HideCommand.self, "timer": TimerCommand.self,
        "rm": RemoveCommand.self, "ls": ListCommand.self, "run": RunCommand.self, "pipe": PipeCommand.self,
    ]

    static func run(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first, !command.hasPrefix("-") else {
            if arguments.contains("--help") || arguments.contains("-h") { print(usage); return 0 }
            return ServeCommand.run(arguments)
        }
        let rest = Array(arguments.dropFirst())
        switch command {
        case "serve": return ServeCommand.run(rest)
        case "load": return LoadCommand.run(rest)
        case "help": print(usage); return 0
        case let name where producers[name] != nil: return producers[name]!.main(rest)
        default:
            fail("unknown command '\(command)'; run `ringcast help` for the list")
            return 2
        }
    }
}

/// Prints a one-line error to stderr.
func fail(_ message: String) {
    FileHandle.standardError.write(Data("ringcast: \(message)\n".utf8))
}

/// Options as `--name value`, `--name=value` or a bare `--flag`; anything else is positional.
struct ParsedOptions {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var positional: [String] = []
    var passthrough: [String] = []

    init(_ arguments: [String], valued: Set<String>, flags allowedFlags: Set<String>) throws(UsageError) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                passthrough = Array(arguments[index...])
                return
            }
            guard argument.hasPrefix("--") else {
                positional.append(argument)
                continue
            }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if valued.contains(name) {
                if let inlineValue {
                    values[name] = inlineValue
                } else {
                    guard index < arguments.count else { throw UsageError("--\(name) needs a value") }
                    values[name] = arguments[index]
                    index += 1
                }
            } else if allowedFlags.contains(name), inlineValue == nil {
                flags.insert(name)
            } else {
                throw UsageError("unknown option --\(name)")
            }
        }
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum ServeCommand {
    static let help = """
    usage: ringcast serve [--config FILE] [--host HOST] [--port PORT]

    Serves the dashboard, the WebSocket at /ws and the HTTP API under /api/ on one port.

    options:
      --config FILE   the configuration (default: config.json in the current directory)
      --host HOST     the address to listen on (overrides the config; default 127.0.0.1)
      --port PORT     the port (overrides the config); 0 picks a free port
      --help          show this help
    """

    static func run(_ arguments: [String]) -> Int32 {
        let options: ParsedOptions
        do {
            options = try ParsedOptions(arguments, valued: ["config", "host", "port"], flags: ["help"])
        } catch {
            fail("serve: \(error); see `ringcast serve --help`")
            return 2
        }
        if options.flags.contains("help") { print(help); return 0 }
        guard options.positional.isEmpty else {
            fail("serve: unexpected argument '\(options.positional[0])'; see `ringcast serve --help`")
            return 2
        }
        let configPath = options.values["config"] ?? "config.json"
        var config: ServerConfig
        do {
            guard let data = FileManager.default.contents(atPath: configPath) else {
                fail("cannot read the config file '\(configPath)': give one with --config FILE")
                return 2
            }
            config = try ServerConfig.parse(Array(data), source: configPath, environment: ProcessInfo.processInfo.environment)
        } catch {
            fail("\(error)")
            return 2
        }
        if let host = options.values["host"] { config.host = host }
        if let portText = options.values["port"] {
            guard let port = Int(portText), (0...65535).contains(port) else {
                fail("serve: --port must be a number from 0 to 65535, not '\(portText)'")
                return 2
            }
            config.port = port
        }
        let logger = Logger(level: config.logLevel) { line in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        let baseDirectory = URL(fileURLWithPath: configPath).deletingLastPathComponent().path
        let persistence: TaskPersistence
        do {
            persistence = try RingcastServer.persistence(for: config, baseDirectory: baseDirectory, logger: logger)
        } catch {
            fail("\(error)")
            return 1
        }
        let server = RingcastServer(config: config, baseDirectory: baseDirectory, logger: logger, persistence: persistence)
        let port: Int
        do {
            port = try server.start()
        } catch {
            fail("\(error)")
            return 1
        }
        let shownHost = config.host.contains(":") ? "[\(config.host)]" : config.host
        print("listening on http://\(shownHost):\(port)")
        waitForTerminationSignal()
        logger.info("stopping")
        server.stop()
        return 0
    }

    /// Blocks until SIGINT or SIGTERM arrives.
    static func waitForTerminationSignal() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        var received: Int32 = 0
        sigwait(&signals, &received)
    }
}
