/// A watch pattern over task ids: `*` matches any run of characters (dots included), `?` one character.
/// `ci.*` matches `ci.build-42` and `ci.a.b`; `*` matches everything.
///
/// Matching costs at most a few word operations per byte of the id, whatever the pattern: a
/// backtracking matcher costs the id's length times the pattern's on an id that almost matches
/// (`*aaaa…aZ` against `aaaa…a`), and a watcher may send many such patterns.
public struct Glob: Hashable, Sendable, CustomStringConvertible {
    public let pattern: String
    let bytes: [UInt8]
    private let isMatchAll: Bool
    /// The literal bytes before the first wildcard and after the last: every id the pattern
    /// matches starts with `head` and ends with `tail` (both the whole pattern when it has no
    /// wildcard). They are what `PatternIndex` files a pattern under.
    let head: [UInt8]
    let tail: [UInt8]
    /// The ASCII bytes every matching id holds somewhere: the pattern's literals.
    let required: ByteSet
    private let program: GlobProgram

    public init(_ pattern: String) {
        self.pattern = pattern
        bytes = Array(pattern.utf8)
        isMatchAll = pattern == "*"
        let isWildcard = { (byte: UInt8) in byte == UInt8(ascii: "*") || byte == UInt8(ascii: "?") }
        head = Array(bytes.prefix { !isWildcard($0) })
        tail = head.count == bytes.count ? head : Array(bytes.reversed().prefix { !isWildcard($0) }.reversed())
        required = ByteSet(bytes.filter { $0 != UInt8(ascii: "*") && $0 != UInt8(ascii: "?") })
        program = GlobProgram(bytes)
    }

    public static func == (lhs: Glob, rhs: Glob) -> Bool { lhs.pattern == rhs.pattern }
    public func hash(into hasher: inout Hasher) { hasher.combine(pattern) }

    public var description: String { pattern }

    public static let pattern = #"^[A-Za-z0-9*?][A-Za-z0-9._*?-]{0,127}$"#

    /// A pattern is valid when it could match some valid task id.
    public static func isValid(_ pattern: String) -> Bool {
        let utf8 = Array(pattern.utf8)
        guard let first = utf8.first, utf8.count <= 128 else { return false }
        // Ids start with a letter or digit, so a pattern starting with '.', '_' or '-' could match none.
        guard first != UInt8(ascii: "."), first != UInt8(ascii: "_"), first != UInt8(ascii: "-") else { return false }
        return utf8.allSatisfy { TaskID.isIDByte($0) || $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: "?") }
    }

    public func matches(_ id: String) -> Bool {
        if isMatchAll { return true }
        var matched = false
        id.utf8.withContiguousStorageIfAvailable { text in
            matched = matches(text)
        } ?? { matched = matches(Array(id.utf8)) }()
        return matched
    }

    /// `matches`, for a caller that tries many patterns on one id and has counted its bytes
    /// (`present`): a pattern with a literal the id lacks is turned away at once.
    func matches(_ id: String, holding present: ByteSet) -> Bool {
        guard present.contains(required) else { return false }
        return matches(id)
    }

    private func matches<T: RandomAccessCollection>(_ text: T) -> Bool where T.Element == UInt8, T.Index == Int {
        let count = text.count
        guard count >= program.fixedLength, program.hasStar || count == program.fixedLength else { return false }
        // The literal ends first: they turn most ids away after a byte or two.
        guard count >= head.count, count >= tail.count else { return false }
        let start = text.startIndex
        for (offset, byte) in head.enumerated() where text[start + offset] != byte { return false }
        let tailStart = text.endIndex - tail.count
        for (offset, byte) in tail.enumerated() where text[tailStart + offset] != byte { return false }
        return program.run(text)
    }
}

/// A set of ASCII bytes, one bit each (bytes past ASCII are left out: ids and patterns have none).
struct ByteSet: Equatable, Sendable {
    private var low: UInt64 = 0
    private var high: UInt64 = 0

    init<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        for byte in bytes where byte < 128 {
            if byte < 64 { low |= 1 << UInt64(byte) } else { high |= 1 << UInt64(byte - 64) }
        }
    }

    func contains(_ other: ByteSet) -> Bool { other.low & ~low == 0 && other.high & ~high == 0 }
}

/// A glob as a bit-parallel automaton (Shift-And with a self-loop on each star): state `i` means
/// "the pattern's first `i` bytes are matched", every live state moves at once, one bit each, so a
/// byte of the id costs one operation per 64 bytes of pattern and nothing backtracks. Patterns
/// with at most one star need no automaton: their fixed bytes sit at fixed places from the ends.
private struct GlobProgram: Sendable {
    /// Bytes of the pattern after merging runs of stars (`a**b` is `a*b`).
    let core: [UInt8]
    /// Bytes a matching id has besides what stars stand for; with no star, its exact length.
    let fixedLength: Int
    let hasStar: Bool
    let starCount: Int
    /// Words of 64 states; the automaton has `core.count + 1` states.
    let words: Int
    /// Bit `i`: core byte `i` is `*`.
    let stars: [UInt64]
    /// Bit `i`: core byte `i` is `?`.
    let anyByte: [UInt64]
    /// For each byte value, 0 when no literal of the pattern is that byte, else its row in `literals` plus one.
    let rowOfByte: [UInt8]
    /// Bit `i` of row `r`: core byte `i` is the literal of row `r`.
    let literals: [UInt64]

    init(_ bytes: [UInt8]) {
        let star = UInt8(ascii: "*")
        let question = UInt8(ascii: "?")
        var core: [UInt8] = []
        for byte in bytes where !(byte == star && core.last == star) { core.append(byte) }
        self.core = core
        starCount = core.filter { $0 == star }.count
        hasStar = starCount > 0
        fixedLength = core.count - starCount
        let words = core.count / 64 + 1
        self.words = words
        var stars = [UInt64](repeating: 0, count: words)
        var anyByte = [UInt64](repeating: 0, count: words)
        var rowOfByte = [UInt8](repeating: 0, count: 256)
        var literals: [UInt64] = []
        for (i, byte) in core.enumerated() {
            let bit = UInt64(1) << UInt64(i % 64)
            if byte == star {
                stars[i / 64] |= bit
            } else if byte == question {
                anyByte[i / 64] |= bit
            } else {
                if rowOfByte[Int(byte)] == 0 {
                    literals.append(contentsOf: repeatElement(0, count: words))
                    // At most 254 distinct bytes can be literals, and no pattern reaches that.
                    rowOfByte[Int(byte)] = UInt8(truncatingIfNeeded: literals.count / words)
                }
                literals[(Int(rowOfByte[Int(byte)]) - 1) * words + i / 64] |= bit
            }
        }
        self.stars = stars
        self.anyByte = anyByte
        self.rowOfByte = rowOfByte
        self.literals = literals
    }

    /// Whether `text` matches, its length and literal ends already checked by the caller.
    func run<T: RandomAccessCollection>(_ text: T) -> Bool where T.Element == UInt8, T.Index == Int {
        if starCount <= 1 { return runFixed(text) }
        if words == 1 { return runOneWord(text) }
        return runWords(text)
    }

    /// With no star, byte `i` of the pattern meets byte `i` of the id; with one, the bytes after
    /// it meet the id's last ones.
    private func runFixed<T: RandomAccessCollection>(_ text: T) -> Bool where T.Element == UInt8, T.Index == Int {
        let question = UInt8(ascii: "?")
        let starAt = core.firstIndex(of: UInt8(ascii: "*")) ?? core.count
        var position = text.startIndex
        for i in 0..<starAt {
            if core[i] != question && core[i] != text[position] { return false }
            position += 1
        }
        guard starAt < core.count else { return true }
        position = text.endIndex - (core.count - starAt - 1)
        for i in (starAt + 1)..<core.count {
            if core[i] != question && core[i] != text[position] { return false }
            position += 1
        }
        return true
    }

    private func runOneWord<T: RandomAccessCollection>(_ text: T) -> Bool where T.Element == UInt8, T.Index == Int {
        let stars = stars[0]
        let anyByte = anyByte[0]
        var live: UInt64 = 1
        live |= (live & stars) << 1
        for byte in text {
            let row = Int(rowOfByte[Int(byte)])
            let accepts = anyByte | (row == 0 ? 0 : literals[row - 1])
            live = ((live & accepts) << 1) | (live & stars)
            // Runs of stars are merged, so a state a star reaches is never itself a star.
            live |= (live & stars) << 1
            if live == 0 { return false }
        }
        return live & (UInt64(1) << UInt64(core.count)) != 0
    }

    private func runWords<T: RandomAccessCollection>(_ text: T) -> Bool where T.Element == UInt8, T.Index == Int {
        var live = [UInt64](repeating: 0, count: words)
        live[0] = 1 | ((1 & stars[0]) << 1)
        for byte in text {
            let row = Int(rowOfByte[Int(byte)])
            var moveCarry: UInt64 = 0
            var any: UInt64 = 0
            for k in 0..<words {
                let accepts = anyByte[k] | (row == 0 ? 0 : literals[(row - 1) * words + k])
                let moved = live[k] & accepts
                live[k] = (moved << 1) | moveCarry | (live[k] & stars[k])
                moveCarry = moved >> 63
                any |= live[k]
            }
            if any == 0 { return false }
            var starCarry: UInt64 = 0
            for k in 0..<words {
                let atStar = live[k] & stars[k]
                live[k] |= (atStar << 1) | starCarry
                starCarry = atStar >> 63
            }
        }
        let accept = core.count
        return live[accept / 64] & (UInt64(1) << UInt64(accept % 64)) != 0
    }
}

/// A set of patterns a watcher subscribes to; matches when any pattern does.
public struct WatchSet: Hashable, Sendable {
    public let globs: [Glob]
    public var matchesAll: Bool { globs.contains { $0.pattern == "*" } }

    public init(_ globs: [Glob]) { self.globs = globs }

    // By the patterns, read in place: the synthesized ones copy each whole `Glob` (its matcher's
    // arrays, five retains) to compare or hash one string, and every watcher's connect hashes its
    // set to find a snapshot it can share.
    public static func == (lhs: WatchSet, rhs: WatchSet) -> Bool {
        guard lhs.globs.count == rhs.globs.count else { return false }
        for index in lhs.globs.indices where lhs.globs[index].pattern != rhs.globs[index].pattern { return false }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(globs.count)
        for index in globs.indices { hasher.combine(globs[index].pattern) }
    }

    /// Parses `a.*,b.*` as sent in `?watch=`; empty means everything.
    /// `*`: what a dashboard and most watchers ask for, made once rather than on every connection.
    public static let everything = WatchSet([Glob("*")])

    /// What one watch list may hold: every event is matched against every pattern set that cannot
    /// be ruled out by its literal ends (`PatternIndex`), so a list's size is a cost on every
    /// publish, and a watcher sets it. A dashboard sends one pattern; a service a few.
    public static let maxPatterns = 32
    public static let maxPatternBytes = 1024

    public static func parse(_ list: String?) -> Result<WatchSet, APIError> {
        guard let list, !list.isEmpty, list != "*" else { return .success(everything) }
        let parts = list.split(separator: ",", omittingEmptySubsequences: true)
        let bytes = parts.reduce(0) { $0 + $1.utf8.count }
        if parts.count > maxPatterns || bytes > maxPatternBytes {
            return .failure(
                APIError(
                    .invalidPattern,
                    "watch lists \(parts.count) patterns of \(bytes) bytes in all: at most \(maxPatterns) patterns of \(maxPatternBytes) bytes are allowed; watch a broader pattern (such as 'ci.*') instead",
                    field: "watch")
            )
        }
        var globs: [Glob] = []
        for part in parts {
            let text = String(part)
            guard Glob.isValid(text) else {
                return .failure(
                    APIError(.invalidPattern, "watch pattern '\(text)' is not valid: use letters, digits, '.', '_', '-', '*' and '?'", field: "watch")
                )
            }
            if !globs.contains(Glob(text)) { globs.append(Glob(text)) }
        }
        return .success(globs.isEmpty ? everything : WatchSet(globs))
    }

    public var key: String { globs.map(\.pattern).joined(separator: ",") }

    public func matches(_ id: String) -> Bool {
        for glob in globs where glob.matches(id) { return true }
        return false
    }
}

extension Glob {
    /// Whether every id this pattern's `other` matches is matched by this one too: `ci.*` covers
    /// `ci.build-*` and `ci.lint`, `*` covers everything, `ci.*` does not cover `*.build`. Sound
    /// but not complete: a `true` is always right; a `false` may, in contrived cases (`a*` against
    /// `a*?*`), miss an inclusion, which only makes the caller refuse a pattern it could have kept.
    /// Quadratic in the patterns' lengths (128 at most), never exponential.
    public func covers(_ other: Glob) -> Bool {
        if isMatchAll { return true }
        let p = bytes
        let q = other.bytes
        let star = UInt8(ascii: "*")
        let question = UInt8(ascii: "?")
        // reach[j]: this pattern's first i bytes can stand for other's first j bytes.
        var reach = [Bool](repeating: false, count: q.count + 1)
        reach[0] = true
        for byte in p {
            var next = [Bool](repeating: false, count: q.count + 1)
            if byte == star {
                // A star of ours absorbs any run of the other's bytes, its wildcards included.
                var reached = false
                for j in 0...q.count {
                    reached = reached || reach[j]
                    next[j] = reached
                }
            } else {
                for j in 0..<q.count where reach[j] {
                    // A `?` of ours takes one character of the other's: a literal or its `?`, never
                    // its `*`, which may stand for none or for many.
                    if byte == question ? q[j] != star : q[j] == byte { next[j + 1] = true }
                }
            }
            reach = next
        }
        return reach[q.count]
    }
}
