import Foundation
import RingcastCore
import RingcastCrypto
import XCTest

/// Numbers from outside (a token's times, another node's log entry, a stored row) meet integer
/// conversions and the date formatter only once range-checked; the helpers for a span until a
/// deadline clamp, and UTCTime writes every Double.
final class NumericRangeTests: XCTestCase {
    override class func setUp() {
        super.setUp()
        installCryptography()
    }

    private let now = 1_764_489_600_000.0
    private let extremes: [Double] = [
        .nan, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 1e308, -1e300, 1e19, 9_007_199_254_740_991e3,
        .leastNonzeroMagnitude, -0.0,
    ]

    func testTheSpanUntilADeadlineIsClampedNeverTrapped() {
        XCTAssertEqual(UnixTime.microseconds(until: now + 1.5, now: now), 1500)
        XCTAssertEqual(UnixTime.seconds(until: now + 90_999, now: now), 90)
        XCTAssertEqual(UnixTime.microseconds(until: now - 5000, now: now), 0, "a deadline passed is due now")
        let longest = Int64(UnixTime.longestSpan * 1000)
        for value in extremes {
            for (deadline, from) in [(value, now), (now, value), (value, value)] {
                XCTAssertTrue((0...longest).contains(UnixTime.microseconds(until: deadline, now: from)), "\(deadline) from \(from)")
                XCTAssertGreaterThanOrEqual(UnixTime.seconds(until: deadline, now: from), 0)
            }
        }
        XCTAssertEqual(UnixTime.microseconds(until: .nan, now: now), longest, "NaN is never, not now (a timer would spin)")
        XCTAssertEqual(UnixTime.microseconds(until: 9_007_199_254_740_991e3, now: now), longest)
    }

    func testUTCTimeWritesEveryDouble() {
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: UnixTime.latest), "9999-12-31T23:59:59.999Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: UnixTime.latest + 1), "+010000-01-01T00:00:00.000Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: -62_198_755_200_000), "-000001-01-01T00:00:00.000Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: 8.64e15), "+275760-09-13T00:00:00.000Z")
        XCTAssertEqual(UTCTime.iso8601(unixMilliseconds: -8.64e15), "-271821-04-20T00:00:00.000Z")
        for value in extremes where !UTCTime.formattable.contains(value) {
            XCTAssertTrue(UTCTime.iso8601(unixMilliseconds: value).hasPrefix("invalid time ("), "\(value)")
        }
        XCTAssertTrue(UnixTime.isSane(seconds: 253_402_300_799))
        for seconds in [-1.0, 253_402_300_800, 1e13, .nan, .infinity, 9_007_199_254_740_991] {
            XCTAssertFalse(UnixTime.isSane(seconds: seconds), "\(seconds)")
        }
    }

    func testAnETAOfAnySizeIsWrittenAsADuration() throws {
        XCTAssertEqual(TextTable.duration(1e300), "277777777 h 46 min")
        XCTAssertEqual(TextTable.duration(.infinity), "277777777 h 46 min")
        XCTAssertEqual(TextTable.duration(.nan), "0 s")
        XCTAssertEqual(TextTable.duration(-.infinity), "0 s")
        // Progress 1e-300 a second: the ETA is 1e300 s, and the text table still answers.
        let api = API(store: TaskStore(epoch: "ranges"))
        for (step, progress) in [0, 1e-300, 2e-300, 3e-300].enumerated() {
            let body = Array(#"{"progress":\#(progress)}"#.utf8)
            let answer = api.handle(APIRequest(method: "POST", path: "/api/tasks/slow", body: body), now: now + Double(step) * 1000)
            XCTAssertEqual(answer.status, 200, String(decoding: answer.body, as: UTF8.self))
        }
        XCTAssertGreaterThan(api.store.task("slow")?.eta ?? 0, 1e100, "an ETA past any Int")
        let table = api.handle(APIRequest(method: "GET", path: "/api/tasks", query: ["format": "text"]), now: now + 4000)
        XCTAssertEqual(table.status, 200)
        XCTAssertTrue(String(decoding: table.body, as: UTF8.self).contains("slow"))
    }

    func testAStrictParseRefusesAMemberNamedTwiceAtAnyDepth() throws {
        XCTAssertEqual(try JSONParser.parse(#"{"a":1,"a":2}"#)["a"], .number(2), "the lenient parse keeps the last")
        for text in [#"{"a":1,"a":2}"#, #"{"x":{"b":[],"b":null}}"#, #"[{"k":1,"k":1}]"#] {
            XCTAssertThrowsError(try JSONParser.parse(Array(text.utf8), uniqueMembers: true), text) {
                XCTAssertTrue("\($0)".contains("appears twice"), "\($0)")
            }
        }
        XCTAssertNoThrow(try JSONParser.parse(Array(#"{"a":{"a":1},"b":[{"a":2}]}"#.utf8), uniqueMembers: true))
    }

    // MARK: Tokens, signed here with libcrypto's HMAC (the server tests mint theirs with PyJWT)

    private let key = Array("signing-key-for-tests-0123456789abcdef".utf8)

    private func token(header: String = #"{"alg":"HS256","typ":"JWT"}"#, _ claims: String) -> String {
        func encode(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let unsigned = encode(header) + "." + encode(claims)
        let signature = Data(LibCrypto().hmacSHA256(key: key, message: Array(unsigned.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return unsigned + "." + signature
    }

    private func refusal(_ token: String) -> String? {
        guard case .failure(let error) = SignedToken.verify(token, secret: key, now: now) else { return nil }
        XCTAssertEqual(error.code, .unauthorized)
        return error.message
    }

    func testTheTokensThatCrashedTheServerAreRefusedWithTheReason() {
        let grant = #""ringcast":{"read":["*"]}"#
        for (claims, reason) in [
            (#"{"exp":9007199254740991,\#(grant)}"#, #"has an "exp" of 9"#),
            (#"{"exp":1e13,\#(grant)}"#, #"has an "exp" of 1"#),
            (#"{"exp":1e19,\#(grant)}"#, #"has an "exp" of 1e+19"#),
            (#"{"exp":1800000000,"nbf":1e308,\#(grant)}"#, #"has an "nbf" of 1e+308"#),
            (#"{"exp":-1e300,\#(grant)}"#, #"has an "exp" of -1e+300"#),
            (#"{"exp":1800000000,"iat":-1,\#(grant)}"#, #"has an "iat" of -1.0"#),
            (#"{"exp":"1800000000",\#(grant)}"#, #"has an "exp" of string"#),
        ] {
            let message = refusal(token(claims))
            XCTAssertTrue(message?.contains(reason) == true, "\(claims): \(message ?? "accepted")")
            XCTAssertTrue(message?.contains("not a time from 1970 through 9999") == true, "\(claims): \(message ?? "accepted")")
        }
        // The last second of 9999 holds; its grant's expiry is the clamp's own bound.
        guard case .success(let last) = SignedToken.verify(token(#"{"exp":253402300799,\#(grant)}"#), secret: key, now: now) else {
            return XCTFail("the end of 9999 refused")
        }
        XCTAssertEqual(last.expiresAt, 253_402_300_799_000)
    }

    func testCritAMemberNamedTwiceAndOutOfRangeCapsAreRefused() {
        let claims = #"{"exp":1800000000,"ringcast":{"read":["*"]}}"#
        XCTAssertTrue(refusal(token(header: #"{"alg":"HS256","crit":["b64"],"b64":false}"#, claims))?.contains(#""crit" ("b64")"#) == true)
        XCTAssertTrue(refusal(token(header: #"{"alg":"HS256","crit":"x"}"#, claims))?.contains("not a list") == true)
        XCTAssertTrue(refusal(token(header: #"{"alg":"none","alg":"HS256"}"#, claims))?.contains(#"the member "alg" appears twice"#) == true)
        XCTAssertTrue(
            refusal(token(#"{"exp":1,"exp":1800000000,"ringcast":{"read":["*"]}}"#))?.contains(#"the member "exp" appears twice"#) == true)
        XCTAssertTrue(
            refusal(token(#"{"exp":1800000000,"ringcast":{"read":["*"],"read":[]}}"#))?.contains(#"the member "read" appears twice"#) == true)
        for cap in ["0", "1.5", "1e300", "-1", "\"5\""] {
            let message = refusal(token(#"{"exp":1800000000,"ringcast":{"read":["*"],"maxTasks":\#(cap)}}"#))
            XCTAssertTrue(message?.contains("ringcast.maxTasks that is not a whole number") == true, "\(cap): \(message ?? "accepted")")
        }
        guard
            case .success(let grant) = SignedToken.verify(
                token(#"{"exp":1800000000,"ringcast":{"read":["*"],"maxTasks":5,"maxConnections":2}}"#), secret: key, now: now)
        else { return XCTFail("caps refused") }
        XCTAssertEqual(grant.maxTasks, 5)
        XCTAssertEqual(grant.maxConnections, 2)
    }

    func testASubThatIsTheServersOrAnEntrysNameIsRefusedAndOthersGetTheDefaultShare() {
        var policy = AccessPolicy(
            publishers: [.publisher(name: "ci", token: "ci-token-0123456789abcdef", patterns: WatchSet([Glob("ci.*")]))], tokenSecret: key)
        policy.tokenMaxTasks = 3
        for sub in ["local", "Server", "anonymous", "ci", "CI"] {
            guard case .refused(let error) = policy.identify(token: token(#"{"sub":"\#(sub)","exp":1800000000,"ringcast":{"read":["*"]}}"#), now: now)
            else { return XCTFail("\(sub) accepted") }
            XCTAssertTrue(error.message.contains("'\(sub)' is a name the server or config.json uses already"), error.message)
        }
        for (claims, share) in [
            (#"{"sub":"svc-ci","exp":1800000000,"ringcast":{"read":["*"]}}"#, 3), (#"{"exp":1800000000,"ringcast":{"read":["*"]}}"#, 3),
            (#"{"sub":"big","exp":1800000000,"ringcast":{"read":["*"],"maxTasks":50}}"#, 50),
        ] {
            guard case .token(let grant) = policy.identify(token: token(claims), now: now) else { return XCTFail("\(claims) refused") }
            XCTAssertEqual(grant.maxTasks, share, claims)
            XCTAssertEqual(grant.principal.maxTasks, share, claims)
        }
    }

    // MARK: Outside input that is not a token

    func testALogEntryWithNumbersNoConversionHoldsIsSkipped() {
        let good = LogEntry(node: "n1", token: 7, worker: 1, now: now, kind: .due)
        XCTAssertNotNil(LogEntry(decoding: good.encoded()))
        let text = String(decoding: good.encoded(), as: UTF8.self)
        for (from, to) in [(#""k":7"#, #""k":1e300"#), (#""k":7"#, #""k":-1"#), (#""w":1"#, #""w":1e19"#), (#""w":1"#, #""w":0.5"#)] {
            XCTAssertTrue(text.contains(from), text)
            XCTAssertNil(LogEntry(decoding: Array(text.replacingOccurrences(of: from, with: to).utf8)), to)
        }
    }

    func testAKindsStoredRunsKeepOnlyDurationsThatAreNumbers() {
        let items: [JSONValue] = [.number(12), .number(1e308), .number(-3), .string("9"), .number(30)]
        XCTAssertEqual(KindRuns.restored(items, lastFinishedAt: now), KindRuns(seconds: [12, 30], lastFinishedAt: now))
        XCTAssertNil(KindRuns.restored(items, lastFinishedAt: 1e300), "a finish that is no instant")
        XCTAssertNil(KindRuns.restored([.number(-1)], lastFinishedAt: now), "nothing left to keep")
        XCTAssertEqual(KindRuns.restored(Array(repeating: .number(5), count: 50), lastFinishedAt: now)?.seconds.count, KindHistory.runsKept)
    }

    func testAStoredTaskIsCheckedAsAnUpdateIsAndEveryStoredNumberIsRangeChecked() throws {
        let store = TaskStore()
        var patch = TaskPatch()
        patch.title = "Build"
        patch.completed = .some(3)
        patch.total = .some(10)
        _ = try store.apply(.update(id: "ci.build", patch: patch), now: now)
        _ = try store.apply(.startTimer(id: "tea", spec: TimerStart(seconds: 180, interval: 1)), now: now)
        for id in ["ci.build", "tea"] {
            let bytes = try XCTUnwrap(store.task(id)).encodedForStorage()
            guard case .success(let task) = TaskRecord.restoring(bytes) else { return XCTFail("\(id) refused") }
            XCTAssertEqual(task.encodedForStorage(), bytes)
        }
        let build = String(decoding: try XCTUnwrap(store.task("ci.build")).encodedForStorage(), as: UTF8.self)
        let tea = String(decoding: try XCTUnwrap(store.task("tea")).encodedForStorage(), as: UTF8.self)
        let cases: [(String, String, String, String)] = [
            (build, #""title":"Build""#, #""title":"\#(String(repeating: "x", count: 20_000_000))""#, "title is longer than 200"),
            (build, #""progress":0.3"#, #""progress":1e308"#, "progress"),
            (build, #""total":10"#, #""total":-5"#, "total"),
            (build, #""seq":1"#, #""seq":1e300"#, "\"seq\" is not a whole number"),
            (build, #""updatedAt":\#(Int(now))"#, #""updatedAt":1e300"#, "stored.updatedAt is not an instant"),
            (build, #""publishedAt":\#(Int(now))"#, #""publishedAt":-1e300"#, "stored.publishedAt is not an instant"),
            (tea, #""ticks":0"#, #""ticks":1e300"#, "\"ticks\" is not a whole number"),
            (tea, #""interval":1,"#, #""interval":1e-300,"#, "interval"),
        ]
        for (original, from, to, reason) in cases {
            XCTAssertTrue(original.contains(from), "\(from) in \(original)")
            let changed = Array(original.replacingOccurrences(of: from, with: to).utf8)
            guard case .failure(let error) = TaskRecord.restoring(changed) else {
                XCTFail("\(to.prefix(60)) restored")
                continue
            }
            XCTAssertNotNil(error.id)
            XCTAssertTrue(error.reason.contains(reason), "\(to.prefix(60)): \(error.reason)")
            XCTAssertNil(TaskRecord(stored: changed))
        }
    }
}
