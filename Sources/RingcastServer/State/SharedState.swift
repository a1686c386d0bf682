import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform
import Synchronization

/// The single writer behind every service thread: the store, the API and storage, and one lock
/// that every worker takes to change or read them, so seq stays one ordered space. A change's
/// events go, still under the lock, into every worker's inbox in seq order, each with the storage
/// ticket it must wait for; each worker then delivers them on its own thread, so nothing on the
/// per-delivery path takes this lock.
///
/// With a cluster engine (`RedisCluster`, `ServerStorage.cluster`), changes are not applied where
/// they are asked for: the worker submits them to the cluster's log, and the engine's reader thread
/// applies every entry here, in log order (`applyLog`), and hands the asking worker its answer.
///
/// `read` only reads; everything that changes the state, counters and caches included, is an
/// operation named for what it does (`perform`, `change`, `connectWatcher`, `snapshot`, …).
///
/// `@unchecked Sendable`: `store`, `api`, `persistence`, the inboxes and the timer bookkeeping are
/// touched only while `lock` is held; `committed` and `failed` are their own synchronisation.
final class SharedState: @unchecked Sendable {
    /// Events for one worker, and the storage ticket that must be kept before they leave.
    struct Delivery {
        let ticket: UInt64
        let events: [OutboundEvent]
        /// When the change was applied (a monotonic clock), for the publish-to-write latency.
        var appliedAt = Clock.monotonicSeconds()
    }

    /// What a client asked of the state, whichever transport carried it.
    enum Asked {
        /// An HTTP request (reads included: they are answered under the lock too).
        case request(APIRequest)
        /// A WebSocket message, with the session of the socket it came on.
        case message(SocketMessage, SocketSession)
    }

    /// How what a client asked turned out: the answer for the asking worker to send.
    enum Outcome {
        case request(APIResponse)
        case message(SocketReply)
        case refused(APIError)
    }

    /// What `perform` did with what was asked.
    struct Performed {
        /// The outcome, when it is known now; nil when it comes back through the cluster's log, in
        /// the asking worker's mail under the token it gave.
        var outcome: Outcome?
        /// The storage ticket the outcome waits for (0: nothing to wait for).
        var ticket: UInt64 = 0
        /// Frames the sender may have at once, before anything is applied: a message's refusals
        /// and `auth` reply, when its commands go through the cluster's log.
        var early: [[UInt8]] = []
        /// The session as the message left it (an `auth` message changes its credential).
        var session: SocketSession?
        /// How many commands it asked to apply: what the publisher's allowance pays.
        var commands = 0
    }

    /// What a worker takes from its inbox when it wakes.
    struct Mail {
        var deliveries: [Delivery] = []
        var completions: [(token: UInt64, outcome: Outcome)] = []
        /// The state was replaced: every watcher of the worker needs a full snapshot.
        var resyncEveryone = false
        /// Worker 0 keeps the deadline timer: where to arm it, when that changed.
        var deadline: Double??
        /// Worker 0 keeps the write-behind timer: arm it.
        var armWriteBehind = false
        /// The cluster's state was put back under a new epoch: the changes this worker handed to
        /// the lost log up to this token will never be read back; answer them with the error.
        var lostThrough: (token: UInt64, error: APIError)?
    }

    let lock = NSLock()
    private let store: TaskStore
    private let api: API
    /// What the store writes each change to: the storage this node owns, or, in a cluster, memory
    /// (the log keeps the changes). Touched only under `lock`, like the store.
    private let persistence: TaskPersistence
    /// The cluster's engine, when state is shared through its log rather than owned here.
    let cluster: RedisCluster?
    /// The workers to wake, behind a lock of its own: storage's report wakes them while `lock` may
    /// be held by a flush that waits for that very report.
    private let workers = Locked<[ServiceWorker]>([])
    private var mail: [Mail] = []
    /// Each worker's coalescing window, if it has one: while it is open, the window's timer takes
    /// the inbox when it ends, so a delivery need not wake the thread.
    private var windows: [CoalescingWindowOwner?] = []
    private var issued: UInt64 = 0
    /// The newest ticket storage reported kept (or lost): tickets come back in order.
    private let committed = Atomic<UInt64>(0)
    /// Tickets storage could not keep, so their answers say so.
    private let failed = Locked<Set<UInt64>>([])
    private var armedDeadline: Double?
    private var deadlineChanged = false
    private var writeBehindArmed = false
    private var writeBehindRequested = false
    /// The transport's figures for /healthz and /metrics: set once, before any worker starts.
    private var transportStatus: () -> TransportStatus = { TransportStatus() }
    /// The webhook senders, once started (a reload replaces them); deliveries a change made wait
    /// in `heldWebhooks` for its ticket.
    var webhooks: WebhookSenders? {
        get { senders.withLock { $0 } }
        set { senders.withLock { $0 = newValue } }
    }
    private let senders = Locked<WebhookSenders?>(nil)
    /// Which senders report: one more at each reload of the webhooks (under `lock`).
    var webhookGeneration = 0
    private let heldWebhooks = Locked<[(ticket: UInt64, deliveries: [WebhookDelivery])]>([])
    /// In a cluster, per worker: the token of the last change it handed to the log.
    private var lastAppended: [UInt64] = []
    /// In a cluster with `redisReplicas`: answers to this node's changes that wait for the replicas
    /// to confirm them (by log index), the newest index the writer has heard about, and the
    /// indices whose replicas fell short, with the error to answer instead.
    private var awaitingReplicas: [(index: Int64, worker: Int, token: UInt64, outcome: Outcome)] = []
    private var replicatedThrough: Int64 = 0
    private var replicaShortfalls: [Int64: APIError] = [:]
    /// In a cluster: the time of the last entry applied. Entries apply at the later of their own
    /// time and this one, on every node alike, so time never runs back across nodes' clocks.
    private var appliedNow: Double = 0

    /// - Parameters:
    ///   - persistence: what `store` was made on.
    ///   - cluster: the engine whose log changes go through, when state is shared.
    init(store: TaskStore, api: API, persistence: TaskPersistence, cluster: RedisCluster?) {
        self.store = store
        self.api = api
        self.persistence = persistence
        self.cluster = cluster
        if cluster != nil { store.marksWaitingRequests = false }
        appliedNow = cluster?.startingNow ?? 0
        cluster?.attach(self)
    }

    /// Once the workers and the webhook senders are attached: storage's writer starts, reporting
    /// each commit here; or the cluster's engine catches up with the log and starts its threads.
    func startStorage() {
        if let cluster {
            cluster.start()
        } else {
            // Weak: storage outlives the state only while its last report is on its way.
            persistence.startWriting { [weak self] ticket, kept in self?.storageKept(ticket, kept: kept) }
        }
    }

    var epoch: String { store.epoch }
    var isClustered: Bool { cluster != nil }

    /// The workers whose inboxes events go to, and what /healthz and /metrics read of them; once,
    /// before any of them starts.
    func attach(_ workers: [ServiceWorker], status: @escaping () -> TransportStatus) {
        self.workers.withLock { $0 = workers }
        transportStatus = status
        lock.withLock {
            mail = Array(repeating: Mail(), count: workers.count)
            lastAppended = Array(repeating: 0, count: workers.count)
            windows = workers.map(\.window)
            armedDeadline = store.nextDeadline()
            deadlineChanged = true
        }
    }

    /// Once every worker has stopped: lets go of them.
    func detachWorkers() {
        workers.withLock { $0 = [] }
        transportStatus = { TransportStatus() }
        lock.withLock {
            mail = []
            windows = []
        }
    }

    var committedTicket: UInt64 { committed.load(ordering: .acquiring) }

    func wasKept(_ ticket: UInt64) -> Bool { !failed.withLock { $0.contains(ticket) } }

    /// Runs `body` on the locked state; the events it returns go to every worker once storage has
    /// kept what must be kept. Returns its result and the ticket the caller's answer waits for (0:
    /// nothing to wait for). A body that sets its `durable` argument commits even plain progress
    /// (a publisher's `flush`).
    func change<T>(from worker: Int, _ body: (API, TaskStore, _ durable: inout Bool) -> (T, [OutboundEvent])) -> (T, ticket: UInt64) {
        var notify: Set<Int> = []
        let (result, ticket): (T, UInt64) = lock.withLock {
            var durable = false
            let (result, events) = body(api, store, &durable)
            return (result, changedLocked(events, durable: durable, from: worker, notify: &notify))
        }
        wake(notify)
        releaseWebhooks()
        return (result, ticket)
    }

    /// Under the lock, after a change: commits what must be kept before its answer, puts its events
    /// in every inbox and returns the ticket the answer waits for.
    private func changedLocked(_ events: [OutboundEvent], durable: Bool, from worker: Int, notify: inout Set<Int>) -> UInt64 {
        var ticket: UInt64 = 0
        if persistence.hasUrgentWrites || (durable && persistence.hasPendingWrites) {
            issued = persistence.commit()
            ticket = issued
        } else if !events.isEmpty || durable {
            // Plain progress waits behind whatever is still being committed: seq order holds.
            ticket = issued > committed.load(ordering: .acquiring) ? issued : 0
        }
        deliverLocked(events, ticket: ticket, from: worker, notify: &notify)
        takeWebhooksLocked(ticket: ticket)
        return ticket
    }

    /// What was asked, as planned under the lock: an entry to apply, here or from the cluster's
    /// log; or, when there is none, the answer already made (a read, a refusal, a message with
    /// nothing to apply).
    private struct Planned {
        var entry: LogEntry.Kind?
        var answered = Applied()
    }

    /// What applying an entry made: the events for the fan-out, the asker's outcome, and whether
    /// it asked for everything before it to be kept (a `flush`).
    private struct Applied {
        var events: [OutboundEvent] = []
        var outcome: Outcome?
        var durable = false
    }

    /// The one door from a transport to the state, for an HTTP request and a WebSocket message
    /// alike, and the one place that decides between one node and a cluster: planned here under
    /// the lock (`planLocked`), then applied at once, or handed to the cluster's log, which applies
    /// it on every node (`applyLog`) and brings the outcome back to `worker`'s mail under `token`.
    /// Both apply through `executeLocked`.
    func perform(_ asked: Asked, from worker: Int, token: UInt64, now: Double) -> Performed {
        let status = transportStatus
        guard let cluster else {
            let (performed, ticket) = change(from: worker) { _, _, durable in
                var performed = Performed()
                let planned = planLocked(asked, now: now, status: status, into: &performed)
                let applied = planned.entry.map { executeLocked($0, now: now, fromLog: false, asked: true) } ?? planned.answered
                performed.outcome = applied.outcome
                durable = applied.durable
                return (performed, applied.events)
            }
            var done = performed
            done.ticket = ticket
            return done
        }
        var performed = Performed()
        let entryKind: LogEntry.Kind? = lock.withLock {
            let planned = planLocked(asked, now: now, status: status, into: &performed)
            if planned.entry == nil { performed.outcome = planned.answered.outcome }
            return planned.entry
        }
        guard let entryKind else { return performed }
        guard cluster.isAvailable else {
            performed.outcome = .refused(cluster.unreachable)
            return performed
        }
        lock.withLock { if worker < lastAppended.count { lastAppended[worker] = token } }
        cluster.append(LogEntry(node: cluster.node, token: token, worker: worker, now: now, kind: entryKind))
        return performed
    }

    /// Under the lock: what `asked` comes to, decided before anything changes. In a cluster, the
    /// frames a message earned at once (refusals, `auth`) stay with this node and leave now
    /// (`early`); one node applies the plan with them, so they leave in the message's order
    /// among its replies, once what it changed is kept.
    private func planLocked(_ asked: Asked, now: Double, status: () -> TransportStatus, into performed: inout Performed) -> Planned {
        switch asked {
        case .request(let request):
            switch api.plan(request, now: now, status: status) {
            case .answer(let response):
                return Planned(answered: Applied(events: response.events, outcome: .request(response)))
            case .apply(let commands, let shape, let principal):
                performed.commands = commands.count
                return Planned(entry: .request(commands, shape, principal))
            }
        case .message(let message, var session):
            var plan = api.planMessage(message, on: &session, now: now)
            performed.session = session
            performed.commands = plan.commands.count
            if cluster != nil {
                performed.early = plan.frames.map(\.bytes)
                plan.frames = []
                if plan.commands.isEmpty, plan.flush == nil { return Planned(answered: Applied(outcome: .message(SocketReply()))) }
            }
            return Planned(entry: .message(plan))
        }
    }

    /// Under the lock: one planned entry applied to the store, the one executor for a change
    /// applied where it was asked and for one read back from the cluster's log (`fromLog`, on
    /// every node; `asked`: this node asked for it).
    private func executeLocked(_ entry: LogEntry.Kind, now: Double, fromLog: Bool, asked: Bool) -> Applied {
        switch entry {
        case .request(let commands, let answer, let principal):
            var response = api.execute(commands, answer: answer, by: principal, now: now)
            if fromLog {
                // Every node's own publishers hear a control request as their node applies it:
                // the asking node's answer carries none left to send.
                for control in response.controls { control.send() }
                response.controls = []
            }
            return Applied(events: response.events, outcome: .request(response))
        case .message(var plan):
            // The socket that sent it is on the asking node only: only there is it noted as its
            // tasks' publisher (and told of requests already waiting).
            if !asked { plan.socketKey = 0 }
            let reply = api.execute(plan, now: now)
            return Applied(events: reply.events, outcome: .message(reply), durable: reply.wantsDurable)
        case .due:
            return Applied(events: store.runDue(now: now))
        }
    }

    /// Under the lock: the deliveries the change made, held until storage keeps the change (their
    /// outbox rows are in the same commit). Returns them.
    @discardableResult
    private func takeWebhooksLocked(ticket: UInt64) -> [WebhookDelivery] {
        guard let made = store.webhooks?.takePending(), !made.isEmpty else { return [] }
        api.webhookQueued(made.count)
        heldWebhooks.withLock { $0.append((ticket, made)) }
        return made
    }

    /// Under the lock: a sender will try `delivery` again later; where the deliveries owed are
    /// kept (this node's storage, or the cluster's engine) keeps its new schedule.
    func deliveryRescheduledLocked(_ delivery: WebhookDelivery) {
        if let cluster { cluster.rescheduled(delivery) } else { persistence.saveDelivery(delivery, urgent: false) }
    }

    /// Under the lock: a delivery is owed no more (a 2xx, given up, dropped).
    func deliveryEndedLocked(id: String) {
        if let cluster { cluster.ended(deliveryID: id) } else { persistence.removeDelivery(id: id) }
    }

    /// Hands the senders every held delivery whose ticket storage has kept.
    private func releaseWebhooks() {
        let committed = committedTicket
        let due: [WebhookDelivery] = heldWebhooks.withLock { held in
            let ready = held.prefix { $0.ticket <= committed }
            held.removeFirst(ready.count)
            return ready.flatMap(\.deliveries)
        }
        if !due.isEmpty { webhooks?.send(due) }
    }

    /// Under the lock: the events to every inbox in seq order; worker 0 told of a new deadline or
    /// of writes waiting behind.
    private func deliverLocked(_ events: [OutboundEvent], ticket: UInt64, from worker: Int, notify: inout Set<Int>) {
        if !events.isEmpty {
            api.metrics.eventsPublished += events.count
            for index in mail.indices {
                if mail[index].deliveries.isEmpty, index != worker, windows[index]?.isOpen != true { notify.insert(index) }
                mail[index].deliveries.append(Delivery(ticket: ticket, events: events))
            }
        }
        let next = store.nextDeadline()
        if next != armedDeadline {
            armedDeadline = next
            deadlineChanged = true
            if worker != 0 { notify.insert(0) }
        }
        if persistence.hasPendingWrites, !writeBehindArmed {
            writeBehindArmed = true
            writeBehindRequested = true
            if worker != 0 { notify.insert(0) }
        }
    }

    private func wake(_ indices: Set<Int>) {
        guard !indices.isEmpty else { return }
        let targets = workers.withLock { all in indices.compactMap { $0 < all.count ? all[$0] : nil } }
        for worker in targets { worker.loop.notify() }
    }

    private func wakeEveryone() {
        for worker in workers.withLock({ $0 }) { worker.loop.notify() }
    }

    /// Counts something the API did not see (a refusal before routing) in its metrics.
    func record(_ body: (inout ServerMetrics) -> Void) {
        lock.withLock { body(&api.metrics) }
    }

    /// Reads the locked state; `body` changes nothing, not even a counter or a cache (what does
    /// is one of the operations below, or `perform` and `change`).
    func read<T>(_ body: (API, TaskStore) throws -> T) rethrows -> T {
        try lock.withLock { try body(api, store) }
    }

    /// For SharedState's own operations written in other files (the webhook senders'): `body`
    /// may change what it is handed; nothing goes to the workers.
    func withLockedState<T>(_ body: (API, TaskStore) throws -> T) rethrows -> T {
        try lock.withLock { try body(api, store) }
    }

    // MARK: Watchers and settings: what changes the state outside a change's fan-out

    /// A new socket's or stream's opening, in one turn of the lock: its session (with a new
    /// publisher key), hello and snapshot (`API.openSocket`; the snapshot is kept for the next
    /// watcher that asks the same at this seq), the seq and epoch it was taken at, and `controls`
    /// registered as where the control requests for the tasks it publishes go.
    func connectWatcher(
        _ request: SocketRequest, headers: RequestHeaders, fromLoopback: Bool, controls: ControlSink?
    ) -> (opening: SocketOpening, seq: UInt64, epoch: String) {
        lock.withLock {
            let opening = api.openSocket(request, headers: headers, fromLoopback: fromLoopback, now: Clock.now())
            if let controls { api.socketOpened(opening.session, sink: controls) }
            return (opening, store.seq, store.epoch)
        }
    }

    /// A socket whose query was refused: the error frame it gets (counted as a client error) and
    /// the seq its empty subscription starts at.
    func refuseWatcher(_ error: APIError) -> (frame: [UInt8], seq: UInt64) {
        lock.withLock { (api.refusalFrame(error), store.seq) }
    }

    /// A full snapshot of `watch` (or the changes after `since`), the seq and the epoch it was
    /// taken at. The bytes are kept for the next watcher that asks the same at this seq.
    func snapshot(matching watch: WatchSet, since: UInt64? = nil) -> (bytes: [UInt8], seq: UInt64, epoch: String) {
        lock.withLock { (store.encodeSnapshot(matching: watch, since: since, now: Clock.now()), store.seq, store.epoch) }
    }

    /// The browser's sign-in at an identity provider: `body` identifies the provider's token and,
    /// signing out, adds the session to the signed-out list.
    func signIn(_ body: (API) -> Void) {
        lock.withLock { body(api) }
    }

    /// The identity providers whose tokens are accepted from the next request on.
    func setIdentityProviders(_ providers: IdentityProviders?) {
        lock.withLock { api.identityProviders = providers }
    }

    /// Which configuration file runs now, for `/readyz` and `/metrics`.
    func setConfigGeneration(_ generation: ConfigGeneration) {
        lock.withLock { api.configGeneration = generation }
    }

    /// A reloaded configuration: the API's rules and limits, and the generation it came from.
    func reconfigure(_ config: ServerConfig, generation: ConfigGeneration) {
        lock.withLock {
            api.reconfigure(config)
            api.configGeneration = generation
        }
    }

    /// What worker `index` must deliver, answer or arm now.
    func takeMail(_ index: Int) -> Mail {
        lock.withLock {
            guard index < mail.count else { return Mail() }
            var taken = mail[index]
            mail[index] = Mail()
            if index == 0 {
                if deadlineChanged {
                    taken.deadline = .some(armedDeadline)
                    deadlineChanged = false
                }
                taken.armWriteBehind = writeBehindRequested
                writeBehindRequested = false
            }
            return taken
        }
    }

    /// Storage reports a commit (from its writer thread, or the caller's when it writes in place).
    func storageKept(_ ticket: UInt64, kept: Bool) {
        if !kept { failed.withLock { _ = $0.insert(ticket) } }
        var current = committed.load(ordering: .relaxed)
        while current < ticket {
            let (exchanged, original) = committed.compareExchange(expected: current, desired: ticket, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        releaseWebhooks()
        wakeEveryone()
    }

    /// Worker 0's write-behind timer: hands what is pending to storage.
    func writeBehind() {
        lock.withLock {
            writeBehindArmed = false
            if persistence.hasPendingWrites { issued = persistence.commit() }
        }
    }

    /// Worker 0's deadline timer: fires what is due here, or, in a cluster, claims the deadline
    /// (`armed`, the same on every node) so that one node's `due` entry fires it for all.
    func deadlineFell(from worker: Int, now: Double) -> UInt64 {
        if let cluster {
            // The timer may have been set for a deadline that has fired since, with a later one
            // armed meanwhile (a hidden task's retention, a day away): claiming that one now would
            // run every node's deadlines, and their clocks, up to it. Worker 0 re-arms for it instead.
            let deadline: Double? = lock.withLock {
                guard let armed = armedDeadline else { return nil }
                guard armed <= now else {
                    deadlineChanged = true
                    return nil
                }
                return armed
            }
            guard let deadline else { return 0 }
            cluster.claim(deadline: deadline, entry: LogEntry(node: cluster.node, token: 0, worker: worker, now: deadline, kind: .due))
            return 0
        }
        return change(from: worker) { _, _, _ in ((), executeLocked(.due, now: now, fromLog: false, asked: true).events) }.ticket
    }

    /// At shutdown: everything pending is written and counts as kept.
    func flush() {
        // A cluster's reader thread may be waiting for the lock to apply entries it has read (a
        // deadline's `due`, say): its threads are stopped first, outside the lock, or neither
        // side would ever go on.
        cluster?.stop()
        let last: UInt64 = lock.withLock {
            persistence.flush()
            return issued
        }
        storageKept(last, kept: true)
    }

    // MARK: The cluster's log

    /// Applies log entries in order (the engine's reader thread); the asking node's worker gets its answer.
    func applyLog(_ entries: [(index: Int64, entry: LogEntry)], node: String) {
        var notify: Set<Int> = []
        let waitsForReplicas = (cluster?.replicas ?? 0) > 0
        lock.withLock {
            for (index, entry) in entries {
                appliedNow = max(appliedNow, entry.now)
                let asked = entry.node == node
                let applied = executeLocked(entry.kind, now: appliedNow, fromLog: true, asked: asked)
                deliverLocked(applied.events, ticket: 0, from: -1, notify: &notify)
                // Every node made the same deliveries and owes them; the node that asked sends them, once.
                if asked {
                    cluster?.owe(takeWebhooksLocked(ticket: 0), sending: true)
                } else {
                    cluster?.owe(store.webhooks?.takePending() ?? [], sending: false)
                }
                if let outcome = applied.outcome, asked, entry.worker < mail.count {
                    if waitsForReplicas, index > replicatedThrough {
                        awaitingReplicas.append((index, entry.worker, entry.token, outcome))
                    } else {
                        answerLocked(worker: entry.worker, token: entry.token, index: index, outcome, notify: &notify)
                    }
                }
            }
            for index in mail.indices where !mail[index].deliveries.isEmpty { notify.insert(index) }
        }
        wake(notify)
        releaseWebhooks()
    }

    /// Under the lock: `outcome` to the worker that asked, or the replicas' shortfall instead.
    private func answerLocked(worker: Int, token: UInt64, index: Int64, _ outcome: Outcome, notify: inout Set<Int>) {
        let shortfall = replicaShortfalls.removeValue(forKey: index)
        mail[worker].completions.append((token, shortfall.map { .refused($0) } ?? outcome))
        notify.insert(worker)
    }

    /// The writer heard from Redis's WAIT about this node's changes up to log index `through`:
    /// their answers leave, each as applied or, for those in `failed`, with the error.
    func replicated(through: Int64, failed: [Int64: APIError]) {
        var notify: Set<Int> = []
        lock.withLock {
            replicatedThrough = max(replicatedThrough, through)
            replicaShortfalls.merge(failed) { $1 }
            let ready = awaitingReplicas.filter { $0.index <= replicatedThrough }
            awaitingReplicas.removeAll { $0.index <= replicatedThrough }
            for held in ready where held.worker < mail.count {
                answerLocked(worker: held.worker, token: held.token, index: held.index, held.outcome, notify: &notify)
            }
        }
        wake(notify)
    }

    /// This node took over deliveries another node owed (its lease ran out): /metrics counts them
    /// in this node's outbox, which their outcomes empty again.
    func webhooksTakenOver(_ count: Int) {
        lock.withLock { api.webhookQueued(count) }
    }

    /// Redis did not take a change: its worker answers with the error.
    func unavailable(_ entry: LogEntry, _ error: APIError) {
        let known: Bool = lock.withLock {
            guard entry.worker < mail.count, entry.token != 0 else { return false }
            mail[entry.worker].completions.append((entry.token, .refused(error)))
            return true
        }
        if known { wake([entry.worker]) }
    }

    /// Replaces the state with the cluster's (after Redis lost it, or this node fell behind the
    /// log's trimmed start): every watcher on every thread gets a full snapshot.
    func reload(_ saved: PersistedState) {
        lock.withLock {
            let lostEpoch = saved.epoch != store.epoch
            store.replace(with: saved)
            appliedNow = saved.appliedNow
            let unknown = APIError(
                .storageFailed,
                "Redis lost the cluster's log while this change was on its way, and the state was put back under a new epoch; it may or may not be in it: read the task, and publish again if it is missing"
            )
            for index in mail.indices {
                mail[index].deliveries = []
                mail[index].resyncEveryone = true
                if lostEpoch, index < lastAppended.count { mail[index].lostThrough = (lastAppended[index], unknown) }
            }
            if lostEpoch {
                for held in awaitingReplicas where held.worker < mail.count {
                    mail[held.worker].completions.append((held.token, .refused(unknown)))
                }
                awaitingReplicas = []
                replicaShortfalls = [:]
            }
            armedDeadline = store.nextDeadline()
            deadlineChanged = true
        }
        wakeEveryone()
    }

    /// The whole state, for the cluster's checkpoint (or to seed a Redis that lost it).
    func checkpointState() -> PersistedState {
        lock.withLock {
            PersistedState(
                epoch: store.epoch, seq: store.seq, tasks: store.tasks.values.sorted { $0.seq < $1.seq }, logs: store.logTails,
                appliedNow: appliedNow, history: store.history.kinds)
        }
    }

    /// Redis came or went: /healthz reads it fresh; nothing waits.
    func redisChanged() {}
}
