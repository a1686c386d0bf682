import CLibWebSockets
import CRingcastShims

/// A one-shot timer on a loop's service thread (a libev timer of the shim's, `rc_timer`). The loop holds it and
/// frees it when it stops; schedule and cancel on the service thread only.
package final class LoopTimer {
    var pointer: OpaquePointer?
    let fire: () -> Void

    init(fire: @escaping () -> Void) {
        self.fire = fire
    }

    /// (Re)arms the timer; an earlier schedule is replaced.
    package func schedule(microseconds: Int64) {
        guard let pointer else { return }
        rc_timer_schedule(pointer, microseconds)
    }

    package func schedule(seconds: Double) { schedule(microseconds: Int64((seconds * 1_000_000).rounded(.up))) }

    package func cancel() {
        if let pointer { rc_timer_cancel(pointer) }
    }

    func release() {
        guard let pointer else { return }
        rc_timer_cancel(pointer)
        rc_timer_free(pointer)
        self.pointer = nil
    }
}
