import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform

/// What a hook's sender tells the state: an attempt's outcome, a delivery dropped from a full
/// outbox, and how the hook stands after either (its circuit, what it owes).
enum WebhookReport: Sendable {
    case attempted(WebhookDelivery, WebhookOutcome, WebhookHookStatus)
    case dropped(WebhookDelivery, WebhookHookStatus)
    case changed(hook: Int, WebhookHookStatus)
}

/// The webhook senders: per hook in config.json, `concurrency` threads over one outbox, so a slow
/// receiver holds up its own deliveries only (and only as many as it has slots), never a service
/// thread. Deliveries come in from the service thread once storage has kept them; each attempt's
/// outcome goes back to the state (`report`), which keeps the stored outbox and the counters.
/// @unchecked Sendable: the senders are Sendable themselves; the array is fixed at init.
final class WebhookSenders: @unchecked Sendable {
    private let senders: [HookSender]

    /// Throws when a hook's URL is not one the HTTP client can reach (checked at start).
    init(rules: [WebhookRule], logger: Logger, report: @escaping @Sendable (WebhookReport) -> Void) throws {
        let urls = try WebhookSenders.check(rules)
        senders = rules.enumerated().map { index, rule in
            HookSender(rule: rule, index: index, url: urls[index], logger: logger, report: report)
        }
    }

    /// Each hook's URL, or the error that names the first hook the HTTP client cannot serve: at
    /// start, and before a reload changes anything.
    @discardableResult
    static func check(_ rules: [WebhookRule]) throws -> [ServerURL] {
        try rules.enumerated().map { index, rule in
            guard let url = ServerURL(rule.url) else {
                throw ServerError("webhooks[\(index)].url '\(rule.url)' is not a URL this server can POST to: write https://HOST:PORT/PATH")
            }
            for (key, file) in [("caFile", rule.caFile), ("clientCert", rule.clientCert), ("clientKey", rule.clientKey)] {
                if let file, !FileManager.default.isReadableFile(atPath: file) {
                    throw ServerError("webhooks[\(index)].\(key) '\(file)' is not a readable file")
                }
            }
            return url
        }
    }

    /// Any thread. A delivery goes to its hook, found by URL when the list changed under it (a
    /// reload between the change and its commit); one no hook has any more is left in storage.
    func send(_ deliveries: [WebhookDelivery]) {
        for delivery in deliveries {
            if senders.indices.contains(delivery.hook), senders[delivery.hook].rule.url == delivery.url {
                senders[delivery.hook].enqueue(delivery)
            } else if let sender = senders.first(where: { $0.rule.url == delivery.url }) {
                sender.enqueue(
                    WebhookDelivery(
                        id: delivery.id, hook: sender.index, url: delivery.url, body: delivery.body, attempts: delivery.attempts,
                        due: delivery.due))
            }
        }
    }

    /// Stops every sender's threads once their current attempts (if any) end; what they still hold
    /// stays in the outbox for the next start. Returns at once.
    func stop() { for sender in senders { sender.stop() } }

    /// Stops every sender (as `stop`) and returns what they owed and had not begun to attempt,
    /// for the senders a reload starts instead. What is in flight reports to the state when it
    /// ends, which hands a retry to the new senders.
    func stopAndTakeOwed() -> [WebhookDelivery] { senders.flatMap { $0.stopAndTakeOwed() } }
}

/// One hook: its outbox (`WebhookOutbox`, the core's decisions: the bound, the slots, the circuit)
/// and `concurrency` threads that each take the next due delivery, sign the exact body
/// (`X-Ringcast-Signature: sha256=<hex HMAC-SHA256>`) and POST it with a client of their own.
/// @unchecked Sendable: `outbox` and `stopped` are guarded by `condition`; each HTTP client belongs to its thread.
final class HookSender: @unchecked Sendable {
    /// The most of a receiver's answer body read (Ringcast reads only the status).
    static let maxAnswerBytes = 8 * 1024
    let rule: WebhookRule
    let index: Int
    let url: ServerURL
    private let logger: Logger
    private let report: @Sendable (WebhookReport) -> Void
    private let condition = NSCondition()
    private var outbox: WebhookOutbox
    private var stopped = false

    init(rule: WebhookRule, index: Int, url: ServerURL, logger: Logger, report: @escaping @Sendable (WebhookReport) -> Void) {
        self.rule = rule
        self.index = index
        self.url = url
        self.logger = logger
        self.report = report
        outbox = WebhookOutbox(rule: rule)
        for slot in 0..<rule.concurrency {
            let thread = Thread { [self] in run() }
            thread.name = "ringcast-webhook-\(index)-\(slot)"
            thread.start()
        }
    }

    func enqueue(_ delivery: WebhookDelivery) {
        let (dropped, status) = condition.withLock {
            let dropped = outbox.admit(delivery)
            condition.broadcast()
            return (dropped, outbox.status)
        }
        report(dropped.map { .dropped($0, status) } ?? .changed(hook: index, status))
    }

    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    func stopAndTakeOwed() -> [WebhookDelivery] {
        condition.withLock {
            stopped = true
            condition.broadcast()
            return outbox.owed.filter { !outbox.inFlight.contains($0.id) }
        }
    }

    private func run() {
        // Only the status counts: a receiver's body past a few KiB fails the attempt rather than filling memory.
        // One client per slot: its easy handle keeps the connection (and TLS session) to the receiver.
        let tls = TLSSettings(caFile: rule.caFile, clientCertificate: rule.clientCert, clientKey: rule.clientKey)
        let client = HTTPClient(
            url: url, tls: tls, proxy: rule.proxy, timeoutSeconds: rule.timeoutSeconds, maxBodyBytes: HookSender.maxAnswerBytes)
        while let delivery = nextDue() {
            let attempt = self.attempt(delivery, with: client)
            let (outcome, status) = condition.withLock {
                let outcome = outbox.finish(delivery, attempt, now: Clock.now(), random: Double.random(in: 0...1))
                condition.broadcast()
                return (outcome, outbox.status)
            }
            report(.attempted(delivery, outcome, status))
        }
    }

    private enum Step {
        case attempt(WebhookDelivery)
        case stop
        case lookAgain
    }

    /// Waits until the outbox gives a delivery to attempt and takes it; nil once stopped. Reports
    /// are made outside the lock: they take the state's.
    private func nextDue() -> WebhookDelivery? {
        while true {
            let (step, changed): (Step, WebhookHookStatus?) = condition.withLock {
                guard !stopped else { return (.stop, nil) }
                let circuit = outbox.circuit
                let taken = outbox.take(now: Clock.now())
                // Half-opening happens when a probe may go: said while the probe is out.
                let changed = outbox.circuit != circuit ? outbox.status : nil
                if let taken { return (.attempt(taken), changed) }
                if changed == nil {
                    if let next = outbox.nextLook(now: Clock.now()) {
                        _ = condition.wait(until: Date().addingTimeInterval(max(0.001, (next - Clock.now()) / 1000)))
                    } else {
                        condition.wait()
                    }
                }
                return (.lookAgain, changed)
            }
            if let changed { report(.changed(hook: index, changed)) }
            switch step {
            case .attempt(let delivery): return delivery
            case .stop: return nil
            case .lookAgain: continue
            }
        }
    }

    private func attempt(_ delivery: WebhookDelivery, with client: HTTPClient) -> WebhookAttempt {
        do {
            // ntfy takes JSON at its root, the topic in the body.
            let response = try client.request(
                "POST", rule.format == .ntfy ? "/" : url.path, body: delivery.body,
                headers: [
                    ("X-Ringcast-Signature", Crypto.current.webhookSignature(body: delivery.body, key: rule.secret)),
                    ("X-Ringcast-Delivery", delivery.id),
                    ("X-Ringcast-Event", "state"),
                    ("User-Agent", "ringcast/\(ProtocolInfo.version)"),
                ])
            return .answered(response.status)
        } catch {
            client.disconnect()
            return .failed("\(error)")
        }
    }
}

/// The state's side of webhooks: starting the senders, handing them what storage has kept, and
/// keeping the outbox and the counters as attempts end. Under the state's lock, from any thread.
extension SharedState {
    /// At start: the senders, and the deliveries the outbox still held.
    func startWebhooks(logger: Logger) throws -> WebhookSenders? {
        // Handed over outside the lock: a sender's report takes it.
        let started: (WebhookSenders, [WebhookDelivery])? = try withLockedState { _, store in
            guard let planner = store.webhooks else {
                if !store.restoredDeliveries.isEmpty {
                    logger.warning(
                        "webhooks: \(store.restoredDeliveries.count) deliveries still owed were dropped: config.json has no \"webhooks\" any more")
                }
                return nil
            }
            let generation = webhookGeneration
            let senders = try WebhookSenders(rules: planner.rules, logger: logger) { [weak self] report in
                self?.webhookReported(report, generation: generation, logger: logger)
            }
            let restored = planner.takePending()
            if restored.count < store.restoredDeliveries.count {
                logger.warning(
                    "webhooks: \(store.restoredDeliveries.count - restored.count) deliveries still owed were dropped: no hook has their URL any more, or past its maxOutbox"
                )
            }
            if !restored.isEmpty { logger.info("webhooks: \(restored.count) deliveries still owed from before the restart") }
            return (senders, restored)
        }
        guard let (senders, restored) = started else { return nil }
        senders.send(restored)
        return senders
    }

    /// SIGHUP's `webhooks`: the senders stop, and new ones start for the new list with what the
    /// old ones owed and had not begun (each found its hook by URL, as at a restart; a delivery no
    /// hook has any more is dropped and counted so). Throws, changing nothing, when a hook is one
    /// the HTTP client cannot serve. Any thread but a sender's.
    func reloadWebhooks(_ rules: [WebhookRule], logger: Logger) throws {
        try WebhookSenders.check(rules)
        // All under the state's lock, so that a report of an attempt the old senders still have
        // in flight is taken either before (its retry is then among what they owe) or after the
        // swap (it is then stale, and its retry goes to the new senders): never between.
        let started: (WebhookSenders?, [WebhookDelivery]) = try withLockedState { api, store in
            webhookGeneration += 1
            let generation = webhookGeneration
            let owed = webhooks?.stopAndTakeOwed() ?? []
            let planner = rules.isEmpty ? nil : WebhookPlanner(rules: rules)
            store.webhooks = planner
            api.followUpMetrics.webhookHooks = rules.map { WebhookHookStatus(url: $0.url) }
            let (kept, orphaned, overflow) = (planner ?? WebhookPlanner(rules: [])).restore(owed)
            _ = planner?.takePending()
            for delivery in orphaned + overflow {
                deliveryEndedLocked(id: delivery.id)
                api.webhookDropped(hook: delivery.hook)
            }
            if !orphaned.isEmpty {
                logger.warning("webhooks: \(orphaned.count) deliveries still owed were dropped: no hook has their URL after the reload")
            }
            guard let planner else {
                webhooks = nil
                return (nil, [])
            }
            let senders = try WebhookSenders(rules: planner.rules, logger: logger) { [weak self] report in
                self?.webhookReported(report, generation: generation, logger: logger)
            }
            webhooks = senders
            return (senders, kept)
        }
        started.0?.send(started.1)
    }

    /// A sender's report (a sender's thread): the stored outbox and the counters follow, written
    /// behind like progress. A report of senders a reload replaced (`generation` behind) says
    /// nothing of the hooks now listed; a retry it schedules goes to the new senders.
    private func webhookReported(_ report: WebhookReport, generation: Int, logger: Logger) {
        let retry: WebhookDelivery? = change(from: 0) { (api: API, store: TaskStore, _: inout Bool) -> (WebhookDelivery?, [OutboundEvent]) in
            let current = generation == webhookGeneration
            switch report {
            case .attempted(let delivery, let outcome, let status):
                webhookEnded(delivery, outcome, api: api, store: store, logger: logger)
                if current { reportCircuit(delivery.hook, status, api: api, logger: logger) }
                if !current, case .retrying(let again, _) = outcome { return (again, []) }
            case .dropped(let delivery, let status):
                api.webhookDropped(hook: delivery.hook)
                deliveryEndedLocked(id: delivery.id)
                logger.debug(
                    "webhook \(delivery.id) to \(delivery.url) dropped: the hook owes maxOutbox (\(status.owed)) deliveries, the oldest not in flight goes"
                )
                if current { reportCircuit(delivery.hook, status, api: api, logger: logger) }
            case .changed(let hook, let status):
                if current { reportCircuit(hook, status, api: api, logger: logger) }
            }
            return (nil, [])
        }.0
        if let retry { webhooks?.send([retry]) }
    }

    /// Under the lock: the hook's status for /metrics and /readyz; its circuit's changes logged once each.
    private func reportCircuit(_ hook: Int, _ status: WebhookHookStatus, api: API, logger: Logger) {
        guard api.followUpMetrics.webhookHooks.indices.contains(hook) else { return }
        let before = api.followUpMetrics.webhookHooks[hook].circuit
        api.webhookHookChanged(hook, status)
        // A late report is left out, and says nothing.
        guard api.followUpMetrics.webhookHooks[hook].circuit != before else { return }
        switch status.circuit {
        case .open:
            let wait = ((status.probeAt ?? Clock.now()) - Clock.now()) / 1000
            logger.warning(
                "webhook \(hook) to \(status.url): circuit open after \(status.consecutiveFailures) failed attempts in a row; nothing is sent until a probe in \(wait.rounded().plain) s"
            )
        case .halfOpen: logger.info("webhook \(hook) to \(status.url): circuit half-open, one delivery probes the receiver")
        case .closed: logger.info("webhook \(hook) to \(status.url): circuit closed, the receiver answers again")
        }
    }

    /// Under the lock: an attempt ended.
    private func webhookEnded(_ delivery: WebhookDelivery, _ outcome: WebhookOutcome, api: API, store: TaskStore, logger: Logger) {
        let attempts = store.webhooks.flatMap { $0.rules.indices.contains(delivery.hook) ? $0.rules[delivery.hook].maxAttempts : nil } ?? 0
        switch outcome {
        case .delivered(let status):
            api.webhookAttempted(delivered: true, willRetry: false)
            deliveryEndedLocked(id: delivery.id)
            logger.debug("webhook \(delivery.id) delivered to \(delivery.url) (\(status))")
        case .retrying(let again, let reason):
            api.webhookAttempted(delivered: false, willRetry: true)
            deliveryRescheduledLocked(again)
            let wait = ((again.due - Clock.now()) / 1000 * 10).rounded() / 10
            logger.debug(
                "webhook \(delivery.id) to \(delivery.url): \(reason); attempt \(again.attempts) of \(attempts), again in \(wait.plain) s")
        case .gaveUp(let reason):
            api.webhookAttempted(delivered: false, willRetry: false)
            deliveryEndedLocked(id: delivery.id)
            logger.warning("webhook \(delivery.id) to \(delivery.url) given up after \(delivery.attempts + 1) attempts: \(reason)")
        }
    }
}
