import Foundation

/// SIGINT and SIGTERM, owned here. `main` blocks both before any thread starts (threads inherit the
/// mask), so no thread is interrupted by one; a command that cares takes them here, synchronously:
/// `serve` waits for one, `load` takes a pending one between progress reports, `run` passes them on
/// to its child. A child process gets the dispositions a fresh process expects.
enum TerminationSignals {
    private static var set: sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        return signals
    }

    /// Once, first thing in `main`: SIGINT and SIGTERM wait to be taken; a write to a closed socket
    /// fails with EPIPE instead of killing the process.
    static func takeOver() {
        var signals = set
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Blocks until SIGINT or SIGTERM arrives; returns which.
    @discardableResult
    static func wait() -> Int32 {
        var signals = set
        var received: Int32 = 0
        while sigwait(&signals, &received) != 0 {}
        return received
    }

    /// For `serve`, before its threads start (they inherit the mask): SIGHUP waits to be taken
    /// too, by `waitWithHangUp`, and means "read the configuration again" instead of ending the
    /// process. Other commands leave SIGHUP as a fresh process has it.
    static func takeOverHangUp() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Blocks until SIGINT, SIGTERM or SIGHUP arrives; returns which (after `takeOverHangUp`).
    static func waitWithHangUp() -> Int32 {
        var signals = set
        sigaddset(&signals, SIGHUP)
        var received: Int32 = 0
        while sigwait(&signals, &received) != 0 {}
        return received
    }

    /// One that arrived, taken; waits at most `timeout` seconds (0: only a pending one).
    /// `sentByKill` is true when a process sent it with kill(2) rather than a terminal's Ctrl-C.
    static func take(timeout: Double = 0) -> (signal: Int32, sentByKill: Bool)? {
        var signals = set
        var info = siginfo_t()
        var limit = timespec(tv_sec: Int(timeout), tv_nsec: Int((timeout - timeout.rounded(.down)) * 1e9))
        let signal = sigtimedwait(&signals, &info, &limit)
        return signal > 0 ? (signal, info.si_code == SI_USER) : nil
    }

    /// For posix_spawn: the child starts with no signal blocked, and SIGINT, SIGTERM and SIGPIPE at
    /// their default actions.
    static func resetForChild(_ attributes: inout posix_spawnattr_t) {
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = set
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    }
}
