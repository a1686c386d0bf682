import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform

/// How one attempt at a delivery ended.
enum WebhookOutcome: Sendable {
    case delivered(status: Int)
    /// Failed; tried again at `delivery.due` (its `attempts` counts this one).
    case retrying(WebhookDelivery, reason: String)
    case gaveUp(reason: String)
}

/// The webhook senders: one thread per hook in config.json, so a slow receiver holds up its own
/// deliveries only, and never a service thread. Deliveries come in from the service thread once
/// storage has kept them; each attempt's outcome goes back to it (`report`), which keeps the
/// outbox and the counters.
/// @unchecked Sendable: the senders are Sendable themselves; the array is fixed at init.
final class WebhookSenders: @unchecked Sendable {
    private let senders: [HookSender]

    /// Throws when a hook's URL is not one the HTTP client can reach (checked at start).
    init(rules: [WebhookRule], logger: Logger, report: @escaping @Sendable (WebhookDelivery, WebhookOutcome) -> Void) throws {
        senders = try rules.enumerated().map { index, rule in
            guard let url = ServerURL(rule.url), !url.secure else {
                throw ServerError("webhooks[\(index)].url '\(rule.url)' is not a URL this server can POST to: write http://HOST:PORT/PATH")
            }
            return HookSender(rule: rule, index: index, url: url, logger: logger, report: report)
        }
    }

    /// Any thread.
    func send(_ deliveries: [WebhookDelivery]) {
        for delivery in deliveries where senders.indices.contains(delivery.hook) { senders[delivery.hook].enqueue(delivery) }
    }

    /// Stops every sender's thread once its current attempt (if any) ends; what they still hold
    /// stays in the outbox for the next start. Returns at once.
    func stop() { for sender in senders { sender.stop() } }
}

/// One hook's queue and its thread: attempts each delivery when it is due, signs the exact body
/// (`X-Ringcast-Signature: sha256=<hex HMAC-SHA256>`), and schedules a failed one again after
/// `WebhookRetry`'s back-off until `maxAttempts`.
/// @unchecked Sendable: `queue` and `stopped` are guarded by `condition`; the HTTP client belongs to the thread.
final class HookSender: @unchecked Sendable {
    /// The most of a receiver's answer body read (Ringcast reads only the status).
    static let maxAnswerBytes = 8 * 1024
    let rule: WebhookRule
    let index: Int
    let url: ServerURL
    private let logger: Logger
    private let report: @Sendable (WebhookDelivery, WebhookOutcome) -> Void
    private let condition = NSCondition()
    private var queue: [WebhookDelivery] = []
    private var stopped = false

    init(rule: WebhookRule, index: Int, url: ServerURL, logger: Logger, report: @escaping @Sendable (WebhookDelivery, WebhookOutcome) -> Void) {
        self.rule = rule
        self.index = index
        self.url = url
        self.logger = logger
        self.report = report
        let thread = Thread { [self] in run() }
        thread.name = "ringcast-webhook-\(index)"
        thread.start()
    }

    func enqueue(_ delivery: WebhookDelivery) {
        condition.withLock {
            queue.append(delivery)
            condition.broadcast()
        }
    }

    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    private func run() {
        // Only the status counts: a receiver's body past a few KiB fails the attempt rather than filling memory.
        let client = HTTPClient(host: url.host, port: url.port, timeoutSeconds: rule.timeoutSeconds, maxBodyBytes: HookSender.maxAnswerBytes)
        while let delivery = nextDue() {
            let outcome = attempt(delivery, with: client)
            if case .retrying(let again, _) = outcome { enqueue(again) }
            report(delivery, outcome)
        }
    }

    /// Waits for the earliest delivery to fall due and takes it; nil once stopped.
    private func nextDue() -> WebhookDelivery? {
        condition.lock()
        defer { condition.unlock() }
        while !stopped {
            guard let earliest = queue.indices.min(by: { queue[$0].due < queue[$1].due }) else {
                condition.wait()
                continue
            }
            let wait = (queue[earliest].due - Clock.now()) / 1000
            if wait <= 0 { return queue.remove(at: earliest) }
            _ = condition.wait(until: Date().addingTimeInterval(wait))
        }
        return nil
    }

    private func attempt(_ delivery: WebhookDelivery, with client: HTTPClient) -> WebhookOutcome {
        var reason: String
        do {
            let response = try client.request(
                "POST", url.path, body: delivery.body,
                headers: [
                    ("X-Ringcast-Signature", HMACSHA256.signatureHeader(delivery.body, key: rule.secret)),
                    ("X-Ringcast-Delivery", delivery.id),
                    ("X-Ringcast-Event", "state"),
                    ("User-Agent", "ringcast/\(ProtocolInfo.version)"),
                ])
            if (200..<300).contains(response.status) { return .delivered(status: response.status) }
            reason = "answered \(response.status)"
        } catch {
            client.disconnect()
            reason = "\(error)"
        }
        var again = delivery
        again.attempts += 1
        guard again.attempts < rule.maxAttempts else { return .gaveUp(reason: reason) }
        again.due = Clock.now() + WebhookRetry.delaySeconds(afterAttempt: again.attempts, random: Double.random(in: 0...1)) * 1000
        return .retrying(again, reason: reason)
    }
}

/// The state's side of webhooks: starting the senders, handing them what storage has kept, and
/// keeping the outbox and the counters as attempts end. Under the state's lock, from any thread.
extension SharedState {
    /// At start: the senders, and the deliveries the outbox still held.
    func startWebhooks(logger: Logger) throws -> WebhookSenders? {
        try read { _, store in
            guard let planner = store.webhooks else {
                if !store.restoredDeliveries.isEmpty {
                    logger.warning(
                        "webhooks: \(store.restoredDeliveries.count) deliveries still owed were dropped: config.json has no \"webhooks\" any more")
                }
                return nil
            }
            let senders = try WebhookSenders(rules: planner.rules, logger: logger) { [weak self] delivery, outcome in
                self?.webhookEnded(delivery, outcome, logger: logger)
            }
            let restored = planner.takePending()
            if restored.count < store.restoredDeliveries.count {
                logger.warning(
                    "webhooks: \(store.restoredDeliveries.count - restored.count) deliveries still owed were dropped: no hook has their URL any more")
            }
            if !restored.isEmpty { logger.info("webhooks: \(restored.count) deliveries still owed from before the restart") }
            senders.send(restored)
            return senders
        }
    }

    /// An attempt ended (a sender's thread): the outbox and the counters follow, written behind like progress.
    private func webhookEnded(_ delivery: WebhookDelivery, _ outcome: WebhookOutcome, logger: Logger) {
        _ = change(from: 0) { (api: API, store: TaskStore, _: inout Bool) -> ((), [OutboundEvent]) in
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
                logger.warning("webhook \(delivery.id) to \(delivery.url) given up after \(attempts) attempts: \(reason)")
            }
            return ((), [])
        }
    }
}
