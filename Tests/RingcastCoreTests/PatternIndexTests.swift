import XCTest

@testable import RingcastCore

private final class Box {
    let watch: WatchSet
    init(_ patterns: [String]) { watch = WatchSet(patterns.map(Glob.init)) }
}

final class PatternIndexTests: XCTestCase {
    func testShapes() {
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("ci.build-42")), .exact("ci.build-42"))
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("ci.*")), .prefix("ci."))
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("ci*")), .prefix("ci"))
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("*")), .prefix(""))
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("ci.*.test")), .scanned)
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("ci.?")), .scanned)
        XCTAssertEqual(PatternIndex<Box>.shape(of: Glob("*.test")), .scanned)
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
            case 4: return "a*" + word(1)
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
        let live = Array(boxes.dropFirst(100))
        for _ in 0..<2000 {
            let id = (generator.next() % 2 == 0 ? "a" : "b") + word(Int(generator.next() % 5))
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
