/// Every setting of `ringcast serve`, read from config.json and validated at start.
public struct ServerConfig: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// The only directory served over HTTP; relative paths are taken from the config file's folder.
    public var publicDir = "Public"
    /// Other sites whose pages may open `/ws`; the server's own origin is always allowed.
    public var allowedOrigins: [String] = []
    /// Seconds between heartbeats on every WebSocket; a page reconnects after two silent ones.
    public var heartbeatSeconds = 15.0
    /// Largest HTTP body or WebSocket message accepted, in bytes.
    public var maxMessageBytes = 1 << 20
    /// Events each watcher pattern set keeps for watchers that are behind; beyond it they resync.
    public var fanOutLogEvents = 4096
    public var maxEventsPerFrame = 256
    /// Seconds a static file may be cached by browsers.
    public var staticMaxAge = 60
    public var logLevel = LogLevel.info
    /// `text` lines for people, or `json`: one object per line for collectors.
    public var logFormat = LogFormat.text
    /// Who may read and who may publish what: `publishers`, `readers`, `anonymousRead`,
    /// `anonymousLocalPublish`, `anonymousLocalMaxTasks`, `tokenSecretEnv` (Access.swift).
    public var access = AccessPolicy()
    /// `access` as the server applies it: a signed token's `sub` without a `tokenMaxTasks` of the
    /// file's holds a tenth of `maxTasks`, so that one token cannot fill the server.
    public var effectiveAccess: AccessPolicy {
        var policy = access
        if policy.tokenMaxTasks == nil { policy.tokenMaxTasks = max(1, maxTasks / 10) }
        return policy
    }
    /// Addresses (or CIDR ranges) of reverse proxies whose `forwardedHeader` names the client; a
    /// request from anywhere else is taken to come from its own address.
    public var trustedProxies: [String] = []
    /// The one header a trusted proxy names the client in; a client's copy of the other is ignored.
    public var forwardedHeader = ForwardedFor.Header.xForwardedFor
    /// Identity providers whose tokens name people, and whose sign-in the dashboard offers
    /// (IdentityProvider.swift); empty: none.
    public var oidc: [IdentityProviderSettings] = []
    /// The headers of an auth proxy in front (oauth2-proxy), believed only from `trustedProxies`.
    public var proxyAuth: ProxyAuthSettings?
    /// `"memory"`, or the SQLite file that keeps tasks across restarts (relative to the config file).
    public var storage = "memory"
    /// In a cluster: how many Redis replicas must confirm a change (Redis's `WAIT`) before it is
    /// answered; 0 answers once the master has it.
    public var redisReplicas = 0
    /// Names besides the configured host, `localhost` and IP literals that the `Host` header may carry
    /// (`.example.com` allows every subdomain; `*` turns the check off).
    public var allowedHosts: [String] = []
    /// Seconds after which a finished task (done, failed, cancelled) or a hidden, untouched one is removed.
    public var retentionSeconds = 86_400.0
    /// The most tasks held at once; past it a new task is refused (nothing held is dropped).
    public var maxTasks = 10_000
    /// Events a second one connection may publish (a token bucket holding one second's worth); 0: no limit.
    public var maxPublishRate = 100_000.0
    /// Sockets the server holds open at once, every address together; nil: what the open-file
    /// limit leaves once the server's own descriptors and a reserve are set aside (`ConnectionLimits`).
    public var maxConnections: Int?
    /// Connections one address may hold open at once; 0: no limit; nil: 1024, or half of
    /// `maxConnections` where that is less, so that one address never holds them all.
    public var maxConnectionsPerAddress: Int?
    /// Whether the per-address limit applies to loopback peers too (a trusted proxy's address never counts).
    public var limitLoopback = true
    /// Bytes the kernel may hold unsent for one socket (SO_SNDBUF); 0: the kernel's own, which
    /// grows to megabytes for a reader that takes nothing.
    public var sendBufferBytes = 256 * 1024
    /// Seconds a WebSocket may take nothing that is written to it before it is closed (4408); 0: never.
    public var writeTimeoutSeconds = 30
    /// Offer permessage-deflate to WebSocket clients that ask for it (browsers do).
    public var compression = false
    /// Serve https:// and wss:// with this certificate and key (PEM files, relative to the config file).
    public var tls: TLSFiles?
    /// Service threads, each with its own libwebsockets context sharing the port; 0 (the default)
    /// means one per online core.
    public var threads = 0
    /// Seconds a connection may take to send its request headers (or finish a WebSocket handshake)
    /// before it is closed; also how long an HTTP body may take to arrive.
    public var handshakeTimeoutSeconds = 10
    /// Hooks POSTed, signed, when a task enters a state (Webhooks.swift).
    public var webhooks: [WebhookRule] = []
    /// Seconds a stalled task stays stalled before it ends failed, "abandoned" (a task's
    /// `abandonAfter` overrides it); 0: never.
    public var abandonAfterSeconds = 3600.0
    /// Lines of each task's log the server keeps.
    public var logLines = 100
    /// What `logLines` may be set to.
    public static let logLinesRange: ClosedRange<Double> = 1...10_000
    /// Bytes of each task's log the server keeps (each line counted as `LogTail.cost`).
    public var logBytes = 64 * 1024
    /// Bytes of every task's log together; past it the oldest lines of all go first.
    public var maxLogBytes = 64 * 1024 * 1024
    /// Entries of each task's timeline the server keeps (`GET /api/tasks/{id}/timeline`).
    public var timelineEntries = 50
    /// What `timelineEntries` may be set to.
    public static let timelineEntriesRange: ClosedRange<Double> = 1...1000
    /// The coalescing window, in milliseconds: each service thread holds the events of a
    /// window this long (from its first event) and then sends each watcher one frame with the latest
    /// event of each task changed in it and every sticky one. 0 writes every event at once.
    public var flushMilliseconds = 0

    public init() {}

    public static let keys = [
        "host", "port", "publicDir", "allowedOrigins", "allowedHosts", "heartbeatSeconds", "maxMessageBytes",
        "fanOutLogEvents", "maxEventsPerFrame", "staticMaxAge", "logLevel", "publishers", "anonymousLocalPublish",
        "storage", "retentionSeconds", "maxTasks", "maxPublishRate", "maxConnections", "maxConnectionsPerAddress", "limitLoopback",
        "sendBufferBytes", "writeTimeoutSeconds", "compression", "tls",
        "handshakeTimeoutSeconds", "threads", "webhooks", "abandonAfterSeconds", "logLines", "logBytes", "maxLogBytes", "logFormat",
        "flushMilliseconds",
        "timelineEntries", "readers", "anonymousRead", "anonymousLocalMaxTasks", "tokenSecretEnv", "tokenMaxTasks", "trustedProxies",
        "redisReplicas", "forwardedHeader", "oidc", "proxyAuth",
    ]

    /// Parses a config file's contents; the error names the field and says what to write instead.
    /// `environment` supplies the variables that publishers' `tokenEnv` name.
    public static func parse(_ bytes: [UInt8], source: String = "config.json", environment: [String: String] = [:]) throws(ConfigError)
        -> ServerConfig
    {
        let json: JSONValue
        do {
            json = try JSONParser.parse(ConfigText.withoutComments(bytes))
        } catch {
            throw ConfigError("\(source): \(error)")
        }
        guard case .object(let members) = json else { throw ConfigError("\(source): the top level must be a JSON object") }
        var config = ServerConfig()
        for (key, value) in members {
            func fail(_ expected: String) -> ConfigError {
                let found = value.typeName == "number" ? String(decoding: JSONWriter.encode(value), as: UTF8.self) : value.typeName
                return ConfigError("\(source): \"\(key)\" must be \(expected), not \(found)")
            }
            func number(_ range: ClosedRange<Double>, _ expected: String) throws(ConfigError) -> Double {
                guard case .number(let n) = value, range.contains(n) else { throw fail(expected) }
                return n
            }
            func integer(_ range: ClosedRange<Double>, _ expected: String) throws(ConfigError) -> Int {
                let n = try number(range, expected)
                guard n == n.rounded() else { throw fail("a whole number") }
                return Int(n)
            }
            func string() throws(ConfigError) -> String {
                guard case .string(let s) = value, !s.isEmpty else { throw fail("a non-empty string") }
                return s
            }
            switch key {
            case "host": config.host = try string()
            case "port": config.port = try integer(0...65535, "a port number from 0 to 65535 (0 picks a free port)")
            case "publicDir": config.publicDir = try string()
            case "allowedOrigins":
                guard case .array(let items) = value else { throw fail("a list of origins like [\"https://example.com\"]") }
                config.allowedOrigins = try items.map { item throws(ConfigError) in
                    guard case .string(let origin) = item, origin.hasPrefix("http://") || origin.hasPrefix("https://") else {
                        throw ConfigError("\(source): \"allowedOrigins\" entries must be origins like \"https://example.com\"")
                    }
                    return origin.hasSuffix("/") ? String(origin.dropLast()) : origin
                }
            case "heartbeatSeconds": config.heartbeatSeconds = try number(0.1...3600, "seconds between 0.1 and 3600")
            case "maxMessageBytes": config.maxMessageBytes = try integer(1024...(64 * 1024 * 1024), "bytes between 1024 and 67108864")
            case "fanOutLogEvents": config.fanOutLogEvents = try integer(16...1_000_000, "a count between 16 and 1000000")
            case "maxEventsPerFrame": config.maxEventsPerFrame = try integer(1...10_000, "a count between 1 and 10000")
            case "staticMaxAge": config.staticMaxAge = try integer(0...31_536_000, "seconds, 0 or more")
            case "logLevel":
                guard case .string(let name) = value, let level = LogLevel(rawValue: name) else {
                    throw fail("one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                config.logLevel = level
            case "logFormat":
                guard case .string(let name) = value, let format = LogFormat(rawValue: name) else {
                    throw fail("one of \(LogFormat.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                config.logFormat = format
            case "storage":
                guard case .string(let storage) = value, !storage.isEmpty else {
                    throw fail(
                        "\"memory\", the path of an SQLite file like \"data/ringcast.db\", redis://HOST:PORT or redis-sentinel://HOST:PORT,HOST:PORT/MASTER"
                    )
                }
                config.storage = storage
            case "redisReplicas": config.redisReplicas = try integer(0...100, "a count of Redis replicas from 0 to 100 (0: do not wait for replicas)")
            case "allowedHosts":
                guard case .array(let items) = value else { throw fail("a list of host names like [\"ringcast.example.com\"]") }
                config.allowedHosts = try items.map { item throws(ConfigError) in
                    guard case .string(let name) = item, HostPolicy.isValidEntry(name) else {
                        throw ConfigError(
                            "\(source): \"allowedHosts\" entries must be host names like \"ringcast.example.com\" or \".example.com\" (no port, no scheme), or \"*\""
                        )
                    }
                    return name.lowercased()
                }
            case "retentionSeconds": config.retentionSeconds = try number(1...31_536_000, "seconds between 1 and 31536000")
            case "maxTasks": config.maxTasks = try integer(1...10_000_000, "a count between 1 and 10000000")
            case "maxPublishRate": config.maxPublishRate = try number(0...100_000_000, "events per second, 0 for no limit")
            case "maxConnections": config.maxConnections = try integer(1...10_000_000, "a count between 1 and 10000000")
            case "maxConnectionsPerAddress": config.maxConnectionsPerAddress = try integer(0...10_000_000, "a count, 0 for no limit")
            case "sendBufferBytes":
                config.sendBufferBytes = try integer(0...67_108_864, "bytes between 4096 and 67108864, or 0 for the kernel's own")
                if config.sendBufferBytes != 0 && config.sendBufferBytes < 4096 {
                    throw fail("bytes between 4096 and 67108864, or 0 for the kernel's own")
                }
            case "writeTimeoutSeconds": config.writeTimeoutSeconds = try integer(0...86_400, "whole seconds between 1 and 86400, or 0 for never")
            case "handshakeTimeoutSeconds": config.handshakeTimeoutSeconds = try integer(1...3600, "whole seconds between 1 and 3600")
            case "limitLoopback":
                guard case .bool(let flag) = value else { throw fail("true or false") }
                config.limitLoopback = flag
            case "compression":
                guard case .bool(let flag) = value else { throw fail("true or false") }
                config.compression = flag
            case "tls":
                guard case .object = value, case .string(let cert)? = value["cert"], !cert.isEmpty,
                    case .string(let key)? = value["key"], !key.isEmpty
                else {
                    throw fail("{\"cert\": \"cert.pem\", \"key\": \"key.pem\"} (PEM files)")
                }
                if case .object(let members) = value, let extra = members.first(where: { !["cert", "key", "ciphers"].contains($0.0) }) {
                    throw ConfigError("\(source): \"tls\" has no setting \"\(extra.0)\"; it takes \"cert\", \"key\" and \"ciphers\"")
                }
                var files = TLSFiles(cert: cert, key: key)
                if let ciphers = value["ciphers"] {
                    guard case .string(let list) = ciphers, !list.isEmpty else {
                        throw ConfigError(
                            "\(source): \"tls.ciphers\" must be an OpenSSL cipher list for TLS 1.2, like \"\(TLSFiles.intermediateCiphers)\"")
                    }
                    files.ciphers = list
                }
                config.tls = files
            case "threads": config.threads = try integer(0...256, "a count of service threads from 1 to 256, or 0 for one per core")
            case "webhooks":
                guard case .array(let items) = value else { throw fail("a list of {\"url\", \"patterns\", \"states\", \"secretEnv\"}") }
                config.webhooks = try items.enumerated().map { index, item throws(ConfigError) in
                    try WebhookRule.parse(item, at: "\(source): webhooks[\(index)]", environment: environment)
                }
            case "abandonAfterSeconds": config.abandonAfterSeconds = try number(0...31_536_000, "seconds, 0 for never")
            case "logLines": config.logLines = try integer(logLinesRange, "a count between 1 and 10000")
            case "logBytes":
                // The floor holds the longest line there is (2 000 four-byte characters and their bookkeeping).
                config.logBytes = try integer(8192...1_073_741_824, "bytes between 8192 (one longest line) and 1073741824")
            case "maxLogBytes": config.maxLogBytes = try integer(65_536...17_179_869_184, "bytes between 65536 and 17179869184 (16 GiB)")
            case "timelineEntries": config.timelineEntries = try integer(timelineEntriesRange, "a count between 1 and 1000")
            case "flushMilliseconds":
                config.flushMilliseconds = try integer(
                    0...1000,
                    "whole milliseconds from 0 (write every event at once) to 1000, e.g. 16 for at most one frame per watcher per 60 Hz frame")
            case "redis":
                throw ConfigError(
                    "\(source): \"\(key)\" is not supported by this version of Ringcast; remove it (a setting the server does not carry out is refused, never ignored)"
                )
            case "anonymousLocalPublish":
                guard case .bool(let flag) = value else { throw fail("true or false") }
                config.access.anonymousLocalPublish = flag
            case "anonymousLocalMaxTasks":
                config.access.anonymousLocalMaxTasks = try integer(1...10_000_000, "a count between 1 and 10000000")
            case "tokenMaxTasks":
                config.access.tokenMaxTasks = try integer(1...10_000_000, "a count between 1 and 10000000")
            case "publishers", "readers":
                let role: AccessEntry.Role = key == "publishers" ? .publisher : .reader
                guard case .array(let items) = value else { throw fail("a list of {\"name\", \"token\" or \"tokenEnv\", \"patterns\"}") }
                let entries = try items.enumerated().map { index, item throws(ConfigError) in
                    try parseEntry(role, item, at: "\(source): \(key)[\(index)]", environment: environment)
                }
                config.access.entries = config.access.entries.filter { $0.role != role } + entries
            case "anonymousRead":
                switch value {
                case .bool(true): config.access.anonymousRead = .everyone
                case .bool(false): config.access.anonymousRead = .nobody
                case .string("loopback"): config.access.anonymousRead = .loopback
                case .array:
                    config.access.anonymousRead = .patterns(try parsePatterns(value, at: "\(source): anonymousRead"))
                default:
                    throw fail(
                        "\"loopback\" (the default), true (anyone), false (nobody without a token) or a list of id patterns like [\"public.*\"]")
                }
            case "tokenSecretEnv":
                let variable = try string()
                guard let secret = environment[variable], !secret.isEmpty else {
                    throw ConfigError(
                        "\(source): tokenSecretEnv: the environment variable \(variable) is not set; export it before starting the server")
                }
                guard secret.utf8.count >= 32 else {
                    throw ConfigError(
                        "\(source): tokenSecretEnv: the key in \(variable) is shorter than 32 bytes; HS256 wants at least 256 bits (openssl rand -hex 32)"
                    )
                }
                config.access.tokenSecret = Array(secret.utf8)
            case "trustedProxies":
                guard case .array(let items) = value else { throw fail("a list of proxy addresses like [\"127.0.0.1\"]") }
                config.trustedProxies = try items.map { item throws(ConfigError) in
                    guard case .string(let address) = item, ForwardedFor.isTrustedProxyEntry(address) else {
                        throw ConfigError(
                            "\(source): \"trustedProxies\" entries must be IP addresses like \"127.0.0.1\" or \"::1\", or ranges like \"10.0.0.0/8\" (no port, no name)"
                        )
                    }
                    return address
                }
            case "forwardedHeader":
                guard case .string(let name) = value, let header = ForwardedFor.Header(named: name) else {
                    let found = if case .string(let name) = value { "\"\(name)\"" } else { value.typeName }
                    throw ConfigError(
                        "\(source): \"forwardedHeader\" must be \"X-Forwarded-For\" or \"Forwarded\" (the one header your proxy sets to the client's address), not \(found)"
                    )
                }
                config.forwardedHeader = header
            case "oidc":
                let items: [JSONValue]
                switch value {
                case .object: items = [value]
                case .array(let list) where !list.isEmpty: items = list
                default: throw fail("an object {\"issuer\", \"clientId\", …} or a list of them")
                }
                config.oidc = try items.enumerated().map { index, item throws(ConfigError) in
                    try parseProvider(item, at: items.count == 1 ? "\(source): oidc" : "\(source): oidc[\(index)]", environment: environment)
                }
            case "proxyAuth":
                guard case .object(let members) = value else { throw fail("an object {\"userHeader\", \"groupsHeader\"}") }
                let allowed = ServerConfig.nestedKeys["proxyAuth", default: []]
                if let extra = members.first(where: { !allowed.contains($0.0) }) {
                    throw ConfigError("\(source): proxyAuth has no setting \"\(extra.0)\"; it takes \"userHeader\" and \"groupsHeader\"")
                }
                func header(_ key: String) throws(ConfigError) -> String? {
                    guard let item = value[key] else { return nil }
                    guard case .string(let name) = item, ProxyAuthSettings.isHeaderName(name) else {
                        throw ConfigError("\(source): proxyAuth.\(key) must be a header name like \"X-Auth-Request-User\"")
                    }
                    return name
                }
                guard let user = try header("userHeader") else {
                    throw ConfigError(
                        "\(source): proxyAuth needs \"userHeader\": the header your proxy names the person in (oauth2-proxy: \"X-Auth-Request-User\")"
                    )
                }
                config.proxyAuth = ProxyAuthSettings(userHeader: user, groupsHeader: try header("groupsHeader"))
            default:
                throw ConfigError("\(source): unknown setting \"\(key)\"; the settings are \(ServerConfig.keys.joined(separator: ", "))")
            }
        }
        try config.checkAccess(source: source)
        if config.proxyAuth != nil, config.trustedProxies.isEmpty {
            throw ConfigError(
                "\(source): proxyAuth is believed only from the addresses in \"trustedProxies\", and there are none: list your auth proxy's address there"
            )
        }
        let issuers = config.oidc.map(\.issuer)
        if Set(issuers).count != issuers.count {
            throw ConfigError("\(source): oidc names an issuer twice; list each identity provider once")
        }
        if config.access.entries.contains(where: { !$0.groups.isEmpty }), config.oidc.isEmpty, config.proxyAuth == nil {
            throw ConfigError(
                "\(source): publishers or readers name \"groups\", but neither \"oidc\" nor \"proxyAuth\" is configured to say who is in them"
            )
        }
        guard config.logBytes <= config.maxLogBytes else {
            throw ConfigError(
                "\(source): \"logBytes\" (\(config.logBytes)) is more than \"maxLogBytes\" (\(config.maxLogBytes)), the budget of every task's log together; lower logBytes or raise maxLogBytes"
            )
        }
        return config
    }

    /// What no single setting can check: names and tokens unique across publishers and readers,
    /// and quotas within the server's own.
    func checkAccess(source: String) throws(ConfigError) {
        var names: Set<String> = []
        for (index, entry) in access.entries.enumerated() {
            let place = "\(source): \(entry.role.rawValue)s entry '\(entry.name)'"
            guard !AccessPolicy.serverNames.contains(entry.name) else {
                throw ConfigError(
                    "\(place): the name is the server's own for \(entry.name == "signed" ? "signed tokens without a sub" : "access without a token or its own changes"); choose another"
                )
            }
            guard names.insert(entry.name).inserted else {
                throw ConfigError("\(place): the name is used twice; every publisher and reader needs a name of its own (logs and quotas name it)")
            }
            if entry.hasToken, access.entries[..<index].contains(where: { $0.token == entry.token }) {
                throw ConfigError("\(place): its token is another entry's too; give every publisher and reader a token of its own")
            }
            if let quota = entry.maxTasks, quota > maxTasks {
                throw ConfigError("\(place): maxTasks \(quota) is more than the server's maxTasks (\(maxTasks)); lower it, or raise \"maxTasks\"")
            }
        }
    }

    private static func parseEntry(_ role: AccessEntry.Role, _ item: JSONValue, at place: String, environment: [String: String])
        throws(ConfigError) -> AccessEntry
    {
        let allowed = ServerConfig.nestedKeys["\(role.rawValue)s[]", default: []]
        guard case .object = item, case .string(let name)? = item["name"], !name.isEmpty else {
            throw ConfigError(
                "\(place) needs a \"name\" (e.g. {\"name\": \"ci\", \"tokenEnv\": \"RINGCAST_CI_TOKEN\", \"patterns\": [\"ci.*\"]})")
        }
        if case .object(let members) = item, let extra = members.first(where: { !allowed.contains($0.0) }) {
            let why = role == .reader && extra.0 == "maxTasks" ? " (a reader publishes nothing, so it holds no tasks)" : ""
            throw ConfigError(
                "\(place) has no setting \"\(extra.0)\"\(why); a \(role.rawValue) takes \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))")
        }
        var groups: [String] = []
        if let value = item["groups"] {
            guard case .array(let list) = value, !list.isEmpty,
                let names = Optional(list.compactMap(\.stringValue)), names.count == list.count, !names.contains(where: \.isEmpty)
            else {
                throw ConfigError("\(place).groups must be a non-empty list of group names, like [\"team-a\"]")
            }
            groups = names
        }
        let hasToken = item["token"] != nil || item["tokenEnv"] != nil
        guard hasToken || !groups.isEmpty else {
            throw ConfigError(
                "\(place) needs exactly one of \"token\" or \"tokenEnv\" (the name of an environment variable holding the token), or \"groups\" whose people it grants"
            )
        }
        let token = hasToken ? try parseSecret(item, "token", at: place, environment: environment, holding: "the token") : ""
        guard !hasToken || token.utf8.count >= 16 else {
            throw ConfigError("\(place): the token of '\(name)' is shorter than 16 characters; use a long random one (openssl rand -hex 24)")
        }
        func count(_ key: String) throws(ConfigError) -> Int? {
            guard let value = item[key] else { return nil }
            guard case .number(let n) = value, n >= 1, n <= 10_000_000, n == n.rounded() else {
                throw ConfigError("\(place).\(key) must be a whole number from 1 to 10000000")
            }
            return Int(n)
        }
        return AccessEntry(
            role, name: name, token: token, patterns: try parsePatterns(item["patterns"], at: place), maxTasks: try count("maxTasks"),
            maxConnections: try count("maxConnections"), groups: groups)
    }

    /// One provider of `oidc`: its issuer (https, or http on loopback), the client, and what its
    /// tokens must be.
    private static func parseProvider(_ item: JSONValue, at place: String, environment: [String: String]) throws(ConfigError)
        -> IdentityProviderSettings
    {
        guard case .object(let members) = item else {
            throw ConfigError("\(place) must be an object like {\"issuer\": \"https://id.example.com\", \"clientId\": \"ringcast\"}")
        }
        let allowed = ServerConfig.nestedKeys["oidc", default: []]
        if let extra = members.first(where: { !allowed.contains($0.0) }) {
            throw ConfigError("\(place) has no setting \"\(extra.0)\"; it takes \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))")
        }
        func text(_ key: String, required: Bool = false) throws(ConfigError) -> String? {
            guard let value = item[key] else {
                if required { throw ConfigError("\(place) needs \"\(key)\"") }
                return nil
            }
            guard case .string(let s) = value, !s.isEmpty else { throw ConfigError("\(place).\(key) must be a non-empty string") }
            return s
        }
        func seconds(_ key: String, _ range: ClosedRange<Double>) throws(ConfigError) -> Double? {
            guard let value = item[key] else { return nil }
            guard case .number(let n) = value, range.contains(n) else {
                throw ConfigError("\(place).\(key) must be seconds from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
            }
            return n
        }
        func url(_ key: String, required: Bool) throws(ConfigError) -> String? {
            guard var address = try text(key, required: required) else { return nil }
            guard IdentityProviderSettings.isAcceptableURL(address) else {
                throw ConfigError(
                    "\(place).\(key) must be an https:// address (http:// only on loopback, for tests and development), not \"\(address)\"")
            }
            if key == "issuer", address.hasSuffix("/") { address.removeLast() }
            return address
        }
        let issuer = try url("issuer", required: true)!
        let clientId = try text("clientId", required: true)!
        var clientSecret: String?
        if item["clientSecret"] != nil || item["clientSecretEnv"] != nil {
            clientSecret = try parseSecret(item, "clientSecret", at: place, environment: environment, holding: "the client's secret")
        }
        var audience: [String]?
        switch item["audience"] {
        case nil: break
        case .string(let one)? where !one.isEmpty: audience = [one]
        case .array(let list)? where !list.isEmpty && list.allSatisfy({ $0.stringValue?.isEmpty == false }):
            audience = list.compactMap(\.stringValue)
        default: throw ConfigError("\(place).audience must be a string or a non-empty list of them (what the tokens' \"aud\" holds)")
        }
        var algorithms = ["RS256", "PS256", "ES256"]
        if let value = item["algorithms"] {
            guard case .array(let list) = value, !list.isEmpty, list.allSatisfy({ $0.stringValue != nil }) else {
                throw ConfigError("\(place).algorithms must be a non-empty list, like [\"RS256\", \"ES256\"]")
            }
            algorithms = list.compactMap(\.stringValue)
            for algorithm in algorithms {
                if algorithm.lowercased() == "none" {
                    throw ConfigError("\(place).algorithms: \"none\" is never accepted: an unsigned token proves nothing")
                }
                if algorithm.hasPrefix("HS") {
                    throw ConfigError(
                        "\(place).algorithms: \(algorithm) is an HMAC algorithm; a provider's tokens are checked with its public keys, which are no secret: use RS256, PS256 or ES256 (HS256 tokens of your own backend go through tokenSecretEnv)"
                    )
                }
                guard IdentityProviderSettings.supportedAlgorithms.contains(algorithm) else {
                    throw ConfigError(
                        "\(place).algorithms: \"\(algorithm)\" is not supported; choose from \(IdentityProviderSettings.supportedAlgorithms.joined(separator: ", "))"
                    )
                }
            }
        }
        let groupsClaim = try text("groupsClaim") ?? "groups"
        guard !groupsClaim.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
            throw ConfigError("\(place).groupsClaim must be a claim name or a dotted path like \"realm_access.roles\"")
        }
        var scopes = ["openid", "profile", "email", "groups"]
        if let value = item["scopes"] {
            guard case .array(let list) = value, list.allSatisfy({ $0.stringValue?.isEmpty == false }), list.contains(.string("openid")) else {
                throw ConfigError("\(place).scopes must be a list of scope names that includes \"openid\"")
            }
            scopes = list.compactMap(\.stringValue)
        }
        var provider = IdentityProviderSettings(
            issuer: issuer, clientId: clientId, jwksURL: try url("jwksURL", required: false), audience: audience, algorithms: algorithms,
            leewaySeconds: try seconds("leewaySeconds", 0...600) ?? 60, clientSecret: clientSecret, groupsClaim: groupsClaim,
            displayName: try text("displayName"), sessionMaxAgeSeconds: try seconds("sessionMaxAgeSeconds", 60...2_592_000) ?? 8 * 3600,
            keysRefetchSeconds: try seconds("keysRefetchSeconds", 1...86_400) ?? 60,
            keysMaxAgeSeconds: try seconds("keysMaxAgeSeconds", 1...604_800) ?? 3600)
        provider.scopes = scopes
        return provider
    }

    /// `"KEY": "literal"` or `"KEYEnv": "VARIABLE"` (exactly one): a secret kept in the file or,
    /// better, in the environment (publishers' tokens, webhooks' signing secrets).
    static func parseSecret(
        _ item: JSONValue, _ key: String, at place: String, environment: [String: String],
        holding what: String
    ) throws(ConfigError) -> String {
        switch (item[key], item[key + "Env"]) {
        case (.string(let literal)?, nil):
            return literal
        case (nil, .string(let variable)?):
            guard let value = environment[variable], !value.isEmpty else {
                throw ConfigError("\(place).\(key)Env: the environment variable \(variable) is not set; export it before starting the server")
            }
            return value
        default:
            throw ConfigError("\(place) needs exactly one of \"\(key)\" or \"\(key)Env\" (the name of an environment variable holding \(what))")
        }
    }

    /// `"patterns": ["ci.*", …]`, a non-empty list of valid id patterns (publishers' and webhooks').
    static func parsePatterns(_ value: JSONValue?, at place: String) throws(ConfigError) -> WatchSet {
        guard case .array(let patternValues)? = value, !patternValues.isEmpty else {
            throw ConfigError("\(place).patterns must be a non-empty list of id patterns, like [\"ci.*\"]")
        }
        var patterns: [Glob] = []
        for value in patternValues {
            guard case .string(let pattern) = value, Glob.isValid(pattern) else {
                throw ConfigError("\(place).patterns: \(value) is not a valid id pattern (letters, digits, '.', '_', '-', '*', '?')")
            }
            patterns.append(Glob(pattern))
        }
        return WatchSet(patterns)
    }

}

/// The certificate and private key `tls` names, as written in the config (relative to its folder).
public struct TLSFiles: Equatable, Sendable {
    public var cert: String
    public var key: String
    /// OpenSSL's cipher list for TLS 1.2 (TLS 1.3's suites are all forward-secret AEAD).
    public var ciphers: String

    /// Mozilla's "intermediate" profile for TLS 1.2: ECDHE key exchange and AEAD ciphers only, so
    /// no suite without forward secrecy (AES128-SHA) and no CBC or SHA-1 suite is offered.
    public static let intermediateCiphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        + "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    public init(cert: String, key: String, ciphers: String = TLSFiles.intermediateCiphers) {
        self.cert = cert
        self.key = key
        self.ciphers = ciphers
    }
}

public struct ConfigError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
