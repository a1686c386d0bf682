import Foundation
import RingcastCore
import RingcastServer

/// What `serve` says of itself: the configuration it loads (shared with `config check`, so both say
/// the same of a bad file) and its start-up line.
extension ServeCommand {
    /// The file's settings with the environment's overrides, or the one-line error `serve` stops with.
    static func load(_ path: String, environment: [String: String]) throws(UsageError) -> LoadedConfig {
        try load(path, bytes: read(path), environment: environment)
    }

    /// The config file's bytes, or the error that says it cannot be read.
    static func read(_ path: String) throws(UsageError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("cannot read the config file '\(path)': give one with --config FILE", pointsAtHelp: false)
        }
        return Array(data)
    }

    /// `bytes`, the file at `path` as read, parsed and checked.
    static func load(_ path: String, bytes: [UInt8], environment: [String: String]) throws(UsageError) -> LoadedConfig {
        do {
            return try ServerConfig.load(bytes, source: path, environment: environment)
        } catch {
            throw UsageError("\(error)", pointsAtHelp: false)
        }
    }

    /// One line: version, address, storage, threads, the config file and where each setting came from.
    func logStart(_ server: Server, to logger: Logger) {
        let storage = storageDescription
        let threads = server.threads
        let file = URL(fileURLWithPath: loaded.source).standardizedFileURL.path
        logger.info(
            "ringcast \(RingcastVersion.version) serving \(server.url): storage \(storage), \(threads) service thread\(threads == 1 ? "" : "s"), "
                + "config \(file) (\(loaded.summary))",
            fields: [
                ("event", .string("start")), ("version", .string(RingcastVersion.version)), ("address", .string(server.url)),
                ("storage", .string(storage)), ("threads", .number(Double(threads))), ("config", .string(file)),
                ("settings", loaded.originsJSON),
            ] + (server.configGeneration?.fields ?? []))
    }

    /// SIGHUP: the file read again, checked whole, and applied to `server` (Server.reload); a
    /// file that cannot be read, parsed or applied is refused, logged, and what runs keeps running.
    func reload(_ server: Server, logger: Logger) {
        let refused: String
        do {
            let bytes = try ServeCommand.read(configPath)
            let file = try ServeCommand.withOptions(ServeCommand.load(configPath, bytes: bytes, environment: options.environment), options)
            let overridden = Set(
                ServerConfig.keys.filter {
                    switch file.origin(of: $0) {
                    case .environment, .option: true
                    case .file, .defaultValue: false
                    }
                })
            let outcome = try server.reload(file.config, bytes: bytes, source: configPath, overridden: overridden)
            let live = server.configGeneration
            logger.info(
                "reloaded \(configPath) (generation \(live?.generation ?? 0), hash \(live?.hash ?? "?")): "
                    + (outcome.applied.isEmpty ? "no live setting changed" : "applied " + outcome.applied.joined(separator: ", "))
                    + (server.config.tls != nil ? "; TLS certificate and key read again" : ""),
                fields: [("event", .string("reload")), ("applied", .array(outcome.applied.map(JSONValue.string)))] + (live?.fields ?? []))
            if !outcome.kept.isEmpty {
                logger.warning(
                    "reload: \(outcome.kept.joined(separator: ", ")) changed in \(configPath) but cannot change while the server runs: kept as they are until a restart",
                    fields: [("event", .string("reload-kept")), ("kept", .array(outcome.kept.map(JSONValue.string)))])
            }
            return
        } catch let error as UsageError {
            refused = error.description
        } catch {
            refused = "\(error)"
        }
        let live = server.configGeneration
        logger.error(
            "reload refused, nothing changed: \(refused); still serving generation \(live?.generation ?? 0) (hash \(live?.hash ?? "?"))",
            fields: [("event", .string("reload-refused")), ("reason", .string(refused))] + (live?.fields ?? []))
    }

    /// `memory`, or `sqlite PATH` with the path resolved as `Server.storage(for:)` resolves it.
    private var storageDescription: String {
        guard config.storage != "memory" else { return "memory" }
        // A Redis URL carries no password (RedisURL refuses one), so the start line may show it whole.
        if config.storage.hasPrefix("redis://") || config.storage.hasPrefix("redis-sentinel://") { return config.storage }
        let path = config.storage.hasPrefix("/") ? config.storage : baseDirectory + "/" + config.storage
        return "sqlite " + URL(fileURLWithPath: path).standardizedFileURL.path
    }
}
