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

    /// Descriptors kept back from connections: 64 (SQLite's file, its journal and shared memory,
    /// Redis, the log, a certificate being read), one for each webhook attempt that may be in flight,
    /// and a 64th of the limit for what grows with the load. Sized by what the server opens, not
    /// by a share of the limit: an eighth would idle 8 192 descriptors at systemd's 65 536.
    public static func reserve(openFileLimit: Int, for config: ServerConfig = ServerConfig()) -> Int {
        64 + config.webhooks.reduce(0) { $0 + $1.concurrency } + openFileLimit / 64
    }

    /// The limits `config` sets, its unset ones derived from the open-file limit (nil: unlimited)
    /// and the descriptors the server holds already (`inUse`: listeners, event loops, storage).
    public static func derived(from config: ServerConfig, openFileLimit: Int?, inUse: Int) -> ConnectionLimits {
        let total =
            config.maxConnections
            ?? openFileLimit.map { limit in max(16, limit - inUse - reserve(openFileLimit: limit, for: config)) } ?? Int.max
        let perAddress = config.maxConnectionsPerAddress ?? min(1024, max(1, total / 2))
        return ConnectionLimits(total: total, perAddress: perAddress)
    }
}
