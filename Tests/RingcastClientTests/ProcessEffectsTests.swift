import Foundation
import RingcastClient
import RingcastTestSupport
import XCTest

/// A client runs inside somebody else's program: it leaves what belongs to the whole process (the
/// open-file limit, the heap) as it found them. The server's executable raises the limit and grows
/// its service threads' heaps; a library must not.
final class ProcessEffectsTests: XCTestCase {
    func testAClientLeavesTheOpenFileLimitAsItWas() async throws {
        let server = try producerServer()
        var original = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &original), 0)
        // A soft limit below the hard one, so that raising it would show.
        var lowered = original
        lowered.rlim_cur = min(original.rlim_max, rlim_t(4096)) - 100
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lowered), 0)
        defer { setrlimit(Int32(RLIMIT_NOFILE.rawValue), &original) }

        let client = try RingcastClient(url: URL(string: server.httpURL)!)
        try await client.update("effects.limit", progress: 0.5)
        try await client.flush(timeout: 5)
        await client.close()

        var now = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &now), 0)
        XCTAssertEqual(now.rlim_cur, lowered.rlim_cur, "the client changed the process's open-file limit")
        XCTAssertEqual(now.rlim_max, lowered.rlim_max)
    }

    /// The sanitizer runs skip this one (Tests/sanitizers/run): their allocators map memory of their own.
    func testAClientGrowsNoHeapOfItsOwnAhead() async throws {
        let server = try producerServer()
        // The concurrency pool's threads (and their stacks) exist before the measure starts.
        try await Task.sleep(nanoseconds: 10_000_000)
        let writableBefore = try writableAnonymousBytes()

        let client = try RingcastClient(url: URL(string: server.httpURL)!)
        try await client.update("effects.heap", progress: 0.5)
        try await client.flush(timeout: 5)
        let writableWhileOpen = try writableAnonymousBytes()
        await client.close()

        // A server's service thread grows its heap by 32 MiB at start, and glibc keeps those pages
        // writable after they are freed; a client's thread adds its stack (8 MiB) and what its
        // connection needs.
        let grown = writableWhileOpen - writableBefore
        XCTAssertLessThan(grown, 24 << 20, "the client's thread made \(grown >> 20) MiB more memory writable")
    }

    /// Bytes of the process's private anonymous mappings that may be written (heaps, arenas, stacks).
    private func writableAnonymousBytes() throws -> Int {
        try String(contentsOfFile: "/proc/self/maps", encoding: .utf8).split(separator: "\n").reduce(0) { total, line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 5, fields[1] == "rw-p", fields[4] == "0" else { return total }
            let bounds = fields[0].split(separator: "-").compactMap { Int($0, radix: 16) }
            return bounds.count == 2 ? total + bounds[1] - bounds[0] : total
        }
    }
}
