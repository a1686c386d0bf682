import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastPlatform
import Synchronization

/// What one load run does: how many watchers, what is published how fast and how, and what to measure.
package struct LoadTestOptions: Sendable {
    package enum PublishMode: String, Sendable, CaseIterable {
        /// One `POST /api/tasks/{id}` per update, on one kept-alive connection.
        case http
        /// `POST /api/events` with `batchSize` updates per request.
        case batch
        /// A WebSocket publisher: one frame per update, or an array of `batchSize` per frame.
        case ws
    }

    /// The server, e.g. `http://127.0.0.1:8080`: watchers open `/ws` there, updates go to `/api/`.
    package var url: ServerURL
    /// Where updates go, when not to `url`: another node of a cluster, to time delivery across nodes.
    package var publishURL: ServerURL?
    package var clients = 100
    /// Updates per second; 0 publishes as fast as the server takes them.
    package var rate: Double = 10
    /// How long to publish (seconds); with `messages` too, whichever ends first.
    package var duration: Double?
    /// How many updates to publish; 0 publishes nothing and just holds the watchers for `duration`.
    package var messages: Int?
    /// Each update's `detail` is padded to this many bytes (it always holds at least the marker).
    package var payloadBytes = 0
    /// The watchers' `?watch=` patterns.
    package var watch = "*"
    /// Updates go round-robin to task ids `rcload.t0` … `rcload.t(K-1)`.
    package var tasks = 1
    package var publish = PublishMode.http
    /// Updates per request (`batch`) or per frame (`ws`); `http` always sends one.
    package var batchSize = 1
    /// A publisher token, sent as `Authorization: Bearer TOKEN` (servers that require one).
    package var token: String?
    /// How https:// and wss:// servers are checked, for the publisher and the watchers alike.
    package var tls = TLSSettings()
    /// A local server's pid: its CPU time and memory are read from /proc.
    package var serverPID: Int32?
    /// New watcher connections started per second; 0 = as fast as `maxHandshakes` allows.
    package var rampPerSecond: Double = 0
    /// At most this many watchers connecting (TCP + handshake) at once.
    package var maxHandshakes = 256
    /// A watcher not open after this many seconds counts as failed.
    package var connectTimeout: Double = 10
    /// After the last update, how long to wait at most for deliveries still on their way.
    package var drainTimeout: Double = 60
    /// Drain ends early after this long without a new delivery.
    package var quietSeconds: Double = 2
    /// Also measure, for every update, the time until each watcher held its value or a newer one of
    /// the same task: the latency that counts when a server merges a task's updates (a coalescing
    /// window, conflation), where an update replaced by a newer one is never delivered itself.
    package var latestValue = false
    /// Bounds the run must stay within (`--fail-if`): the result names those that held.
    package var failIf: LoadThresholds?
    /// Watchers spread over this many client contexts, each on its own thread (the publisher has its own).
    package var threads = 1
    /// Local addresses the watchers are bound to, round-robin (empty: the kernel's choice).
    package var sourceAddresses: [String] = []
    /// Publishing begins at this Unix time (seconds), once the watchers are connected: runs on
    /// several machines start together and their results can be merged.
    package var startAt: Double?
    /// Watchers closed a second while the run publishes (or holds), each reopened after the
    /// dashboard's back-off and resuming with `since` (`--churn`); 0: none.
    package var churnPerSecond: Double = 0
    /// Every watcher closed at once halfway through publishing (or holding), then back as the
    /// dashboard comes back: its back-off, resuming with `since` (`--storm`).
    package var storm = false
    /// Where the run publishes its own progress as a task (`--report-to`): the server and the task id.
    package var reportTo: (url: String, task: String)?

    package init(url: ServerURL) { self.url = url }

    /// Closing and reopening watchers: their resume point (epoch and seq) is tracked.
    package var reconnects: Bool { churnPerSecond > 0 || storm }

    package static let taskPrefix = "rcload.t"

    package func taskID(_ index: Int) -> String { LoadTestOptions.taskPrefix + String(index) }

    /// Everything a user could get wrong, as one message saying what to type instead.
    package func validate() throws(LoadError) {
        guard url.path == "/" || url.path == "/ws" || url.path.hasPrefix("/?") || url.path.hasPrefix("/ws?") else {
            throw LoadError("--server takes the server's address, like http://127.0.0.1:8080, not a path (\(url.path))")
        }
        if let publishURL {
            guard publishURL.path == "/" else {
                throw LoadError(
                    "--publish-to takes another server's address, like http://127.0.0.1:8081, not \(publishURL.hostHeader)\(publishURL.path)")
            }
        }
        guard clients >= 1, clients <= 1_000_000 else { throw LoadError("--clients must be from 1 to 1000000, not \(clients)") }
        guard rate >= 0, rate.isFinite else { throw LoadError("--rate must be updates per second (0 for as fast as possible), not \(rate)") }
        if let duration {
            guard duration > 0 || messages == 0, duration.isFinite else { throw LoadError("--duration must be a positive number of seconds") }
        }
        if let messages { guard messages >= 0 else { throw LoadError("--messages must be 0 or more") } }
        if messages == 0 && duration == nil { throw LoadError("--messages 0 publishes nothing: add --duration S to hold the watchers for S seconds") }
        if let messages, messages > SendTimes.defaultCapacity { throw LoadError("--messages can be at most \(SendTimes.defaultCapacity)") }
        if rate == 0 && messages == nil && duration == nil { throw LoadError("--rate 0 needs --messages M or --duration S") }
        guard payloadBytes >= 0, payloadBytes <= 1_000_000 else { throw LoadError("--payload-bytes must be from 0 to 1000000") }
        guard tasks >= 1, tasks <= 1_000_000 else { throw LoadError("--tasks must be from 1 to 1000000") }
        guard batchSize >= 1, batchSize <= 10_000 else { throw LoadError("--batch-size must be from 1 to 10000") }
        if publish == .http && batchSize != 1 { throw LoadError("--batch-size needs --publish batch or ws (http sends one update per request)") }
        for address in sourceAddresses where !LoadTestOptions.isAddress(address) {
            throw LoadError("--source-address takes IP addresses of this machine, like 127.0.0.2,127.0.0.3, not '\(address)'")
        }
        guard threads >= 1, threads <= 256 else { throw LoadError("--threads must be from 1 to 256, not \(threads)") }
        guard maxHandshakes >= 1 else { throw LoadError("--max-handshakes must be at least 1") }
        guard rampPerSecond >= 0 else { throw LoadError("--ramp-per-second must be 0 (no limit) or more") }
        guard connectTimeout > 0 else { throw LoadError("--connect-timeout must be a positive number of seconds") }
        guard drainTimeout >= 0 else { throw LoadError("--drain-timeout must be 0 or more seconds") }
        if case .failure(let error) = WatchSet.parse(watch) { throw LoadError("--watch: \(error.message)") }
        if let startAt {
            let now = Date().timeIntervalSince1970
            guard startAt > now else {
                throw LoadError(
                    "--start-at is \(Int((now - startAt).rounded(.up))) s in the past; give a time ahead of every machine's start, e.g. \(Int(now) + 60)"
                )
            }
            guard startAt - now < 86_400 else { throw LoadError("--start-at is more than a day ahead; give a Unix time or 2026-01-31T12:00:00Z") }
        }
        guard churnPerSecond >= 0, churnPerSecond.isFinite, churnPerSecond <= 100_000 else {
            throw LoadError("--churn must be watchers a second, from 0 to 100000, not \(churnPerSecond)")
        }
        if churnPerSecond > 0 && storm { throw LoadError("--churn and --storm are separate scenarios: give one of them per run") }
        if let reportTo, ServerURL(reportTo.url) == nil {
            throw LoadError(
                "--report-to takes a server's address and a task id, like --report-to http://127.0.0.1:8080 load.nightly, not '\(reportTo.url)'")
        }
        if let reportTo, !TaskID.isValid(reportTo.task) {
            throw LoadError(
                "--report-to: '\(reportTo.task)' is not a task id: 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit")
        }
        if latestValue, clients * tasks > LoadTestOptions.latestValueLimit {
            throw LoadError(
                "--latest-value keeps a number per watcher and task: --clients × --tasks can be at most \(LoadTestOptions.latestValueLimit)")
        }
    }

    package static let latestValueLimit = 20_000_000

    /// An IPv4 or IPv6 address literal (not a name: a bind needs the address itself).
    static func isAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

package struct LoadError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A moment of a run, for the live progress line.
package struct LoadProgress: Sendable {
    package enum Phase: String, Sendable { case connecting, waiting, publishing, draining, holding, done }
    package var phase: Phase
    package var clients: Int
    package var connected: Int
    package var failed: Int
    package var published: Int
    package var delivered: Int
    /// Deliveries per second since the previous progress report.
    package var deliveriesPerSecond: Double
    package var elapsed: Double
}

/// Runs one load test: opens the watchers from `threads` client contexts (ramped, with a cap on
/// handshakes in flight and a timeout), publishes updates that carry a marker with their number, and
/// measures at every watcher the time from send to delivery on the process's one monotonic clock.
///
/// Threads: the caller's thread ramps, reports progress and decides the phases; the publisher has
/// its own thread; a watcher's callbacks run on its shard's service thread, which alone touches
/// that shard's `WatcherStats` (added into one after every context has shut down). Counters the
/// others need are atomics or sit under `lock`.
/// @unchecked Sendable: each mutable member belongs to one of those threads, or is atomic, or sits under `lock`.
package final class LoadTester: @unchecked Sendable {
    package let options: LoadTestOptions
    package let run: String
    private let runBytes: [UInt8]
    let sendTimes: SendTimes
    private let watchSet: WatchSet

    // Under `lock`: the connection state of each watcher and the counts that follow from it.
    private let lock = NSLock()
    /// `leaving`: closed by the run (churn, storm); `away`: closed, its reconnect due later;
    /// `returning`: reconnecting, open again once it holds its resume snapshot.
    private enum WatcherState: UInt8 { case pending, open, failed, closed, leaving, away, returning }
    private var states: [WatcherState]
    private var connected = 0, failed = 0, timedOut = 0, dropped = 0, inFlight = 0
    /// With churn or a storm: when each watcher was closed, its attempts since, the reconnects due
    /// (each with its URL, which carries the watcher's own resume point), and how long each took.
    private var lostAt: [UInt64] = []
    private var attempts: [UInt8] = []
    private var dueReconnects: [(due: UInt64, index: Int, url: ServerURL)] = []
    private var away = 0, closedByRun = 0, cameBack = 0, failedAttempts = 0
    private var backTimes = LatencyHistogram()
    private var lastBackAt: UInt64 = 0
    private var churned = 0
    private var stormAt: UInt64?
    private var stormWatchers = 0
    private var random = SystemRandomNumberGenerator()
    /// The caller's thread only: for `--report-to`.
    private var livePool: WatcherPool?
    private var publishStartedAt: UInt64?
    private var connectErrors: [String: Int] = [:]
    private var publishingStarted = false
    private var finishing = false

    /// Where every watcher thread's timeline starts.
    private let origin: UInt64

    // Any thread.
    private let publishedCount = Atomic<Int>(0)
    /// Watchers that received their first snapshot, and watchers that received any frame at all.
    private let snapshotted = Atomic<Int>(0)
    private let heardFrom = Atomic<Int>(0)
    /// Updates a returning watcher got inside its resume snapshot rather than one by one.
    private let resumedCount = Atomic<Int>(0)
    /// With `--report-to`: watcher threads share a copy of their histogram now and then.
    private let sharesHistograms: Bool
    private let stopRequested = Atomic<Bool>(false)
    private let publisherError = Locked<String?>(nil)
    /// The publisher thread's CPU time, written as it ends (0 until then).
    private let publisherCPUNanoseconds = Atomic<UInt64>(0)

    package init(options: LoadTestOptions) throws(LoadError) {
        try options.validate()
        self.options = options
        sharesHistograms = options.reportTo != nil
        run = LoadMarker.newRunID()
        runBytes = Array(run.utf8)
        let capacity = options.messages.map { max(1, $0 + options.batchSize) } ?? SendTimes.defaultCapacity
        sendTimes = SendTimes(capacity: capacity)
        if case .success(let parsed) = WatchSet.parse(options.watch) { watchSet = parsed } else { watchSet = WatchSet([Glob("*")]) }
        states = Array(repeating: .pending, count: options.clients)
        if options.reconnects {
            lostAt = Array(repeating: 0, count: options.clients)
            attempts = Array(repeating: 0, count: options.clients)
        }
        origin = MonotonicClock.nanoseconds()
    }

    /// Asks a running test to stop publishing and finish (Ctrl-C). Any thread.
    package func stop() { stopRequested.store(true, ordering: .relaxed) }

    private var stopping: Bool { stopRequested.load(ordering: .relaxed) }

    /// Runs the whole test and returns its figures; throws what a user can fix (no server, nothing
    /// connected, updates refused). `progress` is called about four times a second on this thread.
    package func execute(progress: @escaping (LoadProgress) -> Void = { _ in }) throws(LoadError) -> LoadResult {
        guard let reportTo = options.reportTo else { return try measure(progress: progress) }
        let reporter = try LoadRunReporter(url: reportTo.url, task: reportTo.task, token: options.token, tls: options.tls)
        do {
            let result = try measure { [self] moment in
                progress(moment)
                reporter.report(moment, p99Milliseconds: liveP99Milliseconds(), fraction: fraction(moment), force: moment.phase == .done)
            }
            let breaches = result.breaches
            reporter.finish(
                detail: "delivered \(result.delivered) of \(result.expected), loss \(result.loss), "
                    + result.latencyMilliseconds.map { "\($0.label) \($0.value.map { String(format: "%.2f", $0) } ?? "–") ms" }.joined(
                        separator: ", ")
                    + (breaches.isEmpty ? "" : "; failed --fail-if: " + breaches.joined(separator: "; ")),
                failed: !breaches.isEmpty)
            return result
        } catch {
            reporter.finish(detail: error.description, failed: true)
            throw error
        }
    }

    /// The latency p99 of the deliveries so far (each watcher thread shares its histogram twice a second).
    private func liveP99Milliseconds() -> Double? {
        guard let watchers = livePool else { return nil }
        var sum = LatencyHistogram()
        for shard in watchers.shards { sum.add(shard.shared.withLock { $0 }) }
        return sum.percentile(99).map { Double($0) / 1000 }
    }

    /// How far the run is: its publishing (or holding) time or updates so far, of those planned.
    private func fraction(_ moment: LoadProgress) -> Double? {
        switch moment.phase {
        case .connecting, .waiting: return 0
        case .draining, .done: return 1
        case .publishing, .holding:
            if let messages = options.messages, messages > 0 { return Double(moment.published) / Double(messages) }
            guard let duration = options.duration, let start = publishStartedAt else { return nil }
            return Double(MonotonicClock.nanoseconds() - start) / 1e9 / duration
        }
    }

    private func measure(progress: @escaping (LoadProgress) -> Void) throws(LoadError) -> LoadResult {
        let began = MonotonicClock.nanoseconds()
        try checkServer()
        try checkSourceAddresses()
        let before = try sampleServer()

        let watchers: WatcherPool
        do {
            watchers = try WatcherPool(options: options, origin: origin, matches: taskMatches)
        } catch {
            throw LoadError("\(error)")
        }
        livePool = watchers
        var reporter = ProgressReporter(began: began, clients: options.clients, report: progress)
        let connectStarted = MonotonicClock.nanoseconds()
        let handles = ramp(watchers, reporter: &reporter)
        awaitSnapshots(reporter: &reporter)
        let connectSeconds = seconds(MonotonicClock.nanoseconds() - connectStarted)
        let startLate = awaitStartTime(reporter: &reporter)
        let openAtStart: Int = lock.withLock {
            publishingStarted = true
            return connected
        }
        guard openAtStart > 0 else {
            watchers.shutdown()
            let reasons = lock.withLock { connectErrors.sorted { $0.value > $1.value }.first?.key } ?? "no reason given"
            throw LoadError("none of the \(options.clients) watchers could connect to \(wsURL.hostHeader): \(reasons)")
        }

        let afterConnect = try sampleServer()
        let ownCPUStart = LoadTester.ownCPUSeconds()
        let watcherCPUStart = watchers.shards.map { $0.cpuNanoseconds() }
        let publishStart = MonotonicClock.nanoseconds()
        publishStartedAt = publishStart
        let publishBegan = Date().timeIntervalSince1970
        var publisherThread: Thread?
        let publisherDone = DispatchSemaphore(value: 0)
        var publisherContext: WebSocketClientContext?
        var activePublisher: LoadPublisher?
        if options.messages != 0 {
            let publisher: LoadPublisher
            do {
                publisher = try makePublisher(&publisherContext)
            } catch {
                watchers.shutdown()
                publisherContext?.shutdown()
                throw error
            }
            activePublisher = publisher
            let thread = Thread { [self] in
                publisher.run(self, start: publishStart)
                // Read here: the thread's /proc entry goes when it ends.
                let own = LoadTester.threadCPUNanoseconds(LoadTester.currentThreadID()) ?? 0
                publisherCPUNanoseconds.store(own, ordering: .releasing)
                publisherDone.signal()
            }
            thread.name = "ringcast-load-publisher"
            thread.start()
            publisherThread = thread
        }

        // Publishing (or holding, with --messages 0) until the publisher ends or time is up.
        let holdUntil = options.duration.map { publishStart + UInt64($0 * 1e9) }
        if publisherThread != nil {
            while publisherDone.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
                if stopping {
                    publisherDone.wait()
                    break
                }
                scenarioTick(watchers, handles, publishStart: publishStart)
                reporter.tick(.publishing, snapshot())
            }
        } else {
            while !stopping, let holdUntil, MonotonicClock.nanoseconds() < holdUntil {
                scenarioTick(watchers, handles, publishStart: publishStart)
                reporter.tick(.holding, snapshot())
                usleep(20_000)
            }
        }
        let publishEnd = MonotonicClock.nanoseconds()
        if let message = publisherError.withLock({ $0 }) {
            watchers.shutdown()
            publisherContext?.shutdown()
            throw LoadError(message)
        }
        let published = publishedCount.load(ordering: .acquiring)
        let matchingPublished = countMatching(published)
        let expected = matchingPublished * openAtStart

        // Draining: until everything expected arrived, nothing arrived for a while, or time is up.
        let drainLimit = publishEnd + UInt64(options.drainTimeout * 1e9)
        let quiet = UInt64(options.quietSeconds * 1e9)
        // Watchers still on their way back are waited for too (within the drain's limit).
        while !stopping, published > 0 || lock.withLock({ away }) > 0 {
            let now = MonotonicClock.nanoseconds()
            let returning = lock.withLock { away }
            let delivered = deliveredSoFar + resumedCount.load(ordering: .relaxed)
            if now >= drainLimit || (delivered >= expected && returning == 0) { break }
            let last = max(lastDeliverySoFar, publishEnd)
            if now > last + quiet && returning == 0 { break }
            serviceReconnects(watchers, handles, now: now)
            reporter.tick(.draining, snapshot())
            usleep(10_000)
        }
        let end = MonotonicClock.nanoseconds()
        let ownCPU = LoadTester.ownCPUSeconds() - ownCPUStart
        let watcherCPU = zip(watchers.shards, watcherCPUStart).map { shard, start in
            shard.cpuNanoseconds().map { Double($0 &- (start ?? 0)) / 1e9 }
        }
        let publisherNanoseconds = publisherCPUNanoseconds.load(ordering: .acquiring)
        let publisherCPU = publisherNanoseconds > 0 ? Double(publisherNanoseconds) / 1e9 : nil
        if let message = publisherError.withLock({ $0 }) {
            // A WebSocket publisher hears of a refused update only after sending it.
            watchers.shutdown()
            publisherContext?.shutdown()
            throw LoadError(message)
        }
        let after = (try? sampleServer()) ?? nil
        reporter.tick(.done, snapshot(), force: true)

        lock.withLock { finishing = true }
        activePublisher?.finish()
        publisherContext?.shutdown()
        watchers.shutdown()
        withExtendedLifetime(handles) {}

        // The service threads have stopped: their state may be read here.
        let stats = watchers.combinedStats()
        let lastDelivery = lastDeliverySoFar
        let lastMatching = lastMatchingNumber(published)
        let finalSeen = lastMatching.map { number in (0..<options.clients).filter { stats.maxSeen[$0] >= number }.count } ?? 0
        let openCounts: [Int] = lock.withLock {
            (0..<options.clients).filter { states[$0] != .failed && states[$0] != .pending }.map { stats.delivered[$0] }
        }
        var result = LoadResult(options: options, run: run)
        lock.withLock {
            result.connected = connected
            result.failed = failed
            result.timedOut = timedOut
            result.dropped = dropped
            result.connectErrors = connectErrors
            if options.reconnects {
                result.reconnects = ReconnectFigures(
                    closed: closedByRun, back: cameBack, stillAway: away, failedAttempts: failedAttempts, backTimes: backTimes,
                    resumedUpdates: stats.resumed, stormWatchers: options.storm ? stormWatchers : nil,
                    stormSeconds: stormAt.flatMap { at in away == 0 && lastBackAt > at ? seconds(lastBackAt - at) : nil })
            }
        }
        result.connectSeconds = connectSeconds
        result.publishBegan = publishBegan
        result.startLateSeconds = startLate
        result.openAtStart = openAtStart
        result.published = published
        result.matchingPublished = matchingPublished
        result.publishSeconds = seconds(publishEnd - publishStart)
        result.expected = expected
        result.delivered = stats.totalDelivered
        result.deliverySeconds = lastDelivery > publishStart ? seconds(lastDelivery - publishStart) : 0
        result.runSeconds = seconds(end - began)
        result.measuredSeconds = seconds(end - publishStart)
        result.loadCPUSeconds = ownCPU
        if watcherCPU.allSatisfy({ $0 != nil }) { result.watcherThreadCPUSeconds = watcherCPU.compactMap { $0 } }
        result.publisherThreadCPUSeconds = publisherCPU
        result.histogram = stats.histogram
        result.timeline = stats.timeline
        result.timelineOffset = seconds(publishStart - stats.timeline.origin)
        result.frames = stats.frames
        result.dataFrames = stats.dataFrames
        result.resyncs = stats.resyncs
        result.foreignMarkers = stats.foreign
        result.errorFrames = stats.errorFrames
        result.firstErrorFrame = stats.firstErrorFrame
        result.finalValueSeenBy = finalSeen
        if options.latestValue {
            result.latestValue = stats.latestValue
            // (watcher, task) pairs whose last update, or a newer one, never arrived.
            let lastOfTask: [Int?] = (0..<options.tasks).map { task in
                guard taskMatches[task], published > task else { return nil }
                return (published - 1 - task) / options.tasks * options.tasks + task
            }
            let open: [Int] = lock.withLock { (0..<options.clients).filter { states[$0] != .failed && states[$0] != .pending } }
            var stale = 0
            for watcher in open {
                for task in 0..<options.tasks {
                    if let last = lastOfTask[task], stats.highest(watcher: watcher, task: task) < last { stale += 1 }
                }
            }
            result.staleAtEnd = stale
        }
        result.perWatcherMin = openCounts.min() ?? 0
        result.perWatcherMax = openCounts.max() ?? 0
        result.interrupted = stopping
        if let pid = options.serverPID, let before, let afterConnect, let after {
            result.server = ServerFigures(
                pid: pid, cpuSource: after.cpuSource,
                cpuSeconds: Double(after.cpuNanoseconds &- afterConnect.cpuNanoseconds) / 1e9,
                connectCPUSeconds: Double(afterConnect.cpuNanoseconds &- before.cpuNanoseconds) / 1e9,
                residentKiB: after.residentKiB, residentBeforeKiB: before.residentKiB)
        }
        return result
    }

    /// The calling thread's kernel id, from /proc/thread-self (PID/task/TID): Glibc's gettid is
    /// not visible to Swift without _GNU_SOURCE, and this is read once per thread.
    static func currentThreadID() -> Int32 {
        guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self"),
            let last = link.split(separator: "/").last, let tid = Int32(last)
        else { return 0 }
        return tid
    }

    /// One thread of this process's CPU time from its schedstat (nil: no such thread, or no schedstat).
    static func threadCPUNanoseconds(_ tid: Int32) -> UInt64? {
        guard tid > 0, let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/schedstat", encoding: .utf8),
            let first = text.split(separator: " ").first
        else { return nil }
        return UInt64(first)
    }

    /// This process's user + system CPU time: a load generator near one CPU-second per second is
    /// the bottleneck, and then the figures describe it rather than the server.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    private var wsURL: ServerURL {
        var url = options.url
        url.path = "/ws"
        return url
    }

    private var publisherURL: ServerURL { options.publishURL ?? options.url }

    private func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }

    // MARK: Before the run

    /// One request to /healthz: an unreachable server is a one-line error, not N failed watchers.
    private func checkServer() throws(LoadError) {
        let client = HTTPClient(url: options.url, tls: options.tls, timeoutSeconds: options.connectTimeout)
        let response: HTTPResponse
        do {
            response = try client.request("GET", "/healthz")
        } catch {
            throw LoadError("\(error)")
        }
        guard response.status == 200 else {
            throw LoadError("\(options.url.hostHeader)/healthz answered \(response.status): is this a Ringcast server?")
        }
    }

    /// Each --source-address must be one this machine can bind: else every watcher on it would
    /// fail, one connect error each, instead of one line that says why.
    private func checkSourceAddresses() throws(LoadError) {
        for address in options.sourceAddresses {
            do throws(CCallError) {
                try checkBindableLocalAddress(address)
            } catch {
                throw LoadError(
                    "--source-address \(address): this machine cannot bind it (\(error.detail)); give addresses it has, e.g. 127.0.0.2 to 127.255.255.254 on loopback"
                )
            }
        }
    }

    private func sampleServer() throws(LoadError) -> ProcessSample? {
        guard let pid = options.serverPID else { return nil }
        guard let sample = ProcessSample.read(pid: pid) else {
            throw LoadError("--server-pid \(pid): no such process on this machine (its /proc/\(pid) cannot be read)")
        }
        return sample
    }

    // MARK: Watchers

    /// Starts every watcher, at most `maxHandshakes` connecting at once and `rampPerSecond` a
    /// second, and returns when each is open or has failed (or timed out).
    private func ramp(_ watchers: WatcherPool, reporter: inout ProgressReporter) -> [WatcherHandle] {
        var url = wsURL
        url.path = "/ws?watch=" + options.watch
        var handles: [WatcherHandle] = []
        handles.reserveCapacity(options.clients)
        var issuedAt: [UInt64] = []
        issuedAt.reserveCapacity(options.clients)
        let start = MonotonicClock.nanoseconds()
        let timeout = UInt64(options.connectTimeout * 1e9)
        var oldestPending = 0
        var lastTimeoutCheck: UInt64 = 0
        while !stopping {
            let now = MonotonicClock.nanoseconds()
            let (pendingNow, resolved) = lock.withLock { (inFlight, connected + failed) }
            if resolved >= options.clients { break }
            var allowed = min(options.clients - handles.count, options.maxHandshakes - pendingNow)
            if options.rampPerSecond > 0 {
                let budget = Int(Double(now - start) / 1e9 * options.rampPerSecond) + 1
                allowed = min(allowed, budget - handles.count)
            }
            if allowed > 0 {
                lock.withLock { inFlight += allowed }
                for _ in 0..<allowed {
                    let handle = watchers.handle(handles.count, tester: self)
                    handles.append(handle)
                    issuedAt.append(now)
                    let connection = watchers.connect(handle, url)
                    lock.withLock { handle.connection = connection }
                }
            }
            if now - lastTimeoutCheck > 100_000_000 {
                lastTimeoutCheck = now
                let expired: [Int] = lock.withLock {
                    while oldestPending < handles.count, states[oldestPending] != .pending { oldestPending += 1 }
                    var expired: [Int] = []
                    for index in oldestPending..<handles.count where states[index] == .pending && now - issuedAt[index] > timeout + 1_000_000_000 {
                        states[index] = .failed
                        failed += 1
                        timedOut += 1
                        inFlight -= 1
                        connectErrors["no answer within \(options.connectTimeout) s", default: 0] += 1
                        expired.append(index)
                    }
                    return expired
                }
                for index in expired { lock.withLock { handles[index].connection }?.close() }
            }
            reporter.tick(.connecting, snapshot())
            usleep(allowed > 0 ? 1000 : 2000)
        }
        return handles
    }

    /// Publishing starts once every open watcher holds its first snapshot. A watcher is open when
    /// its handshake completes, but the server sends the snapshot after that: an update applied in
    /// between arrives inside the snapshot, not as an event, and would count as lost. A server that
    /// sends nothing on connect (Nchan) is waited for one second at most; any server, for the
    /// connect timeout at most.
    private func awaitSnapshots(reporter: inout ProgressReporter) {
        let open = lock.withLock { connected }
        guard open > 0 else { return }
        let start = MonotonicClock.nanoseconds()
        let limit = start + UInt64(options.connectTimeout * 1e9)
        while !stopping, snapshotted.load(ordering: .acquiring) < open {
            let now = MonotonicClock.nanoseconds()
            if now >= limit { break }
            if now - start > 1_000_000_000 && heardFrom.load(ordering: .relaxed) == 0 { break }
            reporter.tick(.connecting, snapshot())
            usleep(1000)
        }
    }

    /// With `startAt`: waits (connected) until that wall-clock time and returns how late it is now
    /// (0 when it waited; more when connecting ran past it), or nil without `startAt`.
    private func awaitStartTime(reporter: inout ProgressReporter) -> Double? {
        guard let startAt = options.startAt else { return nil }
        while !stopping {
            let left = startAt - Date().timeIntervalSince1970
            if left <= 0 { break }
            reporter.tick(.waiting, snapshot())
            usleep(UInt32(min(left, 0.01) * 1e6))
        }
        return max(0, Date().timeIntervalSince1970 - startAt)
    }

    fileprivate func watcherOpened(_ handle: WatcherHandle, _ connection: WebSocketConnection) {
        handle.shard.noteServiceThread()
        let keep: Bool = lock.withLock {
            // A returning watcher counts as open once its resume snapshot is in (`watcherBack`).
            if states[handle.index] == .returning { return true }
            guard states[handle.index] == .pending, !publishingStarted else { return false }
            states[handle.index] = .open
            connected += 1
            inFlight -= 1
            return true
        }
        if !keep { connection.close() }
    }

    fileprivate func watcherClosed(_ handle: WatcherHandle, error: String?) {
        lock.withLock {
            switch states[handle.index] {
            case .pending:
                states[handle.index] = .failed
                failed += 1
                inFlight -= 1
                connectErrors[error ?? "closed by the server before it opened", default: 0] += 1
            case .open:
                states[handle.index] = .closed
                if !finishing { dropped += 1 }
            case .leaving, .returning:
                if states[handle.index] == .returning { failedAttempts += 1 }
                guard !finishing else {
                    states[handle.index] = .closed
                    return
                }
                // As the dashboard does: a delay random in [0, min(15 s, 0.5 s·2^n)), n the
                // attempts since its last snapshot, then back with `since`.
                states[handle.index] = .away
                let ceiling = min(15.0, 0.5 * Double(1 << min(Int(attempts[handle.index]), 10)))
                attempts[handle.index] &+= 1
                let delay = Double.random(in: 0..<ceiling, using: &random)
                dueReconnects.append((MonotonicClock.nanoseconds() + UInt64(delay * 1e9), handle.index, resumeURL(handle)))
            case .failed, .closed, .away:
                break
            }
        }
        if handle.resumable {
            // The next connection's first snapshot is a resume, not a resync.
            handle.snapshots = 0
            handle.resuming = true
        }
    }

    /// The watcher's URL with its own resume point: the epoch of its hello and the last seq it had. Service thread.
    private func resumeURL(_ handle: WatcherHandle) -> ServerURL {
        var url = wsURL
        url.path = "/ws?watch=" + options.watch + (handle.epoch.map { "&since=\($0):\(handle.lastSeq)" } ?? "")
        return url
    }

    /// A returning watcher holds its resume snapshot: it is live again. Service thread.
    private func watcherBack(_ handle: WatcherHandle, at now: UInt64) {
        lock.withLock {
            guard states[handle.index] == .returning else { return }
            states[handle.index] = .open
            attempts[handle.index] = 0
            away -= 1
            cameBack += 1
            lastBackAt = now
            backTimes.record(MonotonicClock.latencyMicroseconds(sentAt: lostAt[handle.index], receivedAt: now))
        }
    }

    /// Churn and the storm, on the caller's thread: closes the watchers due to go and reopens those due back.
    private func scenarioTick(_ watchers: WatcherPool, _ handles: [WatcherHandle], publishStart: UInt64) {
        guard options.reconnects else { return }
        let now = MonotonicClock.nanoseconds()
        var leaving: [WebSocketConnection] = []
        lock.withLock {
            if options.churnPerSecond > 0 {
                let due = Int(Double(now - publishStart) / 1e9 * options.churnPerSecond) - churned
                var tries = 0
                var closing = 0
                // Random open watchers; a few misses are fine (the next tick makes them up).
                while closing < due, tries < due * 4 + 16, !handles.isEmpty {
                    tries += 1
                    let index = Int.random(in: 0..<handles.count, using: &random)
                    guard states[index] == .open, let connection = handles[index].connection else { continue }
                    states[index] = .leaving
                    lostAt[index] = now
                    away += 1
                    closedByRun += 1
                    closing += 1
                    leaving.append(connection)
                }
                churned += closing
            }
            if options.storm, stormAt == nil, now >= publishStart + stormDelay {
                stormAt = now
                for index in handles.indices where states[index] == .open {
                    guard let connection = handles[index].connection else { continue }
                    states[index] = .leaving
                    lostAt[index] = now
                    leaving.append(connection)
                }
                stormWatchers = leaving.count
                away += leaving.count
                closedByRun += leaving.count
            }
        }
        for connection in leaving { connection.close() }
        serviceReconnects(watchers, handles, now: now)
    }

    /// Halfway through publishing (or holding): the storm comes while updates flow on both sides of it.
    private var stormDelay: UInt64 {
        let planned = options.duration ?? (options.rate > 0 ? Double(options.messages ?? 0) / options.rate : 0)
        return UInt64(planned / 2 * 1e9)
    }

    /// Opens the reconnects that are due. Caller's thread.
    private func serviceReconnects(_ watchers: WatcherPool, _ handles: [WatcherHandle], now: UInt64) {
        guard options.reconnects else { return }
        let due: [(due: UInt64, index: Int, url: ServerURL)] = lock.withLock {
            guard !dueReconnects.isEmpty, !finishing else { return [] }
            let ready = dueReconnects.filter { $0.due <= now }
            guard !ready.isEmpty else { return [] }
            dueReconnects.removeAll { $0.due <= now }
            for entry in ready { states[entry.index] = .returning }
            return ready
        }
        for entry in due {
            let handle = handles[entry.index]
            let connection = watchers.connect(handle, entry.url)
            lock.withLock { handle.connection = connection }
        }
    }

    /// One frame at one watcher, on the service thread: counted without parsing the JSON.
    fileprivate func watcherReceived(_ handle: WatcherHandle, _ frame: UnsafeRawBufferPointer) {
        let now = MonotonicClock.nanoseconds()
        let snapshotsBefore = handle.snapshots
        if !handle.heard {
            handle.heard = true
            heardFrom.add(1, ordering: .relaxed)
        }
        if handle.resumable { handle.noteResumePoint(frame) }
        let resuming = handle.resuming
        let resumedBefore = handle.shard.stats.resumed
        let delivered = runBytes.withUnsafeBytes { run in
            handle.shard.stats.receive(
                frame, watcher: handle.local, at: now, sendTimes: sendTimes, run: run, snapshotsBefore: &handle.snapshots, resuming: resuming)
        }
        if snapshotsBefore == 0 && handle.snapshots == 1 {
            if resuming {
                handle.resuming = false
                let resumed = handle.shard.stats.resumed - resumedBefore
                if resumed > 0 { resumedCount.add(resumed, ordering: .relaxed) }
                watcherBack(handle, at: now)
            } else {
                snapshotted.add(1, ordering: .releasing)
            }
        }
        guard delivered > 0 else { return }
        if sharesHistograms, now - handle.shard.sharedAt > 500_000_000 {
            handle.shard.sharedAt = now
            let histogram = handle.shard.stats.histogram
            handle.shard.shared.withLock { $0 = histogram }
        }
        // Each thread its own counters: one shared by every watcher thread would bounce between cores.
        handle.shard.delivered.add(delivered, ordering: .relaxed)
        handle.shard.lastDeliveryAt.store(now, ordering: .relaxed)
    }

    /// Deliveries so far, and the last one's time, over every watcher thread. The caller's thread.
    private var deliveredSoFar: Int { livePool?.shards.reduce(0) { $0 + $1.delivered.load(ordering: .relaxed) } ?? 0 }
    private var lastDeliverySoFar: UInt64 { livePool?.shards.map { $0.lastDeliveryAt.load(ordering: .relaxed) }.max() ?? 0 }

    private func snapshot() -> (connected: Int, failed: Int, published: Int, delivered: Int) {
        let (open, failed) = lock.withLock { (connected, self.failed) }
        return (open, failed, publishedCount.load(ordering: .relaxed), deliveredSoFar)
    }

    // MARK: Publishing

    /// Which task an update number goes to, and whether the watchers' patterns match it.
    private lazy var taskMatches: [Bool] = (0..<options.tasks).map { watchSet.matches(options.taskID($0)) }

    private func countMatching(_ published: Int) -> Int { LoadTester.countMatching(published, taskMatches) }

    /// How many of updates 0..<count go to a task the watchers' patterns match (`matches`, by task).
    static func countMatching(_ count: Int, _ matches: [Bool]) -> Int {
        guard count > 0, !matches.isEmpty else { return 0 }
        let perCycle = matches.filter { $0 }.count
        return count / matches.count * perCycle + (0..<(count % matches.count)).filter { matches[$0] }.count
    }

    private func lastMatchingNumber(_ published: Int) -> Int? {
        let matches = taskMatches
        var number = published - 1
        var checked = 0
        while number >= 0, checked < options.tasks {
            if matches[number % options.tasks] { return number }
            number -= 1
            checked += 1
        }
        return nil
    }

    private func makePublisher(_ context: inout WebSocketClientContext?) throws(LoadError) -> LoadPublisher {
        switch options.publish {
        case .http, .batch:
            return LoadPublisher(http: HTTPClient(url: publisherURL, tls: options.tls, timeoutSeconds: 30), headers: authorization)
        case .ws:
            let created: WebSocketClientContext
            do {
                created = try WebSocketClientContext(
                    connectTimeoutSeconds: Int(options.connectTimeout.rounded(.up)), trustedCertificates: options.tls.effectiveCAFile,
                    insecure: options.tls.insecure)
            } catch {
                throw LoadError("\(error)")
            }
            context = created
            let listener = PublisherSocket(tester: self)
            var url = publisherURL
            // A publish-only socket (older servers: one that watches an id nobody publishes to).
            url.path = "/ws?mode=publish&watch=rcload.publisher"
            let connection = created.connect(url, headers: authorization, delegate: listener)
            guard listener.opened.wait(timeout: .now() + options.connectTimeout) == .success, listener.isOpenNow else {
                throw LoadError(
                    "the WebSocket publisher could not connect to \(publisherURL.hostHeader): \(listener.closeError ?? "no answer within \(options.connectTimeout) s")"
                )
            }
            return LoadPublisher(socket: connection, listener: listener)
        }
    }

    /// `Authorization: Bearer TOKEN` for servers that want a publisher's token.
    fileprivate var authorization: [(String, String)] { options.token.map { [("Authorization", "Bearer \($0)")] } ?? [] }

    fileprivate func publisherFailed(_ message: String) {
        publisherError.withLock { if $0 == nil { $0 = message } }
        stop()
    }

    fileprivate func published(upTo count: Int) { publishedCount.store(count, ordering: .releasing) }

    fileprivate var shouldStopPublishing: Bool { stopping }
}

/// The watchers' client contexts: `threads` of them, each on its own service thread and loop.
/// Watcher i goes to shard i % threads, where it is number i / threads of that shard's stats.
final class WatcherPool {
    let shards: [WatcherShard]
    private let clients: Int
    private let sourceAddresses: [String]

    init(options: LoadTestOptions, origin: UInt64, matches: [Bool]) throws {
        clients = options.clients
        sourceAddresses = options.sourceAddresses
        let threads = options.threads
        shards = try (0..<threads).map { shard in
            let context = try WebSocketClientContext(
                connectTimeoutSeconds: Int(options.connectTimeout.rounded(.up)), trustedCertificates: options.tls.effectiveCAFile,
                insecure: options.tls.insecure, readsFramesItself: true)
            let size = options.clients / threads + (shard < options.clients % threads ? 1 : 0)
            return WatcherShard(
                context: context,
                stats: WatcherStats(
                    clients: size, origin: origin, latestValueTasks: options.latestValue ? options.tasks : 0,
                    matches: options.reconnects ? matches : []))
        }
    }

    func handle(_ index: Int, tester: LoadTester) -> WatcherHandle {
        WatcherHandle(
            index: index, shard: shards[index % shards.count], local: index / shards.count, tester: tester, resumable: tester.options.reconnects)
    }

    func connect(_ handle: WatcherHandle, _ url: ServerURL) -> WebSocketConnection {
        let source = sourceAddresses.isEmpty ? nil : sourceAddresses[handle.index % sourceAddresses.count]
        return handle.shard.context.connect(url, sourceAddress: source, delegate: handle)
    }

    /// Stops every watcher thread (each closes its connections).
    func shutdown() { shards.forEach { $0.context.shutdown() } }

    /// Every shard's figures as one, by global watcher index. After `shutdown` only.
    func combinedStats() -> WatcherStats { WatcherStats(combining: shards.map(\.stats), clients: clients) }
}

/// One watcher thread's context and what its watchers saw.
/// @unchecked Sendable: `stats` is touched only on `context`'s service thread while the run lasts,
/// and read by the caller after the context has shut down.
final class WatcherShard: @unchecked Sendable {
    let context: WebSocketClientContext
    var stats: WatcherStats
    /// A copy of `stats.histogram`, for the p99 so far of `--report-to`; `sharedAt` (service thread) is when it was taken.
    let shared = Locked(LatencyHistogram())
    var sharedAt: UInt64 = 0
    /// This thread's deliveries so far and the last one's time, read by the caller's thread.
    let delivered = Atomic<Int>(0)
    let lastDeliveryAt = Atomic<UInt64>(0)
    /// The service thread's kernel id, learnt on its first callback, for its CPU time.
    private let threadID = Atomic<Int32>(0)

    /// On the service thread.
    func noteServiceThread() {
        if threadID.load(ordering: .relaxed) == 0 { threadID.store(LoadTester.currentThreadID(), ordering: .releasing) }
    }

    /// The service thread's CPU time so far (nil before its first watcher opened).
    func cpuNanoseconds() -> UInt64? { LoadTester.threadCPUNanoseconds(threadID.load(ordering: .acquiring)) }

    init(context: WebSocketClientContext, stats: WatcherStats) {
        self.context = context
        self.stats = stats
    }
}

/// One watcher's delegate: knows its index, in the run and in its shard. Callbacks arrive on its
/// shard's service thread.
final class WatcherHandle: WebSocketDelegate {
    let index: Int
    let shard: WatcherShard
    let local: Int
    unowned let tester: LoadTester
    /// The current connection: under the tester's lock.
    var connection: WebSocketConnection?
    /// Closed and reopened in this run (churn, storm): its resume point is kept.
    let resumable: Bool
    /// Service thread only.
    var snapshots = 0
    var heard = false
    /// The next snapshot answers a resume (`since`).
    var resuming = false
    /// The epoch of its last hello and the last seq it was sent: where it resumes from.
    var epoch: String?
    var lastSeq = 0

    init(index: Int, shard: WatcherShard, local: Int, tester: LoadTester, resumable: Bool) {
        self.index = index
        self.shard = shard
        self.local = local
        self.tester = tester
        self.resumable = resumable
    }

    /// Keeps the epoch from a hello and the newest seq of any frame (a frame's last `"seq":` is its newest).
    func noteResumePoint(_ frame: UnsafeRawBufferPointer) {
        switch LoadMarker.kind(of: frame) {
        case .hello:
            epoch = LoadMarker.stringField("epoch", in: frame) ?? epoch
            if let seq = LoadMarker.lastNumberField("seq", in: frame) { lastSeq = seq }
        case .snapshot, .events:
            if let seq = LoadMarker.lastNumberField("seq", in: frame), seq > lastSeq { lastSeq = seq }
        case .error, .heartbeat:
            break
        }
    }

    func webSocketDidOpen(_ connection: WebSocketConnection) { tester.watcherOpened(self, connection) }

    func webSocket(_ connection: WebSocketConnection, didReceiveBytes message: UnsafeRawBufferPointer) {
        tester.watcherReceived(self, message)
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        message.withUnsafeBytes { tester.watcherReceived(self, $0) }
    }

    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) { tester.watcherClosed(self, error: error) }
}

/// What the watchers saw. Service thread only while the run lasts; read by the caller after the
/// client context has shut down.
struct WatcherStats {
    var histogram = LatencyHistogram()
    var timeline: LatencyTimeline
    var maxSeen: [Int]
    var delivered: [Int]
    var totalDelivered = 0
    var frames = 0
    var dataFrames = 0
    var resyncs = 0
    var foreign = 0
    var errorFrames = 0
    var firstErrorFrame: String?
    /// With `latestValue`: per update, the time until a watcher held it or a newer value of its task.
    var latestValue = LatencyHistogram()
    /// Updates that returning watchers held by their resume snapshot instead of receiving them one
    /// by one (churn, storm): not lost, but not deliveries either.
    var resumed = 0
    /// By task: whether the watchers' patterns match it (only kept when watchers resume).
    private let matches: [Bool]
    /// With `latestValue`: the highest update number of each task each watcher holds (-1: none),
    /// watcher-major; empty without it.
    private var highestByTask: [Int32]
    private let tasks: Int

    init(clients: Int, origin: UInt64, latestValueTasks: Int = 0, matches: [Bool] = []) {
        self.matches = matches
        timeline = LatencyTimeline(origin: origin)
        maxSeen = Array(repeating: -1, count: clients)
        delivered = Array(repeating: 0, count: clients)
        tasks = latestValueTasks
        highestByTask = Array(repeating: -1, count: clients * latestValueTasks)
    }

    /// The shards' figures as one run's: watcher i is number i / N of shard i % N.
    init(combining shards: [WatcherStats], clients: Int) {
        let count = shards.count
        self.init(clients: clients, origin: shards[0].timeline.origin, latestValueTasks: shards[0].tasks, matches: shards[0].matches)
        for (number, shard) in shards.enumerated() {
            histogram.add(shard.histogram)
            timeline.add(shard.timeline)
            latestValue.add(shard.latestValue)
            totalDelivered += shard.totalDelivered
            frames += shard.frames
            dataFrames += shard.dataFrames
            resyncs += shard.resyncs
            resumed += shard.resumed
            foreign += shard.foreign
            errorFrames += shard.errorFrames
            if firstErrorFrame == nil { firstErrorFrame = shard.firstErrorFrame }
            for local in shard.maxSeen.indices {
                let watcher = local * count + number
                maxSeen[watcher] = shard.maxSeen[local]
                delivered[watcher] = shard.delivered[local]
                for task in 0..<tasks { highestByTask[watcher * tasks + task] = shard.highestByTask[local * tasks + task] }
            }
        }
    }

    /// The highest update number of `task` that `watcher` holds, or -1.
    func highest(watcher: Int, task: Int) -> Int { tasks > 0 ? Int(highestByTask[watcher * tasks + task]) : -1 }

    /// `watcher` holds update `number` as of `now` (delivered, or in a snapshot): every earlier update
    /// of the same task it did not hold yet is now superseded, and its latest-value latency ends.
    @inline(__always)
    mutating func holds(_ number: Int, watcher: Int, at now: UInt64, sendTimes: SendTimes) {
        guard tasks > 0 else { return }
        let task = number % tasks
        let slot = watcher * tasks + task
        let previous = Int(highestByTask[slot])
        guard number > previous else { return }
        highestByTask[slot] = Int32(truncatingIfNeeded: number)
        var superseded = previous < 0 ? task : previous + tasks
        while superseded <= number {
            if let sentAt = sendTimes.get(superseded) {
                latestValue.record(MonotonicClock.latencyMicroseconds(sentAt: sentAt, receivedAt: now))
            }
            superseded += tasks
        }
    }

    /// Counts one frame received by `watcher` at `now` and returns how many updates of this run it
    /// delivered. Updates are found by their marker (an array frame holds several); each one's
    /// latency is `now` minus its send time. `snapshots` is how many snapshots this watcher had
    /// before: the first is the state on connect, later ones are resyncs (conflation), whose values
    /// count as seen but not as deliveries.
    mutating func receive(
        _ frame: UnsafeRawBufferPointer, watcher: Int, at now: UInt64, sendTimes: SendTimes,
        run: UnsafeRawBufferPointer, snapshotsBefore snapshots: inout Int, resuming: Bool = false
    ) -> Int {
        frames += 1
        switch LoadMarker.kind(of: frame) {
        case .events:
            var count = 0
            var highest = maxSeen[watcher]
            var unknown = 0
            let skipped = LoadMarker.scan(frame, run: run) { number in
                guard let sentAt = sendTimes.get(number) else {
                    unknown += 1
                    return
                }
                let latency = MonotonicClock.latencyMicroseconds(sentAt: sentAt, receivedAt: now)
                histogram.record(latency)
                timeline.record(latency, receivedAt: now)
                if number > highest { highest = number }
                count += 1
                holds(number, watcher: watcher, at: now, sendTimes: sendTimes)
            }
            foreign += skipped + unknown
            guard count > 0 else { return 0 }
            maxSeen[watcher] = highest
            dataFrames += 1
            delivered[watcher] += count
            totalDelivered += count
            return count
        case .snapshot:
            snapshots += 1
            guard snapshots > 1 || resuming else { return 0 }
            if !resuming { resyncs += 1 }
            let before = maxSeen[watcher]
            var highest = before
            _ = LoadMarker.scan(frame, run: run) { number in
                if sendTimes.get(number) != nil {
                    highest = max(highest, number)
                    holds(number, watcher: watcher, at: now, sendTimes: sendTimes)
                }
            }
            maxSeen[watcher] = highest
            if resuming && highest > before {
                // What the watcher missed while away, up to the newest value its snapshot holds.
                resumed += LoadTester.countMatching(highest + 1, matches) - LoadTester.countMatching(before + 1, matches)
            }
            return 0
        case .error:
            errorFrames += 1
            if firstErrorFrame == nil { firstErrorFrame = String(decoding: frame.prefix(300), as: UTF8.self) }
            return 0
        case .hello, .heartbeat:
            return 0
        }
    }
}

/// The WebSocket publisher's delegate: tells when it is open and turns an `error` event from the
/// server (an update it refused) into the run's error.
/// @unchecked Sendable: its mutable state is written under `lock` (`closeError` is read after `opened` signals).
final class PublisherSocket: WebSocketDelegate, @unchecked Sendable {
    let opened = DispatchSemaphore(value: 0)
    unowned let tester: LoadTester
    private(set) var closeError: String?
    private let lock = NSLock()
    private var isOpen = false
    private var closing = false

    /// Closes the publisher at the end of the run (not an error).
    func finish(_ connection: WebSocketConnection) {
        lock.withLock { closing = true }
        connection.close()
    }

    init(tester: LoadTester) { self.tester = tester }

    var isOpenNow: Bool { lock.withLock { isOpen } }

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        lock.withLock { isOpen = true }
        opened.signal()
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        message.withUnsafeBytes { webSocket(connection, didReceiveBytes: $0) }
    }

    func webSocket(_ connection: WebSocketConnection, didReceiveBytes message: UnsafeRawBufferPointer) {
        if LoadMarker.kind(of: message) == .error {
            tester.publisherFailed("the server refused an update sent over WebSocket: \(String(decoding: message.prefix(300), as: UTF8.self))")
        }
    }

    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) {
        let wasOpen = lock.withLock { () -> Bool in
            closeError = error ?? "closed"
            defer { isOpen = false }
            return isOpen && !closing
        }
        if wasOpen { tester.publisherFailed("the server closed the WebSocket publisher: \(error ?? "closed")") } else { opened.signal() }
    }
}

/// Sends the updates, paced to the rate, on its own thread; records each one's send time just
/// before it leaves.
/// @unchecked Sendable: handed to the publisher thread, which alone uses it until it signals that it
/// is done; the caller calls `finish()` only after that.
final class LoadPublisher: @unchecked Sendable {
    private let http: HTTPClient?
    private let headers: [(String, String)]
    private let socket: WebSocketConnection?
    private let listener: PublisherSocket?

    init(http: HTTPClient, headers: [(String, String)]) {
        self.http = http
        self.headers = headers
        socket = nil
        listener = nil
    }

    init(socket: WebSocketConnection, listener: PublisherSocket) {
        http = nil
        headers = []
        self.socket = socket
        self.listener = listener
    }

    func run(_ tester: LoadTester, start: UInt64) {
        let options = tester.options
        let perRequest = options.publish == .http ? 1 : options.batchSize
        let limit = options.messages ?? Int.max
        let end = options.duration.map { start + UInt64($0 * 1e9) } ?? UInt64.max
        let ids = (0..<options.tasks).map { options.taskID($0) }
        let paths = options.publish == .http ? ids.map { "/api/tasks/" + $0 } : []
        var number = 0
        while number < limit, !tester.shouldStopPublishing {
            // Publishing ends at the deadline even when the server could not keep up with the rate.
            if MonotonicClock.nanoseconds() >= end { break }
            if options.rate > 0 {
                let due = start + UInt64(Double(number) / options.rate * 1e9)
                if due >= end { break }
                sleep(until: due)
            }
            let count = min(perRequest, limit - number)
            let body = encode(number..<(number + count), options: options, ids: ids, run: tester.run)
            let sentAt = MonotonicClock.nanoseconds()
            for message in number..<(number + count) { tester.sendTimes.set(message, sentAt) }
            do {
                try send(body, path: options.publish == .http ? paths[number % options.tasks] : "/api/events")
            } catch {
                tester.publisherFailed("\(error)")
                return
            }
            number += count
            tester.published(upTo: number)
        }
    }

    /// The run is over: the WebSocket publisher's close is expected, not an error. (It stays open
    /// through the drain, so that an `error` event for a refused update still reaches it.)
    func finish() {
        if let socket { listener?.finish(socket) }
    }

    private func send(_ body: [UInt8], path: String) throws {
        if let http {
            let response = try http.request("POST", path, body: body, headers: headers)
            guard response.status == 200 else {
                throw LoadError("the server refused an update: POST \(path) answered \(response.status) \(response.text.prefix(300))")
            }
        } else if let socket {
            // Back-pressure: as fast as possible means as fast as the socket drains, not an
            // ever-growing queue in this process.
            var waited = 0
            while socket.queuedMessages > 64 {
                usleep(100)
                waited += 1
                if waited > 300_000 { throw LoadError("the WebSocket publisher could not send for 30 s") }
            }
            socket.send(body)
        }
    }

    /// The body of one request or frame carrying updates `numbers`.
    private func encode(_ numbers: Range<Int>, options: LoadTestOptions, ids: [String], run: String) -> [UInt8] {
        var writer = JSONWriter(capacity: numbers.count * (options.payloadBytes + 64) + 2)
        if options.publish == .http {
            let number = numbers.lowerBound
            writer.beginObject()
            writer.key("detail")
            writer.string(LoadMarker.detail(run: run, number: number, length: options.payloadBytes))
            writer.endObject()
            return writer.bytes
        }
        let asArray = options.publish == .batch || numbers.count > 1
        if asArray { writer.beginArray() }
        for number in numbers {
            writer.beginObject()
            writer.key("type")
            writer.string("update")
            writer.key("id")
            writer.string(ids[number % options.tasks])
            writer.key("detail")
            writer.string(LoadMarker.detail(run: run, number: number, length: options.payloadBytes))
            writer.endObject()
        }
        if asArray { writer.endArray() }
        return writer.bytes
    }

    private func sleep(until due: UInt64) {
        var spec = timespec(tv_sec: Int(due / 1_000_000_000), tv_nsec: Int(due % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &spec, nil) == EINTR {}
    }
}

/// Calls the progress closure about four times a second with the delivery rate since the last call.
struct ProgressReporter {
    let began: UInt64
    let clients: Int
    let report: (LoadProgress) -> Void
    private var lastAt: UInt64 = 0
    private var lastDelivered = 0

    init(began: UInt64, clients: Int, report: @escaping (LoadProgress) -> Void) {
        self.began = began
        self.clients = clients
        self.report = report
    }

    mutating func tick(_ phase: LoadProgress.Phase, _ counts: (connected: Int, failed: Int, published: Int, delivered: Int), force: Bool = false) {
        let now = MonotonicClock.nanoseconds()
        guard force || now - lastAt >= 250_000_000 else { return }
        let interval = lastAt == 0 ? Double(now - began) / 1e9 : Double(now - lastAt) / 1e9
        let rate = interval > 0 ? Double(counts.delivered - lastDelivered) / interval : 0
        lastAt = now
        lastDelivered = counts.delivered
        report(
            LoadProgress(
                phase: phase, clients: clients, connected: counts.connected, failed: counts.failed,
                published: counts.published, delivered: counts.delivered, deliveriesPerSecond: rate,
                elapsed: Double(now - began) / 1e9))
    }
}
