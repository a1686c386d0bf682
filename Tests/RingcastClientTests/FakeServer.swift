import Foundation
import RingcastCore
import RingcastLWS
import RingcastTestSupport

/// A stand-in for the server on a loopback port, for what the real one does not do (yet): it greets
/// each WebSocket with a `hello` of the protocol version it is told, records every message a client
/// sends, answers `flush` only when told to, and sends any frame a test hands it (a `control`
/// request at a moment of the test's choosing, a `flushed` that never comes, a close).
///
/// `@unchecked Sendable`: `links`, `outbox` and the answering switches are guarded by `lock`; the
/// loop's callbacks run on its service thread, the tests' calls on theirs.
final class FakeServer: @unchecked Sendable {
    private let loop = ServiceLoop(name: "fake-ringcast", logger: .silent)
    /// What the loop holds as its handler while it runs (strongly), in place of this server: a test
    /// that lets go of the server then stops its loop (deinit), instead of leaving the thread and its
    /// port running until the process ends.
    private let relay = Relay()
    private let lock = NSLock()
    private let inbox = Inbox<JSONValue>()
    private var links: [Int: LWSConnection] = [:]
    private var outbox: [Int: [[UInt8]]] = [:]
    private var closing: Set<Int> = []
    private(set) var port = 0
    let protocolVersion: Int
    /// Whether a `flush` is answered with `flushed` at once (false: it is recorded and left unanswered).
    var answersFlush: Bool {
        get { lock.withLock { answering } }
        set { lock.withLock { answering = newValue } }
    }
    private var answering = true
    /// Whether an event with `controls` is refused as a server from before control requests does.
    var refusesControls: Bool {
        get { lock.withLock { refusing } }
        set { lock.withLock { refusing = newValue } }
    }
    private var refusing = false

    /// Whether `hello` goes out when a socket opens (false: only when `greet()` says so).
    private let greetsAtOnce: Bool

    init(protocolVersion: Int = 2, greetsAtOnce: Bool = true) throws {
        self.protocolVersion = protocolVersion
        self.greetsAtOnce = greetsAtOnce
        var settings = ContextSettings(name: "fake-ringcast")
        settings.listener = .init(host: "127.0.0.1", port: 0)
        relay.server = self
        port = try loop.start(settings, handler: relay)
    }

    deinit { loop.stop() }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Every message clients sent, arrays flattened, in order.
    var received: [JSONValue] { inbox.all }

    @discardableResult
    func wait(timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line, until predicate: ([JSONValue]) -> Bool) -> [JSONValue] {
        inbox.wait(
            timeout: timeout, describe: { $0.map { String(decoding: JSONWriter.encode($0), as: UTF8.self) }.description },
            file: file, line: line, until: predicate)
    }

    var connections: Int { lock.withLock { links.count } }

    /// Sends `text` as one frame to every open WebSocket.
    func send(_ text: String) {
        lock.withLock { for id in links.keys { outbox[id, default: []].append(Array(text.utf8)) } }
        wakeAll()
    }

    /// Sends the `hello` that was held back.
    func greet() { send(helloFrame) }

    private var helloFrame: String {
        #"{"type":"hello","protocol":\#(protocolVersion),"epoch":"fakeepoch000","seq":0,"now":0,"heartbeat":15}"#
    }

    /// Closes every open WebSocket (1001, going away): a server restarting.
    func dropConnections() {
        lock.withLock { closing.formUnion(links.keys) }
        wakeAll()
    }

    private func wakeAll() {
        // Unretained, as in `Relay`: a job runs only while the loop does, which ends in deinit.
        loop.post { [unowned(unsafe) self] in
            for link in lock.withLock({ Array(links.values) }) { link.requestWrite() }
        }
    }

    func handle(_ event: ServiceEvent, on link: LWSConnection) -> Bool {
        switch event {
        case .opened:
            lock.withLock {
                links[link.identifier] = link
                outbox[link.identifier] = greetsAtOnce ? [Array(helloFrame.utf8)] : []
            }
            link.requestWrite()
        case .received(let piece, let isLast, _):
            // The client's frames are small: each arrives in one piece.
            guard isLast, let json = try? JSONParser.parse(Array(piece)) else { return true }
            let messages: [JSONValue]
            if case .array(let items) = json { messages = items } else { messages = [json] }
            var answers: [[UInt8]] = []
            if json["type"] == .string("flush"), lock.withLock({ answering }), case .string(let ref)? = json["ref"] {
                answers.append(Array(#"{"type":"flushed","ref":"\#(ref)","seq":1}"#.utf8))
            }
            if lock.withLock({ refusing }) {
                for (index, message) in messages.enumerated() where message["controls"] != nil {
                    let field = messages.count > 1 ? "events[\(index)].controls" : "controls"
                    answers.append(Array(#"{"type":"error","error":"unknown_field","message":"unknown field 'controls'","field":"\#(field)"}"#.utf8))
                }
            }
            if !answers.isEmpty {
                lock.withLock { outbox[link.identifier, default: []] += answers }
                link.requestWrite()
            }
            inbox.append(contentsOf: messages)
        case .writeable:
            let (frames, close) = lock.withLock { () -> ([[UInt8]], Bool) in
                defer { outbox[link.identifier] = [] }
                return (outbox[link.identifier] ?? [], closing.contains(link.identifier))
            }
            for frame in frames where link.writeText(frame) == .failed { return false }
            if close {
                link.setCloseReason(.goingAway, "restarting")
                return false
            }
        case .closed:
            lock.withLock {
                links[link.identifier] = nil
                outbox[link.identifier] = nil
                closing.remove(link.identifier)
            }
        default:
            break
        }
        return true
    }
}

/// The loop's handler for a `FakeServer` (see `FakeServer.relay`). It holds the server unretained:
/// callbacks come only while the loop runs, and the server's deinit stops the loop before anything
/// of the server goes; a retain here could drop the last reference on the service thread, whose
/// deinit would then wait for its own thread to stop.
/// @unchecked Sendable: `server` is set once, before the loop starts, and only read after.
private final class Relay: ServiceHandler, @unchecked Sendable {
    unowned(unsafe) var server: FakeServer?

    func handle(_ event: ServiceEvent, on link: LWSConnection) -> Bool {
        server?.handle(event, on: link) ?? false
    }
}
