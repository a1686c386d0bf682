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
        let trusted = ["127.0.0.1", "10.1.0.0/16"].compactMap(AddressRange.init)
        func client(_ peer: String, _ value: String?, _ form: ForwardedFor.Header = .xForwardedFor, trusted: [AddressRange] = trusted) -> String? {
            ForwardedFor.clientAddress(peer: IPAddress(peer)!, header: value, form: form, trusted: trusted)?.description
        }
        XCTAssertEqual(client("127.0.0.1", "203.0.113.7"), "203.0.113.7")
        XCTAssertEqual(client("127.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.2.3"), "203.0.113.7", "rightmost untrusted")
        XCTAssertEqual(client("127.0.0.1", "10.1.9.9"), "10.1.9.9", "a chain of proxies only: the leftmost")
        XCTAssertEqual(client("127.0.0.1", #"for="[2001:db8::1]:4711";proto=https, for=10.1.1.1"#, .forwarded), "2001:db8:0:0:0:0:0:1")
        XCTAssertEqual(client("::ffff:127.0.0.1", "203.0.113.7"), "203.0.113.7", "a mapped address is its IPv4")
        XCTAssertEqual(client("127.0.0.1", " 203.0.113.7:8080 "), "203.0.113.7", "a port is no part of the address")
        // An untrusted peer is itself, whatever it says; without trustedProxies nobody is believed.
        XCTAssertEqual(client("203.0.113.9", "127.0.0.1"), "203.0.113.9")
        XCTAssertEqual(client("127.0.0.1", "203.0.113.7", trusted: []), "127.0.0.1")
        // What the proxy cannot name is unknown: never the proxy's (loopback) address.
        for unknown in ["x", "1.2.3", "x, 203.0.113.7", "203.0.113.7, x", "", " ", "203.0.113.7,", "unknown", "127.0.0.1:http", "[::1]x"] {
            XCTAssertNil(client("127.0.0.1", unknown), unknown)
        }
        XCTAssertNil(client("127.0.0.1", nil), "a trusted proxy that names no one")
        for unknown in ["proto=https", "for=127.0.0.1;proto=http, by=10.1.1.1", "for=unknown", "for=_hidden", #"for="1.2.3""#, "for="] {
            XCTAssertNil(client("127.0.0.1", unknown, .forwarded), unknown)
        }
        // The other header's form is no address in this one.
        XCTAssertNil(client("127.0.0.1", "for=127.0.0.1"))
    }

    func testAddressesAndRangesAreReadExactly() {
        for good in ["127.0.0.1", "0.0.0.0", "::1", "::", "2001:db8::1", "::ffff:10.0.0.7", "1:2:3:4:5:6:7:8", "fe80::1:2.3.4.5"] {
            XCTAssertNotNil(IPAddress(good), good)
        }
        for bad in [
            "1.2.3", "1.2.3.4.5", "256.1.1.1", "01234.1.1.1", "1.2.3.-4", "example.com", "x", "", "1::2::3", ":::", "1:2:3:4:5:6:7:8:9",
            "fe80::1%eth0", "::g",
        ] {
            XCTAssertNil(IPAddress(bad), bad)
        }
        XCTAssertEqual(IPAddress("::ffff:10.0.0.7"), IPAddress("10.0.0.7"))
        XCTAssertTrue(IPAddress("127.9.9.9")!.isLoopback && IPAddress("::1")!.isLoopback && IPAddress("::ffff:127.0.0.1")!.isLoopback)
        XCTAssertFalse(IPAddress("128.0.0.1")!.isLoopback || IPAddress("::2")!.isLoopback)
        let range = AddressRange("10.1.0.0/16")!
        XCTAssertTrue(range.contains(IPAddress("10.1.255.3")!) && !range.contains(IPAddress("10.2.0.1")!))
        XCTAssertTrue(AddressRange("fd00::/8")!.contains(IPAddress("fd12::7")!))
        XCTAssertTrue(AddressRange("::ffff:10.0.0.0/104")!.contains(IPAddress("10.9.8.7")!))
        XCTAssertTrue(AddressRange("0.0.0.0/0")!.contains(IPAddress("203.0.113.7")!))
        XCTAssertFalse(AddressRange("127.0.0.1")!.contains(IPAddress("127.0.0.2")!))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "::/129", "::ffff:10.0.0.0/95", "10.0.0.0/8/8"] { XCTAssertNil(AddressRange(bad), bad) }
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
