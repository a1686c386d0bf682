import XCTest

@testable import RingcastCore

/// Webhooks in the core: the config entry and its errors, which state changes fire which hooks,
/// the body and delivery id, the outbox saved with the change, and the retry schedule.
final class WebhookPlannerTests: XCTestCase {
    private func parse(_ text: String, environment: [String: String] = [:]) throws -> ServerConfig {
        try ServerConfig.parse(Array(text.utf8), source: "test.json", environment: environment)
    }

    private func assertFails(
        _ text: String, saying fragments: String..., environment: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try parse(text, environment: environment), text, file: file, line: line) { error in
            let message = "\(error)"
            for fragment in fragments { XCTAssertTrue(message.contains(fragment), "\(message) should say \(fragment)", file: file, line: line) }
        }
    }

    func testTheConfigEntry() throws {
        let config = try parse(
            #"""
            {"webhooks": [{"url": "http://127.0.0.1:9000/hook", "patterns": ["ci.*"], "states": ["failed", "done"], "secretEnv": "HOOK_SECRET",
                           "maxAttempts": 3, "timeoutSeconds": 2},
                          {"url": "http://hooks.internal/all", "secret": "literal-secret"}],
             "abandonAfterSeconds": 120, "logLines": 50}
            """#, environment: ["HOOK_SECRET": "from-the-environment"])
        XCTAssertEqual(config.webhooks.count, 2)
        XCTAssertEqual(config.webhooks[0].url, "http://127.0.0.1:9000/hook")
        XCTAssertEqual(config.webhooks[0].patterns.key, "ci.*")
        XCTAssertEqual(config.webhooks[0].states, [.failed, .done])
        XCTAssertEqual(config.webhooks[0].secret, Array("from-the-environment".utf8))
        XCTAssertEqual(config.webhooks[0].maxAttempts, 3)
        XCTAssertEqual(config.webhooks[0].timeoutSeconds, 2)
        XCTAssertEqual(config.webhooks[1].patterns.key, "*")
        XCTAssertEqual(config.webhooks[1].states, [.done, .failed, .stalled], "the default states")
        XCTAssertEqual(config.webhooks[1].maxAttempts, WebhookRule.defaultMaxAttempts)
        XCTAssertEqual(config.webhooks[1].maxOutbox, 1000, "the documented default")
        XCTAssertEqual(config.webhooks[1].concurrency, 4)
        XCTAssertEqual(config.webhooks[1].circuitFailures, 5)
        XCTAssertEqual(config.webhooks[1].circuitOpenSeconds, 30)
        let bounded = try parse(
            #"{"webhooks": [{"url": "http://x/h", "secret": "s", "maxOutbox": 50, "concurrency": 2, "circuitFailures": 3, "circuitOpenSeconds": 5}]}"#
        )
        XCTAssertEqual(bounded.webhooks[0].maxOutbox, 50)
        XCTAssertEqual(bounded.webhooks[0].concurrency, 2)
        XCTAssertEqual(bounded.webhooks[0].circuitFailures, 3)
        XCTAssertEqual(bounded.webhooks[0].circuitOpenSeconds, 5)
        XCTAssertNil(bounded.webhooks[0].caFile, "the system's CA store unless a hook names a file")
        let secure = try parse(
            #"{"webhooks": [{"url": "https://hooks.example/h", "secret": "s", "caFile": "ca.pem", "clientCert": "c.pem", "clientKey": "k.pem", "proxy": ""}]}"#
        )
        XCTAssertEqual(secure.webhooks[0].url, "https://hooks.example/h")
        XCTAssertEqual(secure.webhooks[0].caFile, "ca.pem")
        XCTAssertEqual(secure.webhooks[0].clientCert, "c.pem")
        XCTAssertEqual(secure.webhooks[0].clientKey, "k.pem")
        XCTAssertEqual(secure.webhooks[0].proxy, "", "\"\" goes direct, whatever the environment says")
        XCTAssertEqual(secure.webhooks[0].format, .ringcast, "the default format")
        let slack = try parse(
            #"{"webhooks": [{"url": "https://hooks.slack.example/x", "secret": "s", "format": "slack", "pageBase": "https://rc.example"}]}"#)
        XCTAssertEqual(slack.webhooks[0].format, .slack)
        XCTAssertEqual(slack.webhooks[0].pageBase, "https://rc.example")
        XCTAssertEqual(config.abandonAfterSeconds, 120)
        XCTAssertEqual(config.logLines, 50)
        XCTAssertEqual(ServerConfig().abandonAfterSeconds, 3600)
        XCTAssertEqual(ServerConfig().logLines, 100)
    }

    func testConfigErrorsNameTheField() {
        assertFails(#"{"webhooks": [{"url": "https://", "secret": "s"}]}"#, saying: "webhooks[0].url", "https://")
        assertFails(#"{"webhooks": [{"url": "https://x/h", "secret": "s", "clientCert": "c.pem"}]}"#, saying: "webhooks[0]", "clientKey")
        assertFails(#"{"webhooks": [{"url": "https://x/h", "secret": "s", "caFile": ""}]}"#, saying: "webhooks[0].caFile", "PEM")
        assertFails(#"{"webhooks": [{"url": "https://x/h", "secret": "s", "format": "teams"}]}"#, saying: "webhooks[0].format", "slack, discord")
        assertFails(#"{"webhooks": [{"url": "https://ntfy.sh/", "secret": "s", "format": "ntfy"}]}"#, saying: "webhooks[0].url", "topic")
        assertFails(#"{"webhooks": [{"secret": "s"}]}"#, saying: "webhooks[0].url is missing")
        assertFails(#"{"webhooks": [{"url": "ftp://x", "secret": "s"}]}"#, saying: "webhooks[0].url")
        assertFails(#"{"webhooks": [{"url": "http://x/h"}]}"#, saying: "webhooks[0]", "secretEnv")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secretEnv": "NOT_SET_ANYWHERE"}]}"#, saying: "webhooks[0].secretEnv", "NOT_SET_ANYWHERE")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "states": ["finished"]}]}"#, saying: "webhooks[0].states", "finished")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "patterns": ["a b"]}]}"#, saying: "webhooks[0].patterns")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "retries": 3}]}"#, saying: "webhooks[0]", "\"retries\"")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "maxAttempts": 0}]}"#, saying: "webhooks[0].maxAttempts")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "maxOutbox": 0}]}"#, saying: "webhooks[0].maxOutbox", "1 to 1000000")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "maxOutbox": 2.5}]}"#, saying: "webhooks[0].maxOutbox")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "concurrency": 65}]}"#, saying: "webhooks[0].concurrency", "1 to 64")
        assertFails(
            #"{"webhooks": [{"url": "http://x/h", "secret": "s", "concurrency": 8, "maxOutbox": 4}]}"#,
            saying: "webhooks[0].concurrency (8) is more than its maxOutbox (4)", "raise maxOutbox")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "circuitFailures": 0}]}"#, saying: "webhooks[0].circuitFailures")
        assertFails(#"{"webhooks": [{"url": "http://x/h", "secret": "s", "circuitOpenSeconds": 0.5}]}"#, saying: "webhooks[0].circuitOpenSeconds")
        assertFails(#"{"webhooks": {"url": "http://x/h"}}"#, saying: "\"webhooks\"")
        assertFails(#"{"abandonAfterSeconds": -1}"#, saying: "\"abandonAfterSeconds\"")
        assertFails(#"{"logLines": 0}"#, saying: "\"logLines\"")
    }

    /// Remembers outbox rows the way storage is told of them.
    final class Outbox: TaskPersistence {
        var saved: [WebhookDelivery] = []
        var urgent: [Bool] = []
        var removed: [String] = []
        var initial: PersistedState?
        func load() -> PersistedState? { initial }
        func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) {}
        func remove(id: String, epoch: String, seq: UInt64) {}
        var hasPendingWrites: Bool { false }
        func flush() {}
        func saveDelivery(_ delivery: WebhookDelivery, urgent: Bool) {
            saved.append(delivery)
            self.urgent.append(urgent)
        }
        func removeDelivery(id: String) { removed.append(id) }
    }

    func testAStateChangeFiresTheHooksWhosePatternsAndStatesMatch() throws {
        var config = ServerConfig()
        config.webhooks = [
            WebhookRule(url: "http://a/ci", patterns: WatchSet([Glob("ci.*")]), states: [.failed], secret: "k1"),
            WebhookRule(url: "http://b/all", secret: "k2"),
        ]
        let outbox = Outbox()
        let api = API(store: TaskStore(persistence: outbox, epoch: "hookepoch"), config: config)
        let planner = try XCTUnwrap(api.store.webhooks)
        try api.store.update("ci.build", #"{"progress": 0.5}"#, now: t0)
        try api.store.update("ci.build", #"{"progress": 0.6}"#, now: t0 + 1)
        XCTAssertTrue(planner.takePending().isEmpty, "progress fires nothing; nor does entering running (no hook asks for it)")
        let failed = try api.store.update("ci.build", #"{"state": "failed", "detail": "exit 2"}"#, now: t0 + 2)
        let made = planner.takePending()
        XCTAssertEqual(made.map(\.hook), [0, 1])
        XCTAssertEqual(made.map(\.id), ["hookepoch-3-0", "hookepoch-3-1"], "EPOCH-SEQ-HOOK")
        XCTAssertEqual(outbox.saved, made, "saved with the change that made them")
        XCTAssertEqual(outbox.urgent, [true, true])
        XCTAssertEqual(made[0].due, t0 + 2)
        let body = json(made[0].body)
        XCTAssertEqual(body.keys, ["delivery", "event", "state", "previousState", "at", "task"])
        XCTAssertEqual(body["delivery"], .string("hookepoch-3-0"))
        XCTAssertEqual(body["state"], .string("failed"))
        XCTAssertEqual(body["previousState"], .string("running"))
        XCTAssertEqual(body["task"], json(failed.task!.encodedObject(now: t0 + 2)))

        try api.store.update("ci.build", #"{"detail": "still failed"}"#, now: t0 + 3)
        XCTAssertTrue(planner.takePending().isEmpty, "staying in a state fires nothing")
        try api.store.update("deploy.web", #"{"state": "done"}"#, now: t0 + 4)
        XCTAssertEqual(planner.takePending().map(\.hook), [1], "a new task created done enters done")
        try api.store.update("deploy.db", #"{"staleAfter": 1}"#, now: t0)
        _ = api.store.runDue(now: t0 + 1000)
        XCTAssertEqual(planner.takePending().map { json($0.body)["state"] }, [.string("stalled")], "the server's own changes fire too")
    }

    func testTheOutboxComesBackAtStartAndOrphansAreDropped() throws {
        let owed = [
            WebhookDelivery(id: "old-7-0", hook: 0, url: "http://a/h", body: Array("{}".utf8), attempts: 2, due: t0),
            WebhookDelivery(id: "old-7-1", hook: 1, url: "http://moved/h", body: Array("{}".utf8), due: t0),
            WebhookDelivery(id: "old-8-3", hook: 3, url: "http://gone/h", body: Array("{}".utf8), due: t0),
        ]
        let outbox = Outbox()
        outbox.initial = PersistedState(epoch: "old", seq: 9, tasks: [], deliveries: owed)
        var config = ServerConfig()
        config.webhooks = [
            WebhookRule(url: "http://a/h", secret: "k"), WebhookRule(url: "http://other/h", secret: "k"),
            WebhookRule(url: "http://moved/h", secret: "k"),
        ]
        let api = API(store: TaskStore(persistence: outbox), config: config)
        let pending = try XCTUnwrap(api.store.webhooks).takePending()
        XCTAssertEqual(pending.map(\.id), ["old-7-0", "old-7-1"])
        XCTAssertEqual(pending.map(\.hook), [0, 2], "a hook is found again by its URL")
        XCTAssertEqual(pending[0].attempts, 2, "its attempts so far come back with it")
        XCTAssertEqual(outbox.removed, ["old-8-3"], "no hook has its URL any more")
        XCTAssertEqual(api.followUpMetrics.webhookHooks.map(\.circuit), [.closed, .closed, .closed], "every hook shows from the start")
        XCTAssertEqual(api.followUpMetrics.webhookOutbox, 2)
        XCTAssertTrue(String(decoding: api.followUpMetrics.render(), as: UTF8.self).contains("ringcast_webhook_outbox 2\n"))
    }

    func testRetriesBackOffExponentiallyWithJitterUpToTheCap() {
        XCTAssertEqual(WebhookRetry.delaySeconds(afterAttempt: 1, random: 0), 0.5)
        XCTAssertEqual(WebhookRetry.delaySeconds(afterAttempt: 1, random: 1), 1)
        XCTAssertEqual(WebhookRetry.delaySeconds(afterAttempt: 2, random: 0), 1)
        XCTAssertEqual(WebhookRetry.delaySeconds(afterAttempt: 4, random: 1), 8)
        XCTAssertEqual(WebhookRetry.delaySeconds(afterAttempt: 30, random: 1), WebhookRetry.capSeconds)
        XCTAssertEqual(WebhookRetry.delaySeconds(afterAttempt: 30, random: 0), WebhookRetry.capSeconds / 2)
        var api = API(store: TaskStore(epoch: "m"))
        api.webhookQueued(3)
        api.webhookAttempted(delivered: false, willRetry: true)
        api.webhookAttempted(delivered: true, willRetry: false)
        api.webhookAttempted(delivered: false, willRetry: false)
        XCTAssertEqual(api.followUpMetrics.webhookRetries, 1)
        XCTAssertEqual(api.followUpMetrics.webhookDeliveries, 1)
        XCTAssertEqual(api.followUpMetrics.webhookFailures, 1)
        XCTAssertEqual(api.followUpMetrics.webhookOutbox, 1)
        api = API(store: TaskStore(epoch: "n"))
        let metrics = text(api.handle(APIRequest(method: "GET", path: "/metrics"), now: t0).body)
        for name in ["webhook_deliveries_total", "webhook_retries_total", "webhook_failures_total", "webhook_outbox", "control_requests_total"] {
            XCTAssertTrue(metrics.contains("# TYPE ringcast_\(name) "), name)
        }
    }

    func testARestartBringsBackNoMoreThanEachHooksBound() throws {
        let owed = (0..<7).map { WebhookDelivery(id: "old-\($0)-0", hook: 0, url: "http://a/h", body: [], due: t0 + Double($0)) }
        let outbox = Outbox()
        outbox.initial = PersistedState(epoch: "old", seq: 9, tasks: [], deliveries: owed)
        var config = ServerConfig()
        config.webhooks = [WebhookRule(url: "http://a/h", secret: "k", maxOutbox: 3, concurrency: 1)]
        let api = API(store: TaskStore(persistence: outbox), config: config)
        XCTAssertEqual(try XCTUnwrap(api.store.webhooks).takePending().map(\.id), ["old-4-0", "old-5-0", "old-6-0"], "the newest stay")
        XCTAssertEqual(outbox.removed, ["old-0-0", "old-1-0", "old-2-0", "old-3-0"], "the rest leave storage at start")
        XCTAssertEqual(api.followUpMetrics.webhookDropped["0"], 4)
        XCTAssertEqual(api.followUpMetrics.webhookOutbox, 3)
        XCTAssertTrue(text(api.followUpMetrics.render()).contains("ringcast_webhook_dropped_total{hook=\"0\"} 4\n"))
    }

    private func delivery(_ n: Int, due: Double = t0) -> WebhookDelivery {
        WebhookDelivery(id: "e-\(n)-0", hook: 0, url: "http://a/h", body: [], due: due)
    }

    func testAFullOutboxDropsTheOldestNotInFlight() {
        var outbox = WebhookOutbox(rule: WebhookRule(url: "http://a/h", secret: "k", maxOutbox: 3, concurrency: 2))
        for n in 0..<3 { XCTAssertNil(outbox.admit(delivery(n))) }
        XCTAssertEqual(outbox.take(now: t0)?.id, "e-0-0")
        XCTAssertEqual(outbox.take(now: t0)?.id, "e-1-0")
        XCTAssertNil(outbox.take(now: t0), "two slots, both taken")
        XCTAssertEqual(outbox.admit(delivery(3))?.id, "e-2-0", "the oldest not in flight goes")
        XCTAssertEqual(outbox.admit(delivery(4))?.id, "e-3-0")
        XCTAssertEqual(outbox.owed.map(\.id), ["e-0-0", "e-1-0", "e-4-0"], "the bound holds, in flight ones included")
        XCTAssertEqual(outbox.status.owed, 3)
        XCTAssertEqual(outbox.status.inFlight, 2)
        var full = WebhookOutbox(rule: WebhookRule(url: "http://a/h", secret: "k", maxOutbox: 2, concurrency: 2))
        _ = full.admit(delivery(0))
        _ = full.admit(delivery(1))
        _ = full.take(now: t0)
        _ = full.take(now: t0)
        XCTAssertEqual(full.admit(delivery(2))?.id, "e-2-0", "every other one in flight: the new one goes")
    }

    func testSlotsLetOthersGoWhileOneHangsAndRetriesKeepTheirPlace() {
        var outbox = WebhookOutbox(rule: WebhookRule(url: "http://a/h", secret: "k", maxAttempts: 3, concurrency: 2))
        for n in 0..<3 { _ = outbox.admit(delivery(n)) }
        let hung = outbox.take(now: t0)!
        let second = outbox.take(now: t0)!
        XCTAssertEqual([hung.id, second.id], ["e-0-0", "e-1-0"])
        XCTAssertNil(outbox.nextLook(now: t0), "no slot: wait for an attempt to end")
        XCTAssertEqual(outbox.finish(second, .answered(204), now: t0 + 10, random: 0), .delivered(status: 204))
        XCTAssertEqual(outbox.take(now: t0 + 10)?.id, "e-2-0", "the hung attempt holds one slot, not the hook")
        guard case .retrying(let again, let reason) = outbox.finish(hung, .answered(500), now: t0 + 20, random: 0) else {
            return XCTFail("a 500 is retried")
        }
        XCTAssertEqual(reason, "answered 500")
        XCTAssertEqual(again.attempts, 1)
        XCTAssertEqual(again.due, t0 + 20 + 500, "half of the first back-off (1 s) with random 0")
        XCTAssertEqual(outbox.owed.map(\.id), ["e-0-0", "e-2-0"], "a retry keeps its place: it stays the oldest")
        XCTAssertNil(outbox.take(now: t0 + 100), "not due yet")
        XCTAssertEqual(outbox.nextLook(now: t0 + 100), t0 + 520)
        let retried = outbox.take(now: t0 + 520)!
        _ = outbox.finish(retried, .failed("timed out"), now: t0 + 600, random: 0)
        let last = outbox.take(now: t0 + 5000)!
        XCTAssertEqual(outbox.finish(last, .failed("timed out"), now: t0 + 6000, random: 0), .gaveUp(reason: "timed out"), "maxAttempts 3")
        XCTAssertEqual(outbox.owed.map(\.id), ["e-2-0"])
    }

    func testACircuitOpensAfterFailuresInARowAndAProbeClosesIt() {
        let rule = WebhookRule(url: "http://a/h", secret: "k", maxAttempts: 100, concurrency: 4, circuitFailures: 3, circuitOpenSeconds: 30)
        var outbox = WebhookOutbox(rule: rule)
        for n in 0..<6 { _ = outbox.admit(delivery(n)) }
        let taken = (0..<4).map { _ in outbox.take(now: t0)! }
        XCTAssertEqual(outbox.finish(taken[0], .failed("refused"), now: t0 + 1, random: 0).isRetry, true)
        _ = outbox.finish(taken[1], .answered(503), now: t0 + 2, random: 0)
        XCTAssertEqual(outbox.circuit, .closed, "two failures are not yet three")
        _ = outbox.finish(taken[2], .failed("timed out"), now: t0 + 3, random: 0)
        XCTAssertEqual(outbox.circuit, .open)
        XCTAssertEqual(outbox.status.probeAt, t0 + 3 + 30_000)
        XCTAssertEqual(outbox.opens, 1)
        XCTAssertNil(outbox.take(now: t0 + 29_000), "open: nothing is sent, however many are due")
        XCTAssertEqual(outbox.nextLook(now: t0 + 29_000), t0 + 30_003)
        _ = outbox.finish(taken[3], .failed("timed out"), now: t0 + 29_500, random: 0)
        XCTAssertEqual(outbox.circuit, .open, "an attempt from before it opened does not reopen it")
        XCTAssertEqual(outbox.opens, 1)

        let probe = outbox.take(now: t0 + 30_003)!
        XCTAssertEqual(outbox.circuit, .halfOpen)
        XCTAssertNil(outbox.take(now: t0 + 30_003), "half-open: one probe only")
        XCTAssertNil(outbox.nextLook(now: t0 + 30_003))
        _ = outbox.finish(probe, .failed("refused"), now: t0 + 31_000, random: 0)
        XCTAssertEqual(outbox.circuit, .open, "a failed probe opens it again for the cool-down")
        XCTAssertEqual(outbox.opens, 2)
        XCTAssertEqual(outbox.probeAt, t0 + 61_000)

        let second = outbox.take(now: t0 + 61_000)!
        XCTAssertEqual(outbox.finish(second, .answered(200), now: t0 + 61_500, random: 0), .delivered(status: 200))
        XCTAssertEqual(outbox.circuit, .closed)
        XCTAssertEqual(outbox.consecutiveFailures, 0)
        XCTAssertNotNil(outbox.take(now: t0 + 200_000), "closed: deliveries flow again")

        var api = API(store: TaskStore(epoch: "c"))
        api.followUpMetrics.webhookHooks = [WebhookHookStatus(url: "http://a/h")]
        api.webhookHookChanged(
            0, WebhookHookStatus(url: "http://a/h", circuit: .open, consecutiveFailures: 3, opens: 2, owed: 6, probeAt: t0, version: 7))
        api.webhookHookChanged(0, WebhookHookStatus(url: "http://a/h", circuit: .closed, owed: 1, version: 0))
        XCTAssertEqual(api.followUpMetrics.webhookHooks[0].circuit, .open, "a late report does not replace a newer one")
        let metrics = text(api.followUpMetrics.render())
        XCTAssertTrue(metrics.contains("ringcast_webhook_circuit_state{hook=\"0\"} 2\n"), metrics)
        XCTAssertTrue(metrics.contains("ringcast_webhook_circuit_opens_total{hook=\"0\"} 2\n"), metrics)
        let ready = api.readinessResponse([ReadinessStatus(name: "storage")])
        XCTAssertEqual(ready.status, 200, "a receiver's trouble is its hook's, not the server's")
        guard case .array(let hooks)? = json(ready.body)["webhooks"], let hook = hooks.first else { return XCTFail("no webhooks in /readyz") }
        XCTAssertEqual(hook["circuit"], .string("open"))
        XCTAssertEqual(hook["failuresInARow"], .number(3))
        XCTAssertEqual(hook["owed"], .number(6))
    }
}

extension WebhookOutcome {
    fileprivate var isRetry: Bool {
        if case .retrying = self { return true }
        return false
    }
}
