import Glibc

/// A file held for one process: an exclusive `flock` on `path`, which holds the holder's pid so
/// that a second process can say who holds it. The kernel drops the lock when its holder exits
/// (kill -9 included), so a crash leaves nothing to clean up; the file stays, with a stale pid
/// that is read only while someone holds the lock.
///
/// Beside a storage file rather than on it: closing any descriptor of a file drops every POSIX
/// lock the process holds on it, SQLite's own included, and SQLite's `locking_mode=EXCLUSIVE`
/// names no holder and shuts out read-only inspection of the file too. The lock is taken once,
/// at start, so writes pay nothing for it.
package final class OwnerLock: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is set once and closed once, in deinit.
    package let path: String
    private let descriptor: Int32

    /// Who holds the lock, when `OwnerLock` could not take it.
    package struct Held: Error, Sendable {
        /// The holder's pid, as it wrote it (nil when it wrote none yet, or something else).
        package let pid: Int32?
        package let path: String
    }

    /// Takes the lock or throws `Held` (someone else has it) or `CCallError` (the file cannot be
    /// opened or written); never waits.
    package init(path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try checked(fd, "open", detail: { _, code in "cannot open the lock file '\(path)': \(CCallError.errnoText(code))" })
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            defer { close(fd) }
            guard code == EWOULDBLOCK else {
                throw CCallError("flock", "cannot lock '\(path)': \(CCallError.errnoText(code))", errno: code)
            }
            throw Held(pid: OwnerLock.readPid(fd), path: path)
        }
        let text = Array("\(getpid())\n".utf8)
        let written = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == text.count, ftruncate(fd, off_t(text.count)) == 0 else {
            let code = errno
            close(fd)
            throw CCallError("pwrite", "cannot write the lock file '\(path)': \(CCallError.errnoText(code))", errno: code)
        }
        self.path = path
        descriptor = fd
    }

    deinit { close(descriptor) }

    private static func readPid(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").first ?? ""
        return Int32(text)
    }
}
