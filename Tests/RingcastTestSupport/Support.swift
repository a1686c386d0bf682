import Foundation
import XCTest

// What every test target shares: clocks, paths, ports and waiting on a condition. A library target
// (not a test target), so the test targets depend on it instead of copying it.

/// Unix time in milliseconds: the clock the server stamps events with, read the same way.
package func nowMs() -> Double { Date().timeIntervalSince1970 * 1000 }

/// The repository's root, from this file's place in it (Tests/RingcastTestSupport/).
package let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// An empty directory to serve as publicDir, for tests that need the API and not the dashboard.
package let emptyPublicDirectory: String = {
    let path = NSTemporaryDirectory() + "ringcast-tests-empty-public"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}()

/// A fresh, empty directory under the system's temporary one, for one test; `remove()` when done.
package struct TemporaryFolder {
    package let url: URL

    package init(_ prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside it (not created).
    package func file(_ relativePath: String) -> URL { url.appendingPathComponent(relativePath) }

    package func remove() { try? FileManager.default.removeItem(at: url) }
}

/// A loopback port nothing listens on: bound, then closed.
package func closedLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    close(fd)
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The sockets in the kernel's TCP tables (`/proc/net/tcp`, `/proc/net/tcp6`), one row of fields
/// each: sl, local address, remote address, state, tx_queue:rx_queue, … (addresses as HEX:PORT).
/// Read to the end: String(contentsOfFile:) stops after the first page of a /proc file.
package func kernelTCPRows(_ tables: [String] = ["/proc/net/tcp", "/proc/net/tcp6"]) -> [[Substring]] {
    tables.flatMap { table -> [[Substring]] in
        guard let bytes = FileHandle(forReadingAtPath: table)?.readDataToEndOfFile() else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").dropFirst().map { $0.split(separator: " ") }
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; true when it held. For what
/// has no event to wait on (a file's contents, a process table, a client's connection state).
package func eventually(timeout: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}

/// Asserts that something the server schedules (a hide, a stall, a tick) happened at `due`, as a
/// loaded machine meets a deadline: never more than `early` ms before it (the clocks are the same
/// wall clock, read in two threads), and at most `late` ms after it.
// swift-format-ignore: AlwaysUseLowerCamelCase
// Named as XCTest names its assertions, which is how a reader looks for one.
package func XCTAssertOnTime(
    _ at: Double, due: Double, early: Double = 10, late: Double = 500, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) {
    let offset = at - due
    XCTAssertGreaterThanOrEqual(offset, -early, "\(message()): \(offset.rounded()) ms before it was due", file: file, line: line)
    XCTAssertLessThanOrEqual(offset, late, "\(message()): \(offset.rounded()) ms after it was due", file: file, line: line)
}
