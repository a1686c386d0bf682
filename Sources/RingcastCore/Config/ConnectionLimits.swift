/// How many sockets the server holds open at once, in all and per address: below the open-file
/// limit, so that a client holding every connection it may still leaves descriptors for storage,
/// webhooks, the log and the next accept, and below the total per address, so that one address
/// holding all it may still leaves room for another's `/healthz`.
public struct ConnectionLimits: Equatable, Sendable {
    /// Sockets in all (`Int.max`: none but the open-file limit's).
    public var total: Int
    /// Sockets one address may hold (0: no limit).
    public var perAddress: Int

    public init(total: Int, perAddress: Int) {
        self.total = total
        self.perAddress = perAddress
    }

    /// Descriptors kept back from connections: an eighth of the limit, at least 64 (SQLite's file,
    /// its journal and shared memory, webhook sockets, Redis, the log, a certificate being read).
    public static func reserve(openFileLimit: Int) -> Int { max(64, openFileLimit / 8) }

    /// The limits `config` sets, its unset ones derived from the open-file limit (nil: unlimited)
    /// and the descriptors the server holds already (`inUse`: listeners, event loops, storage).
    public static func derived(from config: ServerConfig, openFileLimit: Int?, inUse: Int) -> ConnectionLimits {
        let total =
            config.maxConnections
            ?? openFileLimit.map { limit in max(16, limit - inUse - reserve(openFileLimit: limit)) } ?? Int.max
        let perAddress = config.maxConnectionsPerAddress ?? min(1024, max(1, total / 2))
        return ConnectionLimits(total: total, perAddress: perAddress)
    }
}
