/// A watch pattern over task ids: `*` matches any run of characters (dots included), `?` one character.
/// `ci.*` matches `ci.build-42` and `ci.a.b`; `*` matches everything.
public struct Glob: Hashable, Sendable, CustomStringConvertible {
    public let pattern: String
    private let bytes: [UInt8]
    private let isMatchAll: Bool

    public init(_ pattern: String) {
        self.pattern = pattern
        bytes = Array(pattern.utf8)
        isMatchAll = pattern == "*"
    }

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
            matched = Glob.match(bytes, text)
        } ?? { matched = Glob.match(bytes, Array(id.utf8)) }()
        return matched
    }

    // Iterative wildcard matching with one backtrack point: linear in practice, never exponential.
    private static func match<T: RandomAccessCollection>(_ pattern: [UInt8], _ text: T) -> Bool where T.Element == UInt8, T.Index == Int {
        var p = 0
        var t = text.startIndex
        var starP = -1
        var starT = 0
        while t < text.endIndex {
            if p < pattern.count, pattern[p] == UInt8(ascii: "?") || pattern[p] == text[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                starP = p
                starT = t
                p += 1
            } else if starP >= 0 {
                p = starP + 1
                starT += 1
                t = starT
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}

/// A set of patterns a watcher subscribes to; matches when any pattern does.
public struct WatchSet: Hashable, Sendable {
    public let globs: [Glob]
    public var matchesAll: Bool { globs.contains { $0.pattern == "*" } }

    public init(_ globs: [Glob]) { self.globs = globs }

    /// Parses `a.*,b.*` as sent in `?watch=`; empty means everything.
    /// `*`: what a dashboard and most watchers ask for, made once rather than on every connection.
    public static let everything = WatchSet([Glob("*")])

    public static func parse(_ list: String?) -> Result<WatchSet, APIError> {
        guard let list, !list.isEmpty, list != "*" else { return .success(everything) }
        var globs: [Glob] = []
        for part in list.split(separator: ",", omittingEmptySubsequences: true) {
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
