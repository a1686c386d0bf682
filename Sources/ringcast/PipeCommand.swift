import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform

/// `some-program | ringcast pipe ID`: passes the input through and turns its progress lines into updates.
struct PipeCommand: ProducerCommand {
    static let name = "pipe"
    static let summary = "progress read from another program's output: make 2>&1 | ringcast pipe build"
    static let usage = [
        "some-program | ringcast pipe ID [--title T] [--hide-after SECONDS] [--no-log]",
        "some-program | ringcast pipe ID [--kind K] [--done-at-eof] [--trace]",
    ]
    static let discussion = """
        Copies standard input to standard output byte for byte, and reads progress out of each line
        (a line ends at \\n or \\r, as tqdm redraws with \\r): `42%`, `[42/100]`, a bare `42/100`, or
        tqdm's ` 42%|████      | 42/100 [00:01<00:02, 40.00it/s]`. Task ID is a spinner until the first
        progress; it is updated at most once per 50 ms (the latest value always goes out). At end of
        input the task is done if the last progress read was 100 % (or none was read); otherwise it
        ends failed with the detail "input ended at 21/50" (or "… at 42%"), as when the program before
        the pipe crashed: the end of the input is not taken for success. Its lines also go to the
        task's log (at most four requests a second; --no-log sends none). If the server cannot be
        reached, the input still passes through, one line goes to stderr and the exit status is 1.
        """
    static let ownOptions: [Option] = [
        .value("title", "T", "the task's title"),
        .value("hide-after", "SECONDS", "hide the task that long after the input ends"),
        .flag("no-log", "send no log lines"),
        .value("kind", "K", "the kind whose past runs give the ETA (default: the id without its trailing number, ci.build-42 → ci.build)"),
        .flag("done-at-eof", "mark the task done at end of input, whatever progress was read last"),
        .flag("trace", "write each update to stderr as it is sent, with its time in seconds on the throttle's monotonic clock"),
    ]
    static let epilogue = """
        exit status:
          0  the task is done
          1  the server could not be reached (the input still passed through)
          2  a wrong argument
          3  the input ended before its progress did: the task is failed, "input ended at 21/50"
        """
    /// The exit status when the input ended before its progress did.
    static let endedEarlyStatus: Int32 = 3
    /// Seconds between two updates, at least.
    static let minimumInterval = 0.05
    /// A stuck server must not hold the pass-through up for long.
    static let requestTimeout = 3.0

    let session: ProducerSession
    let id: String
    let title: String?
    let hideAfter: Double?
    let logs: Bool
    let kind: String?
    let doneAtEOF: Bool
    let trace: Bool

    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError) {
        self.session = session
        id = try options.taskID()
        title = try options.text("title", maxLength: 200)
        hideAfter = try options.seconds("hide-after")
        logs = !options.flag("no-log")
        kind = try options.kind()
        doneAtEOF = options.flag("done-at-eof")
        trace = options.flag("trace")
    }

    func run() throws(CommandFailure) -> Int32 {
        var updater = ThrottledUpdater(session: session, id: id, interval: PipeCommand.minimumInterval, trace: trace)
        var start: [(String, JSONValue)] = [
            ("progress", .null), ("completed", .null), ("total", .null), ("detail", .null),
            ("state", .string("running")), ("visible", .bool(true)), ("hideAfter", .null),
        ]
        if let title { start.append(("title", .string(title))) }
        if let kind { start.append(("kind", .string(kind))) }
        updater.latest(start)
        updater.sendIfDue()
        let shipper = logs ? LogShipper(options: session.options, id: id, timeoutSeconds: PipeCommand.requestTimeout) : nil
        var logLines = LogLineSplitter()

        var lines = LineSplitter()
        /// The last progress the input showed: where it stopped, if it stopped early.
        var lastRead: ProgressValue?
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        reading: while true {
            var poller = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, updater.millisecondsUntilDue())
            if ready < 0, errno != EINTR { break }
            if ready > 0 {
                let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    break reading
                }
                if count == 0 { break reading }
                if let problem = writeAll(chunk[..<count], to: STDOUT_FILENO) {
                    fail("pipe: standard output is closed: \(problem)")
                    return 1
                }
                let scan = { (line: [UInt8]) in
                    if let progress = ProgressText.scan(line: line) {
                        updater.latest(progressFields(progress))
                        lastRead = progress
                    }
                }
                lines.feed(chunk[..<count], scan)
                if let shipper { logLines.feed(chunk[..<count]) { shipper.add($0) } }
                // A short read drained the pipe: the unterminated rest is what the writer wrote last
                // (tqdm redraws as "\r" + line, so its newest state has no terminator yet).
                if count < chunk.count { lines.scanUnterminated(scan) }
            }
            updater.sendIfDue()
        }
        lines.finish { line in
            if let progress = ProgressText.scan(line: line) {
                updater.latest(progressFields(progress))
                lastRead = progress
            }
        }
        updater.sendPendingWaiting()
        if let shipper {
            logLines.finish { shipper.add($0) }
            shipper.finish()
        }
        let ending = TaskEnding.input(lastRead: lastRead, doneAtEOF: doneAtEOF)
        var end: [(String, JSONValue)] = [("state", .string(ending.state))]
        if let detail = ending.detail { end.append(("detail", .string(detail))) }
        if let hideAfter { end.append(("hideAfter", .number(hideAfter))) }
        updater.latest(end)
        updater.sendPendingWaiting()
        if updater.failed { return 1 }
        guard ending == .done else {
            fail("pipe: \(ending.sentence(id: id)) (--done-at-eof takes any end for done)")
            return PipeCommand.endedEarlyStatus
        }
        return 0
    }
}

/// Writes all of `bytes` to `descriptor` (retrying after signals); the reason when it fails.
func writeAll(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) -> String? {
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 {
            if errno == EINTR { continue }
            return String(cString: strerror(errno))
        }
        offset += written
    }
    return nil
}

/// Splits bytes into lines at \n or \r (empty lines skipped); a line longer than 4 KiB is cut there.
/// Each line is handed over once, also when it was already read while unterminated.
struct LineSplitter {
    private var line: [UInt8] = []
    /// The unterminated line was handed over as it is now.
    private var handedOver = false
    static let maxLine = 4096

    mutating func feed(_ bytes: ArraySlice<UInt8>, _ handle: ([UInt8]) -> Void) {
        var rest = bytes
        while let end = rest.firstIndex(where: { $0 == 10 || $0 == 13 }) {
            append(rest[..<end])
            if !line.isEmpty, !handedOver { handle(line) }
            line.removeAll(keepingCapacity: true)
            handedOver = false
            rest = rest[(end + 1)...]
        }
        append(rest)
    }

    /// Hands over the line so far, unterminated (when the writer has paused after it).
    mutating func scanUnterminated(_ handle: ([UInt8]) -> Void) {
        guard !line.isEmpty, !handedOver else { return }
        handle(line)
        handedOver = true
    }

    mutating func finish(_ handle: ([UInt8]) -> Void) {
        scanUnterminated(handle)
        line = []
        handedOver = false
    }

    private mutating func append(_ bytes: ArraySlice<UInt8>) {
        guard !bytes.isEmpty else { return }
        line.append(contentsOf: bytes.prefix(max(0, LineSplitter.maxLine - line.count)))
        handedOver = false
    }
}

/// When `ringcast pipe` may send its task's next update: at most one per `interval` on its own
/// clock, always the latest fields (merged), and after a failed send none before the retry delay.
/// It only decides: it takes `now:` (monotonic nanoseconds) and sends nothing itself.
struct UpdateThrottle {
    /// Nanoseconds between two sends, at least.
    let interval: UInt64
    /// How long a failed send holds the next one back, so a lost server never slows the pass-through.
    static let retryDelay: UInt64 = 5_000_000_000
    private(set) var pending: [(String, JSONValue)]?
    /// When the last update was taken to be sent.
    private(set) var lastSent: UInt64?
    private var retryAt: UInt64 = 0

    init(interval: UInt64) { self.interval = interval }

    /// Replaces what is waiting (fields merge: a newer value of a field wins).
    mutating func latest(_ fields: [(String, JSONValue)]) {
        var merged = pending ?? []
        // Counts without a fraction make the server derive the fraction: an older fraction must not win.
        if fields.contains(where: { $0.0 == "completed" }), !fields.contains(where: { $0.0 == "progress" }) {
            merged.removeAll { $0.0 == "progress" }
        }
        for (key, value) in fields {
            if let index = merged.firstIndex(where: { $0.0 == key }) { merged[index].1 = value } else { merged.append((key, value)) }
        }
        pending = merged
    }

    /// When what waits may go; nil when nothing waits. `retrying: false` for the last update,
    /// which goes once its interval has passed even while the server is failing.
    func due(retrying: Bool = true) -> UInt64? {
        guard pending != nil else { return nil }
        let next = lastSent.map { $0 + interval } ?? 0
        return retrying ? max(next, retryAt) : next
    }

    /// What to send at `now`, or nil when nothing waits or it is not due; taking it is sending it at `now`.
    mutating func take(now: UInt64, retrying: Bool = true) -> [(String, JSONValue)]? {
        guard let due = due(retrying: retrying), now >= due, let fields = pending else { return nil }
        pending = nil
        lastSent = now
        return fields
    }

    /// The send taken last failed, as of `now`.
    mutating func sendFailed(now: UInt64) { retryAt = now + UpdateThrottle.retryDelay }
}

/// Sends a task's updates as its `UpdateThrottle` decides, on the monotonic clock; after a failure
/// it says so once and goes on passing the input through. With `trace`, each update's send time on
/// that clock and its fields go to stderr, so the throttle can be checked by its own stamps.
struct ThrottledUpdater {
    let session: ProducerSession
    let id: String
    let trace: Bool
    private var throttle: UpdateThrottle
    private(set) var failed = false

    init(session: ProducerSession, id: String, interval: Double, trace: Bool) {
        self.session = session
        self.id = id
        self.trace = trace
        throttle = UpdateThrottle(interval: UInt64(interval * 1e9))
    }

    mutating func latest(_ fields: [(String, JSONValue)]) { throttle.latest(fields) }

    /// For poll: how long until the waiting update is due (-1: nothing waits).
    func millisecondsUntilDue() -> Int32 {
        guard let due = throttle.due() else { return -1 }
        let now = MonotonicClock.nanoseconds()
        guard due > now else { return 0 }
        return Int32(min((due - now + 999_999) / 1_000_000, UInt64(Int32.max)))
    }

    mutating func sendIfDue() {
        let now = MonotonicClock.nanoseconds()
        if let fields = throttle.take(now: now) { send(fields, at: now) }
    }

    /// Sends what waits once its interval has passed, sleeping until then (even while the server is failing).
    mutating func sendPendingWaiting() {
        guard let due = throttle.due(retrying: false) else { return }
        var now = MonotonicClock.nanoseconds()
        while now < due {
            Thread.sleep(forTimeInterval: Double(due - now) / 1e9)
            now = MonotonicClock.nanoseconds()
        }
        if let fields = throttle.take(now: now, retrying: false) { send(fields, at: now) }
    }

    private mutating func send(_ fields: [(String, JSONValue)], at now: UInt64) {
        if trace {
            let body = String(decoding: JSONWriter.encode(.object(fields)), as: UTF8.self)
            fail("pipe: update sent at \(ThrottledUpdater.seconds(now)) s: \(body)")
        }
        do {
            try session.send("POST", ProducerSession.taskPath(id), .object(fields))
        } catch {
            if !failed { fail("pipe: \(error); passing the input through without progress") }
            failed = true
            throttle.sendFailed(now: MonotonicClock.nanoseconds())
        }
    }

    /// Nanoseconds as seconds with all nine decimals, so the trace loses nothing.
    static func seconds(_ nanoseconds: UInt64) -> String {
        let fraction = String(nanoseconds % 1_000_000_000)
        return "\(nanoseconds / 1_000_000_000)." + String(repeating: "0", count: 9 - fraction.count) + fraction
    }
}
