import Foundation

/// A value behind a lock: what the standard library's `Mutex` does, with the same `withLock`, in a
/// form the thread sanitizer can check. On Linux `Mutex` waits in the kernel when it is contended
/// (FUTEX_LOCK_PI): the sanitizer never sees that lock taken and given back, so it reports the
/// guarded value as raced between any two threads that met at the lock (`make test-sanitize`), which
/// would leave it blind to real races beside them. This one is an `NSLock`, a pthread mutex, which
/// the sanitizer follows. Any thread.
/// @unchecked Sendable: `value` is touched only inside `withLock`, under `lock`.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    /// Unchecked: the lock already keeps any two accesses apart, and the runtime's check would
    /// cost every caller (a connect takes several locks) a second bookkeeping of the same thing.
    @exclusivity(unchecked) private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` on the value with the lock held; do not call back into the same lock from it.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
