// swift-format-ignore-file: OrderedImports
// ringcast-bench: publish throughput, the same load against each server given, one client on one
// connection at a time. Run through Benchmarks/publish.sh, which starts Ringcast and the raw
// libwebsockets reference server.
// First, before Foundation: stdout is a C global Swift 6 cannot prove safe, and it is set up
// here before any other thread runs.
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
    usage: ringcast-bench --target NAME=URL [--target NAME=URL …] [--requests N] [--batches N] [--batch-size N]
                          [--frames N] [--runs N]

    Measures, against each target in turn (HTTP keep-alive, one connection; WebSocket, one connection):
      GET /healthz one by one      plain HTTP 200 answers: the floor of one request per update
      POST update one by one       POST /api/tasks/ID {"progress":…}
      POST /api/events batches     arrays of --batch-size update events
      WebSocket, 1 per frame       one update event per text frame, as fast as the socket takes them
      WebSocket, batch per frame   --batch-size events per frame
    and prints updates (requests, for /healthz) accepted per second: the median of --runs runs.
    A WebSocket run ends when an HTTP probe's answer shows the server's seq has counted every frame.
    """

struct Options {
    var targets: [(name: String, url: ServerURL)] = []
    var requests = 20_000
    var batches = 2_000
    var batchSize = 100
    var frames = 200_000
    var runs = 3
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = Array(CommandLine.arguments.dropFirst())
    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("ringcast-bench: \(message)\n".utf8))
        exit(2)
    }
    while !arguments.isEmpty {
        let name = arguments.removeFirst()
        if name == "--help" {
            print(usage)
            exit(0)
        }
        guard !arguments.isEmpty else { fail("\(name) needs a value; see --help") }
        let value = arguments.removeFirst()
        func count() -> Int {
            guard let number = Int(value), number > 0 else { fail("\(name) wants a positive number, not '\(value)'") }
            return number
        }
        switch name {
        case "--target":
            guard let equals = value.firstIndex(of: "="), let url = ServerURL(String(value[value.index(after: equals)...])) else {
                fail("--target wants NAME=http://HOST:PORT, not '\(value)'")
            }
            options.targets.append((String(value[..<equals]), url))
        case "--requests": options.requests = count()
        case "--batches": options.batches = count()
        case "--batch-size": options.batchSize = count()
        case "--frames": options.frames = count()
        case "--runs": options.runs = count()
        default: fail("unknown option \(name); see --help")
        }
    }
    if options.targets.isEmpty { fail("give at least one --target NAME=URL") }
    return options
}

/// Seconds on the load tester's clock.
func now() -> Double { Double(MonotonicClock.nanoseconds()) / 1e9 }

/// 100 task ids, and one update body per id, built once.
let ids = (0..<100).map { String(format: "bench.t%02d", $0) }
func updateEvent(_ index: Int) -> String {
    #"{"type":"update","id":"\#(ids[index % 100])","progress":\#(Double(index % 1000) / 1000)}"#
}
let updateBodies = (0..<100).map { Array(#"{"progress":\#(Double($0) / 100)}"#.utf8) }

struct BenchError: Error, CustomStringConvertible { let description: String }

/// One scenario against one server: the number of updates (or requests) and the seconds they took.
struct Measurement {
    let count: Int
    let seconds: Double
    var rate: Double { Double(count) / seconds }
}

final class Target {
    let name: String
    let url: ServerURL
    let http: HTTPClient
    let isRingcast: Bool

    init(name: String, url: ServerURL) throws {
        self.name = name
        self.url = url
        http = HTTPClient(host: url.host, port: url.port)
        let health = try http.request("GET", "/healthz")
        guard health.status == 200 else { throw BenchError(description: "\(name): /healthz answered \(health.status)") }
        isRingcast = (try? JSONParser.parse(health.body))?["epoch"] != nil
    }

    func expect200(_ response: HTTPResponse, _ what: String) throws {
        guard response.status == 200 else { throw BenchError(description: "\(name): \(what) answered \(response.status): \(response.text)") }
    }

    func healthz(_ requests: Int) throws -> Measurement {
        let start = now()
        for _ in 0..<requests { try expect200(try http.request("GET", "/healthz"), "GET /healthz") }
        return Measurement(count: requests, seconds: now() - start)
    }

    func postOneByOne(_ requests: Int) throws -> Measurement {
        let start = now()
        for index in 0..<requests {
            try expect200(try http.request("POST", "/api/tasks/\(ids[index % 100])", body: updateBodies[index % 100]), "POST /api/tasks")
        }
        return Measurement(count: requests, seconds: now() - start)
    }

    func postBatches(_ batches: Int, size: Int) throws -> Measurement {
        let bodies = (0..<10).map { round in Array(("[" + (0..<size).map { updateEvent(round * size + $0) }.joined(separator: ",") + "]").utf8) }
        let start = now()
        for index in 0..<batches { try expect200(try http.request("POST", "/api/events", body: bodies[index % 10]), "POST /api/events") }
        return Measurement(count: batches * size, seconds: now() - start)
    }

    /// The server's seq, read from the answer to a probe update (which itself counts one).
    func probeSeq() throws -> Int {
        let response = try http.request("POST", "/api/tasks/bench.probe", body: Array("{}".utf8))
        try expect200(response, "the probe")
        guard case .number(let seq)? = try JSONParser.parse(response.body)["seq"] else {
            throw BenchError(description: "\(name): the probe's answer has no seq")
        }
        return Int(seq)
    }

    func webSocket(frames: Int, eventsPerFrame: Int, context: WebSocketClientContext) throws -> Measurement {
        let texts = (0..<100).map { round -> [UInt8] in
            if eventsPerFrame == 1 { return Array(updateEvent(round).utf8) }
            return Array(("[" + (0..<eventsPerFrame).map { updateEvent(round * eventsPerFrame + $0) }.joined(separator: ",") + "]").utf8)
        }
        var socketURL = url
        socketURL.path = "/ws?mode=publish"  // nothing is echoed back (the reference ignores the query)
        let pump = FramePump(frames: frames, texts: texts)
        let connection = context.connect(socketURL, delegate: pump)
        guard pump.opened.wait(timeout: .now() + 5) == .success else { throw BenchError(description: "\(name): the WebSocket did not open") }
        // The server counts one seq per event (Ringcast) or per frame (the reference).
        let perFrame = isRingcast ? eventsPerFrame : 1
        let before = try probeSeq()
        let start = now()
        pump.start(connection)
        var probes = 1
        while true {
            let seq = try probeSeq()
            probes += 1
            if seq - before - (probes - 1) >= frames * perFrame { break }
            if let failure = pump.failure { throw BenchError(description: "\(name): \(failure)") }
            usleep(500)
        }
        let seconds = now() - start
        connection.close()
        return Measurement(count: frames * eventsPerFrame, seconds: seconds)
    }
}

/// Writes `frames` text frames as fast as the socket takes them (from the writeable callback).
/// @unchecked Sendable: its mutable state sits under `lock`; `opened` is a semaphore.
final class FramePump: WebSocketDelegate, @unchecked Sendable {
    let frames: Int
    let texts: [[UInt8]]
    let opened = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var running = false
    private var sent = 0
    private var failed: String?
    var failure: String? { lock.withLock { failed } }

    init(frames: Int, texts: [[UInt8]]) {
        self.frames = frames
        self.texts = texts
    }

    func start(_ connection: WebSocketConnection) {
        lock.withLock { running = true }
        connection.requestWrite()
    }

    func webSocketDidOpen(_ connection: WebSocketConnection) { opened.signal() }
    func webSocket(_ connection: WebSocketConnection, didReceive message: [UInt8]) {
        if message.starts(with: Array(#"{"type":"error""#.utf8)) { lock.withLock { failed = String(decoding: message, as: UTF8.self) } }
    }
    func webSocketDidClose(_ connection: WebSocketConnection, error: String?) {
        if let error { lock.withLock { failed = error } }
    }

    func webSocketNextMessage(_ connection: WebSocketConnection) -> [UInt8]? {
        lock.withLock {
            guard running, sent < frames else { return nil }
            sent += 1
            return texts[sent % texts.count]
        }
    }
}

func median(_ values: [Measurement]) -> Measurement { values.sorted { $0.rate < $1.rate }[values.count / 2] }

let options = parseOptions()
let context = try WebSocketClientContext()
let scenarios: [(String, (Target) throws -> Measurement)] = [
    ("GET /healthz, one by one (HTTP 200s)", { try $0.healthz(options.requests) }),
    ("POST update, one by one", { try $0.postOneByOne(options.requests) }),
    ("POST /api/events, \(options.batchSize) per batch", { try $0.postBatches(options.batches, size: options.batchSize) }),
    ("WebSocket, 1 event per frame", { try $0.webSocket(frames: options.frames, eventsPerFrame: 1, context: context) }),
    (
        "WebSocket, \(options.batchSize) events per frame",
        { try $0.webSocket(frames: max(1, options.frames / options.batchSize), eventsPerFrame: options.batchSize, context: context) }
    ),
]

do {
    let targets = try options.targets.map { try Target(name: $0.name, url: $0.url) }
    var results: [[Measurement]] = []
    for (name, scenario) in scenarios {
        var row: [Measurement] = []
        for target in targets {
            _ = try scenario(target)  // warm-up
            row.append(median(try (0..<options.runs).map { _ in try scenario(target) }))
        }
        results.append(row)
        FileHandle.standardError.write(Data("measured: \(name)\n".utf8))
    }
    func figure(_ rate: Double) -> String { rate >= 10_000 ? String(format: "%.0fk", rate / 1000) : String(format: "%.0f", rate) }
    let nameWidth = scenarios.map(\.0.count).max()! + 2
    var header = "scenario".padding(toLength: nameWidth, withPad: " ", startingAt: 0)
    for target in targets { header += target.name.padding(toLength: 14, withPad: " ", startingAt: 0) }
    if targets.count == 2 { header += "\(targets[0].name)/\(targets[1].name)" }
    print("updates accepted per second (median of \(options.runs) runs; one client, one connection, loopback)")
    print(header)
    for (index, (name, _)) in scenarios.enumerated() {
        var line = name.padding(toLength: nameWidth, withPad: " ", startingAt: 0)
        for measurement in results[index] { line += ("\(figure(measurement.rate))/s").padding(toLength: 14, withPad: " ", startingAt: 0) }
        if results[index].count == 2 { line += String(format: "%.2f", results[index][0].rate / results[index][1].rate) }
        print(line)
    }
} catch {
    FileHandle.standardError.write(Data("ringcast-bench: \(error)\n".utf8))
    exit(1)
}
context.shutdown()
