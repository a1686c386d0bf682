import Foundation
import RingcastCore
import RingcastCrypto
import RingcastLWS
import RingcastPlatform
import RingcastRedis

/// Open sockets, counted across every service thread, and the limits they are held to.
struct ConnectionBook {
    var byAddress: [String: Int] = [:]
    var total = 0
    var limits = ConnectionLimits(total: .max, perAddress: 0)
}

/// Where a server's state is kept: storage this node owns (memory, an SQLite file), which the
/// store writes every change to; or a cluster's engine, whose log every node applies to a copy
/// of the state in its own memory. One or the other, never both.
public struct ServerStorage {
    enum Role {
        case local(TaskPersistence)
        case cluster(RedisCluster)
    }

    let role: Role

    /// Storage this node owns alone.
    public static func local(_ persistence: TaskPersistence) -> ServerStorage { ServerStorage(role: .local(persistence)) }

    /// State shared through a cluster's log.
    static func cluster(_ engine: RedisCluster) -> ServerStorage { ServerStorage(role: .cluster(engine)) }
}

public struct ServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The Ringcast server: `threads` service loops (each on its own thread, with its own SO_REUSEPORT
/// listener on the one port and up to `contextsPerThread` libwebsockets contexts) serving the static files of the public
/// directory, the HTTP API under /api/ (with /healthz and /metrics) and the WebSocket at /ws. State
/// has one owner, `SharedState`; each loop fans out to its own watchers.
///
/// `start` opens the listeners and starts every loop; `stop` flushes storage, closes every
/// connection (watchers hear 1001) and returns once every context is gone.
///
/// `@unchecked Sendable`: `start`, `stop`, `port`, `url` and `epoch` may be called from any thread,
/// `reload` from any but a service thread (it writes `config` and `certificate` under `reloading`);
/// the shared parts (`state`, the per-address counts, the refusal log) synchronise themselves, and
/// each worker's state belongs to its thread.
public final class Server: @unchecked Sendable {
    /// What runs: as it started, with what reloads applied since (written by `reload`, under `reloading`).
    public internal(set) var config: ServerConfig
    let logger: Logger
    let state: SharedState
    /// What the store writes each change to: the storage this node owns, or, in a cluster, memory.
    let persistence: TaskPersistence
    private let publicDirectory: String
    /// Where relative paths in the config are found (the config file's folder).
    let baseDirectory: String
    /// The certificate and key, resolved against the config's folder, when `tls` is set (a reload
    /// may name other files).
    var certificate: (cert: String, key: String, ciphers: String)?
    /// What `url` says, fixed at start (a reload changes neither), so it reads nothing a reload writes.
    private let listenHost: String
    private let isSecure: Bool
    /// The file the configuration was loaded from, as last applied (`noteConfigFile`, `reload`).
    var configFile: (bytes: [UInt8], generation: ConfigGeneration)?
    /// One reload at a time.
    let reloading = NSLock()
    /// Where the server is in its life: it starts once, and keeps its port once stopped.
    enum Lifecycle: Sendable, Equatable {
        case initial
        case starting
        case running(port: Int)
        case stopped(port: Int)

        var port: Int {
            switch self {
            case .initial, .starting: 0
            case .running(let port), .stopped(let port): port
            }
        }
    }

    private let lifecycle = Locked(Lifecycle.initial)
    var workers: [ServiceWorker] = []
    /// The listening address, this process's alone while the server runs.
    private var addressClaim: AddressClaim?
    /// The open sockets, their limits and the refusals, counted across every service thread.
    let ledger: ServerLedger
    /// Readiness and start time, for operators (Operations.swift).
    let operations: OperationsState
    /// The browser's sign-in at config's `oidc` providers, and the checks of their tokens; nil
    /// when none is configured. Every service thread reads the one current; `applyIdentityProviders`
    /// replaces it.
    let signIn: Locked<ProviderSignIn?>
    /// The keys seen of each issuer, kept across `applyIdentityProviders`.
    private let providerKeys = ProviderKeyCache()

    /// A server on storage it owns alone (memory unless told otherwise).
    public convenience init(config: ServerConfig, baseDirectory: String, logger: Logger, persistence: TaskPersistence = MemoryOnlyPersistence()) {
        self.init(config: config, baseDirectory: baseDirectory, logger: logger, storage: .local(persistence))
    }

    /// - Parameter baseDirectory: where a relative `publicDir` is found (the config file's folder).
    public init(config: ServerConfig, baseDirectory: String, logger: Logger, storage: ServerStorage) {
        // The core checks tokens and signs webhooks through the process's Cryptography: a server
        // embedded in another program (or a test) gets libcrypto's unless its owner installed one.
        Crypto.installIfAbsent(LibCrypto())
        let config = Server.resolvingHookFiles(config, in: baseDirectory)
        self.config = config
        self.baseDirectory = baseDirectory
        self.logger = logger
        ledger = ServerLedger(logger: logger)
        let persistence: TaskPersistence
        let cluster: RedisCluster?
        switch storage.role {
        case .local(let owned): (persistence, cluster) = (owned, nil)
        // The node's copy of the state lives in memory, from the state the engine read at its
        // start: the cluster's log is what keeps a change.
        case .cluster(let engine): (persistence, cluster) = (MemoryOnlyPersistence(starting: engine.startingState), engine)
        }
        self.persistence = persistence
        let store = TaskStore(persistence: persistence, retentionSeconds: config.retentionSeconds, maxTasks: config.maxTasks)
        // "Who cancelled this?": requests and removals at info, states a publisher sets at debug.
        store.audit = { [logger] note in
            let fields: [LogField] = [("by", .string(note.by)), ("task", .string(note.id))]
            if note.kind == .state { logger.debug(note.description, fields: fields) } else { logger.info(note.description, fields: fields) }
        }
        let api = API(store: store, config: config)
        let current = config.oidc.isEmpty ? nil : ProviderSignIn(config: config, keys: providerKeys)
        signIn = Locked(current)
        api.identityProviders = current?.providers
        // Read once: `/tasks/{id}` answers it from the API, which has no files of its own.
        let pageFolder = URL(fileURLWithPath: config.publicDir.hasPrefix("/") ? config.publicDir : baseDirectory + "/" + config.publicDir)
        api.taskPage = FileManager.default.contents(atPath: pageFolder.appendingPathComponent("task.html").path).map { Array($0) }
        state = SharedState(store: store, api: api, persistence: persistence, cluster: cluster)
        operations = OperationsState(probes: Server.readinessProbes(for: storage), logger: logger)
        publicDirectory = Server.resolved(config.publicDir, in: baseDirectory)
        certificate = Server.certificate(of: config, in: baseDirectory)
        listenHost = config.host
        isSecure = config.tls != nil
    }

    /// A hook's certificate files, like the server's own, are found from the config file's folder.
    static func resolvingHookFiles(_ config: ServerConfig, in baseDirectory: String) -> ServerConfig {
        var config = config
        func inBase(_ path: String?) -> String? { path.map { $0.hasPrefix("/") ? $0 : baseDirectory + "/" + $0 } }
        for index in config.webhooks.indices {
            config.webhooks[index].caFile = inBase(config.webhooks[index].caFile)
            config.webhooks[index].clientCert = inBase(config.webhooks[index].clientCert)
            config.webhooks[index].clientKey = inBase(config.webhooks[index].clientKey)
        }
        return config
    }

    static func resolved(_ path: String, in baseDirectory: String) -> String {
        URL(fileURLWithPath: path.hasPrefix("/") ? path : baseDirectory + "/" + path).standardizedFileURL.path
    }

    /// `tls`'s files resolved against the config's folder.
    static func certificate(of config: ServerConfig, in baseDirectory: String) -> (cert: String, key: String, ciphers: String)? {
        config.tls.map { (resolved($0.cert, in: baseDirectory), resolved($0.key, in: baseDirectory), $0.ciphers) }
    }

    /// Puts `config`'s `oidc` in force, for a configuration reloaded while the server runs: the
    /// sign-in and the checks of provider tokens from the next request on, keys already fetched
    /// kept (they are per issuer and `kid`). Sign-ins begun under the old settings must begin again.
    public func applyIdentityProviders(_ config: ServerConfig) {
        let replacement = config.oidc.isEmpty ? nil : ProviderSignIn(config: config, keys: providerKeys)
        signIn.withLock { $0 = replacement }
        state.setIdentityProviders(replacement?.providers)
    }

    /// The storage `config.storage` names: memory, a Redis cluster (`redis://…`), or an SQLite file
    /// relative to `baseDirectory`.
    public static func storage(for config: ServerConfig, baseDirectory: String, logger: Logger) throws -> ServerStorage {
        guard RedisTarget.names(config.storage) || config.redisReplicas == 0 else {
            throw ServerError(
                "redisReplicas is \(config.redisReplicas) but storage is \(config.storage), not Redis: set \"storage\" to redis://… or redis-sentinel://…, or remove \"redisReplicas\""
            )
        }
        guard config.storage != "memory" else { return .local(MemoryOnlyPersistence()) }
        if RedisTarget.names(config.storage) {
            let target: RedisTarget
            do { target = try RedisTarget(config.storage) } catch { throw ServerError("storage \(error)") }
            return .cluster(try RedisCluster(url: target, replicas: config.redisReplicas, logger: logger))
        }
        let path = config.storage.hasPrefix("/") ? config.storage : baseDirectory + "/" + config.storage
        return .local(try SQLitePersistence(path: path, logger: logger, exclusive: true))
    }

    /// A request's head: 16 KiB in all, a header or a piece of the request line (the path, one
    /// query argument) under 8 KiB. Past the piece limit the answer is 414 or 431; past the total
    /// (lws 4.1.6's own limit: 4 KiB), lws closes the connection without one.
    static let headerLimit = HeaderLimit(totalBytes: 16 * 1024, eachBytes: 8 * 1024)

    /// How many libwebsockets contexts each service thread runs on its one event loop, its accepted
    /// sockets spread over them by descriptor range (`ContextSettings.contexts`): Debian's lws walks
    /// a context's whole fd table, and reads every connection in it, on each close, so a close
    /// costs its table's length and the connections its context holds. 16, measured
    /// (Benchmarks/NOTES.md, "Connections held"): 8 gained less, 32 and more no more. Their fd and
    /// poll tables take 8.5 whole-limit tables of 16 bytes a slot (2.7 MB at 20 000 descriptors);
    /// at a limit where that passes `contextTableBudgetBytes` (8 MiB) fewer are made.
    static let contextsPerThread = 16

    /// How many service threads `threads` asks for: 0 means one per online core.
    public static func threadCount(for config: ServerConfig) -> Int {
        config.threads > 0 ? config.threads : max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    public var port: Int { lifecycle.withLock { $0.port } }
    public var epoch: String { state.epoch }
    public var threads: Int { workers.count }
    /// Where the server answers, `http://` or (with `tls`) `https://`, for the first line `serve` prints.
    public var url: String {
        let host = listenHost.contains(":") ? "[\(listenHost)]" : listenHost
        return "\(isSecure ? "https" : "http")://\(host):\(port)"
    }

    /// Opens the listeners and starts every service loop; returns the port once all of them serve.
    @discardableResult
    public func start() throws -> Int {
        try lifecycle.withLock { current throws(ServerError) in
            guard current == .initial else { throw ServerError("a Server starts once") }
            current = .starting
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: publicDirectory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ServerError("publicDir '\(publicDirectory)' is not a directory: point \"publicDir\" in the config at the folder holding index.html")
        }
        if let certificate {
            for (field, path) in [("tls.cert", certificate.cert), ("tls.key", certificate.key)]
            where !FileManager.default.isReadableFile(atPath: path) {
                let reason = FileManager.default.fileExists(atPath: path) ? "is not readable by this user" : "does not exist"
                throw ServerError("\(field): the file '\(path)' \(reason); point \"tls\" in the config at a PEM certificate and its key")
            }
        }
        LWSLog.route(to: logger)
        LWS.raiseOpenFileLimit()
        settleConnectionLimits(final: false)
        do {
            // The address is claimed before any listener shares it (SO_REUSEPORT), and a fixed
            // port is tried once without sharing: either fails while another server (or any
            // other program) listens there. Port 0 is a fresh one, claimed once it is known.
            if config.port != 0 {
                addressClaim = try AddressClaim(host: config.host, port: config.port)
                _ = try ListeningSocket(host: config.host, port: config.port, sharesPort: false)
            }
            // The first listener takes the port (a free one for port 0); the others share it.
            let first = try ListeningSocket(host: config.host, port: config.port)
            if config.port == 0 { addressClaim = try AddressClaim(host: config.host, port: first.port) }
            var listeners = [first]
            for _ in 1..<Server.threadCount(for: config) { listeners.append(try ListeningSocket(host: config.host, port: first.port)) }
            for listener in listeners { listener.sendBufferBytes = config.sendBufferBytes }
            workers = listeners.indices.map { ServiceWorker(index: $0, server: self) }
            state.attach(workers) { [unowned self] in transportStatus }
            state.webhooks = try state.startWebhooks(logger: logger)
            state.startStorage()
            for (worker, listener) in zip(workers, listeners) {
                try worker.loop.start(settings, handler: worker) { [worker, operations] loop in
                    try worker.prepare(loop, listener: listener)
                    if worker.index == 0 { try operations.startAsking(on: loop) }
                }
            }
            lifecycle.withLock { $0 = .running(port: first.port) }
            // Again, now that every loop holds its descriptors.
            settleConnectionLimits(final: true)
            logger.debug("serving on port \(first.port) with \(workers.count) service threads")
            return first.port
        } catch let error as CCallError {
            stop()
            throw ServerError(error.detail)
        } catch {
            stop()
            throw error
        }
    }

    /// The sockets the server admits now, in all and per address (`ConnectionLimits`).
    package var connectionLimits: ConnectionLimits { ledger.connections.withLock { $0.limits } }

    /// Sets the connection limits from the config and the open-file limit, less the descriptors
    /// open now; `final`: the server holds all it needs to run, so a setting above what the limit
    /// leaves is worth a warning.
    private func settleConnectionLimits(final: Bool) {
        let openFileLimit = LWS.openFileLimit
        let inUse = Server.openDescriptors()
        let limits = ConnectionLimits.derived(from: config, openFileLimit: openFileLimit, inUse: inUse)
        ledger.connections.withLock { $0.limits = limits }
        guard final else { return }
        let fit = ConnectionLimits.derived(from: ServerConfig(), openFileLimit: openFileLimit, inUse: inUse).total
        if let openFileLimit, limits.total > fit {
            logger.warning(
                "maxConnections is \(limits.total) but the open-file limit (\(openFileLimit)) leaves room for \(fit): past that, accepting pauses until descriptors free; raise the limit (ulimit -n, LimitNOFILE=) or lower maxConnections"
            )
        }
        logger.debug(
            "connections: at most \(limits.total) in all, \(limits.perAddress == 0 ? "any number" : String(limits.perAddress)) per address, at an open-file limit of \(openFileLimit.map(String.init) ?? "none") with \(inUse) descriptors in use"
        )
    }

    /// Descriptors this process holds now.
    private static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 0
    }

    /// Stops every loop (last first), closes every connection and returns when every context is gone. Any thread.
    public func stop() {
        lifecycle.withLock { current in
            if current != .initial { current = .stopped(port: current.port) }
        }
        state.webhooks?.stop()
        for worker in workers.reversed() { worker.loop.stop() }
        addressClaim = nil
        // The state and its workers point at each other while they run.
        state.detachWorkers()
    }

    /// How every context is made.
    private var settings: ContextSettings {
        var settings = ContextSettings(name: "ringcast")
        settings.acceptsAdoptedSockets = true
        settings.contexts = Server.contextsPerThread
        settings.reservesThreadHeap = true
        settings.certificate = certificate
        settings.staticFiles = .init(
            directory: publicDirectory, maxAge: config.staticMaxAge,
            callbackPaths: ["/api", "/healthz", "/readyz", "/metrics", "/badge", "/tasks", "/auth"])
        settings.sessionBytes = LWSConnection.sessionBytes
        // The widget's files load from any site; the API's answers name their origins themselves
        // (RequestGate.corsHeaders), never `*`.
        settings.staticFileHeaders = [("access-control-allow-origin:", "*")]
        settings.enforceSecurityHeaders = true
        // Over TLS a browser is told to come back only over TLS: a sign-in cookie is never offered
        // to a plain-http page an attacker on the path could answer. A year, as browsers' preload
        // lists ask; no includeSubDomains, since the server speaks for its own host alone.
        if config.tls != nil { settings.headers.append(("strict-transport-security:", "max-age=31536000")) }
        settings.validateUTF8 = true
        settings.timeoutSeconds = config.handshakeTimeoutSeconds
        settings.offersCompression = config.compression
        settings.headerLimit = Server.headerLimit
        return settings
    }

    /// What `/healthz` and `/metrics` report of the transport: every worker's figures, summed.
    var transportStatus: TransportStatus {
        var status = TransportStatus()
        for worker in workers {
            let counters = worker.counters
            status.watchers += counters.watchers.load(ordering: .relaxed)
            status.resyncs += counters.resyncs.load(ordering: .relaxed)
            status.patternSets += counters.patternSets.load(ordering: .relaxed)
            status.framesSent += counters.framesSent.load(ordering: .relaxed)
            status.eventsSent += counters.eventsSent.load(ordering: .relaxed)
            status.socketsOpened += counters.socketsOpened.load(ordering: .relaxed)
            status.eventsCoalesced += counters.coalesced.load(ordering: .relaxed)
        }
        status.threads = workers.count
        status.redis = state.cluster?.health
        return withOperations(status)
    }

    /// Each service thread's counts of its sockets and frames, thread 0 first.
    var workerMetrics: [TransportMetrics] { workers.map { $0.counters.metrics.withLock { $0 } } }

    /// Watchers open on each service thread now, thread 0 first.
    package var watchersByThread: [Int] { workers.map { $0.counters.watchers.load(ordering: .relaxed) } }
}
