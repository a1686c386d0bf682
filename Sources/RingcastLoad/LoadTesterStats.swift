import Foundation

// The load tester's arithmetic: one clock, latency histograms, percentiles, the marker it finds in
// frames, and what /proc says about the server. Pure values, no threads; unit-tested on known inputs.

/// Percentiles by the nearest-rank method: the p-th percentile of N sorted values is the value at
/// rank ⌈p/100 · N⌉ (1-based), so it is always one of the values seen, never an interpolation.
/// For 1…1000: p50 = 500, p90 = 900, p99 = 990, p99.9 = 999, p100 = max = 1000.
package enum Percentile {
    package static let reported: [Double] = [50, 90, 99, 99.9]

    /// The 1-based rank nearest-rank picks for percentile `p` of `count` values.
    package static func rank(_ p: Double, count: Int) -> Int {
        guard count > 0 else { return 0 }
        // The small epsilon keeps 99.9 % of 1000 at rank 999, not 1000 from binary rounding.
        let exact = p / 100 * Double(count)
        return min(count, max(1, Int((exact - 1e-9).rounded(.up))))
    }

    /// Nearest-rank percentile of values already sorted ascending.
    package static func nearestRank<T>(_ sorted: [T], _ p: Double) -> T? {
        guard !sorted.isEmpty else { return nil }
        return sorted[rank(p, count: sorted.count) - 1]
    }
}

/// Latencies in microseconds, counted in buckets that are exact below 2 048 µs and within 1/1024
/// (0.1 %) above, up to 2^40 µs; percentiles are nearest-rank over the buckets and report a bucket's
/// highest value, never above the largest value recorded. Fixed size (32 Ki buckets), so recording
/// a hundred million deliveries costs no memory that grows.
package struct LatencyHistogram: Sendable {
    static let exactBits = 11  // values below 2^11 have a bucket each
    static let exactLimit: UInt64 = 1 << exactBits
    static let halfBucket: UInt64 = exactLimit / 2  // buckets per doubling above the exact range
    static let maxValue: UInt64 = (1 << 40) - 1
    static let bucketCount = index(of: maxValue) + 1

    package private(set) var counts: [UInt64]
    package private(set) var count: UInt64 = 0
    package private(set) var sum: UInt64 = 0
    package private(set) var min: UInt64 = .max
    package private(set) var max: UInt64 = 0

    package init() { counts = Array(repeating: 0, count: LatencyHistogram.bucketCount) }

    /// A histogram as another process wrote it (`--json`): each non-empty bucket by its lowest
    /// value, with the exact sum, min and max. Nil when a bucket is not one of ours or the counts
    /// do not add up (a file edited by hand, or from a tool with other buckets).
    package init?(buckets: [(lower: UInt64, count: UInt64)], sum: UInt64, min: UInt64, max: UInt64) {
        self.init()
        for bucket in buckets {
            guard bucket.lower <= LatencyHistogram.maxValue else { return nil }
            let index = LatencyHistogram.index(of: bucket.lower)
            guard LatencyHistogram.range(of: index).lowerBound == bucket.lower else { return nil }
            counts[index] += bucket.count
            count += bucket.count
        }
        guard count == 0 || (min <= max && LatencyHistogram.index(of: min) <= LatencyHistogram.index(of: max)) else { return nil }
        self.sum = sum
        self.min = count > 0 ? min : .max
        self.max = count > 0 ? max : 0
    }

    @inline(__always)
    static func index(of value: UInt64) -> Int {
        if value < exactLimit { return Int(value) }
        let shift = (63 - value.leadingZeroBitCount) - (exactBits - 1)  // value >> shift is in 1024..<2048
        return Int(exactLimit) + (shift - 1) * Int(halfBucket) + Int((value >> UInt64(shift)) - halfBucket)
    }

    /// The smallest and largest value that land in bucket `index`.
    static func range(of index: Int) -> ClosedRange<UInt64> {
        if index < Int(exactLimit) { return UInt64(index)...UInt64(index) }
        let above = index - Int(exactLimit)
        let shift = above / Int(halfBucket) + 1
        let lower = (halfBucket + UInt64(above % Int(halfBucket))) << UInt64(shift)
        return lower...(lower + (1 << UInt64(shift)) - 1)
    }

    @inline(__always)
    package mutating func record(_ microseconds: UInt64, times: UInt64 = 1) {
        let value = Swift.min(microseconds, LatencyHistogram.maxValue)
        counts[LatencyHistogram.index(of: value)] &+= times
        count &+= times
        sum &+= value &* times
        if value < min { min = value }
        if value > max { max = value }
    }

    package mutating func add(_ other: LatencyHistogram) {
        guard other.count > 0 else { return }
        for index in other.counts.indices where other.counts[index] > 0 { counts[index] += other.counts[index] }
        count += other.count
        sum += other.sum
        min = Swift.min(min, other.min)
        max = Swift.max(max, other.max)
    }

    /// Nearest-rank percentile in microseconds (nil when nothing was recorded).
    package func percentile(_ p: Double) -> UInt64? {
        guard count > 0 else { return nil }
        let rank = UInt64(Percentile.rank(p, count: Int(clamping: count)))
        var seen: UInt64 = 0
        for (index, bucketCount) in counts.enumerated() where bucketCount > 0 {
            seen += bucketCount
            if seen >= rank { return Swift.min(LatencyHistogram.range(of: index).upperBound, max) }
        }
        return max
    }

    package var mean: Double? { count > 0 ? Double(sum) / Double(count) : nil }

    /// Non-empty buckets as (lowest value, highest value, count), ascending: what a report plots.
    package var nonEmptyBuckets: [(lower: UInt64, upper: UInt64, count: UInt64)] {
        counts.indices.compactMap { index in
            guard counts[index] > 0 else { return nil }
            let range = LatencyHistogram.range(of: index)
            return (range.lowerBound, range.upperBound, counts[index])
        }
    }
}

/// Latency over time: one coarse histogram (4 buckets per doubling, ±10 %) per 100 ms slot of
/// receive time, counted from the start of publishing. Enough for p50/p99/max lines in a report.
package struct LatencyTimeline: Sendable {
    package static let slotNanoseconds: UInt64 = 100_000_000
    package static let maxSlots = 36_000  // an hour; later deliveries land in the last slot
    static let bucketsPerSlot = 168  // 4 per doubling up to 2^42 µs

    package struct Slot: Sendable {
        package var count: UInt32 = 0
        package var max: UInt64 = 0
        var buckets: [UInt32] = Array(repeating: 0, count: LatencyTimeline.bucketsPerSlot)

        /// Nearest-rank percentile within the slot, as the upper edge of a coarse bucket.
        package func percentile(_ p: Double) -> UInt64? {
            guard count > 0 else { return nil }
            let rank = UInt32(Percentile.rank(p, count: Int(count)))
            var seen: UInt32 = 0
            for (index, n) in buckets.enumerated() where n > 0 {
                seen += n
                if seen >= rank { return Swift.min(LatencyTimeline.upperEdge(of: index), max) }
            }
            return max
        }
    }

    package let origin: UInt64
    package private(set) var slots: [Slot] = []

    package init(origin: UInt64) { self.origin = origin }

    @inline(__always)
    static func coarseIndex(_ microseconds: UInt64) -> Int {
        guard microseconds > 1 else { return 0 }
        let octave = 63 - microseconds.leadingZeroBitCount  // 2^octave ≤ value
        let quarter = Int(((microseconds << 2) >> UInt64(octave)) & 3)  // the next two bits
        return Swift.min(bucketsPerSlot - 1, octave * 4 + quarter)
    }

    static func upperEdge(of index: Int) -> UInt64 {
        let octave = UInt64(index / 4)
        let quarter = UInt64(index % 4)
        let lower = ((4 + quarter) << octave) >> 2
        return Swift.max(lower, (((5 + quarter) << octave) >> 2) - 1)
    }

    /// Adds another timeline of the same origin (another watcher thread's), slot by slot.
    package mutating func add(_ other: LatencyTimeline) {
        precondition(other.origin == origin, "timelines of one run share its origin")
        while slots.count < other.slots.count { slots.append(Slot()) }
        for (index, slot) in other.slots.enumerated() where slot.count > 0 {
            slots[index].count &+= slot.count
            slots[index].max = Swift.max(slots[index].max, slot.max)
            for bucket in slot.buckets.indices { slots[index].buckets[bucket] &+= slot.buckets[bucket] }
        }
    }

    @inline(__always)
    package mutating func record(_ microseconds: UInt64, receivedAt: UInt64, times: UInt32 = 1) {
        let offset = receivedAt > origin ? receivedAt - origin : 0
        let slot = Swift.min(Int(offset / LatencyTimeline.slotNanoseconds), LatencyTimeline.maxSlots - 1)
        while slots.count <= slot { slots.append(Slot()) }
        slots[slot].count &+= times
        slots[slot].buckets[LatencyTimeline.coarseIndex(microseconds)] &+= times
        if microseconds > slots[slot].max { slots[slot].max = microseconds }
    }
}

/// The mark the publisher puts in every update's `detail`: `rcload:RUN:N:` then padding, where RUN
/// names the run (so state left by earlier runs is not counted) and N is the message number that
/// indexes the send times. Watchers find it by scanning the frame's bytes, not by parsing JSON.
package enum LoadMarker {
    package static let prefix: [UInt8] = Array("rcload:".utf8)
    package static let runLength = 6

    package static func newRunID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<runLength).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    /// The detail text for message `number`, padded with `x` to at least `length` bytes.
    package static func detail(run: String, number: Int, length: Int) -> String {
        let mark = "rcload:\(run):\(number):"
        return mark.count >= length ? mark : mark + String(repeating: "x", count: length - mark.count)
    }

    /// What kind of frame this is, from its first bytes: watchers count only `.events` frames as
    /// deliveries; a `.snapshot` carries state (a resync when it is not the first).
    package enum FrameKind: Equatable, Sendable { case events, hello, snapshot, heartbeat, error }

    package static func kind(of frame: UnsafeRawBufferPointer) -> FrameKind {
        // Both servers write "type" first: {"type":"snapshot",… or [{"type":"progress",…
        func starts(_ text: StaticString) -> Bool {
            frame.count >= text.utf8CodeUnitCount && memcmp(frame.baseAddress!, text.utf8Start, text.utf8CodeUnitCount) == 0
        }
        if starts("{\"type\":\"snapshot\"") { return .snapshot }
        if starts("{\"type\":\"hello\"") { return .hello }
        if starts("{\"type\":\"heartbeat\"") { return .heartbeat }
        if starts("{\"type\":\"error\"") { return .error }
        return .events
    }

    /// Calls `found` with the message number of every marker of run `run` in `frame`, in order, and
    /// returns how many markers of other runs it skipped. An array frame holds several.
    @inline(__always)
    package static func scan(_ frame: UnsafeRawBufferPointer, run: UnsafeRawBufferPointer, _ found: (Int) -> Void) -> Int {
        // "rcload:" found by its 'c' with memchr (a few hits per event), then checked around it.
        guard let base = frame.baseAddress, frame.count >= prefix.count + runLength + 2 else { return 0 }
        let end = frame.count
        var foreign = 0
        var offset = 1
        while offset < end {
            guard let hit = memchr(base + offset, Int32(UInt8(ascii: "c")), end - offset) else { break }
            let c = base.distance(to: UnsafeRawPointer(hit))
            offset = c + 1
            guard frame[c - 1] == UInt8(ascii: "r"), c + 6 <= end, memcmp(base + c + 1, "load:", 5) == 0 else { continue }
            var position = c + 6
            guard position + runLength + 2 <= end,
                memcmp(base + position, run.baseAddress!, runLength) == 0,
                frame[position + runLength] == UInt8(ascii: ":")
            else {
                foreign += 1
                continue
            }
            position += runLength + 1
            var number = 0
            var digits = 0
            while position < end, digits < 18 {
                let byte = frame[position]
                guard byte >= 48 && byte <= 57 else { break }
                number = number * 10 + Int(byte - 48)
                digits += 1
                position += 1
            }
            offset = position
            if digits > 0, position < end, frame[position] == UInt8(ascii: ":") { found(number) } else { foreign += 1 }
        }
        return foreign
    }

    /// `scan` over bytes in an array (tests, and messages that arrived in pieces).
    package static func scan(_ frame: [UInt8], run: String, _ found: (Int) -> Void) -> Int {
        let runBytes = Array(run.utf8)
        return frame.withUnsafeBytes { bytes in runBytes.withUnsafeBytes { scan(bytes, run: $0, found) } }
    }

    package static func kind(of frame: [UInt8]) -> FrameKind { frame.withUnsafeBytes { kind(of: $0) } }

    /// Where the last `"NAME":` of `frame` ends (searched from the end: an array's newest event is
    /// its last), or nil.
    private static func lastValueOffset(_ name: String, in frame: UnsafeRawBufferPointer) -> Int? {
        let key = Array("\"\(name)\":".utf8)
        guard frame.count >= key.count else { return nil }
        var start = frame.count - key.count
        while start >= 0 {
            if frame[start] == key[0] && frame[start + 1] == key[1] && zip(key.indices, key).allSatisfy({ frame[start + $0] == $1 }) {
                return start + key.count
            }
            start -= 1
        }
        return nil
    }

    /// The whole number after the last `"NAME":` of `frame` (a seq), or nil.
    package static func lastNumberField(_ name: String, in frame: UnsafeRawBufferPointer) -> Int? {
        guard var position = lastValueOffset(name, in: frame) else { return nil }
        var number = 0
        var digits = 0
        while position < frame.count, digits < 18, frame[position] >= 48, frame[position] <= 57 {
            number = number * 10 + Int(frame[position] - 48)
            digits += 1
            position += 1
        }
        return digits > 0 ? number : nil
    }

    /// The plain string after the last `"NAME":` of `frame` (an epoch: no escapes), or nil.
    package static func stringField(_ name: String, in frame: UnsafeRawBufferPointer) -> String? {
        guard let start = lastValueOffset(name, in: frame), start < frame.count, frame[start] == UInt8(ascii: "\"") else { return nil }
        var end = start + 1
        while end < frame.count, frame[end] != UInt8(ascii: "\""), frame[end] != UInt8(ascii: "\\"), end - start < 128 { end += 1 }
        guard end < frame.count, frame[end] == UInt8(ascii: "\"") else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: frame[(start + 1)..<end]), as: UTF8.self)
    }
}

/// Send times by message number, written by the publisher and read by the watchers' thread.
/// Storage is chunked and never moves: a chunk is allocated before any message in it is sent, so a
/// reader that learned the number from the server (after the send) finds the time in place.
/// @unchecked Sendable: one writer thread; a slot is read only after its number came back from the server.
package final class SendTimes: @unchecked Sendable {
    static let chunkBits = 16
    static let chunkSize = 1 << chunkBits
    /// Room for 2^28 updates (the table of chunk pointers is 32 KiB; chunks come as used).
    package static let defaultCapacity = 1 << 28
    package let capacity: Int
    private let chunks: UnsafeMutablePointer<UnsafeMutablePointer<UInt64>?>
    private let chunkCount: Int

    package init(capacity: Int = SendTimes.defaultCapacity) {
        self.capacity = capacity
        chunkCount = (capacity + SendTimes.chunkSize - 1) / SendTimes.chunkSize
        chunks = .allocate(capacity: chunkCount)
        chunks.initialize(repeating: nil, count: chunkCount)
    }

    deinit {
        for index in 0..<chunkCount { chunks[index]?.deallocate() }
        chunks.deallocate()
    }

    /// Publisher thread only. Returns false past the capacity.
    @discardableResult
    package func set(_ number: Int, _ nanoseconds: UInt64) -> Bool {
        guard number >= 0, number < capacity else { return false }
        let chunk = number >> SendTimes.chunkBits
        if chunks[chunk] == nil {
            let storage = UnsafeMutablePointer<UInt64>.allocate(capacity: SendTimes.chunkSize)
            storage.initialize(repeating: 0, count: SendTimes.chunkSize)
            chunks[chunk] = storage
        }
        chunks[chunk]![number & (SendTimes.chunkSize - 1)] = nanoseconds
        return true
    }

    /// The send time of `number`, or nil if it was never sent (a marker the publisher did not make).
    @inline(__always)
    package func get(_ number: Int) -> UInt64? {
        guard number >= 0, number < capacity, let chunk = chunks[number >> SendTimes.chunkBits] else { return nil }
        let value = chunk[number & (SendTimes.chunkSize - 1)]
        return value == 0 ? nil : value
    }
}

/// A server process's CPU time and memory, read from /proc (Linux, local servers only).
package struct ProcessSample: Sendable, Equatable {
    /// utime + stime of every thread, in nanoseconds: from /proc/PID/task/*/schedstat when the kernel
    /// has it (nanosecond resolution), else /proc/PID/stat (clock ticks, usually 10 ms).
    package var cpuNanoseconds: UInt64
    package var cpuSource: String
    /// VmRSS from /proc/PID/status.
    package var residentKiB: Int

    package init(cpuNanoseconds: UInt64, cpuSource: String, residentKiB: Int) {
        self.cpuNanoseconds = cpuNanoseconds
        self.cpuSource = cpuSource
        self.residentKiB = residentKiB
    }

    package static func read(pid: Int32) -> ProcessSample? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let resident = parseResidentKiB(status: status)
        else { return nil }
        if let precise = schedstatNanoseconds(pid: pid) {
            return ProcessSample(cpuNanoseconds: precise, cpuSource: "schedstat", residentKiB: resident)
        }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let ticks = parseCPUTicks(stat: stat)
        else { return nil }
        let hertz = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return ProcessSample(cpuNanoseconds: ticks * 1_000_000_000 / hertz, cpuSource: "stat", residentKiB: resident)
    }

    /// utime + stime (fields 14 and 15) in clock ticks from a /proc/PID/stat line. The command name
    /// (field 2) is in parentheses and may hold spaces, so fields are counted after the last ')'.
    package static func parseCPUTicks(stat: String) -> UInt64? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state), so utime (14) is fields[11] and stime (15) fields[12].
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }

    /// VmRSS in KiB from /proc/PID/status.
    package static func parseResidentKiB(status: String) -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    /// The sum of the first field (time on CPU, ns) of every thread's schedstat.
    static func schedstatNanoseconds(pid: Int32) -> UInt64? {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !threads.isEmpty else { return nil }
        var total: UInt64 = 0
        for thread in threads {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8),
                let first = text.split(separator: " ").first, let nanoseconds = UInt64(first)
            else { continue }
            total += nanoseconds
        }
        return total > 0 ? total : nil
    }
}
