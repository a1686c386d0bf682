/// Counters of the API's work, exported at /metrics in Prometheus' text format with the
/// transport's figures (`TransportStatus`). Touched only by the state's owner, under its lock.
public struct ServerMetrics {
    public var httpRequests = 0
    public var httpErrors = 0
    public var eventsPublished = 0
    public var clientMessages = 0
    public var clientErrors = 0
    public var rateLimited = 0
    public var connectionsRefused = 0

    public init() {}

    /// Renders every counter and the gauges given, each with its HELP and TYPE lines (what /metrics
    /// showed before it had the store and storage to ask; `MetricsSnapshot.render` shows everything).
    public func render(_ transport: TransportStatus, tasks: Int, seq: UInt64) -> [UInt8] {
        var text = PrometheusText()
        render(into: &text, transport, tasks: tasks, seq: seq)
        return text.bytes
    }

    func render(into text: inout PrometheusText, _ transport: TransportStatus, tasks: Int, seq: UInt64) {
        text.counter("ringcast_http_requests_total", "API requests answered.", httpRequests)
        text.counter("ringcast_http_errors_total", "API requests answered with a 4xx.", httpErrors)
        text.counter("ringcast_events_published_total", "Events produced by changes to tasks.", eventsPublished)
        text.counter("ringcast_frames_sent_total", "WebSocket frames written to watchers.", transport.framesSent)
        text.counter("ringcast_events_sent_total", "Events written to watchers (a frame may hold several).", transport.eventsSent)
        text.counter(
            "ringcast_events_coalesced_total",
            "Progress and tick events that a later event of the same task replaced within a flushMilliseconds window (counted by each service thread).",
            transport.eventsCoalesced)
        text.counter("ringcast_resyncs_total", "Watchers that fell out of the fan-out log and were sent state instead.", transport.resyncs)
        text.counter("ringcast_watchers_opened_total", "WebSocket connections accepted.", transport.socketsOpened)
        text.counter("ringcast_client_messages_total", "Messages received from WebSocket clients.", clientMessages)
        text.counter("ringcast_client_errors_total", "Error events sent for bad client messages.", clientErrors)
        text.counter("ringcast_rate_limited_total", "Requests and WebSockets refused for publishing past maxPublishRate.", rateLimited)
        text.counter(
            "ringcast_connections_refused_total", "Sockets closed at accept for passing maxConnections or maxConnectionsPerAddress.",
            connectionsRefused)
        text.gauge("ringcast_watchers", "WebSocket connections open now.", Double(transport.watchers))
        text.gauge("ringcast_tasks", "Tasks held now.", Double(tasks))
        text.gauge("ringcast_seq", "The current sequence number.", Double(seq))
        text.gauge(
            "ringcast_pattern_sets", "Distinct watch-pattern sets, each with its own fan-out log (summed over service threads).",
            Double(transport.patternSets))
        text.gauge("ringcast_service_threads", "Service threads, each with its own libwebsockets context.", Double(transport.threads))
    }
}

/// What one service thread counts of its own sockets and frames. Plain numbers that add up (`+`):
/// each thread keeps its own and a scrape renders their sum. Its thread writes it; others read a copy
/// under the lock it is kept behind.
public struct TransportMetrics: Equatable, Sendable {
    /// Sockets accepted (each may carry many HTTP requests, or become a WebSocket), and closed.
    public var connectionsAccepted = 0
    public var connectionsClosed = 0
    /// Times accepting paused for want of descriptors, and resumed (their difference: paused now).
    public var acceptPauses = 0
    public var acceptResumes = 0
    /// WebSockets closed for taking nothing written to them for `writeTimeoutSeconds` (4408).
    public var writeTimeouts = 0
    /// WebSockets opened and closed, by kind: `watcher`, `publisher`.
    public var webSocketsOpened = LabeledCounts()
    public var webSocketsClosed = LabeledCounts()
    /// Payload bytes written: WebSocket frames, and API answers (lws serves static files itself).
    public var webSocketBytes = 0
    public var httpBytes = 0
    /// Events in each frame written to a watcher.
    public var eventsPerFrame = Histogram(bounds: Histogram.eventCounts)
    /// Seconds from a change being applied to the frame carrying the newest of its events being
    /// written to a watcher (the storage commit it waits for, the hand-over to the thread, the fan-out).
    public var publishToWrite = Histogram(bounds: Histogram.latencySeconds)

    public init() {}

    // Every field, by kind, for `+`; MetricsTests checks that no field is left out.
    static var counterFields: [WritableKeyPath<TransportMetrics, Int>] {
        [\.connectionsAccepted, \.connectionsClosed, \.acceptPauses, \.acceptResumes, \.writeTimeouts, \.webSocketBytes, \.httpBytes]
    }
    static var labeledFields: [WritableKeyPath<TransportMetrics, LabeledCounts>] { [\.webSocketsOpened, \.webSocketsClosed] }
    static var histogramFields: [WritableKeyPath<TransportMetrics, Histogram>] { [\.eventsPerFrame, \.publishToWrite] }

    /// Two service threads' counts as one.
    public static func + (lhs: TransportMetrics, rhs: TransportMetrics) -> TransportMetrics {
        var sum = lhs
        for field in counterFields { sum[keyPath: field] += rhs[keyPath: field] }
        for field in labeledFields { sum[keyPath: field] = sum[keyPath: field] + rhs[keyPath: field] }
        for field in histogramFields { sum[keyPath: field] = sum[keyPath: field] + rhs[keyPath: field] }
        return sum
    }

    public func merged(with other: TransportMetrics) -> TransportMetrics { self + other }

    /// WebSockets open now, by kind.
    public func webSocketsOpen(_ kind: String) -> Int { webSocketsOpened[kind] - webSocketsClosed[kind] }
}

/// Why a client was refused or closed: the `reason` of `ringcast_refusals_total` and of the log line.
public enum RefusalReason: String, CaseIterable, Sendable {
    /// The `Host` header names no host of this server (421).
    case host
    /// A page from an origin not in `allowedOrigins`.
    case origin
    /// Past `maxConnections` or `maxConnectionsPerAddress`, closed at accept.
    case connections
    /// Publishing past `maxPublishRate` (429, or close 1008).
    case rate
    /// A body or message over `maxMessageBytes` (413, or an `error` event).
    case oversize
    /// Closed because the server stops (1001).
    case shutdown
    /// A WebSocket closed for its token: none where reading needs one, one that does not hold,
    /// one that may not read what it watches, one that expired, or one a reload shut out (4401, 4403, 4440, 4441).
    case token
    /// A WebSocket past its entry's `maxConnections` (4429).
    case quota
    /// A WebSocket that took nothing written to it for `writeTimeoutSeconds` (4408).
    case stalled
}

/// Everything /metrics shows at one scrape: the API's counters, what the transport (every service
/// thread's, summed) and storage report now, and the store's gauges (`API.metricsSnapshot`).
public struct MetricsSnapshot {
    public var counters: ServerMetrics
    public var transport: TransportStatus
    public var tasks: Int
    public var tasksByState: [TaskState: Int]
    public var seq: UInt64
    /// Tasks removed because their retention ran out.
    public var retired: Int
    /// Webhooks and control requests, rendered last.
    public var followUp = FollowUpMetrics()

    public func render() -> [UInt8] {
        var text = PrometheusText()
        let transport = transport
        let sockets = transport.metrics
        text.family("ringcast_build_info", "gauge", "Always 1; the labels say which release and protocol version this server runs.")
        text.sample("ringcast_build_info", [("version", RingcastVersion.version), ("protocol", String(ProtocolInfo.version))], 1)
        text.gauge("ringcast_start_time_seconds", "When the server started, in Unix seconds.", transport.startTime)
        counters.render(into: &text, transport, tasks: tasks, seq: seq)

        let watchers = sockets.webSocketsOpen("watcher")
        let publishers = sockets.webSocketsOpen("publisher")
        text.gauge(
            "ringcast_connections", "Sockets open now, by what they carry: HTTP requests, or a watcher's or a publisher's WebSocket.",
            label: "kind",
            [
                ("http", Double(max(0, transport.openSockets - watchers - publishers))),
                ("publisher", Double(publishers)), ("watcher", Double(watchers)),
            ])
        text.counter("ringcast_connections_accepted_total", "Sockets accepted (HTTP; some become WebSockets).", sockets.connectionsAccepted)
        text.counter(
            "ringcast_accept_paused_total",
            "Times a service thread stopped accepting because the process was out of file descriptors (new connections wait in the backlog).",
            sockets.acceptPauses)
        text.gauge(
            "ringcast_accept_paused", "Service threads not accepting now, for want of file descriptors.",
            Double(max(0, sockets.acceptPauses - sockets.acceptResumes)))
        text.counter(
            "ringcast_write_timeouts_total", "WebSockets closed (4408) for taking nothing written to them for writeTimeoutSeconds.",
            sockets.writeTimeouts)
        text.counter(
            "ringcast_websockets_opened_total", "WebSockets opened on /ws, by kind.", label: "kind", sockets.webSocketsOpened,
            always: ["publisher", "watcher"])
        text.counter(
            "ringcast_bytes_sent_total", "Payload bytes written: WebSocket frames, and API answers (static files are not counted).",
            label: "kind", LabeledCounts(["http": sockets.httpBytes, "websocket": sockets.webSocketBytes]))
        text.histogram("ringcast_events_per_frame", "Events in each frame written to a watcher.", sockets.eventsPerFrame)
        text.histogram(
            "ringcast_publish_to_write_seconds",
            "Seconds from a change being applied to the frame with the newest of its events being written to a watcher.",
            sockets.publishToWrite)
        text.counter(
            "ringcast_refusals_total", "Clients refused or closed, by reason.", label: "reason", transport.refusals,
            always: RefusalReason.allCases.map(\.rawValue))

        text.gauge(
            "ringcast_tasks_by_state", "Tasks held now, by state.", label: "state",
            TaskState.allCases.map { ($0.rawValue, Double(tasksByState[$0, default: 0])) })
        text.counter("ringcast_tasks_retired_total", "Tasks removed because their retention (retentionSeconds) ran out.", retired)

        if let storage = transport.storage {
            text.histogram(
                "ringcast_storage_commit_seconds", "Seconds each storage transaction took (a group commit of many changes).",
                storage.commitSeconds)
            text.counter("ringcast_storage_commit_failures_total", "Storage transactions that failed after their retries.", storage.commitFailures)
        }
        text.gauge(
            "ringcast_ready", "1 while the dependency answers (what /readyz reports), else 0.", label: "check",
            transport.readiness.map { ($0.name, $0.ready ? 1 : 0) })
        return text.bytes + followUp.render()
    }
}

/// What a storage engine reports at /metrics; it times its own transactions, on its own thread.
public struct StorageMetrics: Equatable, Sendable {
    public var commitSeconds = Histogram(bounds: Histogram.latencySeconds)
    public var commitFailures = 0

    public init() {}
}

/// Storage that keeps `StorageMetrics`. Read from the service threads while storage writes on its
/// own: the engine guards them.
public protocol StorageMetricsSource: AnyObject {
    var storageMetrics: StorageMetrics { get }
}
