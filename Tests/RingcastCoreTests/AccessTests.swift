import XCTest

@testable import RingcastCore

/// The pure parts of who may see what: which patterns cover which, how a watcher's patterns are
/// narrowed, who a proxied request is from, base64url, and whom a logged change is for.
final class AccessTests: XCTestCase {
    func testAPatternCoversWhatEveryIdItMatchesIsMatchedBy() {
        let covered: [(String, String)] = [
            ("*", "a.*"), ("a.*", "a.*"), ("a.*", "a.b"), ("a.*", "a.b-*"), ("a.*", "a.?"), ("a*", "a.*"), ("a.?", "a.b"),
            ("*.build", "ci.build"), ("a.*.c", "a.b.c"),
        ]
        for (pattern, other) in covered { XCTAssertTrue(Glob(pattern).covers(Glob(other)), "\(pattern) covers \(other)") }
        let notCovered: [(String, String)] = [
            ("a.*", "*"), ("a.*", "b.*"), ("a.*", "*.build"), ("a.?", "a.*"), ("a.b", "a.?"), ("a.b", "a.*"), ("ci.build-*", "ci.build"),
        ]
        for (pattern, other) in notCovered { XCTAssertFalse(Glob(pattern).covers(Glob(other)), "\(pattern) does not cover \(other)") }
    }

    func testAWatchersPatternsAreKeptNarrowedOrRefused() {
        let scope = Scope(WatchSet([Glob("team-a.*"), Glob("public.status")]))
        XCTAssertEqual(scope.narrow(WatchSet([Glob("team-a.build-*")])), .within(WatchSet([Glob("team-a.build-*")])))
        XCTAssertEqual(scope.narrow(WatchSet([Glob("*")])), .within(WatchSet([Glob("team-a.*"), Glob("public.status")])))
        XCTAssertEqual(scope.narrow(WatchSet([Glob("public.*")])), .within(WatchSet([Glob("public.status")])))
        XCTAssertEqual(scope.narrow(WatchSet([Glob("team-b.*")])), .outside(Glob("team-b.*")))
        XCTAssertEqual(scope.narrow(WatchSet([Glob("*.build")])), .outside(Glob("*.build")), "a partial overlap is no pattern")
        XCTAssertEqual(Scope.everything.narrow(WatchSet([Glob("x")])), .within(WatchSet([Glob("x")])))
        XCTAssertTrue(Scope(WatchSet([Glob("*")])).isEverything)
        XCTAssertTrue(Scope.nothing.isNothing)
        XCTAssertEqual(Scope.nothing.union(scope), scope)
    }

    func testAProxiedRequestIsFromTheNearestAddressThatIsNoTrustedProxy() {
        let trusted = ["127.0.0.1", "10.1.1.1"]
        func client(_ peer: String, forwarded: String? = nil, xff: String? = nil, trusted: [String] = trusted) -> String {
            ForwardedFor.clientAddress(peer: peer, forwarded: forwarded, xForwardedFor: xff, trusted: trusted)
        }
        XCTAssertEqual(client("127.0.0.1", xff: "203.0.113.7"), "203.0.113.7")
        XCTAssertEqual(client("127.0.0.1", xff: "198.51.100.1, 203.0.113.7, 10.1.1.1"), "203.0.113.7", "rightmost untrusted")
        XCTAssertEqual(client("127.0.0.1", forwarded: #"for="[2001:db8::1]:4711";proto=https, for=10.1.1.1"#), "2001:db8::1")
        XCTAssertEqual(client("127.0.0.1", forwarded: "for=203.0.113.7", xff: "198.51.100.1"), "203.0.113.7", "Forwarded wins")
        XCTAssertEqual(client("127.0.0.1", xff: "10.1.1.1"), "10.1.1.1", "a chain of proxies only: the first")
        XCTAssertEqual(client("203.0.113.9", xff: "127.0.0.1"), "203.0.113.9", "an untrusted peer's headers are ignored")
        XCTAssertEqual(client("127.0.0.1", xff: "not an address"), "127.0.0.1", "an unreadable header: the peer")
        XCTAssertEqual(client("::ffff:127.0.0.1", xff: "203.0.113.7"), "203.0.113.7", "a mapped address is its IPv4")
        XCTAssertEqual(client("127.0.0.1", xff: "203.0.113.7", trusted: []), "127.0.0.1")
        XCTAssertTrue(ForwardedFor.isAddress("::1") && ForwardedFor.isAddress("192.0.2.1"))
        XCTAssertFalse(ForwardedFor.isAddress("example.com") || ForwardedFor.isAddress("256.1.1.1"))
    }

    func testBase64URLDecodesWhatJWTsWriteAndRefusesTheRest() {
        XCTAssertEqual(Base64URL.decode("eyJhbGciOiJIUzI1NiJ9").map { String(decoding: $0, as: UTF8.self) }, #"{"alg":"HS256"}"#)
        XCTAssertEqual(Base64URL.decode("-_8"), [0xFB, 0xFF])
        XCTAssertEqual(Base64URL.decode(""), [])
        for bad in ["a", "ab=c", "a+b/", "ab$c", "AB"] { XCTAssertNil(Base64URL.decode(bad), bad) }
    }

    func testWhomAChangeIsForTravelsThroughTheClustersLog() throws {
        let principal = Principal(name: "ci", maxTasks: 3)
        let entry = LogEntry(node: "n", token: 1, worker: 0, now: 1, kind: .request([.remove(id: "a")], .task, principal))
        guard case .request(_, _, let read)? = LogEntry(decoding: entry.encoded())?.kind else { return XCTFail("not read back") }
        XCTAssertEqual(read, principal)
        var plan = MessagePlan()
        plan.principal = Principal(name: "local")
        guard case .message(let message)? = LogEntry(decoding: LogEntry(node: "n", token: 1, worker: 0, now: 1, kind: .message(plan)).encoded())?.kind
        else { return XCTFail("not read back") }
        XCTAssertEqual(message.principal, Principal(name: "local"))
    }
}
