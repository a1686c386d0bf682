/// What SIGHUP does with a configuration file: the settings a running server can change without
/// dropping a connection are taken from the file; every other one keeps the value the server
/// started with, and is named so the operator knows a restart is owed. A file that does not parse
/// or validate changes nothing (the caller keeps what runs).

extension ServerConfig {
    /// One setting SIGHUP applies: how its value is taken from the file just read into the
    /// configuration that runs.
    public struct LiveSetting: Sendable {
        public let key: String
        let take: @Sendable (_ running: inout ServerConfig, _ file: ServerConfig) -> Void

        init(_ key: String, _ take: @escaping @Sendable (_ running: inout ServerConfig, _ file: ServerConfig) -> Void) {
            self.key = key
            self.take = take
        }
    }

    /// Every setting SIGHUP applies to a running server; any key not here needs a restart.
    /// docs/CONFIG.md says the same of each setting (ConfigReferenceTests holds it to this list).
    public static let liveSettings: [LiveSetting] = [
        LiveSetting("publishers") { $0.access.entries = $1.access.publishers + $0.access.readers },
        LiveSetting("readers") { $0.access.entries = $0.access.publishers + $1.access.readers },
        LiveSetting("anonymousRead") { $0.access.anonymousRead = $1.access.anonymousRead },
        LiveSetting("anonymousLocalPublish") { $0.access.anonymousLocalPublish = $1.access.anonymousLocalPublish },
        LiveSetting("anonymousLocalMaxTasks") { $0.access.anonymousLocalMaxTasks = $1.access.anonymousLocalMaxTasks },
        LiveSetting("tokenSecretEnv") { $0.access.tokenSecret = $1.access.tokenSecret },
        LiveSetting("tokenMaxTasks") { $0.access.tokenMaxTasks = $1.access.tokenMaxTasks },
        LiveSetting("allowedOrigins") { $0.allowedOrigins = $1.allowedOrigins },
        LiveSetting("webhooks") { $0.webhooks = $1.webhooks },
        LiveSetting("logLevel") { $0.logLevel = $1.logLevel },
        // Providers' keys already fetched are kept (per issuer and `kid`); sign-ins begun under
        // the old settings begin again.
        LiveSetting("oidc") { $0.oidc = $1.oidc },
        // Files re-read and swapped for new handshakes; turning TLS on or off needs a restart
        // (`reloaded` keeps it then), since the listeners' scheme is fixed at start.
        LiveSetting("tls") { if $0.tls != nil, $1.tls != nil { $0.tls = $1.tls } },
    ]

    public static var liveKeys: [String] { liveSettings.map(\.key) }

    /// The configuration a running server moves to when its file now reads `file`: the live
    /// settings from the file, the others as they run. `changedInFile` names the settings whose
    /// value in the file differs from the one that runs (compared as written, so a reordered list
    /// counts as a change); the live ones among them are applied, the others kept and returned.
    /// Throws when the result breaks a rule across settings (a publisher's `maxTasks` over a
    /// `maxTasks` that did not change): nothing is then applied.
    public func reloaded(from file: ServerConfig, source: String) throws(ConfigError) -> ConfigReload {
        // Publishers first, then readers, in both: the order the file wrote the two keys in is no change.
        var next = self
        next.access.entries = access.publishers + access.readers
        var applied: [String] = []
        for setting in ServerConfig.liveSettings {
            let before = next
            setting.take(&next, file)
            if next != before { applied.append(setting.key) }
        }
        var kept: [String] = []
        if (tls == nil) != (file.tls == nil) { kept.append("tls") }
        try next.checkAccess(source: source)
        return ConfigReload(config: next, applied: applied, kept: kept)
    }

    /// The top-level keys whose value differs between two files' texts, as written (comments
    /// dropped): the settings an operator changed. A file that does not parse has no keys.
    public static func changedKeys(_ before: [UInt8], _ after: [UInt8]) -> [String] {
        func members(_ bytes: [UInt8]) -> [(String, JSONValue)] {
            guard case .object(let members)? = try? JSONParser.parse(ConfigText.withoutComments(bytes)) else { return [] }
            return members
        }
        let old = members(before)
        let new = members(after)
        func value(_ key: String, in members: [(String, JSONValue)]) -> JSONValue? { members.first { $0.0 == key }?.1 }
        var keys: [String] = []
        for key in (old + new).map(\.0) where !keys.contains(key) && value(key, in: old) != value(key, in: new) { keys.append(key) }
        return keys
    }
}

/// What a reload does: the configuration that runs from now on, the live settings whose value
/// changed, and the settings that changed in the file but keep their running value until a restart.
public struct ConfigReload: Sendable {
    public let config: ServerConfig
    public let applied: [String]
    public var kept: [String]
}

/// Which configuration runs: the how-many-th load since start (1 at start), a hash of the file's
/// bytes (FNV-1a, 64 bits, in hex: `sha256sum` is not needed to tell two loads apart), when it
/// was loaded (Unix ms), and the file. `/readyz` and the log say it.
public struct ConfigGeneration: Equatable, Sendable {
    public let generation: Int
    public let hash: String
    public let loadedAt: Double
    public let source: String

    public init(generation: Int, bytes: [UInt8], loadedAt: Double, source: String) {
        self.generation = generation
        hash = ConfigGeneration.fnv1a(bytes)
        self.loadedAt = loadedAt
        self.source = source
    }

    static func fnv1a(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The fields the log line and `/readyz` carry.
    public var fields: [LogField] {
        [
            ("configGeneration", .number(Double(generation))), ("configHash", .string(hash)),
            ("configLoadedAt", .number(loadedAt.rounded())), ("configSource", .string(source)),
        ]
    }
}
