import RingcastCore
import RingcastLWS
import RingcastPlatform

/// What every service thread counts and logs against: the open sockets in all and per address
/// (and the limits they are held to), the WebSockets per entry with a `maxConnections`, and the
/// refusals, logged once per offender and reason and counted for /metrics. Any thread: each part
/// has its own lock.
final class ServerLedger: Sendable {
    let logger: Logger
    /// Open sockets in all and per address, across every loop, and the limits they are held to.
    let connections = Locked(ConnectionBook())
    /// WebSockets open per publisher or reader entry with a `maxConnections`, across every thread.
    let connectionsByEntry = Locked<[String: Int]>([:])
    private let refusals = Locked(RefusalLog())
    /// Refusals by reason, for /metrics.
    let refusalCounts = Locked(LabeledCounts())

    init(logger: Logger) { self.logger = logger }

    /// Accepting paused for want of descriptors: one line, then at most one a minute however
    /// often it pauses again (each pause is counted in /metrics, `ringcast_accept_paused_total`).
    func logAcceptPause(_ reason: String) {
        let verdict = refusals.withLock { $0.admit(reason: "descriptors", offender: "accept", now: Clock.now()) }
        guard verdict.log else { return }
        let held = connections.withLock { $0.total }
        let suppressed = verdict.suppressed > 0 ? " (paused \(verdict.suppressed) more times since the last report)" : ""
        logger.warning(
            "accepting paused: out of file descriptors (\(reason)) with \(held) connections open at an open-file limit of \(LWS.openFileLimit.map(String.init) ?? "none"); new connections wait until some close. Lower maxConnections or raise the limit (ulimit -n, LimitNOFILE=)\(suppressed)",
            fields: [("reason", .string("descriptors")), ("suppressed", .number(Double(verdict.suppressed)))])
    }

    /// A refused client, logged once per offender and reason (then at most once a minute, with a count).
    func logRefusal(_ reason: String, offender: String, _ message: @autoclosure () -> String) {
        refusalCounts.withLock { $0[reason] += 1 }
        let verdict = refusals.withLock { $0.admit(reason: reason, offender: offender, now: Clock.now()) }
        guard verdict.log else { return }
        let suppressed = verdict.suppressed > 0 ? " (and \(verdict.suppressed) more like it since the last report)" : ""
        logger.warning(
            "\(message())\(suppressed)",
            fields: [("reason", .string(reason)), ("peer", .string(offender)), ("suppressed", .number(Double(verdict.suppressed)))])
    }
}
