// swift-format-ignore-file: OrderedImports
// ringcast-costs: what one published event costs the server, where that cost must not grow — with
// the number of pattern sets, with a task's age — and what SQLite costs against memory. Run through
// Benchmarks/costs.sh, which starts the servers; it prints a Markdown section for RESULTS.md.
@preconcurrency import Glibc
import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastLoad
import RingcastPlatform

setvbuf(stdout, nil, _IOLBF, 0)
signal(SIGPIPE, SIG_IGN)

let usage = """
    usage: ringcast-costs patterns --server URL --pid PID [--watchers N] [--events N]
           ringcast-costs age --server URL --pid PID [--updates N]
           ringcast-costs storage --target NAME=URL … [--batches N] [--batch-size N]
           ringcast-costs throughput --server URL … [--connections N] [--requests N] [--batch-size N]

    patterns  N watchers each on its own task (?watch=w.I) against N watchers on one task (?watch=w.0),
              the same events to random ids w.0…w.(N-1), so both deliver about one event per event
              published: server CPU per published event, and the ratio.
    age       one task updated one request at a time: server CPU of the last 10 % against the first 10 %.
    storage   batches of updates to 1 000 tasks (plain progress, then with a tenth of each batch ending a
              task) against each target: events accepted per second.
    throughput  --connections keep-alive connections at once, spread round-robin over the --server
              URLs (the nodes of a cluster), each posting its share of --requests one after another:
              one update per POST /api/tasks/ID (--batch-size 1) or batches to POST /api/events, to
              1 000 tasks. Prints {"events", "seconds", "rate"} as one JSON line.
    """

struct Failure: Error, CustomStringConvertible { let description: String }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringcast-costs: \(message)\n".utf8))
    exit(2)
}

let (scenario, values): (String, [String: [String]]) = {
    var arguments = Array(CommandLine.arguments.dropFirst())
    guard let scenario = arguments.first, !scenario.hasPrefix("-") else {
        print(usage)
        exit(arguments.contains("--help") ? 0 : 2)
    }
    arguments.removeFirst()
    var values: [String: [String]] = [:]
    while !arguments.isEmpty {
        let name = arguments.removeFirst()
        guard name.hasPrefix("--"), !arguments.isEmpty else { fail("\(name) needs a value; see --help") }
        values[String(name.dropFirst(2)), default: []].append(arguments.removeFirst())
    }
    return (scenario, values)
}()
func value(_ name: String) -> String? { values[name]?.last }
func count(_ name: String, _ fallback: Int) -> Int {
    guard let text = value(name) else { return fallback }
    guard let number = Int(text), number > 0 else { fail("--\(name) wants a positive number, not '\(text)'") }
    return number
}
func server() -> ServerURL {
    guard let text = value("server"), let url = ServerURL(text) else { fail("give --server http://HOST:PORT") }
    return url
}
func pid() -> Int32 {
    guard let text = value("pid"), let pid = Int32(text) else { fail("give --pid PID of the server") }
    return pid
}

/// The server's CPU time so far (every thread), in seconds.
func cpu(_ pid: Int32) throws -> Double {
    guard let sample = ProcessSample.read(pid: pid) else { throw Failure(description: "cannot read /proc/\(pid)") }
    return Double(sample.cpuNanoseconds) / 1e9
}

func expect200(_ response: HTTPResponse, _ what: String) throws {
    guard response.status == 200 else { throw Failure(description: "\(what) answered \(response.status): \(response.text)") }
}

// MARK: patterns

/// Counts the task events its watchers receive (arrays counted event by event).
/// @unchecked Sendable: its counters sit under `lock`; `opened` is a semaphore.
final class CountingWatchers: WebSocketDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var open = 0
    private var events = 0
    private var closed = 0
    private static let marker = Array(#""type":"progress""#.utf8)

    var counts: (open: Int, events: Int, closed: Int) { lock.withLock { (open, events, closed) } }

    func webSocketDidOpen(_ connection: WebSocketConnection) {}
    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        message.withUnsafeBytes { webSocket(connection, didReceiveBytes: $0) }
    }
    func webSocket(_ connection: WebSocketConnection, didReceiveBytes message: UnsafeRawBufferPointer) {
        if message.starts(with: Array(#"{"type":"snapshot""#.utf8)) {
            lock.withLock { open += 1 }
            return
        }
        var found = 0
        let marker = CountingWatchers.marker
        if message.count >= marker.count {
            var index = 0
            while index <= message.count - marker.count {
                if message[index] == marker[0], (1..<marker.count).allSatisfy({ message[index + $0] == marker[$0] }) {
                    found += 1
                    index += marker.count
                } else {
                    index += 1
                }
            }
        }
        if found > 0 { lock.withLock { events += found } }
    }
    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) { lock.withLock { closed += 1 } }
}

func waitUntil(_ what: String, timeout: Double = 120, _ condition: () -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        guard Date() < deadline else { throw Failure(description: "timed out waiting for \(what)") }
        usleep(2_000)
    }
}

/// Server CPU per published event with `watchers` sockets watching what `pattern(i)` names.
func patternRun(_ url: ServerURL, pid: Int32, watchers: Int, ids: [Int], pattern: (Int) -> String) throws -> (perEvent: Double, deliveries: Int) {
    let context = try WebSocketClientContext(connectTimeoutSeconds: 30)
    defer { context.shutdown() }
    let counting = CountingWatchers()
    var connections: [WebSocketConnection] = []
    for index in 0..<watchers {
        var socketURL = url
        socketURL.path = "/ws?watch=" + pattern(index)
        connections.append(context.connect(socketURL, delegate: counting))
        if index % 200 == 199 { try waitUntil("watchers to connect") { counting.counts.open >= index + 1 - 400 } }
    }
    try waitUntil("every watcher's snapshot") { counting.counts.open == watchers }
    var watching: [String: Int] = [:]
    for index in 0..<watchers { watching[pattern(index), default: 0] += 1 }
    let expected = ids.reduce(0) { $0 + watching["w.\($1)", default: 0] }
    let http = HTTPClient(host: url.host, port: url.port)
    let before = try cpu(pid)
    for start in stride(from: 0, to: ids.count, by: 100) {
        let events = ids[start..<min(ids.count, start + 100)].map { #"{"type":"update","id":"w.\#($0)","completed":\#(start),"total":1000000}"# }
        try expect200(try http.request("POST", "/api/events", json: "[" + events.joined(separator: ",") + "]"), "POST /api/events")
    }
    try waitUntil("every delivery (\(expected))") { counting.counts.events >= expected }
    let spent = try cpu(pid) - before
    for connection in connections { connection.close() }
    try waitUntil("the watchers to close") { counting.counts.closed == watchers }
    return (spent / Double(ids.count), counting.counts.events)
}

func patterns() throws {
    let url = server()
    let pid = pid()
    let watchers = count("watchers", 10_000)
    let events = count("events", 20_000)
    var generator = SystemRandomNumberGenerator()
    let ids = (0..<events).map { _ in Int.random(in: 0..<watchers, using: &generator) }
    // The shared set watches one of the ids the events go to; each of its events reaches every watcher.
    let shared = try patternRun(url, pid: pid, watchers: watchers, ids: ids) { _ in "w.\(ids[0])" }
    let own = try patternRun(url, pid: pid, watchers: watchers, ids: ids) { "w.\($0)" }
    let ratio = own.perEvent / shared.perEvent
    print(
        """
        | pattern sets | events published | deliveries | server CPU per published event |
        | --- | --- | --- | --- |
        | 1 (all \(watchers) watchers on `w.\(ids[0])`) | \(events) | \(shared.deliveries) | \(String(format: "%.1f", shared.perEvent * 1e6)) µs |
        | \(watchers) (each watcher on its own task) | \(events) | \(own.deliveries) | \(String(format: "%.1f", own.perEvent * 1e6)) µs |

        Each own-task watcher against one shared set: **\(String(format: "%.2f", ratio)) ×** (wanted ≤ 1.5 ×).
        """)
}

// MARK: age

func age() throws {
    let url = server()
    let pid = pid()
    let updates = count("updates", 100_000)
    let http = HTTPClient(host: url.host, port: url.port)
    let tenth = updates / 10
    var marks: [Double] = []
    for index in 0..<updates {
        if index % tenth == 0 { marks.append(try cpu(pid)) }
        let body = Array(#"{"progress":\#(Double(index) / Double(updates)),"detail":"step \#(index)"}"#.utf8)
        try expect200(try http.request("POST", "/api/tasks/age.one", body: body), "POST /api/tasks/age.one")
    }
    marks.append(try cpu(pid))
    let first = marks[1] - marks[0]
    let last = marks[10] - marks[9]
    print(
        """
        | updates to one task, one request each | server CPU |
        | --- | --- |
        | the first 10 % (\(tenth)) | \(String(format: "%.3f", first)) s (\(String(format: "%.1f", first / Double(tenth) * 1e6)) µs each) |
        | the last 10 % (\(tenth)) | \(String(format: "%.3f", last)) s (\(String(format: "%.1f", last / Double(tenth) * 1e6)) µs each) |

        The last 10 % against the first: **\(String(format: "%.2f", last / first)) ×** (wanted ≤ 1.2 ×).
        """)
}

// MARK: storage

func storage() throws {
    let targets = (values["target"] ?? []).map { text -> (String, ServerURL) in
        guard let equals = text.firstIndex(of: "="), let url = ServerURL(String(text[text.index(after: equals)...])) else {
            fail("--target wants NAME=http://HOST:PORT, not '\(text)'")
        }
        return (String(text[..<equals]), url)
    }
    guard !targets.isEmpty else { fail("give --target NAME=URL for each server") }
    let batches = count("batches", 2_000)
    let size = count("batch-size", 100)
    func bodies(ending: Bool) -> [[UInt8]] {
        (0..<10).map { round in
            let events = (0..<size).map { index -> String in
                let id = "store.\((round * size + index) % 1000)"
                if ending, index % 10 == 0 { return #"{"type":"update","id":"\#(id)","state":"done"}"# }
                return #"{"type":"update","id":"\#(id)","progress":\#(Double(index) / Double(size)),"state":"running"}"#
            }
            return Array(("[" + events.joined(separator: ",") + "]").utf8)
        }
    }
    var rows: [(String, [Double])] = []
    for (label, ending) in [("plain progress", false), ("a tenth of each batch ends a task", true)] {
        let payloads = bodies(ending: ending)
        var rates: [Double] = []
        for (_, url) in targets {
            let http = HTTPClient(host: url.host, port: url.port)
            for index in 0..<50 { try expect200(try http.request("POST", "/api/events", body: payloads[index % 10]), "warm-up") }
            let start = Date()
            for index in 0..<batches { try expect200(try http.request("POST", "/api/events", body: payloads[index % 10]), "POST /api/events") }
            rates.append(Double(batches * size) / Date().timeIntervalSince(start))
        }
        rows.append((label, rates))
    }
    print(
        "| batches of \(size) updates to 1 000 tasks | " + targets.map(\.0).joined(separator: " | ")
            + (targets.count == 2 ? " | \(targets[1].0) / \(targets[0].0) |" : " |"))
    print("| --- |" + String(repeating: " --- |", count: targets.count + (targets.count == 2 ? 1 : 0)))
    for (label, rates) in rows {
        var line = "| \(label) | " + rates.map { String(format: "%.0f events/s", $0) }.joined(separator: " | ")
        if rates.count == 2 { line += String(format: " | **%.2f ×** |", rates[1] / rates[0]) } else { line += " |" }
        print(line)
    }
}

// MARK: throughput

/// One connection's share of a throughput run: posts one after another on its own keep-alive
/// connection. @unchecked Sendable: each is used by the one thread that runs it, then read after.
final class Poster: @unchecked Sendable {
    let http: HTTPClient
    let size: Int
    let first: Int
    var failure: String?
    private static let singles = (0..<1000).map { index in
        (path: "/api/tasks/thr.\(index)", body: Array(#"{"progress":\#(Double(index % 100) / 100)}"#.utf8))
    }
    private let batches: [[UInt8]]

    init(_ url: ServerURL, size: Int, first: Int) {
        http = HTTPClient(host: url.host, port: url.port)
        self.size = size
        self.first = first
        batches = (0..<10).map { round in
            let events = (0..<size).map { index in
                #"{"type":"update","id":"thr.\#((index + round * size) % 1000)","progress":\#(Double(index) / Double(size))}"#
            }
            return Array(("[" + events.joined(separator: ",") + "]").utf8)
        }
    }

    func post(_ index: Int) throws {
        if size == 1 {
            let single = Poster.singles[index % Poster.singles.count]
            try expect200(try http.request("POST", single.path, body: single.body), "POST \(single.path)")
        } else {
            try expect200(try http.request("POST", "/api/events", body: batches[index % batches.count]), "POST /api/events")
        }
    }

    func run(_ count: Int) {
        do {
            for index in 0..<count { try post(first + index) }
        } catch {
            failure = "\(error)"
        }
    }
}

func throughput() throws {
    let servers = (values["server"] ?? []).map { text -> ServerURL in
        guard let url = ServerURL(text) else { fail("--server wants http://HOST:PORT, not '\(text)'") }
        return url
    }
    guard !servers.isEmpty else { fail("give --server URL for each node") }
    let connections = count("connections", 4)
    let requests = count("requests", 10_000)
    let size = count("batch-size", 100)
    let share = requests / connections
    let posters = (0..<connections).map { Poster(servers[$0 % servers.count], size: size, first: $0 * share) }
    for poster in posters { for index in 0..<20 { try poster.post(index) } }
    // A thread per connection (GCD would run no more of them at once than there are cores).
    let finished = DispatchGroup()
    let start = Date()
    for poster in posters {
        finished.enter()
        Thread {
            poster.run(share)
            finished.leave()
        }.start()
    }
    finished.wait()
    let seconds = Date().timeIntervalSince(start)
    if let failure = posters.compactMap(\.failure).first { throw Failure(description: failure) }
    let events = share * connections * size
    print(#"{"events": \#(events), "seconds": \#(seconds), "rate": \#(Double(events) / seconds)}"#)
}

do {
    switch scenario {
    case "patterns": try patterns()
    case "age": try age()
    case "storage": try storage()
    case "throughput": try throughput()
    case "--help", "help": print(usage)
    default: fail("unknown scenario '\(scenario)'; see --help")
    }
} catch {
    fail("\(error)")
}
