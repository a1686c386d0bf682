import Glibc
import RingcastRedis
import RingcastTestSupport
import XCTest

/// `RedisConnection` against a redis-server of the test's own on a free loopback port: every kind
/// of reply hiredis gives, pipelines, databases, and what a connection does when Redis goes away.
/// A machine without redis-server fails these tests (scripts/deps.sh test installs it).
final class RedisConnectionTests: XCTestCase {
    private var redis: RedisProcess!

    override func setUpWithError() throws {
        // As `ringcast` does: hiredis writes without MSG_NOSIGNAL, and a write to the Redis this
        // test kills must fail the command, not end the test run.
        signal(SIGPIPE, SIG_IGN)
        redis = try RedisProcess()
    }

    override func tearDown() { redis = nil }

    private func connect(database: String = "") throws -> RedisConnection {
        try RedisConnection(RedisURL(redis.url + database))
    }

    private func bytes(_ text: String) -> RedisValue { .string(Array(text.utf8)) }

    func testEveryKindOfReplyComesBackAsItsValue() throws {
        let connection = try connect()
        XCTAssertEqual(try connection.command(["PING"]), .status("PONG"))
        XCTAssertEqual(try connection.command(["SET", "word", "héllo"]), .status("OK"))
        XCTAssertEqual(try connection.command(["GET", "word"]), bytes("héllo"))
        XCTAssertEqual(try connection.command(["GET", "missing"]), .null)
        XCTAssertEqual(try connection.command(["SET", "empty", ""]), .status("OK"))
        XCTAssertEqual(try connection.command(["GET", "empty"]), .string([]))
        XCTAssertEqual(try connection.command(["INCRBY", "count", "-5"]), .integer(-5))
        XCTAssertEqual(try connection.command(["SET", "largest", String(Int64.max - 1)]), .status("OK"))
        XCTAssertEqual(try connection.command(["INCR", "largest"]), .integer(Int64.max))

        // Strings are bytes, both ways: a NUL, a byte that is not UTF-8, line breaks.
        let binary: [UInt8] = [0, 0xFF, 10, 13, 0x41, 0]
        XCTAssertEqual(try connection.command([Array("SET".utf8), Array("bytes".utf8), binary]), .status("OK"))
        XCTAssertEqual(try connection.command([Array("GET".utf8), Array("bytes".utf8)]), .string(binary))
        XCTAssertEqual(try connection.command(["STRLEN", "bytes"]), .integer(Int64(binary.count)))

        // Arrays: with a nil inside, empty, and the nil array of a BLPOP that timed out.
        XCTAssertEqual(try connection.command(["MGET", "word", "missing", "count"]), .array([bytes("héllo"), .null, bytes("-5")]))
        XCTAssertEqual(try connection.command(["LRANGE", "no-list", "0", "-1"]), .array([]))
        XCTAssertEqual(try connection.command(["BLPOP", "no-list", "0.01"]), .null)

        // Nested arrays, with statuses and errors inside, as a Lua script answers.
        let script = "return {1, {'two', {3, redis.status_reply('FINE')}}, {}, redis.error_reply('MINE went wrong')}"
        XCTAssertEqual(
            try connection.command(["EVAL", script, "0"]),
            .array([.integer(1), .array([bytes("two"), .array([.integer(3), .status("FINE")])]), .array([]), .error("MINE went wrong")]))

        // An error reply is a value, not a failure: the connection goes on.
        XCTAssertEqual(try connection.command(["INCR", "word"]), .error("ERR value is not an integer or out of range"))
        guard case .error(let unknown) = try connection.command(["NO-SUCH-COMMAND", "x"]) else { return XCTFail("an unknown command answered") }
        XCTAssertTrue(unknown.hasPrefix("ERR unknown command 'NO-SUCH-COMMAND'"), unknown)
        XCTAssertEqual(try connection.command(["PING"]), .status("PONG"))
    }

    func testTheValuesReadAsWhatTheyHold() {
        XCTAssertEqual(bytes("héllo").text, "héllo")
        XCTAssertEqual(RedisValue.status("OK").text, "OK")
        XCTAssertNil(RedisValue.error("ERR no").text, "an error is never taken for a value")
        XCTAssertNil(RedisValue.integer(3).text)
        XCTAssertNil(RedisValue.null.text)

        XCTAssertEqual(RedisValue.integer(-7).integer, -7)
        XCTAssertEqual(bytes("42").integer, 42, "a number stored as a string, as GET answers it")
        XCTAssertNil(bytes("4.5").integer)
        XCTAssertNil(bytes("").integer)
        XCTAssertNil(RedisValue.status("42").integer)
        XCTAssertNil(RedisValue.null.integer)

        XCTAssertEqual(RedisValue.array([.null, .integer(1)]).array, [.null, .integer(1)])
        XCTAssertEqual(RedisValue.array([]).array, [])
        XCTAssertNil(RedisValue.null.array, "a nil array is not an empty one")
        XCTAssertNil(bytes("a").array)
    }

    func testAPipelineAnswersEveryCommandInOrderAndAnErrorDoesNotStopTheRest() throws {
        let connection = try connect()
        func pipeline(_ commands: [[String]]) throws -> [RedisValue] {
            try connection.pipeline(commands.map { $0.map { Array($0.utf8) } })
        }
        XCTAssertEqual(
            try pipeline([["SET", "p", "1"], ["INCR", "p"], ["HGET", "p", "field"], ["INCR", "p"], ["GET", "p"]]),
            [.status("OK"), .integer(2), .error("WRONGTYPE Operation against a key holding the wrong kind of value"), .integer(3), bytes("3")])
        XCTAssertEqual(try connection.pipeline([]), [])
        // A transaction in one pipeline: each command queued, then EXEC's array of their replies.
        XCTAssertEqual(
            try pipeline([["MULTI"], ["INCR", "t"], ["RPUSH", "l", "a", "b"], ["EXEC"]]),
            [.status("OK"), .status("QUEUED"), .status("QUEUED"), .array([.integer(1), .integer(2)])])
        // More than one socket read of replies: each still the answer to its own command.
        let many = try pipeline(Array(repeating: ["INCR", "many"], count: 2000))
        XCTAssertEqual(many, (1...2000).map { RedisValue.integer(Int64($0)) })
        XCTAssertEqual(try connection.command(["GET", "many"]), bytes("2000"), "the connection is in step after the pipeline")
    }

    func testADatabaseInTheURLIsSelectedAndOneTheServerLacksIsRefused() throws {
        let zero = try connect()
        let three = try connect(database: "/3")
        XCTAssertEqual(try three.command(["SET", "where", "three"]), .status("OK"))
        XCTAssertEqual(try zero.command(["GET", "where"]), .null)
        XCTAssertEqual(try three.command(["GET", "where"]), bytes("three"))
        XCTAssertEqual(try zero.command(["SELECT", "3"]), .status("OK"))
        XCTAssertEqual(try zero.command(["GET", "where"]), bytes("three"))

        let small = try RedisProcess(settings: ["--databases", "2"])
        let url = try RedisURL(small.url + "/5")
        XCTAssertThrowsError(try RedisConnection(url)) { error in
            XCTAssertEqual("\(error)", "cannot select database 5 on \(url): ERR DB index is out of range")
        }
    }

    func testAReplyThatDoesNotComeInTimeFailsSayingSo() throws {
        let connection = try connect()
        try connection.setTimeout(seconds: 0.2)
        XCTAssertThrowsError(try connection.command(["BLPOP", "never", "10"])) { error in
            XCTAssertEqual("\(error)", "\(connection.url) did not answer within 0.2 s")
        }
        XCTAssertThrowsError(try connection.command(["PING"]), "a connection that failed stays failed")
        XCTAssertEqual(try connect().command(["PING"]), .status("PONG"), "Redis itself still answers")
    }

    func testAfterRedisDiesTheNextCommandFailsClearlyAndANewConnectionWorksOnceItIsBack() throws {
        let url = try RedisURL(redis.url)
        let connection = try RedisConnection(url)
        XCTAssertEqual(try connection.command(["SET", "before", "1"]), .status("OK"))

        redis.stop()
        var failure = ""
        XCTAssertThrowsError(try connection.command(["GET", "before"])) { failure = "\($0)" }
        XCTAssertEqual(failure, "reading from \(url) failed: Server closed the connection (redisGetReply)", "the call is named")
        XCTAssertThrowsError(try RedisConnection(url)) { error in
            XCTAssertEqual("\(error)", "cannot connect to \(url): Connection refused (redisConnectWithTimeout)")
        }

        try redis.start()
        XCTAssertThrowsError(try connection.command(["PING"]), "a connection that failed stays failed, Redis back or not") { error in
            XCTAssertEqual("\(error)", failure)
        }
        let fresh = try RedisConnection(url)
        XCTAssertEqual(try fresh.command(["PING"]), .status("PONG"))
        XCTAssertEqual(try fresh.command(["GET", "before"]), .null, "this Redis keeps nothing across a restart")
        XCTAssertEqual(try fresh.pipeline([[Array("SET".utf8), Array("after".utf8), Array("2".utf8)]]), [.status("OK")])
    }
}
