import Foundation
import RingcastCore
import RingcastTestSupport
import XCTest

/// `make install` into a temporary DESTDIR: the tree a systemd machine expects, a config that points
/// at what was installed, and a unit that `systemd-analyze verify` passes in that tree.
/// (`make deb` packages the same tree; `make test` builds it and runs lintian.)
final class PackagingTests: XCTestCase {
    private var folder: TemporaryFolder!

    override func setUpWithError() throws { folder = try TemporaryFolder("ringcast-install") }
    override func tearDown() { folder?.remove() }

    private var root: String { folder.file("root").path }

    /// Where `name` is installed, or a failure saying which package installs it.
    private func tool(_ name: String, from package: String) throws -> String {
        for folder in ["/usr/bin", "/bin", "/usr/sbin"] where FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)") {
            return "\(folder)/\(name)"
        }
        throw MissingTool(description: "\(name) is not installed: apt-get install \(package) (scripts/deps.sh test does)")
    }

    private struct MissingTool: Error, CustomStringConvertible { let description: String }

    private func install(prefix: String) throws {
        try MissingBinary.check()
        let result = try runToEnd(
            repositoryRoot + "/packaging/install.sh", [], environment: ["DESTDIR": root, "PREFIX": prefix, "BIN": ringcastBinary])
        XCTAssertEqual(result.status, 0, result.output)
    }

    func testInstallPutsEachPieceWhereTheUnitAndTheConfigExpectIt() throws {
        try install(prefix: "/usr/local")
        let files = FileManager.default
        func exists(_ path: String, executable: Bool = false, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertTrue(
                executable ? files.isExecutableFile(atPath: root + path) : files.fileExists(atPath: root + path), "\(path) is missing", file: file,
                line: line)
        }
        exists("/usr/local/bin/ringcast", executable: true)
        exists("/usr/local/share/ringcast/Public/index.html")
        exists("/usr/local/share/ringcast/Public/ringcast-widget.js")
        exists("/usr/local/lib/systemd/system/ringcast.service")
        exists("/usr/local/share/man/man1/ringcast.1.gz")
        for doc in ["README.md", "CONFIG.md", "PROTOCOL.md", "grafana-dashboard.json"] { exists("/usr/local/share/doc/ringcast/\(doc)") }
        let publicFiles = try files.subpathsOfDirectory(atPath: repositoryRoot + "/Public").filter { !$0.hasPrefix(".") }
        for path in publicFiles { exists("/usr/local/share/ringcast/Public/\(path)") }

        // The config points at what was installed, and at the unit's StateDirectory.
        let configPath = root + "/etc/ringcast/config.json"
        let config = try ServerConfig.parse(Array(try Data(contentsOf: URL(fileURLWithPath: configPath))), source: configPath)
        XCTAssertEqual(config.publicDir, "/usr/local/share/ringcast/Public")
        XCTAssertTrue(files.fileExists(atPath: root + config.publicDir + "/index.html"))
        let unit = try String(contentsOfFile: root + "/usr/local/lib/systemd/system/ringcast.service", encoding: .utf8)
        let settings = Dictionary(
            unit.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("=") }.map { line -> (String, String) in
                let parts = line.split(separator: "=", maxSplits: 1)
                return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
            }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(settings["ExecStart"], "/usr/local/bin/ringcast serve --config /etc/ringcast/config.json")
        XCTAssertEqual(settings["ExecReload"], "/bin/kill -HUP $MAINPID", "systemctl reload sends SIGHUP, which serve takes as a reload")
        XCTAssertEqual(config.storage, "/var/lib/\(settings["StateDirectory"] ?? "?")/ringcast.db", "storage lives in the StateDirectory")
        for (key, value) in [
            ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("Restart", "on-failure"), ("KillSignal", "SIGTERM"),
            ("DynamicUser", "yes"), ("User", "ringcast"),
        ] {
            XCTAssertEqual(settings[key], value, key)
        }
        let check = try runToEnd(root + "/usr/local/bin/ringcast", ["config", "check", configPath])
        XCTAssertEqual(check.status, 0, check.output)

        // Installing again keeps an edited config and leaves the new default beside it.
        try Data("{\"port\": 9999}".utf8).write(to: URL(fileURLWithPath: configPath))
        try install(prefix: "/usr/local")
        XCTAssertEqual(try String(contentsOfFile: configPath, encoding: .utf8), "{\"port\": 9999}")
        exists("/etc/ringcast/config.json.default")
    }

    /// systemd-analyze verify, with the tree as the root (the distribution's own units beside it, so
    /// the unit's dependencies resolve): the unit parses without a warning and its ExecStart is there.
    func testSystemdAnalyzeVerifiesTheInstalledUnit() throws {
        let analyze = try tool("systemd-analyze", from: "systemd")
        try install(prefix: "/usr")
        let systemUnits = "/lib/systemd/system"
        XCTAssertTrue(FileManager.default.fileExists(atPath: systemUnits + "/multi-user.target"), "the distribution's units")
        try FileManager.default.createDirectory(atPath: root + "/usr/lib/systemd", withIntermediateDirectories: true)
        if !FileManager.default.fileExists(atPath: root + "/usr/lib/systemd/system") {
            try FileManager.default.createDirectory(atPath: root + "/usr/lib/systemd/system", withIntermediateDirectories: true)
        }
        for unit in try FileManager.default.contentsOfDirectory(atPath: systemUnits) where unit != "ringcast.service" {
            let target = root + "/usr/lib/systemd/system/" + unit
            if !FileManager.default.fileExists(atPath: target) { try FileManager.default.copyItem(atPath: systemUnits + "/" + unit, toPath: target) }
        }
        // ExecReload's kill(1), as the distribution installs it: verify looks for it under the root.
        if !FileManager.default.fileExists(atPath: root + "/bin/kill") {
            try FileManager.default.createDirectory(atPath: root + "/bin", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "/bin/kill", toPath: root + "/bin/kill")
        }
        let unit = "/usr/lib/systemd/system/ringcast.service"
        let verified = try runToEnd(analyze, ["verify", "--root=\(root)", unit])
        XCTAssertEqual(verified.status, 0, verified.output)
        XCTAssertEqual(verified.output, "", "systemd-analyze has something to say about the unit")

        // The same check fails when the unit's program is missing: it really looks in the tree.
        try FileManager.default.removeItem(atPath: root + "/usr/bin/ringcast")
        XCTAssertNotEqual(try runToEnd(analyze, ["verify", "--root=\(root)", unit]).status, 0)

        // And its sandbox: systemd rates the exposure from 0 (locked down) to 10.
        let security = try runToEnd(analyze, ["security", "--offline=yes", "--root=\(root)", unit])
        let exposure = security.output.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let level = exposure.flatMap { line in line.split(separator: " ").compactMap { Double($0) }.first }
        XCTAssertNotNil(level, security.output)
        XCTAssertLessThanOrEqual(level ?? 10, 2.5, "the unit's hardening: \(exposure ?? "")")
    }
}
