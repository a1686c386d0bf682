import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastLoad
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// Three `ringcast serve` processes on one redis-server of the test's own: one cluster.
final class ClusterTests: XCTestCase {
    private var folder: TemporaryFolder!
    private var redis: RedisProcess!

    override func setUpWithError() throws {
        folder = try TemporaryFolder("ringcast-cluster")
        redis = try RedisProcess()
    }

    override func tearDown() {
        redis = nil
        folder?.remove()
    }

    private func node(_ name: String) throws -> ServeProcess {
        let config = folder.file("\(name).json")
        try Data(#"{"port":0,"publicDir":"\#(emptyPublicDirectory)","storage":"\#(redis.url)","logLevel":"error"}"#.utf8).write(to: config)
        let served = try ServeProcess(["--config", config.path])
        XCTAssertTrue(served.firstLine.hasPrefix("listening on http://127.0.0.1:"), "\(name): \(served.firstLine)")
        return served
    }

    @discardableResult
    private func post(_ node: ServeProcess, _ path: String, _ body: String = "{}", file: StaticString = #filePath, line: UInt = #line) throws
        -> JSONValue
    {
        let answer = try HTTPClient(host: "127.0.0.1", port: node.port).request("POST", path, json: body)
        XCTAssertEqual(answer.status, 200, "\(path): \(answer.text)", file: file, line: line)
        return try JSONParser.parse(answer.body)
    }

    private func tasks(_ node: ServeProcess) throws -> String {
        String(decoding: try HTTPClient(host: "127.0.0.1", port: node.port).request("GET", "/api/tasks?watch=cl.*").body, as: UTF8.self)
    }

    /// `ringcast load --publish-to`: watchers on one node, updates posted to another, nothing lost
    /// on the way through Redis (how Benchmarks/cluster.sh times delivery across nodes).
    func testTheLoadToolMeasuresDeliveryAcrossNodes() throws {
        let a = try node("a")
        let b = try node("b")
        var options = LoadTestOptions(url: ServerURL("http://127.0.0.1:\(b.port)")!)
        options.publishURL = ServerURL("http://127.0.0.1:\(a.port)")
        options.clients = 20
        options.messages = 50
        options.rate = 100
        options.tasks = 50
        options.connectTimeout = 10
        options.drainTimeout = 10
        let result = try LoadTester(options: options).execute()
        XCTAssertEqual(result.connected, 20)
        XCTAssertEqual(result.published, 50)
        XCTAssertEqual(result.delivered, 1_000, "every update posted to A reached every watcher on B")
        XCTAssertEqual(result.loss, 0)
    }

    func testThreeNodesActAsOne() throws {
        let a = try node("a")
        let b = try node("b")
        let c = try node("c")
        let onB = TestWatcher("ws://127.0.0.1:\(b.port)/ws?watch=cl.*")
        let onC = TestWatcher("ws://127.0.0.1:\(c.port)/ws?watch=cl.*")
        let epoch = onB.waitForSnapshot().hello.string("epoch")
        XCTAssertEqual(onC.waitForSnapshot().hello.string("epoch"), epoch, "one epoch for the cluster")

        // A publish on A reaches watchers on B and C, with the same seq.
        let answer = try post(a, "/api/tasks/cl.one", #"{"title":"One","completed":1,"total":10}"#)
        for watcher in [onB, onC] {
            watcher.wait { $0.contains { $0.id == "cl.one" && $0.number("completed") == 1 && $0.number("seq") == answer["seq"]?.numberValue } }
        }

        // A hideAfter hide and a timer's ticks happen once for the cluster, not once per node.
        try post(b, "/api/tasks/cl.shown/show", #"{"hideAfter":0.4}"#)
        try post(c, "/api/timers/cl.tea", #"{"seconds":1,"interval":0.25}"#)
        onB.wait(timeout: 10) { events in
            events.contains { $0.id == "cl.shown" && $0.type == "hide" }
                && events.contains { $0.id == "cl.tea" && $0.type == "state" && $0.string("state") == "done" }
        }
        Thread.sleep(forTimeInterval: 0.5)  // room for a second node's duplicate, were there one
        for watcher in [onB, onC] {
            XCTAssertEqual(watcher.events(for: "cl.shown", type: "hide").count, 1, "one hide, not one per node")
            let ticks = watcher.events(for: "cl.tea", type: "tick").compactMap { $0.number("elapsed") }
            XCTAssertEqual(ticks, [0.25, 0.5, 0.75, 1], "each tick once, in order")
            XCTAssertEqual(watcher.events(for: "cl.tea", type: "state").count, 1)
        }
        // The snapshot is the same from every node, byte for byte.
        XCTAssertTrue(
            eventually(timeout: 5) { (try? self.tasks(a)) == (try? self.tasks(b)) && (try? self.tasks(b)) == (try? self.tasks(c)) },
            "A: \((try? tasks(a)) ?? "")\nB: \((try? tasks(b)) ?? "")\nC: \((try? tasks(c)) ?? "")")

        // B dies; its watcher resumes on C with `since` and misses nothing published meanwhile.
        let lastSeen = onB.received.compactMap { $0.number("seq") }.max() ?? 0
        _ = b.stop(SIGKILL)
        XCTAssertTrue(onB.waitForClose(timeout: 5))
        try post(a, "/api/tasks/cl.two", #"{"progress":0.3}"#)
        try post(a, "/api/tasks/cl.one", #"{"completed":9,"total":10}"#)
        // A's answer waits for A alone (PROTOCOL.md, Several nodes): C applies the entries when it
        // reads them from Redis, later under load (a sanitizer's run), and a snapshot taken before
        // then rightly leaves cl.one to the live event after it. The snapshot is checked once C has.
        XCTAssertTrue(
            eventually(timeout: 5) {
                let one = try? HTTPClient(host: "127.0.0.1", port: c.port).request("GET", "/api/tasks/cl.one")
                return one.flatMap { try? JSONParser.parse($0.body) }?["completed"] == .number(9)
            }, "C applies what A took")
        let resumed = TestWatcher("ws://127.0.0.1:\(c.port)/ws?watch=cl.*&since=\(epoch ?? ""):\(Int(lastSeen))")
        let snapshot = resumed.waitForSnapshot().snapshot
        XCTAssertEqual(snapshot.event["full"], .bool(false), "resumed within the epoch, on another node")
        let caughtUp = snapshot.event["tasks"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        XCTAssertEqual(Set(caughtUp), ["cl.two", "cl.one"], "exactly what changed after seq \(Int(lastSeen))")
        XCTAssertEqual(snapshot.event["tasks"]?.arrayValue?.first { $0["id"] == .string("cl.one") }?["completed"], .number(9))

        // Redis restarts empty: the nodes put the state back, resync, and carry on as one.
        try redis.restart()
        var afterRestart: JSONValue?
        XCTAssertTrue(
            eventually(timeout: 20) {
                let answer = try? HTTPClient(host: "127.0.0.1", port: a.port).request("POST", "/api/tasks/cl.three", json: #"{"progress":0.7}"#)
                if answer?.status == 200 { afterRestart = try? JSONParser.parse(answer!.body) }
                return answer?.status == 200
            }, "node A publishes again once Redis is back")
        XCTAssertNotNil(afterRestart)
        onC.wait(timeout: 10) { $0.contains { $0.id == "cl.three" && $0.number("progress") == 0.7 } }
        XCTAssertTrue(
            eventually(timeout: 10) { (try? self.tasks(a)) == (try? self.tasks(c)) }, "A: \((try? tasks(a)) ?? "")\nC: \((try? tasks(c)) ?? "")")
        let states = try JSONParser.parse(Array(try tasks(c).utf8))["tasks"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        XCTAssertTrue(Set(states).isSuperset(of: ["cl.one", "cl.two", "cl.three", "cl.tea", "cl.shown"]), "nothing lost with Redis: \(states)")
    }

    func testANodeThatLosesRedisKeepsServingAndRefusesPublishesClearly() throws {
        let a = try node("a")
        let watcher = TestWatcher("ws://127.0.0.1:\(a.port)/ws?watch=cl.*")
        watcher.waitForSnapshot()
        try post(a, "/api/tasks/cl.kept", #"{"progress":0.4}"#)
        let http = HTTPClient(host: "127.0.0.1", port: a.port)
        // What a node depends on is Redis: its copy of the state in memory is no storage to ask.
        var ready: JSONValue?
        XCTAssertTrue(
            eventually(timeout: 10) {
                ready = try? JSONParser.parse(try http.request("GET", "/readyz").body)
                return ready?["ready"] == .bool(true)
            }, "\(String(describing: ready))")
        XCTAssertEqual(ready?["checks"], try JSONParser.parse(#"{"redis":{"ready":true}}"#))
        redis.stop()
        var refused: HTTPResponse?
        XCTAssertTrue(
            eventually(timeout: 10) {
                refused = try? http.request("POST", "/api/tasks/cl.kept", json: #"{"progress":0.5}"#)
                return refused?.status == 503
            }, "publishing without Redis: \(refused?.status ?? 0) \(refused?.text ?? "")")
        XCTAssertTrue(refused?.text.contains("Redis") ?? false, refused?.text ?? "")
        let health = try JSONParser.parse(try http.request("GET", "/healthz").body)
        XCTAssertTrue(health["redis"]?.stringValue?.hasPrefix("unavailable") ?? false, "\(health)")
        XCTAssertTrue(
            eventually(timeout: 10) { (try? http.request("GET", "/readyz"))?.status == 503 }, "not ready while Redis cannot be reached")
        let kept = try JSONParser.parse(try http.request("GET", "/api/tasks/cl.kept").body)
        XCTAssertEqual(kept["progress"], .number(0.4), "what it has, it still serves")
        XCTAssertFalse(watcher.closed, "its watchers stay connected")
        try redis.start()
        XCTAssertTrue(eventually(timeout: 20) { (try? http.request("POST", "/api/tasks/cl.kept", json: #"{"progress":0.6}"#))?.status == 200 })
        watcher.wait(timeout: 10) { $0.contains { $0.id == "cl.kept" && $0.number("progress") == 0.6 } }
        XCTAssertEqual(try JSONParser.parse(try http.request("GET", "/healthz").body)["redis"], .string("connected"))
    }
}

/// ETA from history in a cluster: every node applies the same runs, and a node that
/// starts from the cluster's checkpoint has them too.
extension ClusterTests {
    private func kinds(_ node: ServeProcess) -> String? {
        (try? HTTPClient(host: "127.0.0.1", port: node.port).request("GET", "/api/kinds")).map(\.text)
    }

    func testEveryNodeKeepsTheSameRunsAndANodeStartedFromTheCheckpointHasThem() throws {
        let a = try node("a")
        let b = try node("b")
        let onA = HTTPClient(host: "127.0.0.1", port: a.port)
        for (run, seconds) in [0.1, 0.3, 0.2].enumerated() {
            XCTAssertEqual(try onA.request("POST", "/api/tasks/cl.build-\(run)", json: #"{"progress":null}"#).status, 200)
            Thread.sleep(forTimeInterval: seconds)
            XCTAssertEqual(try onA.request("POST", "/api/tasks/cl.build-\(run)", json: #"{"state":"done"}"#).status, 200)
        }
        let history = try XCTUnwrap(kinds(a))
        XCTAssertTrue(history.contains(#""kind":"cl.build","runs":3"#), history)
        XCTAssertTrue(eventually(timeout: 5) { self.kinds(b) == history }, "B applied the same runs: \(kinds(b) ?? "")")

        // Redis loses everything; A puts its state back as the cluster's checkpoint, and a node
        // that starts now has nothing but that checkpoint to start from.
        try redis.restart()
        XCTAssertTrue(
            eventually(timeout: 20) { (try? onA.request("POST", "/api/tasks/cl.after", json: "{}"))?.status == 200 },
            "A never got back to Redis")
        let c = try node("c")
        XCTAssertEqual(kinds(c), history, "the checkpoint carries the history")
        let fresh = try JSONParser.parse(try HTTPClient(host: "127.0.0.1", port: c.port).request("POST", "/api/tasks/cl.build-9", json: "{}").body)
        guard case .array(let list)? = try JSONParser.parse(Array(history.utf8))["kinds"], let median = list.first?["median"] else {
            return XCTFail(history)
        }
        XCTAssertEqual(fresh["task"]?["expectedSeconds"], median)
    }
}

/// Control requests in a cluster: the request's answer has the control's shape on whichever node
/// it is asked, and the publisher hears it on the node it is connected to.
extension ClusterTests {
    func testACancelAskedOnOneNodeReachesThePublisherOnAnother() async throws {
        let a = try node("a")
        let b = try node("b")
        let rc = try RingcastClient(url: "http://127.0.0.1:\(b.port)")
        let heard = Inbox<RingcastClient.ControlRequest>()
        let listener = Task { for await request in rc.controlRequests { heard.append(contentsOf: [request]) } }
        try await rc.update("cl.copy", progress: 0.1, title: "Copy", controls: [.cancel])
        try await rc.flush(timeout: 10)
        let answer = try post(a, "/api/tasks/cl.copy/cancel")
        XCTAssertNotNil(answer["delivered"], "a control request's answer, not a batch's: \(answer)")
        XCTAssertEqual(answer["task"]?["cancelRequested"], .bool(true), "\(answer)")
        XCTAssertNil(answer["task"]?["requestWaiting"], "node a has no publisher, but b has: a cluster does not mark it")
        XCTAssertNil(answer["applied"], "\(answer)")
        let requests = heard.wait(timeout: 10) { !$0.isEmpty }
        XCTAssertEqual(requests.first?.id, "cl.copy")
        XCTAssertEqual(requests.first?.action, .cancel)
        XCTAssertEqual(requests.first?.seq.map(Double.init), answer["seq"]?.numberValue)
        await rc.close()
        listener.cancel()
    }
}

/// Redis loses everything while one node lags behind the log: what the other node answered
/// survives, and the cluster moves to a new epoch so that no watcher resumes across the loss.
extension ClusterTests {
    private func listing(_ node: ServeProcess) throws -> JSONValue {
        try JSONParser.parse(try HTTPClient(host: "127.0.0.1", port: node.port).request("GET", "/api/tasks?watch=cl.*").body)
    }

    func testRedisLosingEverythingWhileANodeLagsLosesNothingAnsweredAndNumbersANewEpoch() throws {
        let a = try node("a")
        let b = try node("b")
        for job in 0..<6 { try post(a, "/api/tasks/cl.job-\(job)", #"{"progress":0.5}"#) }
        XCTAssertTrue(eventually(timeout: 10) { (try? self.tasks(a)) == (try? self.tasks(b)) }, "B caught up before it was paused")
        let before = try listing(a)
        let oldEpoch = try XCTUnwrap(before["epoch"]?.stringValue)
        let oldSeq = try XCTUnwrap(before["seq"]?.numberValue)

        // B stops reading (as a node stalled by its host would); A answers ten terminal updates.
        kill(b.process.processIdentifier, SIGSTOP)
        var answeredSeqs: [Double] = []
        for job in 0..<6 {
            answeredSeqs.append(try post(a, "/api/tasks/cl.job-\(job)", #"{"state":"done"}"#)["seq"]?.numberValue ?? 0)
        }
        for job in 6..<10 {
            answeredSeqs.append(try post(a, "/api/tasks/cl.job-\(job)", #"{"state":"done"}"#)["seq"]?.numberValue ?? 0)
        }
        let lastAnswered = try XCTUnwrap(answeredSeqs.max())

        // Redis dies, stays down long enough for A's reconnect back-off to grow to its cap, and
        // comes back empty; B resumes first, holding the older state.
        redis.stop()
        Thread.sleep(forTimeInterval: 3)
        try redis.start()
        kill(b.process.processIdentifier, SIGCONT)

        XCTAssertTrue(
            eventually(timeout: 30) {
                (try? HTTPClient(host: "127.0.0.1", port: a.port).request("POST", "/api/tasks/cl.after", json: "{}"))?.status == 200
            }, "A publishes again once the state is back")
        XCTAssertTrue(
            eventually(timeout: 10) { (try? self.tasks(a)) == (try? self.tasks(b)) }, "A: \((try? tasks(a)) ?? "")\nB: \((try? tasks(b)) ?? "")")
        for node in [a, b] {
            let after = try listing(node)
            let newEpoch = try XCTUnwrap(after["epoch"]?.stringValue)
            XCTAssertNotEqual(newEpoch, oldEpoch, "the lost log's epoch is never reused")
            XCTAssertGreaterThan(try XCTUnwrap(after["seq"]?.numberValue), lastAnswered, "the state put back is the newest a node held")
            let done = Set(
                (after["tasks"]?.arrayValue ?? []).filter { $0["state"] == .string("done") }.compactMap { $0["id"]?.stringValue })
            XCTAssertEqual(done, Set((0..<10).map { "cl.job-\($0)" }), "every update A answered is on node \(node.port)")
        }

        // A watcher that last saw the old epoch gets the whole state, not a resume.
        let resumed = TestWatcher("ws://127.0.0.1:\(b.port)/ws?watch=cl.*&since=\(oldEpoch):\(Int(oldSeq))")
        let snapshot = resumed.waitForSnapshot().snapshot
        XCTAssertEqual(snapshot.event["full"], .bool(true), "a since from before the loss is answered with a full snapshot")
        XCTAssertEqual(snapshot.event["tasks"]?.arrayValue?.count, 11)
    }
}

/// Redis under Sentinel: the master killed while two nodes publish; the nodes find the promoted
/// replica, and with `redisReplicas: 1` nothing they answered is lost. The killed master comes
/// back (as operators restart it) and the sentinels make it the new master's replica.
extension ClusterTests {
    func testTheNodesFollowASentinelFailoverAndLoseNothingAnsweredWithRedisReplicas() throws {
        let group = try SentinelGroup()
        func sentinelNode(_ name: String) throws -> ServeProcess {
            let config = folder.file("\(name).json")
            try Data(
                #"{"port":0,"publicDir":"\#(emptyPublicDirectory)","storage":"\#(group.url)","redisReplicas":1,"logLevel":"error"}"#.utf8
            ).write(to: config)
            return try ServeProcess(["--config", config.path])
        }
        let nodes = [try sentinelNode("a"), try sentinelNode("b")]
        let oldMaster = group.master.port
        var answered: [String: Double] = [:]  // task → the progress its last 200 said
        var refusals: [String] = []
        var step = 0
        /// Publishes to the nodes in turn until `done` holds (at most `seconds`); true if it did.
        func publish(for seconds: Double, until done: (_ node: Int, _ status: Int, _ text: String) -> Bool) -> Bool {
            let ends = Date().addingTimeInterval(seconds)
            while Date() < ends {
                step += 1
                let node = step % nodes.count
                let task = "cl.f-\(step % 40)"
                let progress = Double(step) / 10_000
                let answer = try? HTTPClient(host: "127.0.0.1", port: nodes[node].port, timeoutSeconds: 10).request(
                    "POST", "/api/tasks/\(task)", json: #"{"progress":\#(progress)}"#)
                if answer?.status == 200 {
                    answered[task] = progress
                } else {
                    refusals.append("\(answer?.status ?? 0) \(answer?.text ?? "no answer")")
                }
                if done(node, answer?.status ?? 0, answer?.text ?? "") { return true }
                usleep(20_000)
            }
            return false
        }
        XCTAssertTrue(publish(for: 30) { _, _, _ in answered.count == 40 && step >= 100 }, "publishing before the failover: \(refusals.suffix(3))")
        XCTAssertTrue(refusals.isEmpty, "\(refusals)")

        group.master.stop()
        let killed = Date()
        // A node is on the new master when its append reached a master: answered, or refused only
        // because the one replica is gone (it was promoted), not because no master answers.
        var onNewMaster: Set<Int> = []
        XCTAssertTrue(
            publish(for: 30) { node, status, text in
                if status == 200 || text.contains("replicas redisReplicas asks for") { onNewMaster.insert(node) }
                return onNewMaster.count == nodes.count
            }, "both nodes reach the new master: \(refusals.suffix(3))")
        let following = Date().timeIntervalSince(killed)
        XCTAssertEqual(group.masterPort, group.replica.port, "the sentinels promoted the replica")

        // The old master returns empty; the sentinels turn it into the new master's replica, and
        // answers are confirmed by a replica again.
        try group.master.start()
        var answeringAgain: Set<Int> = []
        XCTAssertTrue(
            publish(for: 30) { node, status, _ in
                if status == 200 { answeringAgain.insert(node) }
                return answeringAgain.count == nodes.count
            }, "both nodes answer 200 once the old master is the new one's replica: \(refusals.suffix(3))")
        XCTAssertNotEqual(group.masterPort, oldMaster)
        XCTAssertTrue(
            SentinelGroup.redisCLI(oldMaster, "INFO", "replication").contains("role:slave"), "the old master came back as a replica")

        for refusal in refusals {
            XCTAssertTrue(refusal.hasPrefix("503") && refusal.contains("storage_failed"), "between masters only 503 storage_failed: \(refusal)")
        }
        for node in nodes {
            XCTAssertTrue(
                eventually(timeout: 10) {
                    guard let listing = try? self.listing(node) else { return false }
                    let held = Dictionary(
                        (listing["tasks"]?.arrayValue ?? []).compactMap { task in
                            task["id"]?.stringValue.map { ($0, task["progress"]?.numberValue ?? -1) }
                        }, uniquingKeysWith: { $1 })
                    return answered.allSatisfy { task, progress in (held[task] ?? -1) >= progress }
                }, "every update answered 200 is on node \(node.port) after the failover (\(answered.count) tasks)")
        }
        print(
            "sentinel failover: \(step) updates sent, \(step - refusals.count) answered 200, \(refusals.count) refused with 503; both nodes on the new master \(following) s after the kill"
        )
    }
}

/// Log tails in a cluster: in the checkpoint with the tasks, so a node that starts from it serves
/// the lines written before it joined.
extension ClusterTests {
    func testANodeStartedFromTheCheckpointServesTheLogLinesWrittenBeforeItJoined() throws {
        let a = try node("a")
        let onA = HTTPClient(host: "127.0.0.1", port: a.port)
        try post(a, "/api/tasks/cl.build", #"{"title":"Build"}"#)
        try post(a, "/api/tasks/cl.build/log", #"{"lines":["compiling","linking","done linking"]}"#)
        // Redis loses everything; A puts its state back as the cluster's checkpoint, the only
        // thing a node that starts now can start from.
        try redis.restart()
        XCTAssertTrue(
            eventually(timeout: 20) { (try? onA.request("POST", "/api/tasks/cl.after", json: "{}"))?.status == 200 },
            "A never got back to Redis")
        let c = try node("c")
        let tail = try JSONParser.parse(try HTTPClient(host: "127.0.0.1", port: c.port).request("GET", "/api/tasks/cl.build/log").body)
        XCTAssertEqual(tail["lines"]?.arrayValue?.compactMap(\.stringValue), ["compiling", "linking", "done linking"], "\(tail)")
    }
}

/// Webhook deliveries in a cluster: the node that took the change sends them under a lease it
/// renews; another node sends them only when that node dies, once per delivery id.
extension ClusterTests {
    func testDeliveriesOwedByANodeThatDiesAreSentByAnotherOncePerId() throws {
        let secret = "cluster-hooks-secret-0123456789"
        let whileAlive = try WebhookReceiver(secret: secret, refuseAll: true)
        let afterDeath = try WebhookReceiver(secret: secret, refuseAll: true)
        func hookedNode(_ name: String) throws -> ServeProcess {
            let config = folder.file("\(name).json")
            try Data(
                #"""
                {"port": 0, "publicDir": "\#(emptyPublicDirectory)", "storage": "\#(redis.url)", "logLevel": "error",
                 "webhooks": [{"url": "\#(whileAlive.url)", "patterns": ["cl.alive.*"], "states": ["failed"], "secret": "\#(secret)"},
                              {"url": "\#(afterDeath.url)", "patterns": ["cl.dead.*"], "states": ["failed"], "secret": "\#(secret)"}]}
                """#.utf8
            ).write(to: config)
            return try ServeProcess(["--config", config.path])
        }
        let a = try hookedNode("a")
        let b = try hookedNode("b")
        defer { withExtendedLifetime(b) {} }  // B runs to the end: it is the node that takes over
        func onceEach(_ receiver: WebhookReceiver, _ count: Int, file: StaticString = #filePath, line: UInt = #line) {
            let refused = Set(receiver.wait(timeout: 15) { Set($0.map(\.delivery)).count == count }.map(\.delivery))
            receiver.accept()
            let delivered = receiver.wait(timeout: 30) { Set($0.filter { $0.status == 200 }.map(\.delivery)) == refused }
            Thread.sleep(forTimeInterval: 2)  // room for a second node's duplicate, were there one
            let twice = Dictionary(grouping: receiver.deliveries.filter { $0.status == 200 }, by: \.delivery).filter { $0.value.count > 1 }
            XCTAssertTrue(twice.isEmpty, "delivered more than once: \(twice.keys)", file: file, line: line)
            XCTAssertTrue(delivered.allSatisfy(\.valid), file: file, line: line)
        }

        // A lives: its leases hold past their length, so B never sends what A owes.
        for job in 0..<3 { try post(a, "/api/tasks/cl.alive.\(job)", #"{"state":"failed"}"#) }
        Thread.sleep(forTimeInterval: Double(RedisClusterLease.milliseconds) / 1000 + 2)
        onceEach(whileAlive, 3)

        // A dies owing three deliveries; B sends them once its leases run out.
        for job in 0..<3 { try post(a, "/api/tasks/cl.dead.\(job)", #"{"state":"failed"}"#) }
        afterDeath.wait(timeout: 15) { Set($0.map(\.delivery)).count == 3 }
        _ = a.stop(SIGKILL)
        onceEach(afterDeath, 3)
        // B counted what it took over in its outbox, and emptied it again.
        let metrics = { (try? HTTPClient(host: "127.0.0.1", port: b.port).request("GET", "/metrics").text) ?? "" }
        XCTAssertTrue(eventually(timeout: 5) { metrics().contains("ringcast_webhook_outbox 0\n") }, metrics())
        XCTAssertTrue(metrics().contains("ringcast_webhook_deliveries_total 3\n"), metrics())
    }
}

/// The lease on a webhook delivery (RedisCluster.leaseMilliseconds), as the tests wait for it.
private enum RedisClusterLease { static let milliseconds = 10_000 }
