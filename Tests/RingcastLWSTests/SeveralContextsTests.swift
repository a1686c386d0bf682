import CLibWebSockets
import Foundation
import RingcastCore
import RingcastPlatform
import RingcastTestSupport
import XCTest

@testable import RingcastLWS

/// A loop that runs several lws contexts on its one event loop (`ContextSettings.contexts`), the
/// sockets its listener accepts spread over them, against real sockets.
final class SeveralContextsTests: XCTestCase {
    /// Answers every request on `/api` with its path, keeps the connection alive, and counts what
    /// it saw. The counts take a lock; everything else happens on the service thread.
    private final class Answerer: ServiceHandler, @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [String: Int] = [:]
        /// Service thread only: the path each connection asked for, until it is answered.
        private var asked: [Int: String] = [:]
        /// The server's descriptor of each request's connection, by its path.
        private var descriptors: [String: Int] = [:]

        func count(_ name: String) -> Int { lock.withLock { counts[name, default: 0] } }
        func descriptor(asking path: String) -> Int? { lock.withLock { descriptors[path] } }
        private func note(_ name: String) { lock.withLock { counts[name, default: 0] += 1 } }

        func handle(_ event: ServiceEvent, on connection: LWSConnection) -> Bool {
            switch event {
            case .created: note("created")
            case .destroyed: note("destroyed")
            case .httpRequest:
                note("request")
                let path = connection.requestLine()?.path ?? "?"
                asked[connection.identifier] = path
                let descriptor = Int(lws_get_socket_fd(connection.wsi))
                // By the last piece of the path: "/api/7" or "/7", as the mount hands it on.
                lock.withLock { descriptors["/" + (path.split(separator: "/").last ?? "")] = descriptor }
                connection.requestWrite()
            case .httpWriteable:
                guard let path = asked.removeValue(forKey: connection.identifier) else { return true }
                guard connection.writeHTTP(status: 200, contentType: "text/plain", body: Array("answer to \(path)<end>".utf8), headers: []) else {
                    return false
                }
                return connection.completeHTTPTransaction()
            case .httpClosed: asked.removeValue(forKey: connection.identifier)
            default: break
            }
            return true
        }

        func loopWasNotified(_ loop: ServiceLoop) { note("notified") }
    }

    private static let contexts = 3
    /// Descriptors per context: the first context gets those below the test's next free one plus
    /// this (the loop's own epoll, pipes and listener take about 15 of them, and what other threads
    /// of the test process open meanwhile some more), the second the next that many, the third the rest.
    private static let range = 48

    /// The range the loop is given: from the descriptors the test process holds now.
    private var descriptorRange = 0

    /// The context a descriptor of the server's goes to, as `ServiceLoop.context(for:)` says.
    private func context(of descriptor: Int) -> Int {
        min(descriptor / descriptorRange, SeveralContextsTests.contexts - 1)
    }

    private func startLoop(_ handler: Answerer, name: String, timeoutSeconds: Int = 10) throws -> (ServiceLoop, port: Int) {
        var settings = ContextSettings(name: name)
        settings.timeoutSeconds = timeoutSeconds
        settings.acceptsAdoptedSockets = true
        settings.contexts = SeveralContextsTests.contexts
        descriptorRange = LWS.lowestFreeDescriptor + SeveralContextsTests.range
        settings.descriptorRange = descriptorRange
        settings.staticFiles = .init(directory: NSTemporaryDirectory(), maxAge: 0, callbackPaths: ["/api"])
        let listener = try ListeningSocket(host: "127.0.0.1", port: 0)
        let loop = ServiceLoop(name: name, logger: .silent)
        try loop.start(settings, handler: handler) { loop in try loop.adoptListener(listener) }
        return (loop, listener.port)
    }

    /// The loop's connections by context, read on its thread.
    private func connectionsByContext(_ loop: ServiceLoop) -> [Int] {
        let answer = Record()
        XCTAssertTrue(loop.post { answer.add(loop.connectionsByContext.map(String.init).joined(separator: " ")) })
        return (answer.wait(for: 1).first ?? "").split(separator: " ").compactMap { Int($0) }
    }

    /// Reads the counts until `done` holds them (or 10 s pass), and returns the last read.
    private func connectionsByContext(_ loop: ServiceLoop, until done: ([Int]) -> Bool) -> [Int] {
        let deadline = Date().addingTimeInterval(10)
        var counts = connectionsByContext(loop)
        while !done(counts), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            counts = connectionsByContext(loop)
        }
        return counts
    }

    /// Opens connections (each with a request answered) until every context holds at least `each`.
    private func fillEveryContext(_ loop: ServiceLoop, port: Int, each: Int) throws -> [RawSocket] {
        var sockets: [RawSocket] = []
        while connectionsByContext(loop).contains(where: { $0 < each }), sockets.count < 400 {
            sockets.append(try askedAndAnswered(port: port, sockets.count))
        }
        XCTAssertTrue(connectionsByContext(loop).allSatisfy { $0 >= each }, "\(connectionsByContext(loop)) after \(sockets.count) connections")
        return sockets
    }

    /// Opens a kept-alive connection and has one request on it answered.
    private func askedAndAnswered(port: Int, _ index: Int) throws -> RawSocket {
        let socket = try RawSocket(port: port)
        try socket.send("GET /api/\(index) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let answer = String(decoding: socket.receive(until: Array("<end>".utf8)), as: UTF8.self)
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200") && answer.hasSuffix("/\(index)<end>"), "connection \(index) got: \(answer)")
        return socket
    }

    func testAcceptedSocketsAreSpreadOverTheContextsAndEachIsServed() throws {
        let handler = Answerer()
        let (loop, port) = try startLoop(handler, name: "test-contexts-spread")
        defer { loop.stop() }
        XCTAssertEqual(connectionsByContext(loop), Array(repeating: 0, count: SeveralContextsTests.contexts), "the listener is not a connection")

        let count = 60
        var sockets: [RawSocket?] = try (0..<count).map { try askedAndAnswered(port: port, $0) }
        XCTAssertEqual(handler.count("request"), count, "every connection's request reached the handler once")
        // Where each went: the context of its descriptor's range.
        let contextOf = try (0..<count).map { context(of: try XCTUnwrap(handler.descriptor(asking: "/\($0)"), "request \($0)")) }
        var expected = Array(repeating: 0, count: SeveralContextsTests.contexts)
        for context in contextOf { expected[context] += 1 }
        XCTAssertEqual(connectionsByContext(loop), expected, "each socket went to the context of its descriptor")
        XCTAssertGreaterThan(expected.filter { $0 > 0 }.count, 1, "the sockets are spread: \(expected)")

        // Those in the first two contexts close: those contexts hold none, the others keep theirs.
        for index in 0..<count where contextOf[index] < 2 { sockets[index] = nil }
        let fewer = connectionsByContext(loop) { $0[0] == 0 && $0[1] == 0 }
        XCTAssertEqual(fewer, [0, 0, expected[2]])

        sockets = []
        let closed = connectionsByContext(loop) { $0.allSatisfy { $0 == 0 } }
        XCTAssertEqual(closed, Array(repeating: 0, count: SeveralContextsTests.contexts), "every context is back to none")
        // The listener's connection and every accepted one; all but the listener's are gone.
        XCTAssertEqual(handler.count("created"), 1 + count)
        XCTAssertEqual(handler.count("destroyed"), count)
    }

    func testJobsAndNotificationsRunOnceWhateverTheContexts() throws {
        let handler = Answerer()
        let (loop, port) = try startLoop(handler, name: "test-contexts-jobs")
        defer { loop.stop() }
        // A connection in every context, so each has a socket on the loop.
        let sockets = try fillEveryContext(loop, port: port, each: 1)

        let ran = Record()
        for index in 0..<50 { XCTAssertTrue(loop.post { ran.add("\(index)") }) }
        XCTAssertEqual(ran.wait(for: 50), (0..<50).map(String.init))
        XCTAssertTrue(loop.notify())
        let barrier = Record()
        // After the notification was handled, a job: once it ran, no other context handled the same wake-up.
        let deadline = Date().addingTimeInterval(10)
        while handler.count("notified") == 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertTrue(loop.post { barrier.add("") })
        _ = barrier.wait(for: 1)
        XCTAssertEqual(ran.wait(for: 50).count, 50, "each job ran once")
        XCTAssertEqual(handler.count("notified"), 1, "one notification, one call")
        withExtendedLifetime(sockets) {}
    }

    /// lws's own timers run in every context: the shim services each one's scheduled events
    /// (`rc_loop_run_once`), not only the first's.
    func testEveryContextsTimeoutsFire() throws {
        let handler = Answerer()
        let (loop, port) = try startLoop(handler, name: "test-contexts-timeouts", timeoutSeconds: 1)
        defer { loop.stop() }
        // Half a request, until every context holds one: lws gives the rest `timeoutSeconds`, then closes it.
        var halves: [RawSocket] = []
        while connectionsByContext(loop).contains(0), halves.count < 100 {
            let socket = try RawSocket(port: port, timeoutSeconds: 60)
            try socket.send("GET /api/half HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            halves.append(socket)
            _ = connectionsByContext(loop) { $0.reduce(0, +) == halves.count }
        }
        XCTAssertFalse(connectionsByContext(loop).contains(0), "a half request in every context")
        for (index, socket) in halves.enumerated() { XCTAssertTrue(socket.receive().closed, "lws closed half request \(index)") }
        XCTAssertEqual(connectionsByContext(loop) { $0.allSatisfy { $0 == 0 } }, Array(repeating: 0, count: SeveralContextsTests.contexts))
        XCTAssertEqual(handler.count("request"), 0)
    }

    func testStoppingWithConnectionsInEveryContextClosesThemAll() throws {
        let handler = Answerer()
        let (loop, port) = try startLoop(handler, name: "test-contexts-stop")
        let sockets = try fillEveryContext(loop, port: port, each: 3)
        loop.stop()
        XCTAssertFalse(loop.isRunning)
        XCTAssertEqual(handler.count("destroyed"), handler.count("created"), "every connection, the listener's too, was destroyed with its context")
        for socket in sockets { XCTAssertTrue(socket.receive().closed, "the server closed its end") }
    }

    /// lws's tables grow with the open-file limit, so a high limit makes fewer contexts: n of them
    /// take (n + 1) / 2 whole-limit tables of 16 bytes a slot.
    func testFewerContextsAreMadeWhereTheirTablesWouldPassTheBudget() {
        let budget = 8 << 20
        XCTAssertEqual(LWS.contexts(16, tablesWithin: budget, descriptors: 20_000), 16)
        XCTAssertEqual(LWS.contexts(16, tablesWithin: budget, descriptors: 65_536), 15)
        XCTAssertEqual(LWS.contexts(16, tablesWithin: budget, descriptors: 262_144), 3)
        XCTAssertEqual(LWS.contexts(16, tablesWithin: budget, descriptors: 1_048_576), 1, "never none")
        XCTAssertEqual(LWS.contexts(16, tablesWithin: budget, descriptors: nil), 16, "no finite limit: as asked")
        XCTAssertEqual(LWS.contexts(0, tablesWithin: budget, descriptors: 20_000), 1)
    }

    /// A context made for low descriptors gets a short table: the limit is lowered while it is
    /// made, never below what is open, and put back.
    func testAContextForLowDescriptorsIsMadeWithAShortTableAndTheLimitIsPutBack() throws {
        let before = try XCTUnwrap(LWS.openFileLimit)
        var seenInside = 0
        let ((), slots) = LWS.withDescriptorTable(300, headroom: 16) { seenInside = LWS.openFileLimit ?? 0 }
        XCTAssertEqual(LWS.openFileLimit, before, "the limit is put back")
        XCTAssertEqual(seenInside, slots, "what lws reads while it is made is the table it gets")
        XCTAssertEqual(slots, min(before, max(300, LWS.lowestFreeDescriptor + 16)), "the table reaches past every open descriptor")
        let ((), whole) = LWS.withDescriptorTable(nil) {}
        XCTAssertEqual(whole, before, "nil: the whole limit")
    }
}
