import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastLoad
import RingcastPlatform
import RingcastTestSupport
import XCTest

/// Short real runs of the load tester against an in-process server (real lws on loopback).
final class LoadToolTests: XCTestCase {
    private func server() throws -> TestServer {
        try TestServer { $0.publicDir = emptyPublicDirectory }
    }

    private func options(_ server: TestServer, _ change: (inout LoadTestOptions) -> Void = { _ in }) -> LoadTestOptions {
        var options = LoadTestOptions(url: ServerURL("http://127.0.0.1:\(server.port)")!)
        options.connectTimeout = 5
        options.drainTimeout = 10
        change(&options)
        return options
    }

    private func run(_ options: LoadTestOptions) throws -> LoadResult {
        let tester = try LoadTester(options: options)
        var phases: [LoadProgress.Phase] = []
        let result = try tester.execute { phases.append($0.phase) }
        XCTAssertEqual(phases.last, .done)
        XCTAssertTrue(phases.contains(.connecting))
        return result
    }

    func testFiftyWatchersAHundredUpdatesOverHTTPAllDeliveredNoLoss() throws {
        let server = try self.server()
        let result = try run(
            options(server) {
                $0.clients = 50
                $0.messages = 100
                $0.rate = 0
                $0.tasks = 3
                $0.payloadBytes = 64
                $0.serverPID = getpid()  // the server runs in this process: /proc reading works end to end
            })
        XCTAssertEqual(result.connected, 50)
        XCTAssertEqual(result.failed, 0)
        XCTAssertEqual(result.dropped, 0)
        XCTAssertEqual(result.published, 100)
        XCTAssertEqual(result.expected, 5_000)
        XCTAssertEqual(result.delivered, 5_000)
        XCTAssertEqual(result.loss, 0)
        XCTAssertEqual(result.perWatcherMin, 100)
        XCTAssertEqual(result.perWatcherMax, 100)
        XCTAssertEqual(result.finalValueSeenBy, 50)
        XCTAssertEqual(result.foreignMarkers, 0)
        XCTAssertEqual(result.errorFrames, 0)
        XCTAssertEqual(result.histogram.count, 5_000, "one latency per delivery")
        XCTAssertGreaterThan(result.histogram.min, 0)
        XCTAssertLessThan(result.histogram.max, 10_000_000, "under 10 s")
        XCTAssertGreaterThanOrEqual(result.dataFrames, 1)
        XCTAssertLessThanOrEqual(result.dataFrames, 5_000)
        XCTAssertGreaterThanOrEqual(result.frames, result.dataFrames + 100, "plus hello and snapshot per watcher")
        XCTAssertNotNil(result.deliveriesPerSecond)
        let server0 = try XCTUnwrap(result.server)
        XCTAssertGreaterThan(server0.cpuSeconds, 0)
        XCTAssertGreaterThan(server0.residentKiB, 0)

        // The table, the JSON and the page all say the same.
        XCTAssertTrue(result.table.contains("connected 50 of 50, failed 0"), result.table)
        XCTAssertTrue(result.table.split(separator: "\n").contains { $0.hasPrefix("  loss ") && $0.hasSuffix(" 0 (0.000 %)") }, result.table)
        let json = try JSONParser.parse(JSONWriter.encode(result.json))
        XCTAssertEqual(json["connected"], .number(50))
        XCTAssertEqual(json["failed"], .number(0))
        XCTAssertEqual(json["expected"], .number(5_000))
        XCTAssertEqual(json["delivered"], .number(5_000))
        XCTAssertEqual(json["loss"], .number(0))
        guard case .number? = json["latencyMs"]?["p99.9"], case .number? = json["server"]?["cpuMsPer1000Deliveries"] else {
            return XCTFail("no latency or server figures in \(json)")
        }
        let page = result.html
        XCTAssertTrue(page.hasPrefix("<!doctype html>"))
        XCTAssertEqual(page.components(separatedBy: "<svg").count - 1, 3)
        XCTAssertTrue(page.contains("class=\"bar\""))
        XCTAssertTrue(page.contains("<polyline class=\"p99\""))
        XCTAssertFalse(page.contains("<script"), "self-contained and static")
    }

    func testBatchAndWebSocketPublishersAndBatchedFramesCountEventsNotFrames() throws {
        let server = try self.server()
        for mode in [LoadTestOptions.PublishMode.batch, .ws] {
            let result = try run(
                options(server) {
                    $0.clients = 20
                    $0.messages = 200
                    $0.rate = 0
                    $0.publish = mode
                    $0.batchSize = 10
                    $0.tasks = 4
                })
            XCTAssertEqual(result.connected, 20, "\(mode)")
            XCTAssertEqual(result.published, 200, "\(mode)")
            XCTAssertEqual(result.expected, 4_000, "\(mode)")
            XCTAssertEqual(result.delivered, 4_000, "\(mode)")
            XCTAssertEqual(result.loss, 0, "\(mode)")
            XCTAssertEqual(result.finalValueSeenBy, 20, "\(mode)")
            // Ten updates per request reach the watchers as arrays: fewer frames than deliveries.
            XCTAssertLessThan(result.dataFrames, result.delivered, "\(mode)")
            XCTAssertEqual(result.eventsPerFrame!, Double(result.delivered) / Double(result.dataFrames), accuracy: 1e-9)
        }
    }

    func testAgainstACoalescingWindowLatestValueCoversEveryUpdateAndNothingIsStale() throws {
        let server = try TestServer { config in
            config.publicDir = emptyPublicDirectory
            config.flushMilliseconds = 50
        }
        let result = try run(
            options(server) {
                $0.clients = 20
                $0.messages = 400
                $0.rate = 0
                $0.publish = .ws
                $0.tasks = 4
                $0.latestValue = true
                $0.serverPID = getpid()
            })
        XCTAssertEqual(result.connected, 20)
        XCTAssertEqual(result.published, 400)
        XCTAssertLessThan(result.delivered, result.expected, "the window merged a task's updates")
        XCTAssertEqual(result.latestValue?.count, 8_000, "a latest-value latency for every update at every watcher")
        XCTAssertEqual(result.staleAtEnd, 0, "every watcher ends with every task's last update")
        XCTAssertEqual(result.finalValueSeenBy, 20)
        XCTAssertNotNil(result.cpuMicrosecondsPerPublished)
        guard case .object(let members) = result.json else { return XCTFail("not an object") }
        XCTAssertNotNil(members.first { $0.0 == "latestValueLatencyMs" })
        XCTAssertTrue(result.table.contains("latest value (ms)"))
        XCTAssertThrowsError(
            try LoadTester(
                options: options(server) {
                    $0.latestValue = true
                    $0.clients = 1_000_000
                    $0.tasks = 1_000
                }), "a number per watcher and task has a limit")
    }

    func testOnlyWatchersWhosePatternMatchesAreExpectedToReceive() throws {
        let server = try self.server()
        // Tasks rcload.t0 … t3; the watchers watch only t1: a quarter of the updates.
        let result = try run(
            options(server) {
                $0.clients = 10
                $0.messages = 40
                $0.rate = 0
                $0.tasks = 4
                $0.watch = "rcload.t1"
            })
        XCTAssertEqual(result.matchingPublished, 10)
        XCTAssertEqual(result.expected, 100)
        XCTAssertEqual(result.delivered, 100)
        XCTAssertEqual(result.loss, 0)
        XCTAssertEqual(result.finalValueSeenBy, 10, "the last t1 update (number 37)")
    }

    func testPacedRunHoldsItsRateAndAnIdleRunPublishesNothing() throws {
        let server = try self.server()
        let paced = try run(
            options(server) {
                $0.clients = 5
                $0.rate = 50
                $0.duration = 1
            })
        XCTAssertEqual(paced.published, 50, accuracy: 2)
        XCTAssertEqual(paced.publishSeconds, 1, accuracy: 0.2)
        XCTAssertEqual(paced.loss, 0)

        let idle = try run(
            options(server) {
                $0.clients = 5
                $0.messages = 0
                $0.duration = 0.5
                $0.serverPID = getpid()
            })
        XCTAssertEqual(idle.connected, 5)
        XCTAssertEqual(idle.published, 0)
        XCTAssertEqual(idle.expected, 0)
        XCTAssertEqual(idle.delivered, 0)
        XCTAssertGreaterThanOrEqual(idle.runSeconds, 0.5)
        XCTAssertNotNil(idle.residentPerWatcherKiB)
    }

    func testAnUnreachableServerIsOneClearError() throws {
        // A port that was just free: nothing listens there.
        let port: Int = try {
            let probe = try self.server()
            return probe.port
        }()
        var options = LoadTestOptions(url: ServerURL("http://127.0.0.1:\(port)")!)
        options.clients = 3
        options.messages = 1
        options.connectTimeout = 2
        XCTAssertThrowsError(try LoadTester(options: options).execute()) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("cannot connect to 127.0.0.1:\(port)"), text)
            XCTAssertFalse(text.contains("\n"), "one line: \(text)")
        }
    }

    func testAnUpdateTheServerRefusesStopsTheRunWithItsError() throws {
        let server = try self.server()
        // detail is limited to 1000 characters: the server answers 422 and the run says so.
        var options = options(server) {
            $0.clients = 2
            $0.messages = 3
            $0.rate = 0
            $0.payloadBytes = 5000
        }
        XCTAssertThrowsError(try LoadTester(options: options).execute()) { error in
            XCTAssertTrue("\(error)".contains("422"), "\(error)")
        }
        options.publish = .ws
        XCTAssertThrowsError(try LoadTester(options: options).execute()) { error in
            XCTAssertTrue("\(error)".contains("invalid_field"), "\(error)")
        }
    }

    func testAServerThatWantsATokenGetsItFromEachPublisher() throws {
        let token = "load-token-0123456789abcdef"
        let server = try TestServer {
            $0.publicDir = emptyPublicDirectory
            $0.access = AccessPolicy(
                publishers: [.publisher(name: "load", token: token, patterns: WatchSet([Glob("rcload.*")]))],
                anonymousLocalPublish: false)
        }
        for mode in [LoadTestOptions.PublishMode.http, .batch, .ws] {
            var options = options(server) {
                $0.clients = 3
                $0.messages = 20
                $0.rate = 0
                $0.publish = mode
                $0.batchSize = mode == .http ? 1 : 5
            }
            XCTAssertThrowsError(try LoadTester(options: options).execute(), "\(mode) without a token") { error in
                XCTAssertTrue("\(error)".contains("401") || "\(error)".contains("unauthorized"), "\(mode): \(error)")
            }
            options.token = token
            let result = try run(options)
            XCTAssertEqual(result.delivered, 60, "\(mode)")
            XCTAssertEqual(result.loss, 0, "\(mode)")
        }
    }

    /// The threads of this process with `name` (Linux keeps 15 bytes of it).
    private func threads(named name: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) == name
        }.count
    }

    func testWatchersSpreadOverThreeThreadsCountAsOneRun() throws {
        let server = try self.server()
        let before = threads(named: "ringcast-client")
        var options = options(server) {
            $0.clients = 20  // 7, 7 and 6 a thread
            $0.threads = 3
            $0.messages = 60
            $0.rate = 0
            $0.tasks = 2
            $0.latestValue = true
        }
        var seen = 0
        let tester = try LoadTester(options: options)
        let result = try tester.execute { _ in seen = max(seen, self.threads(named: "ringcast-client") - before) }
        XCTAssertEqual(seen, 3, "one client context, and its service thread, per --threads")
        XCTAssertEqual(result.connected, 20)
        XCTAssertEqual(result.expected, 1_200)
        XCTAssertEqual(result.delivered, 1_200)
        XCTAssertEqual(result.loss, 0)
        XCTAssertEqual(result.histogram.count, 1_200, "every thread's latencies in the one histogram")
        XCTAssertEqual(result.perWatcherMin, 60, "every watcher, whichever thread it is on")
        XCTAssertEqual(result.perWatcherMax, 60)
        XCTAssertEqual(result.finalValueSeenBy, 20)
        XCTAssertEqual(result.latestValue?.count, 1_200)
        XCTAssertEqual(result.staleAtEnd, 0)
        XCTAssertEqual(result.timeline.slots.reduce(0) { $0 + Int($1.count) }, 1_200)
        XCTAssertTrue(result.table.contains("on 3 threads"), result.table)
        // Each thread's own CPU time, from its schedstat: what says whether one of them was saturated.
        let perThread = try XCTUnwrap(result.watcherThreadCPUSeconds)
        XCTAssertEqual(perThread.count, 3)
        XCTAssertTrue(perThread.allSatisfy { $0 > 0 }, "\(perThread)")
        XCTAssertGreaterThan(result.publisherThreadCPUSeconds ?? 0, 0)
        XCTAssertTrue(result.table.contains("watcher threads "), result.table)

        // More threads than watchers: the empty ones cost a thread and change no figure.
        options.clients = 2
        options.threads = 4
        let few = try run(options)
        XCTAssertEqual(few.delivered, 120)
        XCTAssertEqual(few.perWatcherMin, 60)
    }

    /// Local addresses of the established connections to `port`, counted, as `ss` (iproute2) sees
    /// them: the kernel's own view of where each socket is bound.
    private func sourcesConnected(toPort port: Int) throws -> [String: Int] {
        let ss = "/usr/bin/ss"
        guard FileManager.default.isExecutableFile(atPath: ss) else { throw MissingTool("\(ss) (Debian's iproute2)") }
        let (status, output) = try runToEnd(ss, ["-H", "-4", "-tn", "state", "established", "( dport = :\(port) )"])
        XCTAssertEqual(status, 0, output)
        var counts: [String: Int] = [:]
        for line in output.split(separator: "\n") {
            // Recv-Q Send-Q Local:Port Peer:Port
            let fields = line.split(separator: " ")
            guard fields.count >= 4, let colon = fields[2].lastIndex(of: ":") else { continue }
            counts[String(fields[2][..<colon]), default: 0] += 1
        }
        return counts
    }

    func testWatchersAreBoundRoundRobinToTheSourceAddressesGiven() throws {
        let server = try self.server()
        var sources: [String: Int] = [:]
        var lookError: Error?
        let tester = try LoadTester(
            options: options(server) {
                $0.clients = 10
                $0.threads = 2
                $0.sourceAddresses = ["127.0.0.2", "127.0.0.3"]
                $0.messages = 20
                $0.rate = 20
            })
        let result = try tester.execute { progress in
            guard progress.phase == .publishing, sources.isEmpty, lookError == nil else { return }
            do { sources = try self.sourcesConnected(toPort: server.port) } catch { lookError = error }
        }
        if let lookError { throw lookError }
        // The kernel's view: five watchers from each address; the publisher's one kept-alive
        // connection is not a watcher and keeps the kernel's choice.
        XCTAssertEqual(sources, ["127.0.0.2": 5, "127.0.0.3": 5, "127.0.0.1": 1])
        XCTAssertEqual(result.connected, 10)
        XCTAssertEqual(result.delivered, 200)
        XCTAssertEqual(result.loss, 0)

        var options = options(server) { $0.sourceAddresses = ["127.0.0.2", "192.0.2.1"] }
        XCTAssertThrowsError(try LoadTester(options: options).execute(), "an address this machine does not have") { error in
            XCTAssertTrue("\(error)".contains("--source-address 192.0.2.1: this machine cannot bind it"), "\(error)")
        }
        options.sourceAddresses = ["localhost"]
        XCTAssertThrowsError(try LoadTester(options: options), "a name, not an address")
    }
}
