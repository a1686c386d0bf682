/// The Redis a cluster uses: one server (`redis://HOST[:PORT][/DB]`), or the master that Redis
/// Sentinel names (`redis-sentinel://HOST[:PORT],HOST[:PORT]/NAME`: the sentinels and the name of
/// the master they monitor, as other Sentinel clients write it; a sentinel's PORT is 26379 unless
/// given).
package enum RedisTarget: Sendable, Equatable, CustomStringConvertible {
    case server(RedisURL)
    case sentinel(sentinels: [RedisURL], master: String)

    package static let sentinelScheme = "redis-sentinel://"
    package static let defaultSentinelPort = 26379

    /// Whether `text` names Redis at all (either scheme), so that storage settings go here.
    package static func names(_ text: String) -> Bool { text.hasPrefix("redis://") || text.hasPrefix(sentinelScheme) }

    package init(_ text: String) throws(RedisURLError) {
        guard text.hasPrefix(RedisTarget.sentinelScheme) else {
            self = .server(try RedisURL(text))
            return
        }
        func refuse(_ reason: String) -> RedisURLError {
            RedisURLError(
                text: text, reason: reason,
                example: "redis-sentinel://HOST[:PORT],HOST[:PORT]/MASTER-NAME, like redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/ringcast")
        }
        let rest = text.dropFirst(RedisTarget.sentinelScheme.count)
        guard let slash = rest.firstIndex(of: "/") else { throw refuse("it names no master (…/NAME after the sentinels)") }
        let master = String(rest[rest.index(after: slash)...])
        guard !master.isEmpty, master.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
            throw refuse("the master name '\(master)' is empty or has characters other than letters, digits, '.', '_' and '-'")
        }
        var sentinels: [RedisURL] = []
        for address in rest[..<slash].split(separator: ",", omittingEmptySubsequences: false) {
            guard !address.isEmpty else { throw refuse("a sentinel's address is empty (two commas, or a comma at an end)") }
            do {
                var url = try RedisURL("redis://" + address)
                if !address.hasSuffix(":\(url.port)") { url.port = RedisTarget.defaultSentinelPort }
                sentinels.append(url)
            } catch {
                throw refuse("the sentinel '\(address)' is not HOST[:PORT]: \(error.reason)")
            }
        }
        self = .sentinel(sentinels: sentinels, master: master)
    }

    package var description: String {
        switch self {
        case .server(let url): return url.description
        case .sentinel(let sentinels, let master):
            return RedisTarget.sentinelScheme
                + sentinels.map { "\($0.host.contains(":") ? "[\($0.host)]" : $0.host):\($0.port)" }
                .joined(separator: ",") + "/" + master
        }
    }

    /// A connection to the server, or to the master the first sentinel that answers names (checked
    /// with ROLE, as the Sentinel client guidelines ask: during a failover a sentinel may still
    /// name the old master, or one not yet promoted).
    package func connect(timeoutSeconds: Double = 2) throws(RedisError) -> RedisConnection {
        switch self {
        case .server(let url):
            return try RedisConnection(url, timeoutSeconds: timeoutSeconds)
        case .sentinel(let sentinels, let master):
            var reasons: [String] = []
            for sentinel in sentinels {
                let address: RedisValue
                do {
                    address = try RedisConnection(sentinel, timeoutSeconds: timeoutSeconds).command([
                        "SENTINEL", "get-master-addr-by-name", master,
                    ])
                } catch {
                    reasons.append("sentinel \(sentinel.host):\(sentinel.port): \(error)")
                    continue
                }
                guard let pair = address.array, pair.count == 2, let host = pair[0].text, let port = pair[1].integer.map(Int.init),
                    (1...65535).contains(port)
                else {
                    reasons.append("sentinel \(sentinel.host):\(sentinel.port) knows no master named '\(master)' (\(address))")
                    continue
                }
                var url = sentinel
                url.host = host
                url.port = port
                let connection = try RedisConnection(url, timeoutSeconds: timeoutSeconds)
                let role = try connection.command(["ROLE"])
                guard role.array?.first?.text == "master" else {
                    throw RedisError.connection(
                        "\(url), which sentinel \(sentinel.host):\(sentinel.port) names master '\(master)', is not (yet) a master")
                }
                return connection
            }
            throw RedisError.connection("no sentinel named the master '\(master)': " + reasons.joined(separator: "; "))
        }
    }
}
