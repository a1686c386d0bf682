import Glibc

/// The clocks every room reads: the protocol's wall clock, and a monotonic one for durations.
/// The core never reads a clock: it takes `now:` from these.
package enum Clock {
    /// Unix time in milliseconds, the protocol's clock.
    package static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) * 1000 + Double(spec.tv_nsec) / 1_000_000
    }

    /// Seconds on a clock that never jumps, for durations.
    package static func monotonicSeconds() -> Double { Double(MonotonicClock.nanoseconds()) / 1e9 }
}

/// CLOCK_MONOTONIC in nanoseconds: the load tester's one clock. Publisher and watchers live in the
/// same process, so a delivery time minus a send time on this clock has no skew.
package enum MonotonicClock {
    @inline(__always)
    package static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Latency in whole microseconds from a send time to a receive time (0 if the clock were to go
    /// backwards, which a monotonic clock does not).
    @inline(__always)
    package static func latencyMicroseconds(sentAt: UInt64, receivedAt: UInt64) -> UInt64 {
        receivedAt > sentAt ? (receivedAt - sentAt) / 1000 : 0
    }
}
