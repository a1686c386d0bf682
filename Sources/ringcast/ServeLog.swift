import Foundation
import RingcastCore
import RingcastServer

/// What `serve` says of itself: the configuration it loads (shared with `config check`, so both say
/// the same of a bad file) and its start-up line.
extension ServeCommand {
    /// The file's settings with the environment's overrides, or the one-line error `serve` stops with.
    static func load(_ path: String, environment: [String: String]) throws(UsageError) -> LoadedConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("cannot read the config file '\(path)': give one with --config FILE", pointsAtHelp: false)
        }
        do {
            return try ServerConfig.load(Array(data), source: path, environment: environment)
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
            ])
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
