import Foundation
import RingcastCore
import Synchronization

/// The single writer behind every service thread: the store, the API and storage, and one lock
/// that every worker takes to change or read them, so seq stays one ordered space. A change's
/// events go, still under the lock, into every worker's inbox in seq order, each with the storage
/// ticket it must wait for; each worker then delivers them on its own thread, so nothing on the
/// per-delivery path takes this lock.
///
/// `@unchecked Sendable`: `store`, `api`, `persistence`, the inboxes and the timer bookkeeping are
/// touched only while `lock` is held; `committed` and `failed` are their own synchronisation.
final class SharedState: @unchecked Sendable {
    /// Events for one worker, and the storage ticket that must be kept before they leave.
    struct Delivery {
        let ticket: UInt64
        let events: [OutboundEvent]
    }

    /// What a worker takes from its inbox when it wakes.
    struct Mail {
        var deliveries: [Delivery]
        /// Worker 0 keeps the deadline timer: where to arm it, when that changed.
        var deadline: Double??
        /// Worker 0 keeps the write-behind timer: arm it.
        var armWriteBehind: Bool
    }

    private let lock = NSLock()
    private let store: TaskStore
    private let api: API
    private let persistence: TaskPersistence
    private var workers: [ServiceWorker] = []
    private var inboxes: [[Delivery]] = []
    private var issued: UInt64 = 0
    /// The newest ticket storage reported kept (or lost): tickets come back in order.
    private let committed = Atomic<UInt64>(0)
    /// Tickets storage could not keep, so their answers say so.
    private let failed = Mutex<Set<UInt64>>([])
    private var armedDeadline: Double?
    private var deadlineChanged = false
    private var writeBehindArmed = false
    private var writeBehindRequested = false

    init(store: TaskStore, api: API, persistence: TaskPersistence) {
        self.store = store
        self.api = api
        self.persistence = persistence
    }

    var epoch: String { store.epoch }

    /// The workers whose inboxes events go to; once, before any of them starts.
    func attach(_ workers: [ServiceWorker]) {
        self.workers = workers
        inboxes = Array(repeating: [], count: workers.count)
        armedDeadline = store.nextDeadline()
        deadlineChanged = true
    }

    /// Once every worker has stopped: lets go of them.
    func detachWorkers() {
        lock.withLock {
            workers = []
            inboxes = []
        }
    }

    var committedTicket: UInt64 { committed.load(ordering: .acquiring) }

    func wasKept(_ ticket: UInt64) -> Bool { !failed.withLock { $0.contains(ticket) } }

    /// Runs `body` on the locked state; the events it returns go to every worker once storage has
    /// kept what must be kept. Returns its result and the ticket the caller's answer waits for (0:
    /// nothing to wait for). A body that sets its `durable` argument commits even plain progress
    /// (a publisher's `flush`).
    func change<T>(from worker: Int, _ body: (API, TaskStore, _ durable: inout Bool) -> (T, [OutboundEvent])) -> (T, ticket: UInt64) {
        var notify: [ServiceWorker] = []
        let (result, ticket): (T, UInt64) = lock.withLock {
            var durable = false
            let (result, events) = body(api, store, &durable)
            var ticket: UInt64 = 0
            if persistence.hasUrgentWrites || (durable && persistence.hasPendingWrites) {
                issued = persistence.commit()
                ticket = issued
            } else if !events.isEmpty || durable {
                // Plain progress waits behind whatever is still being committed: seq order holds.
                ticket = issued > committed.load(ordering: .acquiring) ? issued : 0
            }
            if !events.isEmpty {
                api.metrics.eventsPublished += events.count
                for index in inboxes.indices {
                    if inboxes[index].isEmpty, index != worker { notify.append(workers[index]) }
                    inboxes[index].append(Delivery(ticket: ticket, events: events))
                }
            }
            let next = store.nextDeadline()
            if next != armedDeadline {
                armedDeadline = next
                deadlineChanged = true
                if worker != 0, !notify.contains(where: { $0 === workers[0] }) { notify.append(workers[0]) }
            }
            if persistence.hasPendingWrites, !writeBehindArmed {
                writeBehindArmed = true
                writeBehindRequested = true
                if worker != 0, !notify.contains(where: { $0 === workers[0] }) { notify.append(workers[0]) }
            }
            return (result, ticket)
        }
        for worker in notify { worker.loop.notify() }
        return (result, ticket)
    }

    /// Counts something the API did not see (a refusal before routing) in its metrics.
    func record(_ body: (inout ServerMetrics) -> Void) {
        lock.withLock { body(&api.metrics) }
    }

    /// Reads the locked state (a new watcher's snapshot, a resync, a GET answered without changes).
    func read<T>(_ body: (API, TaskStore) -> T) -> T {
        lock.withLock { body(api, store) }
    }

    /// What worker `index` must deliver or arm now.
    func takeMail(_ index: Int) -> Mail {
        lock.withLock {
            guard index < inboxes.count else { return Mail(deliveries: [], deadline: nil, armWriteBehind: false) }
            var mail = Mail(deliveries: inboxes[index], deadline: nil, armWriteBehind: false)
            inboxes[index].removeAll(keepingCapacity: true)
            if index == 0 {
                if deadlineChanged {
                    mail.deadline = .some(armedDeadline)
                    deadlineChanged = false
                }
                mail.armWriteBehind = writeBehindRequested
                writeBehindRequested = false
            }
            return mail
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
        for worker in workers { worker.loop.notify() }
    }

    /// Worker 0's write-behind timer: hands what is pending to storage.
    func writeBehind() {
        lock.withLock {
            writeBehindArmed = false
            if persistence.hasPendingWrites { issued = persistence.commit() }
        }
    }

    /// At shutdown: everything pending is written and counts as kept.
    func flush() {
        let last: UInt64 = lock.withLock {
            persistence.flush()
            return issued
        }
        storageKept(last, kept: true)
    }
}
