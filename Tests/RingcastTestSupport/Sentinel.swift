import Foundation

/// Redis under Sentinel, all of the test's own on loopback: a master, one replica and three
/// sentinels (quorum 2, a master is down after `downAfterMilliseconds` without an answer).
package final class SentinelGroup {
    package static let masterName = "ringcast"
    package let master: RedisProcess
    package let replica: RedisProcess
    package let sentinelPorts: [Int]
    private var sentinels: [Process] = []
    private let folder: TemporaryFolder

    package init(downAfterMilliseconds: Int = 1000) throws {
        guard let sentinel = ["/usr/bin/redis-sentinel", "/usr/local/bin/redis-sentinel"].first(where: FileManager.default.isExecutableFile) else {
            throw RedisMissing(detail: "no redis-sentinel: install Debian's redis-sentinel (scripts/deps.sh test does)")
        }
        folder = try TemporaryFolder("ringcast-sentinel")
        master = try RedisProcess(settings: ["--dir", folder.url.path])
        replica = try RedisProcess(settings: ["--dir", folder.url.path, "--replicaof", "127.0.0.1", String(master.port)])
        let replicaPort = replica.port
        guard eventually(timeout: 10, { SentinelGroup.redisCLI(replicaPort, "INFO", "replication").contains("master_link_status:up") }) else {
            throw RedisMissing(detail: "the replica on port \(replica.port) did not sync with the master on \(master.port)")
        }
        let ports = (0..<3).map { _ in closedLoopbackPort() }
        sentinelPorts = ports
        for port in ports {
            let config = folder.file("sentinel-\(port).conf")
            try Data(
                """
                port \(port)
                bind 127.0.0.1
                dir \(folder.url.path)
                sentinel monitor \(SentinelGroup.masterName) 127.0.0.1 \(master.port) 2
                sentinel down-after-milliseconds \(SentinelGroup.masterName) \(downAfterMilliseconds)
                sentinel failover-timeout \(SentinelGroup.masterName) 10000
                sentinel parallel-syncs \(SentinelGroup.masterName) 1

                """.utf8
            ).write(to: config)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: sentinel)
            process.arguments = [config.path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            sentinels.append(process)
        }
        // A failover needs the sentinels to know each other and the replica: they learn both
        // through the master's hello channel within a few seconds.
        let ready = eventually(timeout: 20) {
            ports.allSatisfy { port in
                let fields = SentinelGroup.redisCLI(port, "SENTINEL", "master", SentinelGroup.masterName).split(separator: "\n")
                func field(_ name: String) -> Substring? { fields.firstIndex(of: Substring(name)).map { fields[$0 + 1] } }
                return field("num-other-sentinels") == "2" && field("num-slaves") == "1"
            }
        }
        guard ready else { throw RedisMissing(detail: "the three sentinels did not find each other and the replica within 20 s") }
    }

    deinit {
        for process in sentinels where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        folder.remove()
    }

    /// `redis-sentinel://…/ringcast` for a node's `storage`.
    package var url: String {
        "redis-sentinel://" + sentinelPorts.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/" + SentinelGroup.masterName
    }

    /// The port of the master the first sentinel names now.
    package var masterPort: Int? {
        let lines = SentinelGroup.redisCLI(sentinelPorts[0], "SENTINEL", "get-master-addr-by-name", SentinelGroup.masterName).split(separator: "\n")
        return lines.count == 2 ? Int(lines[1]) : nil
    }

    /// What `redis-cli -p PORT ARGUMENTS…` prints ("" when it cannot run).
    package static func redisCLI(_ port: Int, _ arguments: String...) -> String {
        (try? runToEnd("/usr/bin/redis-cli", ["-h", "127.0.0.1", "-p", String(port)] + arguments))?.output.replacingOccurrences(of: "\r", with: "")
            ?? ""
    }
}
