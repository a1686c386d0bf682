import XCTest

@testable import RingcastCore

private final class Box {
    let watch: WatchSet
    init(_ patterns: [String]) { watch = WatchSet(patterns.map(Glob.init)) }
}

final class PatternIndexTests: XCTestCase {
    func testShapes() {
        typealias Index = PatternIndex<Box>
        XCTAssertEqual(Index.shape(of: Glob("ci.build-42")), .exact("ci.build-42"))
        XCTAssertEqual(Index.shape(of: Glob("ci.*")), .head(key: Index.key(Array("ci.".utf8)), length: 3))
        XCTAssertEqual(Index.shape(of: Glob("ci*")), .head(key: Index.key(Array("ci".utf8)), length: 2))
        XCTAssertEqual(Index.shape(of: Glob("*")), .scanned)
        XCTAssertEqual(Index.shape(of: Glob("ci.*.test")), .tail(key: Index.key(Array(".test".utf8)), length: 5))
        XCTAssertEqual(Index.shape(of: Glob("ci.?")), .head(key: Index.key(Array("ci.".utf8)), length: 3))
        XCTAssertEqual(Index.shape(of: Glob("*.test")), .tail(key: Index.key(Array(".test".utf8)), length: 5))
        XCTAssertEqual(Index.shape(of: Glob("deploy.production.*")), .head(key: Index.key(Array("deploy.p".utf8)), length: 8))
        XCTAssertEqual(Index.shape(of: Glob("*aaaaaaaaaZnxi")), .tail(key: Index.key(Array("aaaaZnxi".utf8)), length: 8))
        XCTAssertEqual(Index.shape(of: Glob("*build*")), .scanned)
        XCTAssertEqual(Index.shape(of: Glob("?x*")), .scanned)
    }

    /// Patterns whose literal ends fit no published id are never run: a watcher of hundreds of
    /// near-miss patterns costs an unrelated event a few hash lookups, not a match each.
    func testPatternsWhoseEndsFitNoIdAreNotRun() {
        var index = PatternIndex<Box>()
        let filler = String(repeating: "a", count: 60)
        let boxes = (0..<20).map { watcher in Box((0..<30).map { "*\(filler)Z\(watcher)x\($0)" }) }
        for box in boxes { index.insert(box, for: box.watch.globs) }
        let ids = [String(repeating: "a", count: 128), "ci.build-1", "a" + filler + "Z1", "deploy.web"]
        for id in ids {
            var found = 0
            XCTAssertEqual(index.forEachMatch(id) { _ in found += 1 }, 0, id)
            XCTAssertEqual(found, 0)
        }
        // An id that ends as one of them does is checked against the patterns filed there, and matches one.
        let id = "b" + filler + "Z3x7"
        var found: [ObjectIdentifier] = []
        XCTAssertEqual(index.forEachMatch(id) { found.append(ObjectIdentifier($0)) }, 1)
        XCTAssertEqual(found, [ObjectIdentifier(boxes[3])])
    }

    /// An id's ends are looked up only while some pattern is filed by them: once the last one goes,
    /// `*` alone is answered without them, and one filed again is found again.
    func testEndsAreLookedUpAgainOnceAPatternIsFiledByThemAgain() {
        var index = PatternIndex<Box>()
        let everything = Box(["*"])
        let ends = Box(["ci.*", "*.test"])
        index.insert(everything, for: everything.watch.globs)
        index.insert(ends, for: ends.watch.globs)
        func found(_ id: String) -> [ObjectIdentifier] {
            var members: [ObjectIdentifier] = []
            index.forEachMatch(id) { members.append(ObjectIdentifier($0)) }
            return members
        }
        XCTAssertEqual(Set(found("ci.unit.test")), [ObjectIdentifier(everything), ObjectIdentifier(ends)])
        XCTAssertEqual(found("ci.unit.test").filter { $0 == ObjectIdentifier(ends) }.count, 2, "once per matching pattern")
        index.remove(ends, for: ends.watch.globs)
        XCTAssertEqual(found("ci.unit.test"), [ObjectIdentifier(everything)])
        let again = Box(["*.test"])
        index.insert(again, for: again.watch.globs)
        XCTAssertEqual(Set(found("ci.unit.test")), [ObjectIdentifier(everything), ObjectIdentifier(again)])
        XCTAssertEqual(found("ci.unit.build"), [ObjectIdentifier(everything)])
    }

    /// The index answers exactly what matching every set would, for random patterns and ids.
    func testTheIndexFindsExactlyWhatAScanWould() {
        var generator = SeededGenerator(seed: 42)
        let alphabet = Array("ab.-1")
        func word(_ length: Int) -> String { String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }) }
        func pattern() -> String {
            switch generator.next() % 6 {
            case 0: return "a" + word(Int(generator.next() % 4))
            case 1: return "a" + word(Int(generator.next() % 3)) + "*"
            case 2: return "*"
            case 3: return "a" + word(1) + "?" + word(1)
            case 4:
                switch generator.next() % 4 {
                case 0: return "a*" + word(1)
                case 1: return "*" + word(Int(generator.next() % 10))
                case 2: return "*" + word(1) + "*"
                default: return "?" + word(Int(generator.next() % 3)) + "*" + word(Int(generator.next() % 10))
                }
            default: return "b" + word(Int(generator.next() % 3))
            }
        }
        var index = PatternIndex<Box>()
        var boxes: [Box] = []
        for _ in 0..<300 {
            let box = Box((0..<Int(1 + generator.next() % 3)).map { _ in pattern() })
            boxes.append(box)
            index.insert(box, for: box.watch.globs)
        }
        // Take a third away again: removal must leave no trace.
        for box in boxes.prefix(100) { index.remove(box, for: box.watch.globs) }
        var live = Array(boxes.dropFirst(100))
        func lookUp(_ rounds: Int) {
            for _ in 0..<rounds {
                let id = (generator.next() % 2 == 0 ? "a" : "b") + word(Int(generator.next() % 12))
                var found: [ObjectIdentifier: Int] = [:]
                index.forEachMatch(id) { found[ObjectIdentifier($0), default: 0] += 1 }
                let expected = Set(live.filter { $0.watch.matches(id) }.map(ObjectIdentifier.init))
                XCTAssertEqual(Set(found.keys), expected, "id \(id)")
                for box in live where expected.contains(ObjectIdentifier(box)) {
                    let matchingGlobs = box.watch.globs.filter { $0.matches(id) }.count
                    XCTAssertEqual(found[ObjectIdentifier(box)], matchingGlobs, "one call per matching pattern")
                }
            }
        }
        lookUp(2000)
        // Answers kept for ids seen before must follow sets that come and go.
        for box in live.prefix(50) { index.remove(box, for: box.watch.globs) }
        live.removeFirst(50)
        lookUp(1000)
        let added = (0..<30).map { _ in Box([pattern(), pattern()]) }
        for box in added { index.insert(box, for: box.watch.globs) }
        live += added
        lookUp(1000)
    }

    /// A pattern with a wildcard at both ends is run once for an id, not on its every update.
    func testAScannedPatternRunsOncePerIdUntilThePatternsChange() {
        var index = PatternIndex<Box>()
        let near = Box(["*a0*a?"])
        index.insert(near, for: near.watch.globs)
        let id = String(repeating: "a", count: 100) + "07"
        XCTAssertEqual(index.forEachMatch(id) { _ in XCTFail("no match") }, 1)
        XCTAssertEqual(index.forEachMatch(id) { _ in XCTFail("no match") }, 0, "the answer was kept")
        let match = Box(["*a0?"])
        index.insert(match, for: match.watch.globs)
        var found: [ObjectIdentifier] = []
        XCTAssertEqual(index.forEachMatch(id) { found.append(ObjectIdentifier($0)) }, 2, "a new scanned pattern: asked again")
        XCTAssertEqual(found, [ObjectIdentifier(match)])
        index.remove(match, for: match.watch.globs)
        XCTAssertEqual(index.forEachMatch(id) { _ in XCTFail("gone") }, 1)
    }

    func testAnEventMatchingTwoPatternsOfOneSetReachesItsWatcherOnce() {
        let fanOut = FanOut()
        let writer = CountingWriter()
        let both = fanOut.subscribe(WatchSet([Glob("ci.*"), Glob("ci.build")]), lastSeq: 0, writer: writer)
        let other = fanOut.subscribe(WatchSet([Glob("deploy.*")]), lastSeq: 0, writer: writer)
        let store = TaskStore(epoch: "indexepoch")
        let events = try! store.update("ci.build", #"{"progress":0.5}"#, now: t0).events
        fanOut.publish(events)
        guard case .frame(let bytes, let count)? = fanOut.nextFrame(for: both) else { return XCTFail("no frame") }
        XCTAssertEqual(count, 1)
        XCTAssertEqual(bytes, events[0].bytes)
        XCTAssertNil(fanOut.nextFrame(for: both), "not twice")
        XCTAssertNil(fanOut.nextFrame(for: other))
        fanOut.unsubscribe(both)
        fanOut.publish(try! store.update("ci.build", #"{"progress":0.6}"#, now: t0 + 1).events)
        XCTAssertEqual(fanOut.groupCount, 1, "an emptied set leaves the index")
    }
}

private final class CountingWriter: FanOutWriter {
    var requests = 0
    func requestWrite() { requests += 1 }
}

/// SplitMix64: the same numbers on every run.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
