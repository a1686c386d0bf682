import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import RingcastRedis

/// The cluster engine, `"storage": "redis://HOST:PORT"`: several `ringcast` nodes share state
/// through one log in Redis. A node checks and authorizes what it is asked (`API.plan`), appends it
/// to the log — a Lua script gives the entry the cluster's next log index and checks the epoch, in
/// one step — and every node, itself included, reads the log in order and applies each entry to its
/// own copy of the state with the entry's time. Applying is deterministic, so every node holds the
/// same tasks and the same `epoch:seq`: a watcher resumes with `since` on any node. Deadlines (timer
/// ticks, `hideAfter`, leases, retention) are part of that state, known alike on every node; when
/// the next one falls due, every node tries to claim it with a compare-and-set script, and the one
/// that wins appends a `due` entry, so each fires once for the cluster. A checkpoint of the whole
/// state (written now and then by any node, the newest kept) lets a new node start without
/// replaying the whole log, which is trimmed behind it.
///
/// Threads: a writer thread (appends, claims, checkpoints) and a reader thread (a blocking XREAD)
/// of its own, each with its own connection; neither ever runs on a service thread. When Redis is
/// gone the node keeps serving its watchers what it has, answers publishes with 503, says so in its
/// log (once) and /healthz, reconnects with capped, jittered back-off, and resyncs by state when back.
///
/// `@unchecked Sendable`: the queue and the connection state are guarded by `condition`; `state`,
/// the reader's cursor and its connection belong to the reader thread after `start`.
final class RedisCluster: @unchecked Sendable {
    private enum Key {
        static let epoch = "ringcast:epoch"
        static let index = "ringcast:index"
        static let log = "ringcast:log"
        static let due = "ringcast:due"
        static let checkpoint = "ringcast:checkpoint"
        static let reseed = "ringcast:reseed"
        /// `…:ID`: the node sending delivery ID, for `leaseMilliseconds` unless renewed.
        static let lease = "ringcast:lease:"
        /// `…:ID`: delivery ID was answered with a 2xx or given up, for an hour.
        static let delivered = "ringcast:delivered:"
    }

    /// Takes the lease of an owed delivery for ARGV[1] unless it was delivered or another node holds it.
    private static let claimDeliveryScript = """
        if redis.call('EXISTS', KEYS[2]) == 1 then return 'done' end
        if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 'claimed' end
        return 'held'
        """
    /// How long a node's lease on a delivery lasts without renewal (it renews every second while
    /// it sends): the longest a dead node's deliveries wait before another node sends them.
    static let leaseMilliseconds = 10_000

    /// Keeps the proposal of the node that has read furthest into the lost log (the first of equals),
    /// for 10 s; answers whose it is.
    private static let proposeScript = """
        local held = tonumber(redis.call('HGET', KEYS[1], 'i') or '-1')
        if tonumber(ARGV[1]) > held then
          redis.call('HSET', KEYS[1], 'i', ARGV[1], 'node', ARGV[2])
          redis.call('PEXPIRE', KEYS[1], 10000)
        end
        return redis.call('HGET', KEYS[1], 'node')
        """
    /// How long the nodes that found the state gone have to propose theirs before the furthest seeds
    /// it: well over the longest a node that is up waits between two attempts to reach Redis
    /// (`reconnectCapSeconds`) plus one connection's set-up, so every node alive through the loss
    /// has proposed before anyone seeds.
    static let reseedSettleSeconds = 3.0
    /// The longest the reader and the writer wait between two attempts to reach Redis.
    static let reconnectCapSeconds = 1.0
    /// Puts a lost cluster's state back, once: a new epoch (so no watcher resumes across the loss),
    /// the log index and checkpoint of the node that had read furthest, and where it came from
    /// (`from`, `fromIndex`: a node that comes back later having read further can say what was lost).
    private static let seedScript = """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        redis.call('SET', KEYS[1], ARGV[1])
        redis.call('SET', KEYS[2], ARGV[2])
        redis.call('DEL', KEYS[3], KEYS[5])
        redis.call('HSET', KEYS[3], 'i', ARGV[2], 'id', '0-0', 'from', ARGV[3], 'fromIndex', ARGV[2], 'body', ARGV[4])
        redis.call('DEL', KEYS[4])
        return 1
        """
    /// Declares the cluster's log lost when Redis holds fewer of its entries than a node has read
    /// (a failover to a replica that had not received the last ones): deletes the epoch, so that
    /// no node appends to that log again and every node goes through putting the state back.
    private static let forgetScript = """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
        if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[2]) then return 0 end
        redis.call('DEL', KEYS[1])
        return 1
        """
    /// A node that starts on a Redis with no cluster in it makes a new one, unless nodes are putting
    /// a lost one back (their proposals are there): then it waits and loads theirs.
    private static let createScript = """
        if redis.call('EXISTS', KEYS[2]) == 1 then return redis.call('GET', KEYS[1]) end
        redis.call('SET', KEYS[1], ARGV[1], 'NX')
        return redis.call('GET', KEYS[1])
        """
    private let nodeID = UUID().uuidString

    /// Appends an entry with the next index, unless the cluster's epoch is not the one the node has
    /// (Redis restarted empty, or the cluster was reset): then `EPOCH`.
    private static let appendScript = """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('EPOCH the cluster state in Redis is not the one this node holds') end
        local i = redis.call('INCR', KEYS[2])
        redis.call('XADD', KEYS[3], '*', 'i', i, 'e', ARGV[2])
        return i
        """
    /// Appends a `due` entry for deadline ARGV[2] only if no node has claimed it (or a later one).
    private static let claimScript = """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('EPOCH the cluster state in Redis is not the one this node holds') end
        local last = tonumber(redis.call('GET', KEYS[2]) or '-1')
        if tonumber(ARGV[2]) <= last then return 0 end
        redis.call('SET', KEYS[2], ARGV[2])
        local i = redis.call('INCR', KEYS[3])
        redis.call('XADD', KEYS[4], '*', 'i', i, 'e', ARGV[3])
        return i
        """
    /// Keeps the newest checkpoint of the cluster's epoch, and trims the log entries it makes unnecessary.
    private static let checkpointScript = """
        if redis.call('GET', KEYS[3]) ~= ARGV[4] then return 0 end
        local current = redis.call('HGET', KEYS[1], 'i')
        if current and tonumber(current) >= tonumber(ARGV[1]) then return 0 end
        redis.call('HSET', KEYS[1], 'i', ARGV[1], 'id', ARGV[2], 'body', ARGV[3])
        redis.call('XTRIM', KEYS[2], 'MINID', ARGV[2])
        return 1
        """

    /// The Redis server, or the sentinels that name its master.
    let url: RedisTarget
    /// `redisReplicas`: how many replicas must confirm a change (Redis's WAIT) before it is answered.
    let replicas: Int
    /// How long an answer waits for the replicas to confirm.
    static let replicaWaitMilliseconds = 1000
    let node: String
    private let logger: Logger
    private let condition = NSCondition()
    private enum Request {
        case append(LogEntry)
        case claim(deadline: Double, entry: LogEntry)
        case checkpoint(index: Int64, id: String, body: [UInt8], epoch: String)
    }
    private var queue: [Request] = []
    /// The webhook deliveries the cluster owes, as every node applied them (with when this node
    /// learnt of each), those this node sends, and those it finished (delivered or gave up) whose
    /// end Redis has not been told yet. Under `condition`.
    private var owed: [String: (delivery: WebhookDelivery, since: Double)] = [:]
    private var sending: Set<String> = []
    private var finished: [String] = []
    private var running = false
    private var writerStopped = true
    private var readerStopped = true
    /// nil while Redis answers; otherwise since when it has not (Unix ms), for /healthz.
    private let unavailableSince = Locked<Double?>(nil)

    // Set up by `init` and `load`, then the reader thread's.
    private var epoch = ""
    private var lastIndex: Int64 = 0
    private var lastID = "0-0"
    private var loaded: PersistedState?
    private weak var state: SharedState?
    private var lastCheckpointIndex: Int64 = 0
    private var lastCheckpointAt = Date()

    /// Connects and reads the cluster's epoch and checkpoint; a new cluster gets a new epoch.
    init(url: RedisTarget, replicas: Int = 0, logger: Logger) throws {
        self.url = url
        self.replicas = replicas
        self.logger = logger
        node = TaskStore.newEpoch()
        do {
            let redis = try url.connect()
            let created = try redis.command(["EVAL", RedisCluster.createScript, "2", Key.epoch, Key.reseed, TaskStore.newEpoch()])
            if case .error(let message) = created { throw RedisError.reply(message) }
            // No epoch: the nodes are putting a lost state back. This node starts empty on an epoch
            // of its own, which no watcher can resume in, and loads theirs when it is there.
            guard let epoch = created.text else {
                self.epoch = TaskStore.newEpoch()
                logger.warning(
                    "storage \(url): Redis lost the cluster's state and the nodes are putting it back; this node loads it when it is there")
                return
            }
            self.epoch = epoch
            loaded = try RedisCluster.readCheckpoint(redis, epoch: epoch, cursor: &lastIndex, id: &lastID)
            lastCheckpointIndex = lastIndex
        } catch {
            let what = if case .sentinel = url { "start the sentinels and the master they monitor" } else { "start redis-server there" }
            throw ServerError("storage \(url): \(error); \(what), or set \"storage\" to \"memory\" or an SQLite file")
        }
    }

    var isAvailable: Bool { unavailableSince.withLock { $0 == nil } }

    /// The answer to a change asked while Redis cannot be reached.
    var unreachable: APIError {
        APIError(.storageFailed, "the change was not applied: this node cannot reach Redis at \(url) (see /healthz); try again, or another node")
    }

    /// The state this node starts from: the cluster's checkpoint (its log entries after it are
    /// applied by `start`), or an empty state of the cluster's epoch.
    var startingState: PersistedState { loaded ?? PersistedState(epoch: epoch, seq: 0, tasks: []) }

    /// The time of the last entry the checkpoint it started from had applied.
    var startingNow: Double { loaded?.appliedNow ?? 0 }

    /// What /healthz says of Redis.
    var health: String {
        unavailableSince.withLock { since in since.map { "unavailable since \(Int($0))" } ?? "connected" }
    }

    // MARK: The webhook deliveries the cluster owes

    /// Every node applies the change that owes `deliveries`, and each keeps them until the cluster
    /// has sent them; the node that asked for the change (`sending`) sends them, under a lease
    /// renewed each second, and another node takes over those whose lease runs out.
    func owe(_ deliveries: [WebhookDelivery], sending: Bool) {
        guard !deliveries.isEmpty else { return }
        let now = Date().timeIntervalSince1970 * 1000
        condition.withLock {
            for delivery in deliveries { owed[delivery.id] = (delivery, owed[delivery.id]?.since ?? now) }
            if sending { self.sending.formUnion(deliveries.map(\.id)) }
        }
    }

    /// This node's sender tries a delivery again later: a node that takes it over sends this one.
    func rescheduled(_ delivery: WebhookDelivery) {
        condition.withLock { owed[delivery.id] = (delivery, owed[delivery.id]?.since ?? Date().timeIntervalSince1970 * 1000) }
    }

    /// This node's sender is done with a delivery (a 2xx, or given up): the cluster is told.
    func ended(deliveryID id: String) {
        condition.withLock {
            owed[id] = nil
            if sending.remove(id) != nil { finished.append(id) }
        }
    }

    // MARK: Running

    /// Replays the log after the checkpoint (so this node starts with the cluster's state), then
    /// starts the reader and writer threads.
    func start() {
        guard let state else { return }
        do {
            let redis = try url.connect()
            while true {
                let entries = try read(redis, block: nil)
                if entries.isEmpty { break }
                apply(entries, to: state)
            }
        } catch {
            logger.error("storage \(url): could not read the cluster's log at start: \(error); this node catches up when Redis answers")
        }
        condition.withLock {
            running = true
            writerStopped = false
            readerStopped = false
        }
        let writer = Thread { [self] in
            Thread.current.name = "ringcast-redis-w"
            writerLoop()
        }
        let reader = Thread { [self] in
            Thread.current.name = "ringcast-redis-r"
            readerLoop()
        }
        writer.start()
        reader.start()
    }

    func attach(_ state: SharedState) { self.state = state }

    /// Stops both threads (the reader within its blocking read's timeout).
    func stop() {
        condition.withLock {
            running = false
            condition.broadcast()
            while !writerStopped || !readerStopped { condition.wait() }
        }
    }

    // MARK: Appending (any thread)

    /// Appends `entry`; its node hears the outcome when it reads the entry back (or, if Redis does
    /// not take it, through `SharedState.unavailable`).
    func append(_ entry: LogEntry) { enqueue(.append(entry)) }

    /// Asks the cluster to fire the deadline `deadline`, unless another node did.
    func claim(deadline: Double, entry: LogEntry) { enqueue(.claim(deadline: deadline, entry: entry)) }

    private func enqueue(_ request: Request) {
        condition.withLock {
            queue.append(request)
            condition.broadcast()
        }
    }

    // MARK: The writer thread

    private func writerLoop() {
        var redis: RedisConnection?
        var backoff = Backoff(cap: RedisCluster.reconnectCapSeconds)
        while true {
            let (batch, stopping): ([Request], Bool) = condition.withLock {
                let tick = Date().addingTimeInterval(1)
                while queue.isEmpty, running, condition.wait(until: tick) {}
                defer { queue.removeAll(keepingCapacity: true) }
                return (queue, !running)
            }
            if batch.isEmpty, stopping {
                condition.withLock {
                    writerStopped = true
                    condition.broadcast()
                }
                return
            }
            if batch.isEmpty {
                // Once a second: the webhook leases. An outage shows in the next append's answer.
                guard condition.withLock({ !owed.isEmpty || !sending.isEmpty || !finished.isEmpty }) else { continue }
                if redis == nil { redis = try? url.connect() }
                if let connection = redis {
                    do { try tendDeliveries(connection) } catch { redis = nil }
                }
                continue
            }
            do {
                if redis == nil { redis = try url.connect() }
                var commands = batch.map(command(for:))
                let appended = batch.contains { if case .append = $0 { true } else { false } }
                let waits = replicas > 0 && appended
                if waits { commands.append(["WAIT", String(replicas), String(RedisCluster.replicaWaitMilliseconds)].map { Array($0.utf8) }) }
                let replies = try redis!.pipeline(commands)
                markAvailable()
                backoff.reset()
                var indices: [Int64] = []
                for (request, reply) in zip(batch, replies) {
                    if case .error(let message) = reply {
                        // A master turned replica by a failover answers READONLY: find the new one.
                        if message.hasPrefix("READONLY") { redis = nil }
                        refuse(request, because: "Redis refused it: \(message)")
                    } else if case .append = request, let index = reply.integer {
                        indices.append(index)
                    }
                }
                if waits, let through = indices.max() {
                    let confirmed = replies.last?.integer ?? 0
                    let shortfall =
                        confirmed >= replicas
                        ? nil
                        : APIError(
                            .storageFailed,
                            "the change was applied on the Redis master, but \(confirmed) of the \(replicas) replicas redisReplicas asks for confirmed it within \(RedisCluster.replicaWaitMilliseconds) ms, so a failover could lose it; check the replicas (INFO replication), then read the task and publish again if it is missing"
                        )
                    state?.replicated(
                        through: through, failed: shortfall.map { error in Dictionary(uniqueKeysWithValues: indices.map { ($0, error) }) } ?? [:])
                }
            } catch {
                redis = nil
                markUnavailable(error)
                for request in batch { refuse(request, because: "Redis at \(url) cannot be reached (\(error)); try again") }
                backoff.wait(until: { condition.withLock { !running } })
            }
        }
    }

    private func command(for request: Request) -> [[UInt8]] {
        func strings(_ values: [String]) -> [[UInt8]] { values.map { Array($0.utf8) } }
        switch request {
        case .append(let entry):
            return strings(["EVAL", RedisCluster.appendScript, "3", Key.epoch, Key.index, Key.log, epochNow]) + [entry.encoded()]
        case .claim(let deadline, let entry):
            return strings(["EVAL", RedisCluster.claimScript, "4", Key.epoch, Key.due, Key.index, Key.log, epochNow, String(deadline)]) + [
                entry.encoded()
            ]
        case .checkpoint(let index, let id, let body, let epoch):
            return strings(["EVAL", RedisCluster.checkpointScript, "3", Key.checkpoint, Key.log, Key.epoch, String(index), id]) + [
                body, Array(epoch.utf8),
            ]
        }
    }

    /// Renews this node's leases, tells the cluster which deliveries it finished, and claims those
    /// whose sender has not renewed its lease (a node that died) to send them itself.
    private func tendDeliveries(_ redis: RedisConnection) throws {
        let now = Date().timeIntervalSince1970 * 1000
        let (mine, done, unclaimed): ([String], [String], [WebhookDelivery]) = condition.withLock {
            defer { finished = [] }
            let stale = owed.values.filter { !sending.contains($0.delivery.id) && now - $0.since >= Double(RedisCluster.leaseMilliseconds) }
            return (Array(sending), finished, stale.map(\.delivery))
        }
        guard !mine.isEmpty || !done.isEmpty || !unclaimed.isEmpty else { return }
        func strings(_ values: [String]) -> [[UInt8]] { values.map { Array($0.utf8) } }
        var commands = mine.map { strings(["SET", Key.lease + $0, nodeID, "PX", String(RedisCluster.leaseMilliseconds)]) }
        for id in done {
            commands.append(strings(["SET", Key.delivered + id, "1", "PX", "3600000"]))
            commands.append(strings(["DEL", Key.lease + id]))
        }
        let senders = state?.webhooks
        let claimable = senders == nil ? [] : unclaimed
        commands += claimable.map {
            strings([
                "EVAL", RedisCluster.claimDeliveryScript, "2", Key.lease + $0.id, Key.delivered + $0.id, nodeID,
                String(RedisCluster.leaseMilliseconds),
            ])
        }
        let replies = try redis.pipeline(commands)
        var claimed: [WebhookDelivery] = []
        condition.withLock {
            for (delivery, reply) in zip(claimable, replies.suffix(claimable.count)) {
                switch reply.text {
                case "done": owed[delivery.id] = nil
                case "claimed":
                    sending.insert(delivery.id)
                    claimed.append(delivery)
                default: owed[delivery.id]?.since = now - Double(RedisCluster.leaseMilliseconds) / 2
                }
            }
        }
        if !claimed.isEmpty {
            logger.warning("storage \(url): \(claimed.count) webhook deliveries owed by a node that stopped renewing its lease; this node sends them")
            state?.webhooksTakenOver(claimed.count)
            senders?.send(claimed)
        }
    }

    /// The epoch this node holds (the reader updates it after a reload).
    private var epochNow: String { condition.withLock { epoch } }

    private func refuse(_ request: Request, because reason: String) {
        guard case .append(let entry) = request, let state else { return }
        state.unavailable(entry, APIError(.storageFailed, "the change was not applied: \(reason)"))
    }

    // MARK: The reader thread

    private func readerLoop() {
        var redis: RedisConnection?
        var backoff = Backoff(cap: RedisCluster.reconnectCapSeconds)
        while condition.withLock({ running }) {
            guard let state else { break }
            do {
                if redis == nil {
                    let connection = try url.connect()
                    try rejoin(connection, state: state)
                    redis = connection
                }
                let entries = try read(redis!, block: 1000)
                markAvailable()
                backoff.reset()
                if !entries.isEmpty {
                    apply(entries, to: state)
                    checkpointIfDue(state)
                }
            } catch let gap as LogGap {
                logger.warning("storage \(url): \(gap.reason); reloading the cluster's state from its checkpoint")
                redis = nil
            } catch {
                redis = nil
                markUnavailable(error)
                backoff.wait(until: { condition.withLock { !running } })
            }
        }
        condition.withLock {
            readerStopped = true
            condition.broadcast()
        }
    }

    private struct LogGap: Error { let reason: String }

    /// On (re)connecting: if Redis lost the cluster's state, the node that had read furthest puts
    /// its state back under a new epoch (every node that finds it gone proposes how far it read;
    /// after a settle window the furthest seeds, the others wait and reload it), so a node that
    /// lagged never overwrites what another answered and no watcher resumes across the loss; if
    /// the log moved on past what this node can read, reload the checkpoint.
    private func rejoin(_ redis: RedisConnection, state: SharedState) throws {
        if try redis.answer(["GET", Key.epoch]).text == epoch, let indexNow = try redis.answer(["GET", Key.index]).integer, indexNow < lastIndex {
            let forgot = try redis.answer(["EVAL", RedisCluster.forgetScript, "2", Key.epoch, Key.index, epoch, String(lastIndex)])
            if forgot.integer == 1 {
                logger.error(
                    "storage \(url): Redis holds \(indexNow) entries of the cluster's log and this node had read \(lastIndex) (a failover to a replica that had not received them): the log is lost, and the state is put back under a new epoch"
                )
            }
        }
        if try redis.answer(["GET", Key.epoch]).text == nil {
            try reseed(redis, state: state)
            if try redis.answer(["GET", Key.epoch]).text == nil {
                throw RedisError.reply("Redis lost the cluster's state; waiting for the node that read furthest to put it back")
            }
        }
        let epochNow = try redis.answer(["GET", Key.epoch]).text ?? ""
        let first = try redis.command(["XRANGE", Key.log, "-", "+", "COUNT", "1"]).array?.first
        let firstIndex = first.flatMap(RedisCluster.entryFields)?.index
        let indexNow = try redis.command(["GET", Key.index]).integer ?? 0
        // Reading on from here works if the entries after this node's last one are all still there.
        let canContinue =
            epochNow == epoch && indexNow >= lastIndex
            && (indexNow == lastIndex || (firstIndex.map { $0 <= lastIndex + 1 } ?? false))
        guard !canContinue else { return }
        var index: Int64 = 0
        var id = "0-0"
        let reloaded =
            try RedisCluster.readCheckpoint(redis, epoch: epochNow, cursor: &index, id: &id)
            ?? PersistedState(epoch: epochNow, seq: 0, tasks: [])
        let origin = try redis.command(["HMGET", Key.checkpoint, "from", "fromIndex"]).array
        if let origin, origin.count == 2, origin[0].text == epoch, let seededAt = origin[1].integer, seededAt < lastIndex {
            logger.error(
                "storage \(url): Redis lost the cluster's state and another node put back its own, \(lastIndex - seededAt) log entries behind this one (this node was away longer than \(RedisCluster.reseedSettleSeconds) s); those changes are gone"
            )
        }
        condition.withLock { epoch = epochNow }
        lastIndex = index
        lastID = id
        state.reload(reloaded)
        logger.info("storage \(url): reloaded the cluster's state (epoch \(epochNow), \(reloaded.tasks.count) tasks); every watcher gets a snapshot")
    }

    /// Redis has no cluster: proposes how far this node read and, after the settle window, puts
    /// its state back under a new epoch if it read furthest (and nobody did so meanwhile).
    private func reseed(_ redis: RedisConnection, state: SharedState) throws {
        _ = try redis.command(["EVAL", RedisCluster.proposeScript, "1", Key.reseed, String(lastIndex), nodeID])
        let settleUntil = Date().addingTimeInterval(RedisCluster.reseedSettleSeconds)
        while Date() < settleUntil, condition.withLock({ running }) { usleep(50_000) }
        guard try redis.command(["HGET", Key.reseed, "node"]).text == nodeID else { return }
        var seeded = state.checkpointState()
        let lostEpoch = seeded.epoch
        seeded.epoch = TaskStore.newEpoch()
        let body = seeded.checkpointBody(appliedNow: seeded.appliedNow)
        let won = try redis.command(
            [
                "EVAL", RedisCluster.seedScript, "5", Key.epoch, Key.index, Key.checkpoint, Key.reseed, Key.log, seeded.epoch, String(lastIndex),
                lostEpoch,
            ].map { Array($0.utf8) } + [body])
        if case .error(let message) = won { throw RedisError.reply(message) }
        guard won.integer == 1 else { return }
        condition.withLock { epoch = seeded.epoch }
        lastID = "0-0"
        state.reload(seeded)
        logger.warning(
            "storage \(url): Redis had lost the cluster's state; this node, which had read furthest, put its own back (\(lastIndex) entries, seq \(seeded.seq)) under a new epoch \(seeded.epoch): every watcher gets a snapshot"
        )
    }

    /// The next entries after `lastID` (waiting up to `block` ms when given); checks none is missing.
    private func read(_ redis: RedisConnection, block: Int?) throws -> [(index: Int64, entry: LogEntry)] {
        var arguments = ["XREAD", "COUNT", "1000"]
        if let block { arguments += ["BLOCK", String(block)] }
        try redis.setTimeout(seconds: Double(block ?? 0) / 1000 + 5)
        // The epoch is read after the entries (Redis answers a client's commands in order): if it
        // changed, the entries may be of the new log, which this node must not apply to the old state.
        let replies = try redis.pipeline([
            (arguments + ["STREAMS", Key.log, lastID]).map { Array($0.utf8) }, [Array("GET".utf8), Array(Key.epoch.utf8)],
        ])
        let reply = replies[0]
        if case .error(let message) = reply { throw RedisError.reply(message) }
        guard replies[1].text == condition.withLock({ epoch }) else {
            throw LogGap(reason: "the cluster's epoch in Redis is no longer \(condition.withLock { epoch })")
        }
        guard let streams = reply.array, let stream = streams.first?.array, stream.count == 2, let items = stream[1].array else { return [] }
        var entries: [(index: Int64, entry: LogEntry)] = []
        for item in items {
            guard let (id, index, bytes) = RedisCluster.entryFields(item) else { continue }
            guard index == lastIndex + 1 else { throw LogGap(reason: "the log went from entry \(lastIndex) to \(index)") }
            lastIndex = index
            lastID = id
            if let entry = LogEntry(decoding: bytes) {
                entries.append((index, entry))
            } else {
                logger.error("storage \(url): log entry \(index) is not one this version reads; skipped")
            }
        }
        return entries
    }

    private func apply(_ entries: [(index: Int64, entry: LogEntry)], to state: SharedState) {
        state.applyLog(entries, node: node)
    }

    private func checkpointIfDue(_ state: SharedState) {
        let since = lastIndex - lastCheckpointIndex
        guard since >= 20_000 || (since > 0 && Date().timeIntervalSince(lastCheckpointAt) > 60) else { return }
        lastCheckpointIndex = lastIndex
        lastCheckpointAt = Date()
        let saved = state.checkpointState()
        enqueue(.checkpoint(index: lastIndex, id: lastID, body: saved.checkpointBody(appliedNow: saved.appliedNow), epoch: saved.epoch))
    }

    /// An XREAD/XRANGE item `[id, [field, value, …]]` as (id, index, entry bytes).
    private static func entryFields(_ item: RedisValue) -> (id: String, index: Int64, bytes: [UInt8])? {
        guard let pair = item.array, pair.count == 2, let id = pair[0].text, let fields = pair[1].array else { return nil }
        var index: Int64?
        var bytes: [UInt8]?
        var position = 0
        while position + 1 < fields.count {
            switch fields[position].text {
            case "i": index = fields[position + 1].integer
            case "e": if case .string(let value) = fields[position + 1] { bytes = value }
            default: break
            }
            position += 2
        }
        guard let index, let bytes else { return nil }
        return (id, index, bytes)
    }

    /// The checkpoint in Redis, if it belongs to `epoch`: its state, and where in the log it stands.
    private static func readCheckpoint(_ redis: RedisConnection, epoch: String, cursor: inout Int64, id: inout String) throws -> PersistedState? {
        guard let fields = try redis.command(["HGETALL", Key.checkpoint]).array, !fields.isEmpty else { return nil }
        var values: [String: RedisValue] = [:]
        var position = 0
        while position + 1 < fields.count {
            if let name = fields[position].text { values[name] = fields[position + 1] }
            position += 2
        }
        guard let index = values["i"]?.integer, let streamID = values["id"]?.text, case .string(let body)? = values["body"],
            let state = PersistedState(checkpoint: body), state.epoch == epoch
        else { return nil }
        cursor = index
        id = streamID
        return state
    }

    private func markAvailable() {
        let wasDown = unavailableSince.withLock { since -> Bool in
            defer { since = nil }
            return since != nil
        }
        if wasDown {
            logger.info("storage \(url): Redis answers again")
            state?.redisChanged()
        }
    }

    private func markUnavailable(_ error: Error) {
        let first = unavailableSince.withLock { since -> Bool in
            guard since == nil else { return false }
            since = Date().timeIntervalSince1970 * 1000
            return true
        }
        if first {
            logger.error("storage \(url): Redis cannot be reached (\(error)); serving what this node has, refusing publishes with 503, reconnecting")
            state?.redisChanged()
        }
    }
}

extension RedisConnection {
    /// A command's reply, an error reply thrown (a Redis still loading its data answers so).
    func answer(_ arguments: [String]) throws -> RedisValue {
        let reply = try command(arguments)
        if case .error(let message) = reply { throw RedisError.reply(message) }
        return reply
    }
}

/// Capped full-jitter back-off: a random wait between 0 and min(cap, base · 2^attempt).
struct Backoff {
    var base = 0.1
    var cap = 5.0
    private var attempt = 0

    init(cap: Double = 5.0) { self.cap = cap }

    mutating func reset() { attempt = 0 }

    /// Waits (in short steps, so `stopping` is noticed) and counts the attempt.
    mutating func wait(until stopping: () -> Bool) {
        let limit = min(cap, base * Double(1 << min(attempt, 16)))
        attempt += 1
        var left = Double.random(in: 0...limit)
        while left > 0, !stopping() {
            let step = min(left, 0.05)
            usleep(UInt32(step * 1_000_000))
            left -= step
        }
    }
}

extension PersistedState {
    /// A checkpoint: a first line of `{"epoch", "seq", "now"}`, then one stored task per line, then
    /// one line per kind of the history, `{"history": KIND, "seconds": […], "lastFinishedAt"}`,
    /// then one line per task with a log, `{"log": ID, "lines": […]}`, in id order (a node that
    /// does not know such lines skips them: they are no task), so a node that joins late serves
    /// the whole tail.
    func checkpointBody(appliedNow: Double) -> [UInt8] {
        var writer = JSONWriter(capacity: 64)
        writer.beginObject()
        writer.key("epoch")
        writer.string(epoch)
        writer.key("seq")
        writer.number(Int(seq))
        writer.key("now")
        writer.number(appliedNow)
        writer.endObject()
        var body = writer.bytes
        for task in tasks {
            body.append(UInt8(ascii: "\n"))
            body += task.encodedForStorage()
        }
        body += KindHistory.checkpointLines(history)
        for (id, lines) in logs.sorted(by: { $0.key < $1.key }) {
            body.append(UInt8(ascii: "\n"))
            body += JSONWriter.encode(.object([("log", .string(id)), ("lines", .array(lines.map(JSONValue.string)))]))
        }
        return body
    }

    init?(checkpoint body: [UInt8]) {
        let lines = body.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        guard let head = lines.first, let meta = try? JSONParser.parse(Array(head)), case .string(let epoch)? = meta["epoch"],
            case .number(let number)? = meta["seq"], let seq = UInt64(exactly: number)
        else { return nil }
        var now = 0.0
        if case .number(let value)? = meta["now"] { now = value }
        self.init(
            epoch: epoch, seq: seq, tasks: lines.dropFirst().compactMap { TaskRecord(stored: Array($0)) },
            logs: PersistedState.logTails(inCheckpoint: lines.dropFirst().map(Array.init)), appliedNow: now,
            history: KindHistory.fromCheckpoint(lines.dropFirst().map(Array.init)))
    }

    /// The log lines among a checkpoint's lines.
    private static func logTails(inCheckpoint lines: [[UInt8]]) -> [String: [String]] {
        var logs: [String: [String]] = [:]
        for line in lines where line.starts(with: Array(#"{"log":"#.utf8)) {
            guard let json = try? JSONParser.parse(line), case .string(let id)? = json["log"], case .array(let items)? = json["lines"] else {
                continue
            }
            logs[id] = items.compactMap {
                if case .string(let text) = $0 { return text }
                return nil
            }
        }
        return logs
    }
}
