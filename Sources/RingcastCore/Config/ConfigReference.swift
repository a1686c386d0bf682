/// What the configuration file may say besides its top-level keys, and what `ringcast config
/// example` shows of each setting. docs/CONFIG.md is the full reference; tests check that it, and
/// the example, name every key.
extension ServerConfig {
    /// The keys inside a top-level setting that holds an object (`tls`) or a list of objects
    /// (`publishers[]`). The parser refuses any other.
    public static let nestedKeys: [String: [String]] = [
        "tls": ["cert", "key", "ciphers"],
        "publishers[]": ["name", "token", "tokenEnv", "groups", "patterns", "maxTasks", "maxConnections"],
        "readers[]": ["name", "token", "tokenEnv", "groups", "patterns", "maxConnections"],
        "oidc": [
            "issuer", "jwksURL", "audience", "algorithms", "leewaySeconds", "clientId", "clientSecret", "clientSecretEnv", "groupsClaim",
            "displayName", "sessionMaxAgeSeconds", "keysRefetchSeconds", "keysMaxAgeSeconds", "scopes",
        ],
        "proxyAuth": ["userHeader", "groupsHeader"],
        "webhooks[]": WebhookRule.keys,
    ]

    /// One setting as the example shows it: the default as JSON, and what it means.
    public struct Reference: Sendable {
        public let key: String
        public let defaultJSON: String
        public let meaning: String
        /// Shown as a comment only: a setting with no default value to write (`tls`).
        public let commentedOut: Bool

        init(_ key: String, _ defaultJSON: String, _ meaning: String, commentedOut: Bool = false) {
            self.key = key
            self.defaultJSON = defaultJSON
            self.meaning = meaning
            self.commentedOut = commentedOut
        }
    }

    /// Every setting, in the order the example shows them.
    public static let reference: [Reference] = [
        Reference(
            "host", #""127.0.0.1""#,
            "The address to listen on, and the only one (an IPv4 address binds exactly that). RINGCAST_HOST overrides it; --host overrides both."),
        Reference("port", "8080", "The TCP port; 0 takes a free one. RINGCAST_PORT overrides it; --port overrides both."),
        Reference(
            "allowedHosts", "[]",
            "Names the Host header may carry besides host, localhost and IP literals (\".example.com\" allows every subdomain, \"*\" turns the check off)."
        ),
        Reference(
            "tls", #"{"cert": "cert.pem", "key": "key.pem", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}"#,
            "Serve https:// and wss:// with this PEM certificate and key (relative to this file); ciphers: TLS 1.2's list (optional).",
            commentedOut: true),
        Reference("publicDir", #""Public""#, "The only directory served over HTTP: the dashboard (relative to this file)."),
        Reference("staticMaxAge", "60", "Seconds browsers may cache static files (they revalidate with ETag)."),
        Reference(
            "storage", #""memory""#,
            "\"memory\", an SQLite file (relative to this file) that keeps every task across restarts, redis://HOST[:PORT][/DB] to share state with other nodes, or redis-sentinel://HOST[:PORT],HOST[:PORT]/MASTER to find that Redis through Sentinel. RINGCAST_STORAGE overrides it."
        ),
        Reference(
            "redisReplicas", "0",
            "With Redis storage: how many replicas must confirm a change (Redis's WAIT, at most 1 s) before it is answered; 0 answers once the master has it."
        ),
        Reference("retentionSeconds", "86400", "Seconds after which a finished or hidden task nothing touched is removed."),
        Reference("maxTasks", "10000", "The most tasks held; past it a new task is refused (409)."),
        Reference(
            "allowedOrigins", "[]",
            "Other sites whose pages may open /ws or publish, like \"https://example.com\"; the server's own origin always may."),
        Reference("heartbeatSeconds", "15", "Seconds between heartbeats to every WebSocket; a page reconnects after two silent ones."),
        Reference("fanOutLogEvents", "4096", "Events kept per watch-pattern set for watchers that are behind; past that they resync by state."),
        Reference("maxEventsPerFrame", "256", "The most events a watcher that is behind receives in one frame."),
        Reference(
            "flushMilliseconds", "0",
            "A coalescing window: each watcher gets at most one frame per window with the latest of each task changed in it (sticky events always); 0: write every event at once."
        ),
        Reference("anonymousLocalPublish", "true", "Whether loopback may publish without a token."),
        Reference(
            "publishers", "[]",
            "Who may publish what: {\"name\": \"ci\", \"tokenEnv\": \"RINGCAST_CI_TOKEN\", \"patterns\": [\"ci.*\"]}, with \"token\" instead of \"tokenEnv\" to write the token here."
        ),
        Reference(
            "readers", "[]",
            "Who may read what: {\"name\": \"team-a\", \"tokenEnv\": \"RINGCAST_TEAM_A_TOKEN\", \"patterns\": [\"team-a.*\"]}, and \"maxConnections\"; \"groups\": [\"team-a\"] grants the entry to the people of those groups (oidc, proxyAuth), with or without a token; a publisher reads what it may publish and takes \"maxTasks\" and \"maxConnections\" too."
        ),
        Reference(
            "anonymousRead", #""loopback""#,
            "Who reads without a token: \"loopback\" (this machine only), true (anyone), false (nobody), or a list of id patterns anyone may read, like [\"public.*\"]."
        ),
        Reference(
            "anonymousLocalMaxTasks", "500",
            "The most tasks anonymous loopback publishing may hold, apart from every publisher's own share (default: maxTasks).",
            commentedOut: true),
        Reference(
            "tokenSecretEnv", #""RINGCAST_TOKEN_SECRET""#,
            "The environment variable holding the HS256 key (32 bytes or more) of signed tokens (JWTs with exp, sub and ringcast.read / ringcast.publish) a backend mints.",
            commentedOut: true),
        Reference(
            "tokenMaxTasks", "1000",
            "The most tasks one signed token's sub may hold unless the token carries ringcast.maxTasks (default: a tenth of maxTasks).",
            commentedOut: true),
        Reference(
            "trustedProxies", "[]",
            "Addresses (or CIDR ranges) of reverse proxies whose forwardedHeader names the client; without it a proxy on this machine makes every client look like loopback. A request from one of them that names no address is a remote client."
        ),
        Reference(
            "forwardedHeader", #""X-Forwarded-For""#,
            "The one header a trusted proxy sets to the client's address: \"X-Forwarded-For\" or \"Forwarded\"; a client's copy of the other is ignored."
        ),
        Reference(
            "oidc", #"{"issuer": "https://id.example.com", "clientId": "ringcast", "displayName": "SSO"}"#,
            "An OpenID Connect identity provider (or a list of them): the dashboard offers \"Sign in with displayName\" (code flow with PKCE at /auth/login), and its tokens are verified against its JWKS (discovered, or \"jwksURL\"); \"clientSecret\" or \"clientSecretEnv\" for a confidential client, \"audience\" (default clientId), \"algorithms\" (RS256, PS256, ES256), \"leewaySeconds\" (60), \"groupsClaim\" (\"groups\", or a path like \"realm_access.roles\"), \"sessionMaxAgeSeconds\" (28800), \"keysRefetchSeconds\" (60), \"keysMaxAgeSeconds\" (3600), \"scopes\". People get what the publishers and readers naming their groups in \"groups\" get.",
            commentedOut: true),
        Reference(
            "proxyAuth", #"{"userHeader": "X-Auth-Request-User", "groupsHeader": "X-Auth-Request-Groups"}"#,
            "An auth proxy in front (oauth2-proxy) names the person and their groups in these headers; believed only from trustedProxies.",
            commentedOut: true),
        Reference(
            "webhooks", "[]",
            "Signed POSTs when a task enters a state: {\"url\": \"https://hooks.example.com/ringcast\", \"patterns\": [\"ci.*\"], \"states\": [\"done\", \"failed\", \"stalled\"], \"secretEnv\": \"RINGCAST_HOOK_SECRET\"}, with \"secret\" instead of \"secretEnv\" to write it here; \"maxAttempts\" (10), \"timeoutSeconds\" (10), \"maxOutbox\" (1000: past it the oldest owed is dropped), \"concurrency\" (4), \"circuitFailures\" (5) and \"circuitOpenSeconds\" (30) too; https:// receivers are verified against the system's CA store, or \"caFile\" (a PEM file, relative to this file); \"clientCert\" and \"clientKey\" for a receiver that asks for a client certificate; \"proxy\" instead of HTTPS_PROXY / NO_PROXY (\"\" goes direct); \"format\": ringcast, slack, discord or ntfy, with \"pageBase\" for the link to the task's page."
        ),
        Reference(
            "abandonAfterSeconds", "3600",
            "Seconds a stalled task stays stalled before it ends failed, \"abandoned\" (a task's abandonAfter wins); 0: never."),
        Reference("logLines", "100", "Lines of each task's log the server keeps."),
        Reference("logBytes", "65536", "Bytes of each task's log the server keeps (a line: its UTF-8 bytes and 96)."),
        Reference("maxLogBytes", "67108864", "Bytes of every task's log together; past it the oldest lines of all go first."),
        Reference("timelineEntries", "50", "Entries of each task's timeline (created, states, requests and who asked) the server keeps."),
        Reference("maxPublishRate", "100000", "Events a second one connection may publish; 0: no limit."),
        Reference("maxMessageBytes", "1048576", "The largest HTTP body or WebSocket message accepted, in bytes."),
        Reference(
            "maxConnections", "10000",
            "Sockets held open at once, every address together; by default the open-file limit less the server's own descriptors and a reserve of an eighth (at least 64).",
            commentedOut: true),
        Reference(
            "maxConnectionsPerAddress", "1024",
            "Sockets one address may hold open; 0: no limit. By default 1024, or half of maxConnections where that is less.",
            commentedOut: true),
        Reference("limitLoopback", "true", "Whether maxConnectionsPerAddress applies to loopback too (trustedProxies never count)."),
        Reference("sendBufferBytes", "262144", "Bytes the kernel may hold unsent for one socket (SO_SNDBUF); 0: the kernel's own."),
        Reference("writeTimeoutSeconds", "30", "Seconds a WebSocket may take nothing written to it before it is closed with 4408; 0: never."),
        Reference("compression", "false", "Offer permessage-deflate to WebSocket clients that ask for it (browsers do)."),
        Reference("threads", "0", "Service threads, each with its own libwebsockets context on the one port; 0: one per online core."),
        Reference(
            "handshakeTimeoutSeconds", "10",
            "Seconds a connection may take to send its request or finish a WebSocket handshake; a request's body must be whole within them of its headers."
        ),
        Reference("logLevel", #""info""#, "debug, info, warning or error; logs go to stderr. RINGCAST_LOG_LEVEL overrides it."),
        Reference("logFormat", #""text""#, "text, or json: one object per line for log collectors. --log-format overrides it."),
    ]
}

/// Configuration files may hold comments: `//` to the end of the line, outside strings.
public enum ConfigText {
    /// The bytes with every comment blanked out (spaces; line ends kept), so a parse error's byte
    /// offset still points into the file as written.
    public static func withoutComments(_ bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        var index = 0
        var inString = false
        while index < result.count {
            let byte = result[index]
            if inString {
                if byte == UInt8(ascii: "\\") {
                    index += 2
                    continue
                }
                if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "/"), index + 1 < result.count, result[index + 1] == UInt8(ascii: "/") {
                while index < result.count, result[index] != UInt8(ascii: "\n") {
                    result[index] = UInt8(ascii: " ")
                    index += 1
                }
                continue
            }
            index += 1
        }
        return result
    }
}
