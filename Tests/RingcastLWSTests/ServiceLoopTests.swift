import Foundation
import RingcastCore
import RingcastPlatform
import XCTest

@testable import RingcastLWS

/// A handler that serves nothing: these tests are about the loop itself.
private final class IdleHandler: ServiceHandler {
    func handle(_ event: ServiceEvent, on connection: LWSConnection) -> Bool { true }
}

/// Collects what happened on the loop, from any thread.
final class Record: @unchecked Sendable {
    private let condition = NSCondition()
    private var entries: [String] = []

    func add(_ entry: String) {
        condition.withLock {
            entries.append(entry)
            condition.broadcast()
        }
    }

    func wait(for count: Int, timeout: Double = 5) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while entries.count < count, condition.wait(until: deadline) {}
        return entries
    }
}

final class ServiceLoopTests: XCTestCase {
    func testPostedJobsRunInOrderOnTheServiceThread() throws {
        let loop = ServiceLoop(name: "test-jobs", logger: .silent)
        let serviceThread = Record()
        try loop.start(ContextSettings(name: "test-jobs"), handler: IdleHandler()) { _ in serviceThread.add("\(pthread_self())") }
        defer { loop.stop() }
        let record = Record()
        for index in 0..<100 {
            XCTAssertTrue(loop.post { record.add("\(index) \(pthread_self())") })
        }
        let entries = record.wait(for: 100)
        let thread = serviceThread.wait(for: 1).first ?? "?"
        XCTAssertNotEqual(thread, "\(pthread_self())")
        XCTAssertEqual(entries, (0..<100).map { "\($0) \(thread)" }, "every job, in order, on the loop's own thread")
    }

    func testTimersFireOnTheLoopAndCanBeCancelled() throws {
        let loop = ServiceLoop(name: "test-timers", logger: .silent)
        let record = Record()
        let began = Date()
        try loop.start(ContextSettings(name: "test-timers"), handler: IdleHandler()) { loop in
            let fired = try loop.makeTimer { record.add("fired after \(Date().timeIntervalSince(began))") }
            let cancelled = try loop.makeTimer { record.add("cancelled timer fired") }
            // Due well after the others: once it has fired, the loop has passed both their deadlines.
            let last = try loop.makeTimer { record.add("last") }
            fired.schedule(seconds: 0.05)
            cancelled.schedule(seconds: 0.02)
            last.schedule(seconds: 0.15)
            cancelled.cancel()
        }
        defer { loop.stop() }
        let entries = record.wait(for: 2)
        XCTAssertEqual(entries.count, 2, "\(entries)")
        XCTAssertTrue(entries.first?.hasPrefix("fired after") ?? false, "the cancelled timer never fires: \(entries)")
        XCTAssertEqual(entries.last, "last")
        let seconds = Double(entries.first?.split(separator: " ").last ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(seconds, 0.045, "a timer does not fire early")
    }

    func testAStoppedLoopTakesNoJobsAndStopsOnce() throws {
        let loop = ServiceLoop(name: "test-stop", logger: .silent)
        XCTAssertFalse(loop.post {}, "a loop that has not started takes no job")
        try loop.start(ContextSettings(name: "test-stop"), handler: IdleHandler())
        XCTAssertTrue(loop.isRunning)
        loop.stop()
        XCTAssertFalse(loop.isRunning)
        XCTAssertFalse(loop.post {}, "a stopped loop takes no job: its context is gone")
        loop.stop()
    }

    func testPostingFromManyThreadsWhileTheLoopStopsIsSafe() throws {
        for round in 0..<5 {
            let loop = ServiceLoop(name: "test-race-\(round)", logger: .silent)
            try loop.start(ContextSettings(name: "test-race"), handler: IdleHandler())
            let counter = Record()
            DispatchQueue.concurrentPerform(iterations: 4) { worker in
                for index in 0..<200 {
                    if worker == 0, index == 100 { loop.stop() }
                    _ = loop.post { counter.add("") }
                }
            }
            loop.stop()
            XCTAssertFalse(loop.isRunning)
        }
    }

    func testAPortInUseFailsWithAnErrorNamingTheCallAndTheSetting() throws {
        var settings = ContextSettings(name: "test-listen")
        settings.listener = .init(host: "127.0.0.1", port: 0)
        let first = ServiceLoop(name: "test-listen", logger: .silent)
        let port = try first.start(settings, handler: IdleHandler())
        defer { first.stop() }
        XCTAssertGreaterThan(port, 0, "port 0 takes a free port and reports it")
        settings.listener = .init(host: "127.0.0.1", port: port)
        let second = ServiceLoop(name: "test-listen-2", logger: .silent)
        XCTAssertThrowsError(try second.start(settings, handler: IdleHandler())) { error in
            guard let error = error as? CCallError else { return XCTFail("not a CCallError: \(error)") }
            XCTAssertEqual(error.call, "lws_create_context")
            XCTAssertTrue(error.detail.contains("127.0.0.1:\(port)") && error.detail.contains("\"port\""), error.detail)
        }
        XCTAssertFalse(second.isRunning)
    }

    func testAFailedPrepareStopsTheLoopAndRethrows() {
        struct Refused: Error {}
        let loop = ServiceLoop(name: "test-prepare", logger: .silent)
        XCTAssertThrowsError(try loop.start(ContextSettings(name: "test-prepare"), handler: IdleHandler()) { _ in throw Refused() }) {
            XCTAssertTrue($0 is Refused)
        }
        XCTAssertFalse(loop.isRunning)
        XCTAssertFalse(loop.post {})
    }
}

final class MessageAssemblerTests: XCTestCase {
    private func append(_ assembler: inout MessageAssembler, _ text: String) {
        Array(text.utf8).withUnsafeBytes { assembler.append($0) }
    }

    func testPiecesJoinAndAMessageOverTheLimitIsDroppedNotKept() {
        var assembler = MessageAssembler(limit: 10)
        append(&assembler, "hello ")
        append(&assembler, "you")
        XCTAssertEqual(assembler.take().bytes, Array("hello you".utf8))
        XCTAssertTrue(assembler.bytes.isEmpty, "take starts the next message")

        append(&assembler, "0123456789")
        XCTAssertFalse(assembler.isTooLarge, "exactly the limit is allowed")
        append(&assembler, "!")
        XCTAssertTrue(assembler.isTooLarge)
        XCTAssertTrue(assembler.bytes.isEmpty, "nothing of an oversized message is held")
        append(&assembler, "more")
        XCTAssertTrue(assembler.bytes.isEmpty)
        let (bytes, tooLarge) = assembler.take()
        XCTAssertTrue(tooLarge)
        XCTAssertTrue(bytes.isEmpty)
        append(&assembler, "next")
        XCTAssertEqual(assembler.take().bytes, Array("next".utf8), "the next message starts clean")

        assembler.refuse()
        append(&assembler, "x")
        XCTAssertTrue(assembler.take().isTooLarge, "a message refused up front (Content-Length) stays refused")
    }
}

final class LWSLogTests: XCTestCase {
    func testLWSLinesLoseTheirTimestampAndLevelTag() {
        XCTAssertEqual(
            LWSLog.stripped("[2026/12/01 08:50:31:1234] E: ERROR on binding fd 7 to port 8080 (-1 98)\n"),
            "ERROR on binding fd 7 to port 8080 (-1 98)")
        XCTAssertEqual(LWSLog.stripped("[2026/12/01 08:50:31:1234] N:  Creating Vhost 'default' port 0\n"), " Creating Vhost 'default' port 0")
        XCTAssertEqual(LWSLog.stripped("plain line"), "plain line")
    }

    func testLWSErrorsReachOurLogger() throws {
        let lines = Record()
        LWSLog.route(to: Logger(level: .warning) { lines.add($0) })
        defer { LWSLog.route(to: .silent) }
        var settings = ContextSettings(name: "test-log")
        settings.listener = .init(host: "127.0.0.1", port: 0)
        let first = ServiceLoop(name: "test-log", logger: .silent)
        let port = try first.start(settings, handler: IdleHandler())
        defer { first.stop() }
        settings.listener = .init(host: "127.0.0.1", port: port)
        XCTAssertThrowsError(try ServiceLoop(name: "test-log-2", logger: .silent).start(settings, handler: IdleHandler()))
        let logged = lines.wait(for: 1)
        XCTAssertTrue(
            logged.contains { $0.hasPrefix("[error] lws: ") && $0.contains("\(port)") }, "lws's bind error came through our logger: \(logged)")
    }
}
