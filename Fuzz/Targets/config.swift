import RingcastCore

/// ServerConfig.parse over any bytes, as `ringcast serve` reads config.json (`//` comments
/// included). What it accepts holds only values in their documented ranges; what it refuses is said
/// with the file's name first. Blanking the comments keeps every byte's place. Then
/// ServerConfig.load, as serve reads the file and the environment: a comment line
/// `//env RINGCAST_PORT=9` in the input sets that variable, and each override set wins over the
/// file and is reported as coming from its variable, or is refused with the variable's name.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let blanked = ConfigText.withoutComments(input)
    expect(
        blanked.count == input.count && zip(blanked, input).allSatisfy { $0 == $1 || $0 == UInt8(ascii: " ") && $1 != 0x0A },
        "blanking comments moved a byte or a line end")
    var environment = ["RINGCAST_CI_TOKEN": "env-token-0123456789abcdef", "EMPTY": ""]
    for line in input.split(separator: 0x0A) where line.starts(with: "//env ".utf8) {
        let assignment = text(Array(line.dropFirst(6)))
        if let equals = assignment.firstIndex(of: "=") {
            environment[String(assignment[..<equals])] = String(assignment[assignment.index(after: equals)...])
        }
    }
    checkLoad(input, environment: environment)
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
    if let perAddress = config.maxConnectionsPerAddress {
        expect((0...10_000_000).contains(perAddress), "maxConnectionsPerAddress \(perAddress)")
    }
    if let total = config.maxConnections { expect((1...10_000_000).contains(total), "maxConnections \(total)") }
    expect((0...67_108_864).contains(config.sendBufferBytes), "sendBufferBytes \(config.sendBufferBytes)")
    expect((0...86_400).contains(config.writeTimeoutSeconds), "writeTimeoutSeconds \(config.writeTimeoutSeconds)")
    expect((1...3600).contains(config.handshakeTimeoutSeconds), "handshakeTimeoutSeconds \(config.handshakeTimeoutSeconds)")
    expect((0...256).contains(config.threads), "threads \(config.threads)")
    expect(config.abandonAfterSeconds >= 0 && config.abandonAfterSeconds <= 31_536_000, "abandonAfterSeconds \(config.abandonAfterSeconds)")
    expect(ServerConfig.logLinesRange.contains(Double(config.logLines)), "logLines \(config.logLines)")
    expect(LogFormat.allCases.contains(config.logFormat), "logFormat \(config.logFormat)")
    expect((0...1000).contains(config.flushMilliseconds), "flushMilliseconds \(config.flushMilliseconds)")
    if let tls = config.tls { expect(!tls.cert.isEmpty && !tls.key.isEmpty, "tls with an empty file name") }
    for host in config.allowedHosts { expect(host == host.lowercased() && !host.isEmpty, "allowedHosts holds \(host)") }
    for origin in config.allowedOrigins {
        expect(origin.hasPrefix("http://") || origin.hasPrefix("https://"), "allowedOrigins holds \(origin)")
    }
    for publisher in config.access.entries {
        expect(!publisher.name.isEmpty, "an entry without a name")
        expect(
            !publisher.patterns.globs.isEmpty && publisher.patterns.globs.allSatisfy { Glob.isValid($0.pattern) },
            "entry patterns \(publisher.patterns.key)")
    }
    return 0
}

/// `load` is `parse` and then the overrides: it fails with the file's error when parse does, else
/// with an override's variable named, else gives parse's settings with each override's value.
private func checkLoad(_ input: [UInt8], environment: [String: String]) {
    let parsed = try? ServerConfig.parse(input, environment: environment)
    let loaded: LoadedConfig
    do {
        loaded = try ServerConfig.load(input, source: "config.json", environment: environment)
    } catch {
        let variables = ServerConfig.environmentOverrides.map(\.variable).filter { !(environment[$0] ?? "").isEmpty }
        expect(
            parsed == nil ? error.description.hasPrefix("config.json") : variables.contains { error.description.hasPrefix($0) },
            "load refused with \(error) (parse \(parsed == nil ? "refused" : "took") the file)")
        return
    }
    guard var expected = parsed else { fatalError("invariant broken: load took a file parse refuses") }
    for (variable, key) in ServerConfig.environmentOverrides {
        guard let value = environment[variable], !value.isEmpty else {
            expect(loaded.origin(of: key) != .environment(variable), "\(key) said to come from unset \(variable)")
            continue
        }
        expect(loaded.origin(of: key) == .environment(variable), "\(key) from \(loaded.origin(of: key)), not \(variable)")
        switch key {
        case "host": expected.host = value
        case "port": expected.port = Int(value) ?? -1
        case "storage": expected.storage = value
        case "logLevel": expected.logLevel = LogLevel(rawValue: value) ?? expected.logLevel
        default: fatalError("invariant broken: an override of \(key) this target does not know")
        }
    }
    expect(loaded.config == expected, "load's settings are not the file's with the overrides")
    _ = loaded.summary
}
