import Foundation
import Ringcast
import RingcastCore

/// `ringcast serve`: the server, on the address in the config file, until SIGINT or SIGTERM.
struct ServeCommand: Subcommand {
    static let name = "serve"
    static let summary = "run the server (the default)"
    static let usage = ["ringcast serve [--config FILE] [--host HOST] [--port PORT]"]
    static let discussion = "Serves the dashboard, the WebSocket at /ws and the HTTP API under /api/ on one port."
    static let optionGroups = [OptionGroup("options", [
        .value("config", "FILE", "the configuration, relative to the current directory", default: "config.json"),
        .value("host", "HOST", "the address to listen on (overrides the config; default 127.0.0.1)"),
        .value("port", "PORT", "the port (overrides the config); 0 picks a free port"),
    ])]

    let config: ServerConfig
    /// Where relative paths in the config (publicDir, storage) start.
    let baseDirectory: String

    init(validating options: ParsedOptions) throws(UsageError) {
        try options.noPositional()
        let configPath = options.value("config")!
        guard let data = FileManager.default.contents(atPath: configPath) else {
            throw UsageError("cannot read the config file '\(configPath)': give one with --config FILE", pointsAtHelp: false)
        }
        var config: ServerConfig
        do {
            config = try ServerConfig.parse(Array(data), source: configPath, environment: options.environment)
        } catch {
            throw UsageError("\(error)", pointsAtHelp: false)
        }
        if let host = options.value("host") { config.host = host }
        if let portText = options.value("port") {
            guard let port = Int(portText), (0...65535).contains(port) else {
                throw UsageError("--port must be a number from 0 to 65535, not '\(portText)'")
            }
            config.port = port
        }
        self.config = config
        baseDirectory = URL(fileURLWithPath: configPath).deletingLastPathComponent().path
    }

    func run() throws(CommandFailure) -> Int32 {
        let logger = Logger(level: config.logLevel) { line in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        let server: RingcastServer
        do {
            let persistence = try RingcastServer.persistence(for: config, baseDirectory: baseDirectory, logger: logger)
            server = RingcastServer(config: config, baseDirectory: baseDirectory, logger: logger, persistence: persistence)
            try server.start()
        } catch {
            throw CommandFailure("\(error)")
        }
        print("listening on \(server.url)")
        TerminationSignals.wait()
        logger.info("stopping")
        server.stop()
        return 0
    }
}
