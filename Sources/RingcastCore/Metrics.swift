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

    /// Renders every counter and the gauges given, each with its HELP and TYPE lines.
    public func render(_ transport: TransportStatus, tasks: Int, seq: UInt64) -> [UInt8] {
        var text = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Int) {
            text += prometheusMetric(name, type, help, value)
        }
        metric("http_requests_total", "counter", "API requests answered.", httpRequests)
        metric("http_errors_total", "counter", "API requests answered with a 4xx.", httpErrors)
        metric("events_published_total", "counter", "Events produced by changes to tasks.", eventsPublished)
        metric("frames_sent_total", "counter", "WebSocket frames written to watchers.", transport.framesSent)
        metric("events_sent_total", "counter", "Events written to watchers (a frame may hold several).", transport.eventsSent)
        metric("events_coalesced_total", "counter", "Progress and tick events that a later event of the same task replaced within a flushMilliseconds window (counted by each service thread).", transport.eventsCoalesced)
        metric("resyncs_total", "counter", "Watchers that fell out of the fan-out log and were sent state instead.", transport.resyncs)
        metric("watchers_opened_total", "counter", "WebSocket connections accepted.", transport.socketsOpened)
        metric("client_messages_total", "counter", "Messages received from WebSocket clients.", clientMessages)
        metric("client_errors_total", "counter", "Error events sent for bad client messages.", clientErrors)
        metric("rate_limited_total", "counter", "Requests and WebSockets refused for publishing past maxPublishRate.", rateLimited)
        metric("connections_refused_total", "counter", "Sockets closed at accept for passing maxConnectionsPerAddress.", connectionsRefused)
        metric("watchers", "gauge", "WebSocket connections open now.", transport.watchers)
        metric("tasks", "gauge", "Tasks held now.", tasks)
        metric("seq", "gauge", "The current sequence number.", Int(seq))
        metric("pattern_sets", "gauge", "Distinct watch-pattern sets, each with its own fan-out log (summed over service threads).", transport.patternSets)
        metric("service_threads", "gauge", "Service threads, each with its own libwebsockets context.", transport.threads)
        return Array(text.utf8)
    }
}

/// One metric in Prometheus' text format: its HELP and TYPE lines, then its value.
func prometheusMetric(_ name: String, _ type: String, _ help: String, _ value: Int) -> String {
    "# HELP ringcast_\(name) \(help)\n# TYPE ringcast_\(name) \(type)\nringcast_\(name) \(value)\n"
}
