import RingcastRedis
import XCTest

/// `redis://HOST[:PORT][/DB]`, as `storage` names a cluster's Redis: what it takes, and what it
/// refuses with the reason a user can act on.
final class RedisURLTests: XCTestCase {
    private func parsed(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> RedisURL? {
        do {
            return try RedisURL(text)
        } catch {
            XCTFail("\(text) refused: \(error)", file: file, line: line)
            return nil
        }
    }

    func testEveryFormItTakes() {
        let forms: [(String, host: String, port: Int, database: Int, written: String)] = [
            ("redis://127.0.0.1", "127.0.0.1", 6379, 0, "redis://127.0.0.1:6379"),
            ("redis://127.0.0.1:6380", "127.0.0.1", 6380, 0, "redis://127.0.0.1:6380"),
            ("redis://localhost/3", "localhost", 6379, 3, "redis://localhost:6379/3"),
            ("redis://redis.internal:7000/15", "redis.internal", 7000, 15, "redis://redis.internal:7000/15"),
            ("redis://cache_1:1/0", "cache_1", 1, 0, "redis://cache_1:1"),
            ("redis://127.0.0.1:65535/", "127.0.0.1", 65535, 0, "redis://127.0.0.1:65535"),
            ("redis://[::1]", "::1", 6379, 0, "redis://[::1]:6379"),
            ("redis://[::1]:6380/2", "::1", 6380, 2, "redis://[::1]:6380/2"),
            ("redis://[fd00::2]:7000", "fd00::2", 7000, 0, "redis://[fd00::2]:7000"),
            ("redis://[::ffff:127.0.0.1]/1", "::ffff:127.0.0.1", 6379, 1, "redis://[::ffff:127.0.0.1]:6379/1"),
        ]
        for form in forms {
            guard let url = parsed(form.0) else { continue }
            XCTAssertEqual(url.host, form.host, form.0)
            XCTAssertEqual(url.port, form.port, form.0)
            XCTAssertEqual(url.database, form.database, form.0)
            XCTAssertEqual(url.description, form.written, form.0)
            XCTAssertEqual(parsed(url.description), url, "what it writes reads back: \(form.0)")
        }
    }

    func testEachRefusalSaysWhatIsWrongAndHowToWriteOne() {
        let refusals: [(String, reason: String)] = [
            ("", "it does not begin with redis://"),
            ("127.0.0.1:6379", "it does not begin with redis://"),
            ("http://127.0.0.1:6379", "it does not begin with redis://"),
            ("REDIS://127.0.0.1", "it does not begin with redis://"),
            ("rediss://127.0.0.1:6379", "TLS to Redis (rediss://) is not supported"),
            ("redis://", "it names no host"),
            ("redis://:6379", "it names no host"),
            ("redis:///2", "it names no host"),
            ("redis://[]:6379", "'' in brackets is not an IPv6 address"),
            ("redis://127.0.0.1:0", "the port '0' is not a number from 1 to 65535"),
            ("redis://127.0.0.1:65536", "the port '65536' is not a number from 1 to 65535"),
            ("redis://127.0.0.1:", "the port '' is not a number from 1 to 65535"),
            ("redis://127.0.0.1:+80", "the port '+80' is not a number from 1 to 65535"),
            ("redis://127.0.0.1:port", "the port 'port' is not a number from 1 to 65535"),
            ("redis://127.0.0.1:99999999999999999999", "the port '99999999999999999999' is not a number from 1 to 65535"),
            ("redis://127.0.0.1/16", "the database '16' is not a number from 0 to 15"),
            ("redis://127.0.0.1/-1", "the database '-1' is not a number from 0 to 15"),
            ("redis://127.0.0.1/db", "the database 'db' is not a number from 0 to 15"),
            ("redis://127.0.0.1/1/2", "the database '1/2' is not a number from 0 to 15"),
            ("redis://::1", "an IPv6 address goes in brackets, like redis://[::1]:6379"),
            ("redis://::1:6379", "an IPv6 address goes in brackets, like redis://[::1]:6379"),
            ("redis://[::1", "the IPv6 address has no closing ]"),
            ("redis://[::1]6379", "'6379' follows the IPv6 address; write [ADDRESS]:PORT"),
            ("redis://[redis.internal]", "'redis.internal' in brackets is not an IPv6 address"),
            ("redis://user:secret@127.0.0.1", "a user or password (…@HOST) is not supported"),
            ("redis://127.0.0.1:6379?db=2", "it has a query or fragment (?db=2), which Ringcast does not read"),
            ("redis://127.0.0.1#x", "it has a query or fragment (#x), which Ringcast does not read"),
            ("redis://red is", #"the host 'red is' has " ", which no host name has"#),
            ("redis://rédis", #"the host 'rédis' has "é", which no host name has"#),
        ]
        for (text, reason) in refusals {
            do {
                let url = try RedisURL(text)
                XCTFail("\(text.debugDescription) was taken as \(url)")
            } catch {
                XCTAssertEqual(error.text, text)
                XCTAssertEqual(error.reason, reason, text)
                XCTAssertEqual(
                    error.description,
                    "'\(text)' is not a Redis URL: \(reason); write redis://HOST[:PORT][/DB], like redis://127.0.0.1:6379")
            }
        }
    }
}

/// `redis-sentinel://HOST[:PORT],HOST[:PORT]/NAME`: the sentinels and the master's name.
final class RedisTargetTests: XCTestCase {
    func testASentinelURLNamesItsSentinelsAndMaster() throws {
        let target = try RedisTarget("redis-sentinel://10.0.0.1:26380,sentinel-b,[::1]:26379/cache.main")
        guard case .sentinel(let sentinels, let master) = target else { return XCTFail("\(target)") }
        XCTAssertEqual(master, "cache.main")
        XCTAssertEqual(sentinels.map(\.host), ["10.0.0.1", "sentinel-b", "::1"])
        XCTAssertEqual(sentinels.map(\.port), [26380, 26379, 26379], "a sentinel's port is 26379 unless given")
        XCTAssertEqual(target.description, "redis-sentinel://10.0.0.1:26380,sentinel-b:26379,[::1]:26379/cache.main")
        XCTAssertEqual(try RedisTarget(target.description), target, "what it writes reads back")
        XCTAssertEqual(try RedisTarget("redis://127.0.0.1:6380"), .server(try RedisURL("redis://127.0.0.1:6380")))
    }

    func testEachSentinelRefusalSaysWhatIsWrongAndHowToWriteOne() {
        let refusals: [(String, reason: String)] = [
            ("redis-sentinel://127.0.0.1:26379", "names no master"),
            ("redis-sentinel://127.0.0.1:26379/", "is empty"),
            ("redis-sentinel://127.0.0.1:26379/my master", "letters, digits"),
            ("redis-sentinel://127.0.0.1:26379,,127.0.0.2/m", "a sentinel's address is empty"),
            ("redis-sentinel://127.0.0.1:99999/m", "the port '99999'"),
            ("redis-sentinel:///m", "a sentinel's address is empty"),
        ]
        for (text, reason) in refusals {
            XCTAssertThrowsError(try RedisTarget(text), text) { error in
                let said = "\(error)"
                XCTAssertTrue(said.contains(reason), "\(text): \(said)")
                XCTAssertTrue(said.contains("write redis-sentinel://HOST[:PORT],HOST[:PORT]/MASTER-NAME"), said)
            }
        }
    }
}
