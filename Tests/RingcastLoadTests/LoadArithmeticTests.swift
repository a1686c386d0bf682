import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastPlatform
import XCTest

@testable import RingcastLoad

/// The load tester's arithmetic on known inputs: percentiles, latency, marker parsing, /proc.
final class LoadArithmeticTests: XCTestCase {
    // MARK: Percentiles (nearest rank)

    func testNearestRankPercentilesOfOneToAThousand() {
        let values = Array(1...1000)
        XCTAssertEqual(Percentile.nearestRank(values, 50), 500)
        XCTAssertEqual(Percentile.nearestRank(values, 90), 900)
        XCTAssertEqual(Percentile.nearestRank(values, 99), 990)
        XCTAssertEqual(Percentile.nearestRank(values, 99.9), 999)
        XCTAssertEqual(Percentile.nearestRank(values, 100), 1000)
        XCTAssertEqual(Percentile.nearestRank(values, 0), 1, "rank is at least 1")
        XCTAssertNil(Percentile.nearestRank([Int](), 50))
    }

    func testNearestRankOnSmallSetsPicksAValueSeenNeverAnInterpolation() {
        XCTAssertEqual(Percentile.nearestRank([7], 99.9), 7)
        XCTAssertEqual(Percentile.nearestRank([1, 2], 50), 1)  // rank ⌈1⌉ = 1
        XCTAssertEqual(Percentile.nearestRank([1, 2], 50.1), 2)  // rank ⌈1.002⌉ = 2
        XCTAssertEqual(Percentile.nearestRank([10, 20, 30, 40], 75), 30)
        XCTAssertEqual(Percentile.nearestRank(Array(1...10), 99), 10)
    }

    func testHistogramGivesTheSamePercentilesAsTheExactListBelowTwoMilliseconds() {
        var histogram = LatencyHistogram()
        for value in (1...1000).shuffled() { histogram.record(UInt64(value)) }
        XCTAssertEqual(histogram.count, 1000)
        XCTAssertEqual(histogram.percentile(50), 500)
        XCTAssertEqual(histogram.percentile(90), 900)
        XCTAssertEqual(histogram.percentile(99), 990)
        XCTAssertEqual(histogram.percentile(99.9), 999)
        XCTAssertEqual(histogram.percentile(100), 1000)
        XCTAssertEqual(histogram.max, 1000)
        XCTAssertEqual(histogram.min, 1)
        XCTAssertEqual(histogram.mean!, 500.5, accuracy: 1e-9)
        XCTAssertNil(LatencyHistogram().percentile(50))
    }

    func testHistogramIsWithinAThousandthAboveTwoMillisecondsAndNeverAboveTheMax() {
        var histogram = LatencyHistogram()
        let values: [UInt64] = (1...1000).map { UInt64($0) * 1_000 + 7 }  // 1.007 ms … 1000.007 ms
        for value in values { histogram.record(value) }
        for p in [50.0, 90, 99, 99.9] {
            let exact = Double(Percentile.nearestRank(values, p)!)
            let reported = Double(histogram.percentile(p)!)
            XCTAssertGreaterThanOrEqual(reported, exact, "p\(p) rounds up within its bucket")
            XCTAssertLessThanOrEqual(reported - exact, exact / 1024 + 1, "p\(p): \(reported) vs \(exact)")
        }
        XCTAssertEqual(histogram.percentile(100), 1_000_007, "the top percentile is the exact max")
        // Every value lands in a bucket that holds it.
        for value: UInt64 in [0, 1, 2047, 2048, 2049, 4095, 4096, 123_456, 99_999_999, 1 << 39] {
            let range = LatencyHistogram.range(of: LatencyHistogram.index(of: value))
            XCTAssertTrue(range.contains(value), "\(value) not in \(range)")
            XCTAssertLessThanOrEqual(Double(range.upperBound - range.lowerBound), Double(value) / 1024 + 1)
        }
    }

    func testHistogramsAdd() {
        var a = LatencyHistogram()
        var b = LatencyHistogram()
        for value in 1...500 { a.record(UInt64(value)) }
        for value in 501...1000 { b.record(UInt64(value)) }
        a.add(b)
        XCTAssertEqual(a.count, 1000)
        XCTAssertEqual(a.percentile(99), 990)
        XCTAssertEqual(a.max, 1000)
    }

    // MARK: Latency arithmetic

    func testLatencyIsReceiveMinusSendOnTheOneClock() {
        XCTAssertEqual(MonotonicClock.latencyMicroseconds(sentAt: 5_000_000_000, receivedAt: 5_002_500_000), 2500)
        XCTAssertEqual(MonotonicClock.latencyMicroseconds(sentAt: 5_000_000_000, receivedAt: 5_000_000_999), 0, "whole microseconds, truncated")
        XCTAssertEqual(MonotonicClock.latencyMicroseconds(sentAt: 7, receivedAt: 3), 0, "never negative")
        let before = MonotonicClock.nanoseconds()
        usleep(2000)
        XCTAssertGreaterThanOrEqual(MonotonicClock.latencyMicroseconds(sentAt: before, receivedAt: MonotonicClock.nanoseconds()), 2000)
    }

    func testAFrameOfThreeUpdatesGivesThreeDeliveriesWithTheirOwnLatencies() {
        let run = "ab12cd"
        let times = SendTimes(capacity: 100)
        times.set(10, 1_000_000_000)  // sent at 1.0000 s
        times.set(11, 1_000_500_000)  // 1.0005 s
        times.set(12, 1_001_000_000)  // 1.0010 s
        var stats = WatcherStats(clients: 2, origin: 1_000_000_000)
        var snapshots = 0
        let received: UInt64 = 1_002_000_000  // all three arrive at 1.002 s
        let frame =
            "["
            + (10...12).map {
                #"{"type":"progress","seq":\#($0),"id":"rcload.t0","detail":"\#(LoadMarker.detail(run: run, number: $0, length: 40))"}"#
            }
            .joined(separator: ",") + "]"
        let delivered = receive(frame, into: &stats, watcher: 1, at: received, times: times, run: run, snapshots: &snapshots)
        XCTAssertEqual(delivered, 3)
        XCTAssertEqual(stats.totalDelivered, 3)
        XCTAssertEqual(stats.delivered, [0, 3])
        XCTAssertEqual(stats.dataFrames, 1)
        XCTAssertEqual(stats.frames, 1)
        XCTAssertEqual(stats.maxSeen[1], 12)
        XCTAssertEqual(stats.histogram.count, 3)
        XCTAssertEqual(stats.histogram.min, 1000)  // 2.0 − 1.0 ms
        XCTAssertEqual(stats.histogram.max, 2000)  // 2.0 − 0.0 ms
        XCTAssertEqual(stats.histogram.percentile(50), 1500)
        XCTAssertEqual(stats.histogram.sum, 4500)
        XCTAssertEqual(stats.timeline.slots.count, 1)
        XCTAssertEqual(stats.timeline.slots[0].count, 3)
        XCTAssertEqual(stats.timeline.slots[0].max, 2000)
    }

    func testHelloFirstSnapshotAndResyncsAreNotDeliveriesButResyncValuesCountAsSeen() {
        let run = "zz99zz"
        let times = SendTimes(capacity: 100)
        for number in 0..<5 { times.set(number, 1_000) }
        var stats = WatcherStats(clients: 1, origin: 0)
        var snapshots = 0
        // An initial snapshot holding an older update of this run is state, not a delivery.
        let snapshot = #"{"type":"snapshot","epoch":"e","seq":3,"full":true,"tasks":[{"id":"rcload.t0","detail":"rcload:zz99zz:2:"}]}"#
        XCTAssertEqual(
            receive(#"{"type":"hello","protocol":1}"#, into: &stats, watcher: 0, at: 2_000, times: times, run: run, snapshots: &snapshots), 0)
        XCTAssertEqual(receive(snapshot, into: &stats, watcher: 0, at: 2_000, times: times, run: run, snapshots: &snapshots), 0)
        XCTAssertEqual(stats.maxSeen[0], -1)
        XCTAssertEqual(stats.resyncs, 0)
        // A later snapshot is a resync: its values are seen (the final value test), not delivered.
        let resync = #"{"type":"snapshot","epoch":"e","seq":9,"full":false,"since":3,"tasks":[{"id":"rcload.t0","detail":"rcload:zz99zz:4:"}]}"#
        XCTAssertEqual(receive(resync, into: &stats, watcher: 0, at: 3_000, times: times, run: run, snapshots: &snapshots), 0)
        XCTAssertEqual(stats.resyncs, 1)
        XCTAssertEqual(stats.maxSeen[0], 4)
        XCTAssertEqual(
            receive(#"{"type":"heartbeat","now":1}"#, into: &stats, watcher: 0, at: 3_000, times: times, run: run, snapshots: &snapshots), 0)
        XCTAssertEqual(stats.frames, 4)
        XCTAssertEqual(stats.dataFrames, 0)
        XCTAssertEqual(stats.totalDelivered, 0)
        XCTAssertEqual(stats.histogram.count, 0)
    }

    func testLatestValueLatencyCountsEveryUpdateUntilItOrANewerOneOfItsTaskArrives() {
        // Two tasks, round-robin: even numbers are rcload.t0, odd ones rcload.t1.
        let run = "lv00lv"
        let times = SendTimes(capacity: 100)
        for number in 0..<8 { times.set(number, UInt64(100 + number) * 1_000_000) }  // update n sent at 100 + n ms
        var stats = WatcherStats(clients: 1, origin: 0, latestValueTasks: 2)
        var snapshots = 1  // past its first snapshot
        func event(_ n: Int) -> String { #"{"type":"progress","id":"rcload.t\#(n % 2)","detail":"rcload:lv00lv:\#(n):"}"# }
        // A window merged 0, 2 into 4 and 1 into 3: the frame at 110 ms holds 3 and 4.
        XCTAssertEqual(
            receive("[\(event(3)),\(event(4))]", into: &stats, watcher: 0, at: 110_000_000, times: times, run: run, snapshots: &snapshots), 2)
        XCTAssertEqual(stats.histogram.count, 2, "deliveries: only what arrived")
        XCTAssertEqual(stats.latestValue.count, 5, "latest value: every update 0…4 is held by 110 ms")
        XCTAssertEqual(stats.latestValue.max, 10_000, "update 0 waited 10 ms")
        XCTAssertEqual(stats.latestValue.min, 6_000, "update 4 waited 6 ms")
        XCTAssertEqual(stats.highest(watcher: 0, task: 0), 4)
        XCTAssertEqual(stats.highest(watcher: 0, task: 1), 3)
        // An older value arriving late changes nothing; a resync holding 7 settles 5 and 7.
        XCTAssertEqual(receive(event(2), into: &stats, watcher: 0, at: 111_000_000, times: times, run: run, snapshots: &snapshots), 1)
        XCTAssertEqual(stats.latestValue.count, 5)
        let resync = #"{"type":"snapshot","full":false,"tasks":[{"id":"rcload.t1","detail":"rcload:lv00lv:7:"}]}"#
        XCTAssertEqual(receive(resync, into: &stats, watcher: 0, at: 120_000_000, times: times, run: run, snapshots: &snapshots), 0)
        XCTAssertEqual(stats.latestValue.count, 7)
        XCTAssertEqual(stats.latestValue.max, 15_000, "update 5 waited from 105 to 120 ms")
        XCTAssertEqual(stats.highest(watcher: 0, task: 1), 7)
        XCTAssertEqual(WatcherStats(clients: 1, origin: 0).highest(watcher: 0, task: 0), -1, "off by default")
    }

    func testMarkersOfOtherRunsAndNumbersNeverSentAreIgnored() {
        let times = SendTimes(capacity: 100)
        times.set(1, 1_000)
        var stats = WatcherStats(clients: 1, origin: 0)
        var snapshots = 0
        let frame = #"[{"detail":"rcload:oldrun:1:"},{"detail":"rcload:abcdef:1:"},{"detail":"rcload:abcdef:77:"}]"#
        XCTAssertEqual(receive(frame, into: &stats, watcher: 0, at: 5_000, times: times, run: "abcdef", snapshots: &snapshots), 1)
        XCTAssertEqual(stats.foreign, 2)
    }

    private func receive(
        _ text: String, into stats: inout WatcherStats, watcher: Int, at now: UInt64, times: SendTimes,
        run: String, snapshots: inout Int
    ) -> Int {
        let bytes = Array(text.utf8)
        let runBytes = Array(run.utf8)
        return bytes.withUnsafeBytes { frame in
            runBytes.withUnsafeBytes { stats.receive(frame, watcher: watcher, at: now, sendTimes: times, run: $0, snapshotsBefore: &snapshots) }
        }
    }

    // MARK: Markers

    func testMarkerScanFindsEveryUpdateOfTheRunInObjectsAndArrays() {
        let run = "k3x9qa"
        func numbers(_ text: String) -> (found: [Int], foreign: Int) {
            var found: [Int] = []
            let foreign = LoadMarker.scan(Array(text.utf8), run: run) { found.append($0) }
            return (found, foreign)
        }
        let one = #"{"type":"progress","seq":5,"id":"rcload.t0","title":"rcload.t0","detail":"rcload:k3x9qa:41:xxxxxxxx","state":"running"}"#
        XCTAssertEqual(numbers(one).found, [41])
        XCTAssertEqual(numbers(one).foreign, 0)
        let array =
            "[" + (0..<256).map { #"{"type":"update","id":"rcload.t\#($0 % 3)","detail":"rcload:k3x9qa:\#($0 + 1000):"}"# }.joined(separator: ",")
            + "]"
        XCTAssertEqual(numbers(array).found, Array(1000..<1256))
        // The reference server's shape, and padding of any length.
        let reference = #"{"type":"progress","seq":9,"id":"rcload.t1","detail":"\#(LoadMarker.detail(run: run, number: 123_456_789, length: 500))"}"#
        XCTAssertEqual(numbers(reference).found, [123_456_789])
        XCTAssertEqual(LoadMarker.detail(run: run, number: 3, length: 100).utf8.count, 100)
        XCTAssertEqual(LoadMarker.detail(run: run, number: 3, length: 0), "rcload:k3x9qa:3:")
        // Not markers: another run, no digits, no closing colon, a frame cut short.
        XCTAssertEqual(numbers(#"{"detail":"rcload:other1:5:"}"#).found, [])
        XCTAssertEqual(numbers(#"{"detail":"rcload:other1:5:"}"#).foreign, 1)
        XCTAssertEqual(numbers(#"{"detail":"rcload:k3x9qa::"}"#).found, [])
        XCTAssertEqual(numbers(#"{"detail":"rcload:k3x9qa:12"}"#).found, [])
        XCTAssertEqual(numbers(#"rcload:k3x9qa:12"#).found, [])
        XCTAssertEqual(numbers(#"{"title":"rcload","detail":"cc rc rcloa rcload"}"#).found, [])
        XCTAssertEqual(numbers("").found, [])
    }

    func testFrameKindsFromTheFirstBytes() {
        XCTAssertEqual(LoadMarker.kind(of: Array(#"{"type":"hello","protocol":1}"#.utf8)), .hello)
        XCTAssertEqual(LoadMarker.kind(of: Array(#"{"type":"snapshot","epoch":"ref","seq":0,"tasks":[]}"#.utf8)), .snapshot)
        XCTAssertEqual(LoadMarker.kind(of: Array(#"{"type":"heartbeat","now":1}"#.utf8)), .heartbeat)
        XCTAssertEqual(LoadMarker.kind(of: Array(#"{"type":"error","error":"invalid_field"}"#.utf8)), .error)
        XCTAssertEqual(LoadMarker.kind(of: Array(#"{"type":"progress","seq":1}"#.utf8)), .events)
        XCTAssertEqual(LoadMarker.kind(of: Array(#"[{"type":"snapshot"}]"#.utf8)), .events, "arrays carry events")
        XCTAssertEqual(LoadMarker.kind(of: Array("{}".utf8)), .events)
    }

    func testSendTimesAreFoundByNumberAcrossChunks() {
        let times = SendTimes(capacity: 200_000)
        XCTAssertNil(times.get(5))
        XCTAssertTrue(times.set(5, 42))
        XCTAssertTrue(times.set(150_000, 43))
        XCTAssertFalse(times.set(200_000, 44))
        XCTAssertEqual(times.get(5), 42)
        XCTAssertEqual(times.get(150_000), 43)
        XCTAssertNil(times.get(150_001))
        XCTAssertNil(times.get(-1))
        XCTAssertNil(times.get(10_000_000))
    }

    // MARK: Latency over time

    func testTimelineSlotsByReceiveTimeWithCoarsePercentiles() {
        var timeline = LatencyTimeline(origin: 1_000_000_000)
        for value in 1...100 { timeline.record(UInt64(value) * 100, receivedAt: 1_050_000_000) }  // slot 0
        timeline.record(5_000, receivedAt: 1_350_000_000)  // slot 3
        XCTAssertEqual(timeline.slots.count, 4)
        XCTAssertEqual(timeline.slots[0].count, 100)
        XCTAssertEqual(timeline.slots[0].max, 10_000)
        let p50 = Double(timeline.slots[0].percentile(50)!)
        XCTAssertEqual(p50, 5_000, accuracy: 5_000 * 0.25, "coarse buckets: within a quarter octave")
        XCTAssertEqual(timeline.slots[0].percentile(100), 10_000)
        XCTAssertEqual(timeline.slots[1].count, 0)
        XCTAssertNil(timeline.slots[1].percentile(50))
        XCTAssertEqual(timeline.slots[3].percentile(99), 5_000)
        for value: UInt64 in [2, 3, 4, 5, 7, 8, 100, 1000, 123_456] {
            XCTAssertGreaterThanOrEqual(LatencyTimeline.upperEdge(of: LatencyTimeline.coarseIndex(value)), value)
        }
    }

    // MARK: /proc

    func testCPUTicksAndResidentMemoryFromProc() {
        // A command name with spaces and a parenthesis, as /proc/PID/stat shows it.
        let stat = "4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 3 0 100 200000 3000 18446744073709551615"
        XCTAssertEqual(ProcessSample.parseCPUTicks(stat: stat), 325)
        XCTAssertNil(ProcessSample.parseCPUTicks(stat: "garbage"))
        let status = "Name:\tringcast\nVmPeak:\t  200000 kB\nVmRSS:\t   24284 kB\nThreads:\t3\n"
        XCTAssertEqual(ProcessSample.parseResidentKiB(status: status), 24284)
        XCTAssertNil(ProcessSample.parseResidentKiB(status: "Name:\tx\n"))
        // This process reads itself: CPU grows with work, memory is there.
        let pid = getpid()
        let before = ProcessSample.read(pid: pid)!
        var sink = 0.0
        for index in 0..<3_000_000 { sink += sqrt(Double(index)) }
        XCTAssertGreaterThan(sink, 0)
        let after = ProcessSample.read(pid: pid)!
        XCTAssertGreaterThan(after.cpuNanoseconds, before.cpuNanoseconds)
        XCTAssertGreaterThan(after.residentKiB, 1000)
        XCTAssertNil(ProcessSample.read(pid: Int32.max))
    }

    // MARK: Figures of a result

    func testLossRatesAndPerDeliveryFiguresOfAResult() {
        var result = LoadResult(options: LoadTestOptions(url: ServerURL("http://127.0.0.1:9")!), run: "abcdef")
        result.expected = 10_000
        result.delivered = 9_900
        result.dataFrames = 4_950
        result.deliverySeconds = 2
        result.connected = 100
        result.server = ServerFigures(
            pid: 1, cpuSource: "schedstat", cpuSeconds: 0.099, connectCPUSeconds: 0.01,
            residentKiB: 30_000, residentBeforeKiB: 20_000)
        XCTAssertEqual(result.loss, 100)
        XCTAssertEqual(result.lossPercent, 1, accuracy: 1e-12)
        XCTAssertEqual(result.deliveriesPerSecond!, 4_950, accuracy: 1e-9)
        XCTAssertEqual(result.eventsPerFrame!, 2, accuracy: 1e-12)
        XCTAssertEqual(result.cpuMillisecondsPer1000!, 10, accuracy: 1e-9)  // 99 ms / 9.9 thousand
        XCTAssertEqual(result.deliveriesPerCPUSecond!, 100_000, accuracy: 1e-6)
        XCTAssertEqual(result.residentPerWatcherKiB!, 100, accuracy: 1e-12)
        result.delivered = 10_500  // more than expected is not negative loss
        XCTAssertEqual(result.loss, 0)
    }

    func testOptionsAUserCanGetWrongAreRefusedWithAMessage() {
        let url = ServerURL("http://127.0.0.1:8080")!
        func refusal(_ change: (inout LoadTestOptions) -> Void) -> String? {
            var options = LoadTestOptions(url: url)
            change(&options)
            do {
                try options.validate()
                return nil
            } catch { return error.description }
        }
        XCTAssertNil(refusal { _ in })
        XCTAssertNotNil(refusal { $0.clients = 0 })
        XCTAssertNotNil(refusal { $0.rate = -1 })
        XCTAssertNotNil(
            refusal {
                $0.rate = 0
                $0.duration = nil
                $0.messages = nil
            })
        XCTAssertNotNil(
            refusal {
                $0.messages = 0
                $0.duration = nil
            })
        XCTAssertNil(
            refusal {
                $0.messages = 0
                $0.duration = 1
            })
        XCTAssertNotNil(refusal { $0.batchSize = 5 })  // http sends one per request
        XCTAssertNil(
            refusal {
                $0.publish = .batch
                $0.batchSize = 5
            })
        XCTAssertNotNil(refusal { $0.watch = "bad pattern!" })
        XCTAssertNotNil(refusal { $0.tasks = 0 })
        XCTAssertNil(refusal { $0.url = ServerURL("https://example.org")! }, "https and wss are taken")
        XCTAssertNotNil(refusal { $0.url = ServerURL("http://127.0.0.1:8080/api/tasks")! })
        XCTAssertNil(refusal { $0.url = ServerURL("ws://127.0.0.1:8080/ws")! })
    }
}
