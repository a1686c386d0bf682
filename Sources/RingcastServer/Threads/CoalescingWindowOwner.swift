import RingcastCore
import RingcastLWS
import Synchronization

/// A service thread's coalescing window (`flushMilliseconds`), and the one place that says whether
/// it is open. It opens with the first event it holds and arms its timer; while it is open the
/// shared state leaves deliveries in the thread's inbox without waking it (`isOpen`); it closes,
/// publishing what it held to the fan-out, when its timer fires, before a heartbeat, at shutdown,
/// or at once when it holds as many events as a log does (its watchers could take no more).
/// Service thread only, but for `isOpen`, which the shared state reads under its lock.
/// @unchecked Sendable: `fanOut` and `timer` are touched only on the service thread; other threads
/// read only `open`, an atomic.
final class CoalescingWindowOwner: @unchecked Sendable {
    private let fanOut: FanOut
    private let microseconds: Int64
    /// Set by `prepare` on the service thread before anything is held.
    private var timer: LoopTimer?
    /// The loop whose thread owns the window, for its debug builds' checks.
    private unowned(unsafe) var loop: ServiceLoop?
    private let open = Atomic<Bool>(false)
    /// Between `beginClosing` and `close`: the inbox is being taken into the window.
    private var isClosing = false

    init(fanOut: FanOut, milliseconds: Int) {
        self.fanOut = fanOut
        microseconds = Int64(milliseconds) * 1000
    }

    /// On the service thread, as its loop starts: `fired` closes the window and sends what it held.
    func prepare(_ loop: ServiceLoop, fired: @escaping () -> Void) throws {
        self.loop = loop
        timer = try loop.makeTimer(fired)
    }

    var isOpen: Bool { open.load(ordering: .acquiring) }

    /// Holds events for the window, opening it with the first (unless it is closing). False when
    /// nothing is held after all (a full window was published at once): the caller flushes then.
    func hold(_ events: [OutboundEvent]) -> Bool {
        assertOnThread(of: loop)
        fanOut.hold(events)
        guard fanOut.isHolding else { return isOpen }
        if fanOut.heldCount >= fanOut.logCapacity {
            close()
            return false
        }
        if !isOpen, !isClosing {
            open.store(true, ordering: .releasing)
            timer?.schedule(microseconds: microseconds)
        }
        return true
    }

    /// The window's time is up: from now on deliveries wake the thread again, and what the inbox
    /// holds still joins the window (`hold` does not reopen it) until `close`.
    func beginClosing() {
        assertOnThread(of: loop)
        isClosing = true
        open.store(false, ordering: .releasing)
        timer?.cancel()
    }

    /// Closes the window: what it held goes to the fan-out's logs. True when there was something.
    @discardableResult
    func close() -> Bool {
        assertOnThread(of: loop)
        if isOpen {
            open.store(false, ordering: .releasing)
            timer?.cancel()
        }
        isClosing = false
        return fanOut.releaseWindow()
    }
}
