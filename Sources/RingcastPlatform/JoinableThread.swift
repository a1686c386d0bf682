import Foundation
import Glibc

/// A POSIX thread that runs one body and can be joined: Foundation's `Thread` cannot be, and a
/// caller that must know a thread is gone (its thread-local clean-up done, not only its body) before
/// the process exits has to join it. Joined at most once; any thread but its own.
/// @unchecked Sendable: `handle` is written once in `init` and read only by `join`, under `lock`.
package final class JoinableThread: @unchecked Sendable {
    private var handle: pthread_t?
    private let lock = Locked(false)

    /// Starts `body` on a new thread named `name` (Linux keeps the first 15 bytes).
    package init(name: String, _ body: @escaping @Sendable () -> Void) throws(CCallError) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { argument in
                // The retain taken above is released here, once the body has run.
                let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
                // Named from inside: a name set from another thread may land on the wrong one.
                Thread.current.name = start.name
                start.body()
                return nil
            }, start)
        guard status == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw CCallError("pthread_create", CCallError.errnoText(status), status: status, errno: status)
        }
        handle = thread
    }

    /// Waits until the thread has ended; later calls return at once.
    package func join() {
        let first = lock.withLock { joined in
            defer { joined = true }
            return !joined
        }
        guard first, let handle else { return }
        pthread_join(handle, nil)
    }

    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
