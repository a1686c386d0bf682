import Foundation
import RingcastCore
import RingcastLWS
import RingcastServer

/// `ringcast serve`: the server, on the address in the config file, until SIGINT or SIGTERM.
struct ServeCommand: Subcommand {
    static let name = "serve"
    static let summary = "run the server (the default)"
    static let usage = ["ringcast serve [--config FILE] [--host HOST] [--port PORT] [--log-format FORMAT]"]
    static let discussion = "Serves the dashboard, the WebSocket at /ws and the HTTP API under /api/ on one port."
    static let optionGroups = [
        OptionGroup(
            "options",
            [
                .value("config", "FILE", "the configuration, relative to the current directory", default: "config.json"),
                .value("host", "HOST", "the address to listen on (overrides the config; default 127.0.0.1)"),
                .value("port", "PORT", "the port (overrides the config); 0 picks a free port"),
                .value("log-format", "FORMAT", "text, or json: one object per line for log collectors (overrides logFormat in the config)"),
            ])
    ]
    static let epilogue = """
        RINGCAST_HOST, RINGCAST_PORT, RINGCAST_STORAGE and RINGCAST_LOG_LEVEL override the config file;
        --host and --port override them. The start-up log line says where each setting came from.
        `ringcast config check FILE` checks a file without starting; docs/CONFIG.md lists every setting.
        SIGINT or SIGTERM stop the server; SIGHUP (systemctl reload) reads the file again and applies
        who may read and publish, origins, webhooks, the log level and the TLS files, dropping no
        connection; a file that does not check is refused and what runs keeps running.
        """

    let config: ServerConfig
    /// The same settings, with where each came from.
    let loaded: LoadedConfig
    /// Where relative paths in the config (publicDir, storage) start.
    let baseDirectory: String
    /// The file, as given, read again on SIGHUP.
    let configPath: String
    /// The command line's overrides, applied again to each reload.
    let options: ParsedOptions
    /// The file as it was read for `loaded`: the first generation's hash (`/readyz`).
    let configBytes: [UInt8]

    init(validating options: ParsedOptions) throws(UsageError) {
        try options.noPositional()
        let configPath = options.value("config")!
        self.configPath = configPath
        self.options = options
        let bytes = try ServeCommand.read(configPath)
        configBytes = bytes
        let loaded = try ServeCommand.withOptions(ServeCommand.load(configPath, bytes: bytes, environment: options.environment), options)
        self.loaded = loaded
        let config = loaded.config
        self.config = config
        baseDirectory = URL(fileURLWithPath: configPath).deletingLastPathComponent().path
    }

    /// The file's settings with `--host`, `--port` and `--log-format` laid over them.
    static func withOptions(_ loaded: LoadedConfig, _ options: ParsedOptions) throws(UsageError) -> LoadedConfig {
        var loaded = loaded
        if let host = options.value("host") {
            loaded.config.host = host
            loaded.note("host", from: .option("--host"))
        }
        if let portText = options.value("port") {
            guard let port = Int(portText), (0...65535).contains(port) else {
                throw UsageError("--port must be a number from 0 to 65535, not '\(portText)'")
            }
            loaded.config.port = port
            loaded.note("port", from: .option("--port"))
        }
        if let formatName = options.value("log-format") {
            guard let format = LogFormat(rawValue: formatName) else {
                throw UsageError("--log-format must be \(LogFormat.allCases.map(\.rawValue).joined(separator: " or ")), not '\(formatName)'")
            }
            loaded.config.logFormat = format
            loaded.note("logFormat", from: .option("--log-format"))
        }
        return loaded
    }

    func run() throws(CommandFailure) -> Int32 {
        let logger = Logger(
            level: config.logLevel,
            destination: .lines(config.logFormat, now: { Date().timeIntervalSince1970 * 1000 }) { line in
                FileHandle.standardError.write(Data((line + "\n").utf8))
            })
        TerminationSignals.takeOverHangUp()
        LWS.raiseOpenFileLimit()
        let server: Server
        do {
            let storage = try Server.storage(for: config, baseDirectory: baseDirectory, logger: logger)
            server = Server(config: config, baseDirectory: baseDirectory, logger: logger, storage: storage)
            try server.start()
        } catch let error as StorageFileError {
            // Like a wrong setting, a file the server will not touch needs the operator, not a restart.
            fail("\(Self.name): \(error)")
            return 2
        } catch {
            throw CommandFailure("\(error)")
        }
        print("listening on \(server.url)")
        server.noteConfigFile(configBytes, source: configPath)
        logStart(server, to: logger)
        var signal = TerminationSignals.waitWithHangUp()
        while signal == SIGHUP {
            reload(server, logger: logger)
            signal = TerminationSignals.waitWithHangUp()
        }
        logger.info(
            "stopping (\(signal == SIGTERM ? "SIGTERM" : "SIGINT")): closing connections, flushing storage", fields: [("event", .string("stop"))])
        server.stop()
        logger.info("stopped", fields: [("event", .string("stopped"))])
        return 0
    }
}
