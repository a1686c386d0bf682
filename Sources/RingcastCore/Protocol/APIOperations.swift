/// What operators ask the API: `/readyz`, and the snapshot `/metrics` renders. Service thread only,
/// as all of `API`.
extension API {
    /// 200 `{"ready": true, …}` while every dependency answers; else 503 with the reasons.
    public func readinessResponse(_ checks: [ReadinessStatus]) -> APIResponse {
        let failures = checks.compactMap(\.failure)
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("ready")
        writer.bool(failures.isEmpty)
        if !failures.isEmpty {
            writer.key("reason")
            writer.string(failures.joined(separator: "; "))
        }
        writer.key("server")
        writer.string(RingcastVersion.version)
        writer.key("checks")
        writer.beginObject()
        for check in checks {
            writer.key(check.name)
            writer.beginObject()
            writer.key("ready")
            writer.bool(check.ready)
            if let failure = check.failure {
                writer.key("reason")
                writer.string(failure)
            }
            writer.endObject()
        }
        writer.endObject()
        if let configGeneration {
            writer.key("config")
            writer.beginObject()
            writer.key("generation")
            writer.number(configGeneration.generation)
            writer.key("hash")
            writer.string(configGeneration.hash)
            writer.key("loadedAt")
            writer.number(configGeneration.loadedAt.rounded())
            writer.endObject()
        }
        // A receiver that fails is its hook's trouble, not the server's: shown, never "not ready".
        if !followUpMetrics.webhookHooks.isEmpty {
            writer.key("webhooks")
            writer.beginArray()
            for (index, hook) in followUpMetrics.webhookHooks.enumerated() {
                writer.beginObject()
                writer.key("hook")
                writer.number(index)
                writer.key("url")
                writer.string(hook.url)
                writer.key("circuit")
                writer.string(hook.circuit.rawValue)
                writer.key("failuresInARow")
                writer.number(hook.consecutiveFailures)
                writer.key("owed")
                writer.number(hook.owed)
                writer.key("inFlight")
                writer.number(hook.inFlight)
                if let probeAt = hook.probeAt {
                    writer.key("probeAt")
                    writer.number(probeAt.rounded())
                }
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endObject()
        return APIResponse(status: failures.isEmpty ? 200 : 503, body: writer.bytes)
    }

    /// This thread's counters with the store's gauges. With several service threads, sum their
    /// counters and transports into `counters` and `transport` before rendering.
    public func metricsSnapshot(transport: TransportStatus) -> MetricsSnapshot {
        var byState: [TaskState: Int] = [:]
        for task in store.tasks.values { byState[task.state, default: 0] += 1 }
        var followUp = followUpMetrics
        followUp.logBytes = store.logBytesHeld
        return MetricsSnapshot(
            counters: metrics, transport: transport, tasks: store.tasks.count, tasksByState: byState,
            seq: store.seq, retired: store.retiredCount, followUp: followUp)
    }
}
