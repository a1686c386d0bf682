import RingcastCore

/// ServerConfig.parse over any bytes, as `ringcast serve` reads config.json. What it accepts holds
/// only values in their documented ranges; what it refuses is said with the file's name first.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let environment = ["RINGCAST_CI_TOKEN": "env-token-0123456789abcdef", "EMPTY": ""]
    let config: ServerConfig
    do {
        config = try ServerConfig.parse(input, environment: environment)
    } catch {
        expect(error.description.hasPrefix("config.json"), "an error names the file: \(error)")
        return 0
    }
    expect((try? ServerConfig.parse(input, environment: environment)) == config, "parsing is not deterministic")
    expect((0...65535).contains(config.port), "port \(config.port)")
    expect(config.heartbeatSeconds >= 0.1 && config.heartbeatSeconds <= 3600, "heartbeatSeconds \(config.heartbeatSeconds)")
    expect((1024...(64 << 20)).contains(config.maxMessageBytes), "maxMessageBytes \(config.maxMessageBytes)")
    expect((16...1_000_000).contains(config.fanOutLogEvents), "fanOutLogEvents \(config.fanOutLogEvents)")
    expect((1...10_000).contains(config.maxEventsPerFrame), "maxEventsPerFrame \(config.maxEventsPerFrame)")
    expect(config.staticMaxAge >= 0, "staticMaxAge \(config.staticMaxAge)")
    expect(!config.host.isEmpty && !config.publicDir.isEmpty && !config.storage.isEmpty, "an empty string setting")
    expect(config.retentionSeconds >= 1 && config.retentionSeconds <= 31_536_000, "retentionSeconds \(config.retentionSeconds)")
    expect((1...10_000_000).contains(config.maxTasks), "maxTasks \(config.maxTasks)")
    expect(config.maxPublishRate >= 0 && config.maxPublishRate <= 100_000_000, "maxPublishRate \(config.maxPublishRate)")
    expect((0...10_000_000).contains(config.maxConnectionsPerAddress), "maxConnectionsPerAddress \(config.maxConnectionsPerAddress)")
    expect((1...3600).contains(config.handshakeTimeoutSeconds), "handshakeTimeoutSeconds \(config.handshakeTimeoutSeconds)")
    expect((0...256).contains(config.threads), "threads \(config.threads)")
    expect(config.abandonAfterSeconds >= 0 && config.abandonAfterSeconds <= 31_536_000, "abandonAfterSeconds \(config.abandonAfterSeconds)")
    expect(ServerConfig.logLinesRange.contains(Double(config.logLines)), "logLines \(config.logLines)")
    for host in config.allowedHosts { expect(host == host.lowercased() && !host.isEmpty, "allowedHosts holds \(host)") }
    for origin in config.allowedOrigins {
        expect(origin.hasPrefix("http://") || origin.hasPrefix("https://"), "allowedOrigins holds \(origin)")
    }
    for publisher in config.publishing.publishers {
        expect(!publisher.name.isEmpty, "a publisher without a name")
        expect(!publisher.patterns.globs.isEmpty && publisher.patterns.globs.allSatisfy { Glob.isValid($0.pattern) }, "publisher patterns \(publisher.patterns.key)")
    }
    return 0
}
