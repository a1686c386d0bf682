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
        senders = try rules.enumerated().map { index, rule in
            guard let url = ServerURL(rule.url) else {
                throw ServerError("webhooks[\(index)].url '\(rule.url)' is not a URL this server can POST to: write https://HOST:PORT/PATH")
            }
            for (key, file) in [("caFile", rule.caFile), ("clientCert", rule.clientCert), ("clientKey", rule.clientKey)] {
                if let file, !FileManager.default.isReadableFile(atPath: file) {
                    throw ServerError("webhooks[\(index)].\(key) '\(file)' is not a readable file")
                }
            }
            return HookSender(rule: rule, index: index, url: url, logger: logger, report: report)
        }
    }

    /// Any thread.
    func send(_ deliveries: [WebhookDelivery]) {
        for delivery in deliveries where senders.indices.contains(delivery.hook) { senders[delivery.hook].enqueue(delivery) }
    }

    /// Stops every sender's threads once their current attempts (if any) end; what they still hold
    /// stays in the outbox for the next start. Returns at once.
    func stop() { for sender in senders { sender.stop() } }
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
        let started: (WebhookSenders, [WebhookDelivery])? = try read { _, store in
            guard let planner = store.webhooks else {
                if !store.restoredDeliveries.isEmpty {
                    logger.warning(
                        "webhooks: \(store.restoredDeliveries.count) deliveries still owed were dropped: config.json has no \"webhooks\" any more")
                }
                return nil
            }
            let senders = try WebhookSenders(rules: planner.rules, logger: logger) { [weak self] report in
                self?.webhookReported(report, logger: logger)
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

    /// A sender's report (a sender's thread): the stored outbox and the counters follow, written
    /// behind like progress.
    private func webhookReported(_ report: WebhookReport, logger: Logger) {
        _ = change(from: 0) { (api: API, store: TaskStore, _: inout Bool) -> ((), [OutboundEvent]) in
            switch report {
            case .attempted(let delivery, let outcome, let status):
                webhookEnded(delivery, outcome, api: api, store: store, logger: logger)
                reportCircuit(delivery.hook, status, api: api, logger: logger)
            case .dropped(let delivery, let status):
                api.webhookDropped(hook: delivery.hook)
                persistence.removeDelivery(id: delivery.id)
                logger.debug(
                    "webhook \(delivery.id) to \(delivery.url) dropped: the hook owes maxOutbox (\(status.owed)) deliveries, the oldest not in flight goes"
                )
                reportCircuit(delivery.hook, status, api: api, logger: logger)
            case .changed(let hook, let status):
                reportCircuit(hook, status, api: api, logger: logger)
            }
            return ((), [])
        }
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
            persistence.removeDelivery(id: delivery.id)
            logger.debug("webhook \(delivery.id) delivered to \(delivery.url) (\(status))")
        case .retrying(let again, let reason):
            api.webhookAttempted(delivered: false, willRetry: true)
            persistence.saveDelivery(again, urgent: false)
            let wait = ((again.due - Clock.now()) / 1000 * 10).rounded() / 10
            logger.debug(
                "webhook \(delivery.id) to \(delivery.url): \(reason); attempt \(again.attempts) of \(attempts), again in \(wait.plain) s")
        case .gaveUp(let reason):
            api.webhookAttempted(delivered: false, willRetry: false)
            persistence.removeDelivery(id: delivery.id)
            logger.warning("webhook \(delivery.id) to \(delivery.url) given up after \(delivery.attempts + 1) attempts: \(reason)")
        }
    }
}
