import Foundation
import XCTest

@testable import RingcastCore

/// SIGHUP's rules without a server: which settings a running configuration takes from the file,
/// which it keeps, what refuses a reload whole, and what an open socket may do afterwards.
final class ConfigReloadTests: XCTestCase {
    override func setUp() { installCryptography() }

    private func config(_ text: String) throws -> ServerConfig { try ServerConfig.parse(Array(text.utf8)) }

    private let oldToken = "reader-token-one-0001"
    private let newToken = "reader-token-two-0002"

    func testLiveSettingsComeFromTheFileAndTheOthersKeepTheirRunningValue() throws {
        let running = try config(
            #"{"port": 8080, "threads": 2, "logLevel": "info", "readers": [{"name": "team", "token": "\#(oldToken)", "patterns": ["a.*"]}]}"#)
        let file = try config(
            #"{"port": 9090, "threads": 4, "logLevel": "debug", "allowedOrigins": ["https://example.com"], "readers": [{"name": "team", "token": "\#(newToken)", "patterns": ["a.*"]}]}"#
        )
        let reload = try running.reloaded(from: file, source: "config.json")
        XCTAssertEqual(reload.config.port, 8080)
        XCTAssertEqual(reload.config.threads, 2)
        XCTAssertEqual(reload.config.logLevel, .debug)
        XCTAssertEqual(reload.config.allowedOrigins, ["https://example.com"])
        XCTAssertEqual(Set(reload.applied), ["readers", "logLevel", "allowedOrigins"])
        let policy = reload.config.access
        XCTAssertEqual(policy.identify(token: newToken, now: t0).grant?.name, "team")
        XCTAssertNil(policy.identify(token: oldToken, now: t0).grant, "the old token no longer holds")
    }

    func testPublishersAndReadersAreReplacedEachOnItsOwn() throws {
        let running = try config(
            #"{"publishers": [{"name": "ci", "token": "publisher-token-0123456789", "patterns": ["ci.*"]}], "readers": [{"name": "team", "token": "\#(oldToken)", "patterns": ["a.*"]}]}"#
        )
        let file = try config(#"{"publishers": [{"name": "ci", "token": "publisher-token-0123456789", "patterns": ["ci.*"]}]}"#)
        let reload = try running.reloaded(from: file, source: "config.json")
        XCTAssertEqual(reload.applied, ["readers"])
        XCTAssertEqual(reload.config.access.publishers.map(\.name), ["ci"])
        XCTAssertEqual(reload.config.access.readers.map(\.name), [])
    }

    func testTheFileNamesTheSettingsItChanged() {
        let before = Array(#"{"port": 8080, "threads": 2, "readers": [] // a comment"#.utf8) + Array("\n}".utf8)
        let after = Array(#"{"port": 8080, "threads": 4, "storage": "data.db", "readers": []}"#.utf8)
        XCTAssertEqual(ServerConfig.changedKeys(before, after), ["threads", "storage"])
        XCTAssertEqual(ServerConfig.changedKeys(after, after), [])
    }

    func testTurningTLSOnOrOffWaitsForARestartWhileNewFilesApply() throws {
        let plain = try config("{}")
        let secure = try config(#"{"tls": {"cert": "new.pem", "key": "new.key"}}"#)
        let on = try plain.reloaded(from: secure, source: "config.json")
        XCTAssertNil(on.config.tls)
        XCTAssertEqual(on.kept, ["tls"])
        let off = try secure.reloaded(from: plain, source: "config.json")
        XCTAssertEqual(off.config.tls?.cert, "new.pem")
        XCTAssertEqual(off.kept, ["tls"])
        let renamed = try secure.reloaded(from: try config(#"{"tls": {"cert": "renewed.pem", "key": "renewed.key"}}"#), source: "config.json")
        XCTAssertEqual(renamed.config.tls?.cert, "renewed.pem")
        XCTAssertEqual(renamed.kept, [])
    }

    /// A publisher's quota within a `maxTasks` that the file raised but that cannot change live:
    /// valid as a file, wrong for what runs, so the whole reload is refused.
    func testARuleAcrossSettingsRefusesTheWholeReload() throws {
        let running = try config(#"{"maxTasks": 100}"#)
        let file = try config(
            #"{"maxTasks": 1000, "logLevel": "debug", "publishers": [{"name": "ci", "token": "publisher-token-0123456789", "patterns": ["ci.*"], "maxTasks": 500}]}"#
        )
        XCTAssertThrowsError(try running.reloaded(from: file, source: "config.json")) { error in
            XCTAssertTrue("\(error)".contains("maxTasks 500 is more than the server's maxTasks (100)"), "\(error)")
        }
    }

    /// docs/CONFIG.md's settings table says of each setting whether SIGHUP reloads it, as the list does.
    func testTheDocsSayOfEverySettingWhetherSIGHUPReloadsIt() throws {
        let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/CONFIG.md")
        let rows = try String(contentsOf: document, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("| `") }
        var said: [String: Bool] = [:]
        for row in rows {
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 5, cells[0].hasPrefix("`") else { continue }
            said[String(cells[0].dropFirst().dropLast())] = cells[3].hasPrefix("reloads")
        }
        for key in ServerConfig.keys {
            XCTAssertEqual(said[key], ServerConfig.liveKeys.contains(key), "docs/CONFIG.md's SIGHUP column for \(key)")
        }
    }

    // MARK: Open sockets after a reload

    private func api(readerPatterns: [String], token: String) -> API {
        var config = ServerConfig()
        config.access = AccessPolicy(
            readers: [.reader(name: "team", token: token, patterns: WatchSet(readerPatterns.map(Glob.init)))], anonymousRead: .nobody)
        return API(store: TaskStore(epoch: "reloadepoch"), config: config)
    }

    private func watcher(_ api: API, watching pattern: String, token: String?) throws -> SocketSession {
        let request = try SocketRequest.parse(["watch": pattern]).get()
        return api.openSocket(
            request, headers: RequestHeaders(authorization: token.map { "Bearer \($0)" }), fromLoopback: true, now: t0
        ).session
    }

    private func reconfigured(_ api: API, readerPatterns: [String], token: String) {
        var config = api.config
        config.access = AccessPolicy(
            readers: [.reader(name: "team", token: token, patterns: WatchSet(readerPatterns.map(Glob.init)))], anonymousRead: .nobody)
        api.reconfigure(config)
    }

    func testAWatcherWhoseTokenWasRemovedIsClosedWithTheReason() throws {
        let api = api(readerPatterns: ["*"], token: oldToken)
        let session = try watcher(api, watching: "*", token: oldToken)
        XCTAssertEqual(session.watch.key, "*")
        reconfigured(api, readerPatterns: ["*"], token: newToken)
        guard case .close(let close) = api.review(session, now: t0) else { return XCTFail("a removed token's watcher must be closed") }
        XCTAssertEqual(close.code, SocketClose.accessChanged)
        XCTAssertTrue(close.reason.hasPrefix("the server's configuration changed: the token matches no publisher or reader"), close.reason)
    }

    func testAWatcherWhoseRightsShrankWatchesOnlyWhatItMayReadNow() throws {
        let api = api(readerPatterns: ["*"], token: oldToken)
        let session = try watcher(api, watching: "*", token: oldToken)
        reconfigured(api, readerPatterns: ["team-a.*"], token: oldToken)
        guard case .changed(let next) = api.review(session, now: t0) else { return XCTFail("the watcher's patterns must narrow") }
        XCTAssertEqual(next.watch.key, "team-a.*")
        XCTAssertEqual(next.credential.grant?.read.description, "team-a.*")
    }

    func testAWatcherOfAPatternItMayNoLongerReadIsClosed() throws {
        let api = api(readerPatterns: ["*"], token: oldToken)
        let session = try watcher(api, watching: "team-b.*", token: oldToken)
        reconfigured(api, readerPatterns: ["team-a.*"], token: oldToken)
        guard case .close(let close) = api.review(session, now: t0) else { return XCTFail("team-b.* is no longer readable") }
        XCTAssertEqual(close.code, SocketClose.accessChanged)
        XCTAssertTrue(close.reason.contains("may not watch 'team-b.*'"), close.reason)
    }

    func testAWatcherTheReloadDidNotTouchIsLeftAlone() throws {
        let api = api(readerPatterns: ["team-a.*"], token: oldToken)
        let session = try watcher(api, watching: "team-a.*", token: oldToken)
        var config = api.config
        config.allowedOrigins = ["https://example.com"]
        api.reconfigure(config)
        guard case .unchanged = api.review(session, now: t0) else { return XCTFail("nothing the watcher holds changed") }
    }

    func testAnAnonymousWatcherFollowsAnonymousRead() throws {
        var config = ServerConfig()
        config.access = AccessPolicy(anonymousRead: .loopback)
        let api = API(store: TaskStore(epoch: "reloadepoch"), config: config)
        let session = try watcher(api, watching: "*", token: nil)
        config.access.anonymousRead = .nobody
        api.reconfigure(config)
        guard case .close(let close) = api.review(session, now: t0) else { return XCTFail("anonymousRead false takes the watcher's reading away") }
        XCTAssertEqual(close.code, SocketClose.accessChanged)
    }

    func testReadyzSaysWhichConfigurationRuns() {
        let api = API(store: TaskStore(epoch: "reloadepoch"))
        api.configGeneration = ConfigGeneration(generation: 3, bytes: Array("{}".utf8), loadedAt: t0, source: "config.json")
        let body = json(api.readinessResponse([]).body)
        XCTAssertEqual(body["config"]?["generation"], .number(3))
        XCTAssertEqual(body["config"]?["loadedAt"], .number(t0))
        // FNV-1a of "{}", 64 bits.
        XCTAssertEqual(body["config"]?["hash"], .string(ConfigGeneration.fnv1a(Array("{}".utf8))))
        XCTAssertEqual(ConfigGeneration.fnv1a([]), "cbf29ce484222325")
    }
}
