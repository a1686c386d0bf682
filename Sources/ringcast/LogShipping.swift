import Foundation
import RingcastClient
import RingcastCore

/// Output bytes cut into the lines a log tail shows, as a terminal would show them: a line ends
/// at \n; a \r not followed by \n starts it over (a progress bar redrawing itself leaves its last
/// state, not every frame); ANSI escape sequences (colours, cursor moves, titles) are dropped; a
/// line longer than `maxBytes` is cut there. Bytes that are not UTF-8 become U+FFFD.
struct LogLineSplitter {
    private enum Escape { case none, start, csi, osc, oscEnd }
    private var line: [UInt8] = []
    private var escape = Escape.none
    /// A \r came: a \n next ends the line, anything else starts it over.
    private var carriageReturn = false
    static let maxBytes = 8192

    mutating func feed<Bytes: Sequence>(_ bytes: Bytes, _ emit: (String) -> Void) where Bytes.Element == UInt8 {
        for byte in bytes {
            switch escape {
            case .start:
                escape = byte == UInt8(ascii: "[") ? .csi : (byte == UInt8(ascii: "]") ? .osc : .none)
                continue
            case .csi:
                if (0x40...0x7E).contains(byte) { escape = .none }
                continue
            case .osc:
                if byte == 0x07 { escape = .none } else if byte == 0x1B { escape = .oscEnd }
                continue
            case .oscEnd:
                escape = .none
                continue
            case .none:
                break
            }
            if carriageReturn {
                carriageReturn = false
                if byte != 0x0A { line.removeAll(keepingCapacity: true) }
            }
            switch byte {
            case 0x0A:
                emit(String(decoding: line, as: UTF8.self))
                line.removeAll(keepingCapacity: true)
            case 0x0D:
                carriageReturn = true
            case 0x1B:
                escape = .start
            default:
                if line.count < LogLineSplitter.maxBytes { line.append(byte) }
            }
        }
    }

    /// The last line, when the output did not end with a line break.
    mutating func finish(_ emit: (String) -> Void) {
        if !line.isEmpty { emit(String(decoding: line, as: UTF8.self)) }
        line = []
        carriageReturn = false
        escape = .none
    }
}

/// Lines on their way to a task's log (`POST /api/tasks/{id}/log`), sent from a thread of their
/// own at most once per `interval` (four requests a second), all that piled up in one request.
/// While the server is slow or gone the newest `maxPending` lines wait and older ones are dropped
/// (the server keeps only a tail anyway); after a failure it waits 5 s before trying again. It
/// says nothing itself: the command it serves reports the server's loss once.
/// @unchecked Sendable: `pending`, `dropped`, `finishing` and `finished` are guarded by
/// `condition`; the session is used only by the thread.
final class LogShipper: @unchecked Sendable {
    static let interval = 0.25
    static let maxPending = 1000
    private let condition = NSCondition()
    private var pending: [String] = []
    private var finishing = false
    private var finished = false
    private(set) var sentLines = 0
    private let session: ProducerSession

    init(options: ConnectionOptions, id: String, timeoutSeconds: Double = 3) {
        session = ProducerSession(options, timeoutSeconds: timeoutSeconds)
        let path = ProducerSession.taskPath(id) + "/log"
        let thread = Thread { [self] in
            var retryAt = Date.distantPast
            while let batch = next(notBefore: retryAt) {
                do {
                    try session.send("POST", path, .object([("lines", .array(batch.map(JSONValue.string)))]))
                    condition.withLock { sentLines += batch.count }
                    retryAt = Date().addingTimeInterval(LogShipper.interval)
                } catch {
                    retryAt = Date().addingTimeInterval(5)
                }
            }
            session.disconnect()
            condition.withLock {
                finished = true
                condition.broadcast()
            }
        }
        thread.name = "ringcast-log"
        thread.start()
    }

    /// Any thread.
    func add(_ line: String) {
        condition.withLock {
            pending.append(line)
            if pending.count > LogShipper.maxPending { pending.removeFirst(pending.count - LogShipper.maxPending) }
            condition.broadcast()
        }
    }

    /// Sends what waits (one last try, whatever the back-off) and stops the thread.
    func finish() {
        condition.withLock {
            finishing = true
            condition.broadcast()
            while !finished { condition.wait() }
        }
    }

    /// The next batch, once there is one and its time has come; nil when finished and empty.
    private func next(notBefore: Date) -> [String]? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if finishing {
                defer { pending = [] }
                return pending.isEmpty ? nil : pending
            }
            if !pending.isEmpty, Date() >= notBefore {
                defer { pending = [] }
                return pending
            }
            if pending.isEmpty { condition.wait() } else { _ = condition.wait(until: notBefore) }
        }
    }
}

/// Copies what a child writes to one of its pipes on to our own descriptor, byte for byte, and
/// hands the lines to a log shipper. Its thread ends at the pipe's end of file.
/// @unchecked Sendable: `done` is a semaphore; the descriptors belong to the thread.
final class OutputTee: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)

    init(reading source: Int32, writingTo target: Int32, shipper: LogShipper) {
        let thread = Thread { [self] in
            var splitter = LogLineSplitter()
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            var targetOpen = true
            while true {
                let count = chunk.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                // A closed stdout of ours must not stop the child: the output is still read, and logged.
                if targetOpen { targetOpen = writeAll(chunk[..<count], to: target) == nil }
                splitter.feed(chunk[..<count]) { shipper.add($0) }
            }
            splitter.finish { shipper.add($0) }
            close(source)
            done.signal()
        }
        thread.name = "ringcast-output"
        thread.start()
    }

    /// Waits for the end of file, at most `timeout` seconds (a background process of the child's
    /// may hold the pipe open long after it exited).
    func wait(timeout: Double) { _ = done.wait(timeout: .now() + timeout) }
}
