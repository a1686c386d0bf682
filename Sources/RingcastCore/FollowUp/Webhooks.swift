/// One entry of config.json's `webhooks`: when a task matching `patterns` enters one of
/// `states`, the server POSTs it to `url`, signed with the secret.
public struct WebhookRule: Equatable, Sendable {
    public var url: String
    public var patterns: WatchSet
    public var states: [TaskState]
    /// The HMAC-SHA256 key; from `secret`, or the environment variable `secretEnv` names.
    public var secret: [UInt8]
    /// Attempts in all (the first included) before a delivery is given up.
    public var maxAttempts: Int
    /// Seconds one attempt may take (connecting, sending, the answer).
    public var timeoutSeconds: Double
    /// The most deliveries the hook may owe (in flight included); one more drops the oldest not in flight.
    public var maxOutbox: Int
    /// Attempts in flight at once, so one slow answer does not hold up the rest.
    public var concurrency: Int
    /// Failed attempts in a row that open the hook's circuit: no attempt until `circuitOpenSeconds` pass.
    public var circuitFailures: Int
    /// Seconds an open circuit waits before one delivery probes the receiver again (half-open).
    public var circuitOpenSeconds: Double
    /// A PEM file of the CA(s) to trust for an https:// receiver instead of the system's store.
    public var caFile: String?
    /// A certificate and its key (PEM files) the sender presents to a receiver that asks for one.
    public var clientCert: String?
    public var clientKey: String?
    /// A proxy URL for this hook's requests instead of the environment's (`HTTPS_PROXY`, `NO_PROXY`…);
    /// "" goes direct.
    public var proxy: String?
    /// The body's shape: Ringcast's JSON (the default), or Slack's, Discord's or ntfy's.
    public var format = WebhookFormat.ringcast
    /// The server's address as the receiver's readers reach it (`https://ringcast.example`): the
    /// message links to the task's page under it; without it, to the task's own `url`, if any.
    public var pageBase: String?

    public static let defaultStates: [TaskState] = [.done, .failed, .stalled]
    public static let defaultMaxAttempts = 10
    public static let defaultMaxOutbox = 1000
    public static let defaultConcurrency = 4
    public static let defaultCircuitFailures = 5
    public static let defaultCircuitOpenSeconds = 30.0
    public static let keys = [
        "url", "patterns", "states", "secret", "secretEnv", "maxAttempts", "timeoutSeconds", "maxOutbox", "concurrency", "circuitFailures",
        "circuitOpenSeconds", "caFile", "clientCert", "clientKey", "proxy", "format", "pageBase",
    ]

    public init(
        url: String, patterns: WatchSet = WatchSet([Glob("*")]), states: [TaskState] = WebhookRule.defaultStates,
        secret: String, maxAttempts: Int = WebhookRule.defaultMaxAttempts, timeoutSeconds: Double = 10,
        maxOutbox: Int = WebhookRule.defaultMaxOutbox, concurrency: Int = WebhookRule.defaultConcurrency,
        circuitFailures: Int = WebhookRule.defaultCircuitFailures, circuitOpenSeconds: Double = WebhookRule.defaultCircuitOpenSeconds
    ) {
        self.url = url
        self.patterns = patterns
        self.states = states
        self.secret = Array(secret.utf8)
        self.maxAttempts = maxAttempts
        self.timeoutSeconds = timeoutSeconds
        self.maxOutbox = maxOutbox
        self.concurrency = concurrency
        self.circuitFailures = circuitFailures
        self.circuitOpenSeconds = circuitOpenSeconds
    }

    /// Whether a task entering `state` fires this hook.
    public func fires(for id: String, entering state: TaskState) -> Bool {
        states.contains(state) && patterns.matches(id)
    }

    static func parse(_ item: JSONValue, at place: String, environment: [String: String]) throws(ConfigError) -> WebhookRule {
        guard case .object(let members) = item else {
            throw ConfigError("\(place) must be an object like {\"url\": \"http://127.0.0.1:9000/hook\", \"secretEnv\": \"HOOK_SECRET\"}")
        }
        if let unknown = members.first(where: { !keys.contains($0.0) }) {
            throw ConfigError("\(place) has no setting \"\(unknown.0)\"; it takes \(keys.joined(separator: ", "))")
        }
        guard case .string(let url)? = item["url"], !url.isEmpty else {
            throw ConfigError("\(place).url is missing: the https:// or http:// address to POST to, like \"https://hooks.example.com/ringcast\"")
        }
        let lowered = url.lowercased()
        let scheme = lowered.hasPrefix("https://") ? 8 : lowered.hasPrefix("http://") ? 7 : 0
        guard scheme > 0, url.dropFirst(scheme).prefix(while: { $0 != "/" && $0 != "?" }).count > 0 else {
            throw ConfigError("\(place).url '\(url)' is not an https:// or http:// URL like \"https://hooks.example.com/ringcast\"")
        }
        let patterns =
            try item["patterns"].map { value throws(ConfigError) in try ServerConfig.parsePatterns(value, at: place) }
            ?? WatchSet([Glob("*")])
        var states = defaultStates
        if let value = item["states"] {
            let names = TaskState.allCases.map(\.rawValue).joined(separator: ", ")
            guard case .array(let values) = value, !values.isEmpty else {
                throw ConfigError("\(place).states must be a non-empty list of states (\(names))")
            }
            states = []
            for value in values {
                guard case .string(let name) = value, let state = TaskState(rawValue: name) else {
                    throw ConfigError("\(place).states: \(value) is not a state; use \(names)")
                }
                if !states.contains(state) { states.append(state) }
            }
        }
        let secret = try ServerConfig.parseSecret(item, "secret", at: place, environment: environment, holding: "the signing secret")
        guard !secret.isEmpty else { throw ConfigError("\(place).secret is empty: give the receiver's signing secret") }
        var rule = WebhookRule(url: url, patterns: patterns, states: states, secret: secret)
        if let value = item["maxAttempts"] {
            guard case .number(let n) = value, n == n.rounded(), (1...100).contains(n) else {
                throw ConfigError("\(place).maxAttempts must be a whole number from 1 to 100")
            }
            rule.maxAttempts = Int(n)
        }
        if let value = item["timeoutSeconds"] {
            guard case .number(let n) = value, (1...300).contains(n) else {
                throw ConfigError("\(place).timeoutSeconds must be seconds from 1 to 300")
            }
            rule.timeoutSeconds = n
        }
        func count(_ key: String, _ range: ClosedRange<Int>, _ meaning: String) throws(ConfigError) -> Int? {
            guard let value = item[key] else { return nil }
            guard case .number(let n) = value, n == n.rounded(), Double(range.lowerBound) <= n, n <= Double(range.upperBound) else {
                throw ConfigError("\(place).\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound): \(meaning)")
            }
            return Int(n)
        }
        rule.maxOutbox = try count("maxOutbox", 1...1_000_000, "the most deliveries the hook may owe") ?? rule.maxOutbox
        rule.concurrency = try count("concurrency", 1...64, "attempts in flight at once") ?? rule.concurrency
        rule.circuitFailures = try count("circuitFailures", 1...1000, "failed attempts in a row that open the circuit") ?? rule.circuitFailures
        if let value = item["circuitOpenSeconds"] {
            guard case .number(let n) = value, (1...3600).contains(n) else {
                throw ConfigError("\(place).circuitOpenSeconds must be seconds from 1 to 3600: how long an open circuit waits before a probe")
            }
            rule.circuitOpenSeconds = n
        }
        func text(_ key: String, _ meaning: String) throws(ConfigError) -> String? {
            guard let value = item[key] else { return nil }
            guard case .string(let text) = value, !text.isEmpty || key == "proxy" else {
                throw ConfigError("\(place).\(key) must be \(meaning)")
            }
            return text
        }
        rule.caFile = try text("caFile", "the path of a PEM file of the CA(s) that sign the receiver's certificate")
        rule.clientCert = try text("clientCert", "the path of a PEM file of the certificate to present to the receiver")
        rule.clientKey = try text("clientKey", "the path of a PEM file of the client certificate's key")
        rule.proxy = try text("proxy", "a proxy URL like \"http://proxy.example:3128\", or \"\" to go direct")
        if let name = try text("format", "one of \(WebhookFormat.allCases.map(\.rawValue).joined(separator: ", "))") {
            guard let format = WebhookFormat(rawValue: name) else {
                throw ConfigError("\(place).format '\(name)' is not a format; use \(WebhookFormat.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            rule.format = format
        }
        rule.pageBase = try text("pageBase", "the server's address as readers reach it, like \"https://ringcast.example\"")
        if rule.format == .ntfy, WebhookMessage.topic(url).isEmpty {
            throw ConfigError("\(place).url names no ntfy topic: write the topic's URL, like \"https://ntfy.sh/ci-builds\"")
        }
        if (rule.clientCert == nil) != (rule.clientKey == nil) {
            throw ConfigError("\(place): clientCert and clientKey go together: give both, or neither")
        }
        guard rule.concurrency <= rule.maxOutbox else {
            throw ConfigError(
                "\(place).concurrency (\(rule.concurrency)) is more than its maxOutbox (\(rule.maxOutbox)): lower concurrency, or raise maxOutbox")
        }
        return rule
    }
}

/// One POST a webhook owes: its body, fixed when the state changed (so every attempt, after a
/// restart too, sends the same bytes with the same delivery id), and where its retries stand.
public struct WebhookDelivery: Equatable, Sendable {
    /// `EPOCH-SEQ-HOOK`: unique for the server's state, the same in every attempt (for de-duplication).
    public let id: String
    /// The index of its hook in config.json's `webhooks` when it was made, and the hook's URL.
    public let hook: Int
    public let url: String
    public let body: [UInt8]
    /// Attempts made so far.
    public var attempts: Int
    /// When the next attempt is due (Unix ms).
    public var due: Double

    public init(id: String, hook: Int, url: String, body: [UInt8], attempts: Int = 0, due: Double) {
        (self.id, self.hook, self.url, self.body, self.attempts, self.due) = (id, hook, url, body, attempts, due)
    }
}

/// When a failed attempt is tried again: with d = min(cap, base·2^(attempts−1)), a random point of
/// [d/2, d] (capped exponential back-off, jittered but never instant).
public enum WebhookRetry {
    public static let baseSeconds = 1.0
    public static let capSeconds = 300.0

    public static func delaySeconds(afterAttempt attempts: Int, random: Double) -> Double {
        let ceiling = min(capSeconds, baseSeconds * Double(1 << min(max(attempts - 1, 0), 20)))
        return ceiling / 2 + min(1, max(0, random)) * ceiling / 2
    }
}

/// Turns state changes into deliveries. The store asks it at each commit that changes a state;
/// the deliveries it makes are saved with that change and wait in `pending` until the transport
/// hands them to its senders (after storage kept them). Service thread only (the store's).
public final class WebhookPlanner {
    public let rules: [WebhookRule]
    private var pending: [WebhookDelivery] = []

    public init(rules: [WebhookRule]) { self.rules = rules }

    func plan(_ task: TaskRecord, from previous: TaskState?, epoch: String, now: Double) -> [WebhookDelivery] {
        var made: [WebhookDelivery] = []
        for (index, rule) in rules.enumerated() where rule.fires(for: task.id, entering: task.state) {
            let id = "\(epoch)-\(task.seq)-\(index)"
            guard rule.format == .ringcast else {
                let body = WebhookMessage.body(rule.format, task, rule: rule, now: now)
                made.append(WebhookDelivery(id: id, hook: index, url: rule.url, body: body, due: now))
                continue
            }
            var writer = JSONWriter(capacity: 512)
            writer.beginObject()
            writer.key("delivery")
            writer.string(id)
            writer.key("event")
            writer.string("state")
            writer.key("state")
            writer.string(task.state.rawValue)
            if let previous {
                writer.key("previousState")
                writer.string(previous.rawValue)
            }
            writer.key("at")
            writer.number(now.rounded())
            writer.key("task")
            writer.beginObject()
            task.writeFields(into: &writer, now: now)
            writer.endObject()
            writer.endObject()
            made.append(WebhookDelivery(id: id, hook: index, url: rule.url, body: writer.bytes, due: now))
        }
        pending += made
        return made
    }

    /// Deliveries storage held at start, to send again (their hook is found by URL, in case the
    /// list in config.json changed); those whose URL no hook has any more are returned apart, and so
    /// are those past their hook's `maxOutbox` (the oldest, by due time, as storage gives them).
    public func restore(_ deliveries: [WebhookDelivery]) -> (kept: [WebhookDelivery], orphaned: [WebhookDelivery], overflow: [WebhookDelivery]) {
        var found: [WebhookDelivery] = []
        var orphaned: [WebhookDelivery] = []
        var perHook = [Int](repeating: 0, count: rules.count)
        for delivery in deliveries {
            if rules.indices.contains(delivery.hook), rules[delivery.hook].url == delivery.url {
                found.append(delivery)
            } else if let index = rules.firstIndex(where: { $0.url == delivery.url }) {
                found.append(
                    WebhookDelivery(
                        id: delivery.id, hook: index, url: delivery.url, body: delivery.body,
                        attempts: delivery.attempts, due: delivery.due))
            } else {
                orphaned.append(delivery)
                continue
            }
            perHook[found.last!.hook] += 1
        }
        // A restart never brings back more than the bound: the newest stay, as if they had queued.
        var over = rules.indices.map { max(0, perHook[$0] - rules[$0].maxOutbox) }
        var kept: [WebhookDelivery] = []
        var overflow: [WebhookDelivery] = []
        for delivery in found {
            if over[delivery.hook] > 0 {
                over[delivery.hook] -= 1
                overflow.append(delivery)
            } else {
                kept.append(delivery)
            }
        }
        pending += kept
        return (kept, orphaned, overflow)
    }

    /// What waits to be handed to the senders, and no longer waits.
    public func takePending() -> [WebhookDelivery] {
        defer { pending = [] }
        return pending
    }
}

extension TaskStore {
    /// A commit changed a task's state: the webhooks it fires are saved with the change, in the
    /// same transaction, so a restart finds them in the outbox if they were not delivered.
    func stateDidChange(_ task: TaskRecord, from previous: TaskState?, now: Double) {
        guard let webhooks else { return }
        for delivery in webhooks.plan(task, from: previous, epoch: epoch, now: now) {
            persistence.saveDelivery(delivery, urgent: true)
        }
    }
}

/// Counters of the follow-up features (webhooks, control requests), rendered after `ServerMetrics` at /metrics. Service thread only.
public struct FollowUpMetrics: Sendable {
    /// Deliveries a receiver answered with a 2xx.
    public var webhookDeliveries = 0
    /// Attempts that failed and were scheduled again.
    public var webhookRetries = 0
    /// Deliveries given up after their last attempt.
    public var webhookFailures = 0
    /// Deliveries not yet answered with a 2xx nor given up.
    public var webhookOutbox = 0
    /// Deliveries dropped from a full outbox (`maxOutbox`), by hook (its index in config.json).
    public var webhookDropped = LabeledCounts()
    /// Each hook as its sender last reported it, by index.
    public var webhookHooks: [WebhookHookStatus] = []
    public var controlRequests = 0
    /// The bytes of log lines held (`maxLogBytes` bounds them).
    public var logBytes = 0

    public init() {}

    public func render() -> [UInt8] {
        let counters: [(name: String, help: String, value: Int)] = [
            ("webhook_deliveries_total", "Webhook deliveries answered with a 2xx.", webhookDeliveries),
            ("webhook_retries_total", "Webhook attempts that failed and were scheduled again.", webhookRetries),
            ("webhook_failures_total", "Webhook deliveries given up after their last attempt.", webhookFailures),
            ("control_requests_total", "Cancel, pause and resume requests accepted.", controlRequests),
        ]
        var text = PrometheusText()
        for counter in counters { text.counter("ringcast_" + counter.name, counter.help, counter.value) }
        text.gauge("ringcast_webhook_outbox", "Webhook deliveries waiting for a 2xx (persisted with the state).", Double(webhookOutbox))
        let hooks = webhookHooks.indices.map(String.init)
        text.counter(
            "ringcast_webhook_dropped_total", "Webhook deliveries dropped from a full outbox (maxOutbox), the oldest not in flight first.",
            label: "hook", webhookDropped, always: hooks)
        text.counter(
            "ringcast_webhook_circuit_opens_total", "Times a hook's circuit opened after circuitFailures failed attempts in a row.",
            label: "hook", LabeledCounts(Dictionary(uniqueKeysWithValues: webhookHooks.enumerated().map { (String($0.offset), $0.element.opens) })))
        text.gauge(
            "ringcast_webhook_circuit_state", "Each hook's circuit: 0 closed, 1 half-open (one probe in flight), 2 open (nothing sent).",
            label: "hook", webhookHooks.enumerated().map { (String($0.offset), $0.element.circuit.gaugeValue) })
        text.gauge("ringcast_log_bytes", "Bytes of task log lines held in memory (logBytes a task, maxLogBytes in all).", Double(logBytes))
        return text.bytes
    }
}

extension API {
    /// The store's share of the config for the follow-up features: log tails, abandonment, webhooks.
    func configureFollowUp() {
        store.setLogBudgets(lines: config.logLines, bytes: config.logBytes, total: config.maxLogBytes)
        store.timelineEntries = config.timelineEntries
        store.abandonAfterSeconds = config.abandonAfterSeconds
        if !config.webhooks.isEmpty { store.webhooks = WebhookPlanner(rules: config.webhooks) }
        followUpMetrics.webhookHooks = config.webhooks.map { WebhookHookStatus(url: $0.url) }
        // Deliveries owed when the server stopped go out again; those no hook has any more are
        // dropped, and so are those past a hook's maxOutbox (counted as drops).
        let (kept, orphaned, overflow) = (store.webhooks ?? WebhookPlanner(rules: [])).restore(store.restoredDeliveries)
        webhookQueued(kept.count)
        for delivery in orphaned { store.persistence.removeDelivery(id: delivery.id) }
        for delivery in overflow {
            store.persistence.removeDelivery(id: delivery.id)
            followUpMetrics.webhookDropped[String(delivery.hook)] += 1
        }
    }

    /// A webhook delivery was planned (or restored at start): it counts in the outbox until its end.
    public func webhookQueued(_ count: Int) { followUpMetrics.webhookOutbox += count }

    /// A full outbox dropped a delivery of hook `hook`: it is owed no more.
    public func webhookDropped(hook: Int) {
        followUpMetrics.webhookDropped[String(hook)] += 1
        followUpMetrics.webhookOutbox -= 1
    }

    /// A hook's sender reports its circuit and what it owes; a report older than the one shown is
    /// left out (they come from several threads).
    public func webhookHookChanged(_ hook: Int, _ status: WebhookHookStatus) {
        guard followUpMetrics.webhookHooks.indices.contains(hook), status.version >= followUpMetrics.webhookHooks[hook].version else { return }
        followUpMetrics.webhookHooks[hook] = status
    }

    /// An attempt's outcome, for /metrics: `delivered`, or failed and `willRetry`, or given up.
    public func webhookAttempted(delivered: Bool, willRetry: Bool) {
        if delivered {
            followUpMetrics.webhookDeliveries += 1
        } else if willRetry {
            followUpMetrics.webhookRetries += 1
        } else {
            followUpMetrics.webhookFailures += 1
        }
        if delivered || !willRetry { followUpMetrics.webhookOutbox -= 1 }
    }
}
