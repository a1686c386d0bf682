import Foundation
import RingcastCore
import RingcastPlatform

// Runs on several machines (or several processes of one) added up: `ringcast load merge A.json B.json`.
// Each run times only its own publisher's updates (one clock per process), so counts add, the
// latency histograms add bucket by bucket, and every percentile comes from the added histogram:
// exactly what one run over the union of the latencies would report, never an average of percentiles.

extension LoadResult {
    /// A run as its `--json` printed it. Throws a message naming what is missing.
    package init(json: JSONValue, source: String) throws(LoadError) {
        func number(_ key: String) throws(LoadError) -> Double {
            guard let value = json[key]?.numberValue else {
                throw LoadError("\(source): no \"\(key)\" number; give files that `ringcast load --json` wrote")
            }
            return value
        }
        func count(_ key: String) throws(LoadError) -> Int { Int(try number(key)) }
        guard let urlText = json["url"]?.stringValue, let url = ServerURL(urlText), let run = json["run"]?.stringValue else {
            throw LoadError("\(source): no \"url\" and \"run\"; give files that `ringcast load --json` wrote")
        }
        var options = LoadTestOptions(url: url)
        options.clients = try count("clients")
        options.threads = json["threads"]?.numberValue.map { Int($0) } ?? 1
        options.rate = try number("rate")
        options.duration = json["duration"]?.numberValue
        options.messages = json["messages"]?.numberValue.map { Int($0) }
        options.payloadBytes = try count("payloadBytes")
        options.watch = json["watch"]?.stringValue ?? "*"
        options.tasks = try count("tasks")
        options.publish = json["publish"]?.stringValue.flatMap(LoadTestOptions.PublishMode.init(rawValue:)) ?? .http
        options.batchSize = try count("batchSize")
        options.churnPerSecond = json["reconnects"]?["churnPerSecond"]?.numberValue ?? 0
        options.storm = json["reconnects"]?["storm"]?.boolValue ?? false
        self.init(options: options, run: run)
        guard let histogram = json["latencyHistogram"] else {
            throw LoadError("\(source): no \"latencyHistogram\"; it was written by an older `ringcast load`: run it again with this one")
        }
        self.histogram = try LoadResult.histogram(histogram, source: source)
        if let figures = json["reconnects"] {
            func figure(_ key: String) throws(LoadError) -> Int {
                guard let value = figures[key]?.numberValue else {
                    throw LoadError("\(source): no \"reconnects.\(key)\" number; give files that `ringcast load --json` wrote")
                }
                return Int(value)
            }
            var r = ReconnectFigures()
            r.closed = try figure("closed")
            r.back = try figure("back")
            r.stillAway = try figure("stillAway")
            r.failedAttempts = try figure("failedAttempts")
            r.resumedUpdates = try figure("resumedUpdates")
            if let times = figures["backHistogram"] { r.backTimes = try LoadResult.histogram(times, source: source) }
            r.stormWatchers = figures["stormWatchers"]?.numberValue.map { Int($0) }
            r.stormSeconds = figures["allLiveSeconds"]?.numberValue
            reconnects = r
        }
        connected = try count("connected")
        failed = try count("failed")
        timedOut = try count("timedOut")
        dropped = try count("dropped")
        connectSeconds = try number("connectSeconds")
        published = try count("published")
        publishSeconds = try number("publishSeconds")
        expected = try count("expected")
        delivered = try count("delivered")
        frames = try count("frames")
        dataFrames = try count("dataFrames")
        resyncs = try count("resyncs")
        finalValueSeenBy = try count("finalValueSeenBy")
        perWatcherMin = try count("perWatcherMin")
        perWatcherMax = try count("perWatcherMax")
        foreignMarkers = try count("foreignMarkers")
        errorFrames = try count("errorFrames")
        measuredSeconds = try number("measuredSeconds")
        loadCPUSeconds = try number("loadCpuSeconds")
        interrupted = json["interrupted"]?.boolValue ?? false
        publishBegan = json["publishBegan"]?.numberValue
        mergedRuns = json["runs"]?.arrayValue?.compactMap(\.stringValue) ?? []
        openAtStart = try count("openAtStart")
        matchingPublished = try count("matchingPublished")
        deliverySeconds = try number("deliverySeconds")
        runSeconds = try number("runSeconds")
        if case .object(let errors)? = json["connectErrors"] {
            for (reason, n) in errors { connectErrors[reason, default: 0] += Int(n.numberValue ?? 0) }
        }
    }

    /// A histogram as `encode` wrote it. Throws naming what is wrong.
    static func histogram(_ json: JSONValue, source: String) throws(LoadError) -> LatencyHistogram {
        guard let buckets = json["buckets"]?.arrayValue, let sum = json["sum"]?.numberValue, let min = json["min"]?.numberValue,
            let max = json["max"]?.numberValue
        else { throw LoadError("\(source): a histogram without buckets, sum, min and max; give files that `ringcast load --json` wrote") }
        var pairs: [(lower: UInt64, count: UInt64)] = []
        for bucket in buckets {
            guard let pair = bucket.arrayValue, pair.count == 2, let lower = pair[0].numberValue, let n = pair[1].numberValue, lower >= 0, n >= 0
            else { throw LoadError("\(source): a latency bucket is not [lowest µs, count]") }
            pairs.append((UInt64(lower), UInt64(n)))
        }
        guard let parsed = LatencyHistogram(buckets: pairs, sum: UInt64(sum), min: UInt64(min), max: UInt64(max)) else {
            throw LoadError("\(source): its latency buckets are not the ones `ringcast load` keeps")
        }
        return parsed
    }

    /// Several runs added up: counts summed, histograms added, durations the longest run's (they
    /// ran side by side), so deliveries per second is the runs' total rate.
    package static func merge(_ runs: [LoadResult], failIf: LoadThresholds? = nil) -> LoadResult {
        precondition(!runs.isEmpty, "merge needs a run")
        var options = runs[0].options
        options.clients = runs.map(\.options.clients).reduce(0, +)
        options.threads = runs.map(\.options.threads).reduce(0, +)
        options.rate = runs.map(\.options.rate).reduce(0, +)
        options.messages = runs.allSatisfy { $0.options.messages != nil } ? runs.compactMap(\.options.messages).reduce(0, +) : nil
        options.failIf = failIf
        let ids = runs.flatMap { $0.mergedRuns.isEmpty ? [$0.run] : $0.mergedRuns }
        var merged = LoadResult(options: options, run: ids.joined(separator: "+"))
        merged.mergedRuns = ids
        for run in runs {
            merged.connected += run.connected
            merged.failed += run.failed
            merged.timedOut += run.timedOut
            merged.dropped += run.dropped
            for (reason, n) in run.connectErrors { merged.connectErrors[reason, default: 0] += n }
            merged.openAtStart += run.openAtStart
            merged.published += run.published
            merged.matchingPublished += run.matchingPublished
            merged.expected += run.expected
            merged.delivered += run.delivered
            merged.histogram.add(run.histogram)
            merged.frames += run.frames
            merged.dataFrames += run.dataFrames
            merged.resyncs += run.resyncs
            merged.foreignMarkers += run.foreignMarkers
            merged.errorFrames += run.errorFrames
            merged.finalValueSeenBy += run.finalValueSeenBy
            merged.loadCPUSeconds += run.loadCPUSeconds
            merged.interrupted = merged.interrupted || run.interrupted
            if let r = run.reconnects {
                var sum = merged.reconnects ?? ReconnectFigures()
                sum.closed += r.closed
                sum.back += r.back
                sum.stillAway += r.stillAway
                sum.failedAttempts += r.failedAttempts
                sum.resumedUpdates += r.resumedUpdates
                sum.backTimes.add(r.backTimes)
                if let watchers = r.stormWatchers { sum.stormWatchers = (sum.stormWatchers ?? 0) + watchers }
                merged.reconnects = sum
            }
        }
        // The storms of runs started together: all live once the slowest run's watchers were.
        if merged.reconnects?.stormWatchers != nil {
            let times = runs.map { $0.reconnects?.stormSeconds }
            merged.reconnects?.stormSeconds = times.contains { $0 == nil } ? nil : times.compactMap { $0 }.max()
        }
        merged.connectSeconds = runs.map(\.connectSeconds).max() ?? 0
        merged.publishSeconds = runs.map(\.publishSeconds).max() ?? 0
        merged.deliverySeconds = runs.map(\.deliverySeconds).max() ?? 0
        merged.measuredSeconds = runs.map(\.measuredSeconds).max() ?? 0
        merged.runSeconds = runs.map(\.runSeconds).max() ?? 0
        merged.perWatcherMin = runs.map(\.perWatcherMin).min() ?? 0
        merged.perWatcherMax = runs.map(\.perWatcherMax).max() ?? 0
        merged.publishBegan = runs.compactMap(\.publishBegan).min()
        return merged
    }
}
