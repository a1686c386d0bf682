import Foundation

/// Debian's nginx in front of a test's server, configured with README.md's recipe: its `map` and
/// its `location / { … }` taken from the README's `nginx` block as written (only the upstream's
/// port changed), in `server`s of the test's own on loopback ports. One plain listener (`port`),
/// and one that takes a PROXY protocol line first (`balancedPort`), so a test can be a client
/// nginx believes is elsewhere, as behind a TCP load balancer, without leaving loopback.
/// Its own prefix, config, pid and temp files; stopped when it goes away.
package final class NginxProcess {
    package let port: Int
    package let balancedPort: Int
    private let folder: TemporaryFolder
    private let process = Process()
    private let errors = Pipe()

    package init(upstreamPort: Int) throws {
        guard let path = ["/usr/sbin/nginx", "/usr/bin/nginx"].first(where: FileManager.default.isExecutableFile) else {
            throw NginxMissing("no nginx: install Debian's nginx (scripts/deps.sh test does)")
        }
        port = closedLoopbackPort()
        balancedPort = closedLoopbackPort()
        folder = try TemporaryFolder("ringcast-nginx")
        let recipe = try NginxProcess.readmeRecipe()
        let location = recipe.location.replacingOccurrences(of: "http://127.0.0.1:8080", with: "http://127.0.0.1:\(upstreamPort)")
        guard location != recipe.location else { throw NginxMissing("README.md's recipe no longer proxies to http://127.0.0.1:8080") }
        let dir = folder.url.path
        for temp in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(temp)", withIntermediateDirectories: true)
        }
        let config = """
            master_process off;
            pid \(dir)/nginx.pid;
            error_log stderr warn;
            events { worker_connections 128; }
            http {
                access_log off;
                client_body_temp_path \(dir)/body;
                proxy_temp_path \(dir)/proxy;
                fastcgi_temp_path \(dir)/fastcgi;
                uwsgi_temp_path \(dir)/uwsgi;
                scgi_temp_path \(dir)/scgi;
            \(recipe.map)
                server {
                    listen 127.0.0.1:\(port);
            \(location)
                }
                server {
                    listen 127.0.0.1:\(balancedPort) proxy_protocol;
                    set_real_ip_from 127.0.0.1;
                    real_ip_header proxy_protocol;
            \(location)
                }
            }
            """
        try config.write(to: folder.file("nginx.conf"), atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-p", dir, "-c", folder.file("nginx.conf").path, "-e", "stderr", "-g", "daemon off;"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let ports = [port, balancedPort]
        guard eventually(timeout: 10, { !process.isRunning || ports.allSatisfy { (try? RawSocket(port: $0, timeoutSeconds: 1)) != nil } }),
            process.isRunning
        else {
            stop()
            let said = String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self)
            throw NginxMissing("nginx did not start: \(said)")
        }
    }

    deinit { stop() }

    package func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        folder.remove()
    }

    /// The `map { … }` and `location / { … }` of README.md's ```nginx block, each whole.
    static func readmeRecipe() throws -> (map: String, location: String) {
        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        guard let start = readme.range(of: "```nginx\n"), let end = readme.range(of: "```", range: start.upperBound..<readme.endIndex) else {
            throw NginxMissing("README.md has no ```nginx block")
        }
        let lines = readme[start.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
        func block(startingWith prefix: String) throws -> String {
            guard let first = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(prefix) }) else {
                throw NginxMissing("README.md's nginx block has no \(prefix)")
            }
            let indent = lines[first].prefix { $0 == " " }
            guard let last = lines[first...].firstIndex(where: { $0 == "\(indent)}" }) else { throw NginxMissing("\(prefix) does not end") }
            return lines[first...last].joined(separator: "\n")
        }
        return (try block(startingWith: "map "), try block(startingWith: "location / {"))
    }
}

package struct NginxMissing: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
