/// Finds the pattern sets that match a task id in time proportional to the sets that could match,
/// not to all of them. Exact ids are found by hash; a pattern with a literal start or end (`ci.*`,
/// `*.deploy`, `ci.*.test`) is filed under up to its first or last 8 literal bytes, and is looked
/// at only for ids that start or end with them (at most 8 hash lookups each way per id); only a
/// pattern with a wildcard at both ends (`*build*`, `?x*`) is looked at for every id, once until
/// the scanned patterns change (the answer is kept by id). A pattern looked at costs a test of the bytes it needs against those the id holds, then, if they are
/// there, one `Glob.matches`, linear in the id.
struct PatternIndex<Member: AnyObject> {
    /// The most literal bytes a key holds: eight fit one word.
    static var keyLength: Int { 8 }

    private struct Entry {
        let glob: Glob
        let member: Member
    }

    private var exact: [String: [Member]] = [:]
    /// `heads[n - 1]`: patterns keyed by their first `n` literal bytes; `tails` by their last.
    private var heads: [[UInt64: [Entry]]] = Array(repeating: [:], count: 8)
    private var tails: [[UInt64: [Entry]]] = Array(repeating: [:], count: 8)
    private var scanned: [Entry] = []
    /// Entries in `heads` and `tails`: while there are none, an id's ends are not looked up.
    private var endsFiled = 0
    /// What the scanned patterns answered for recent ids, one member per matching pattern: a
    /// task's every update has the same id, and scanned patterns are the only ones that cost a
    /// match each, for every id. Emptied whenever a scanned pattern comes or goes, and when full.
    private var scannedAnswers: [String: [Member]] = [:]
    static var answersKept: Int { 4096 }

    /// Where a glob is filed.
    enum Shape: Equatable {
        case exact(String)
        /// Under its first `length` bytes, packed by `key`.
        case head(key: UInt64, length: Int)
        /// Under its last `length` bytes, packed by `key`.
        case tail(key: UInt64, length: Int)
        case scanned
    }

    /// Packs up to 8 bytes into a word, the first byte lowest.
    static func key<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
        var key: UInt64 = 0
        for (i, byte) in bytes.enumerated() { key |= UInt64(byte) << UInt64(8 * i) }
        return key
    }

    static func shape(of glob: Glob) -> Shape {
        if glob.head.count == glob.bytes.count { return .exact(glob.pattern) }
        let headLength = min(glob.head.count, keyLength)
        let tailLength = min(glob.tail.count, keyLength)
        if headLength == 0 && tailLength == 0 { return .scanned }
        // The longer key rules out more ids.
        if headLength >= tailLength { return .head(key: key(glob.head.prefix(headLength)), length: headLength) }
        return .tail(key: key(glob.tail.suffix(tailLength)), length: tailLength)
    }

    mutating func insert(_ member: Member, for globs: [Glob]) {
        for glob in globs {
            let entry = Entry(glob: glob, member: member)
            switch PatternIndex.shape(of: glob) {
            case .exact(let id): exact[id, default: []].append(member)
            case .head(let key, let length):
                heads[length - 1][key, default: []].append(entry)
                endsFiled += 1
            case .tail(let key, let length):
                tails[length - 1][key, default: []].append(entry)
                endsFiled += 1
            case .scanned:
                scanned.append(entry)
                scannedAnswers.removeAll()
            }
        }
    }

    mutating func remove(_ member: Member, for globs: [Glob]) {
        func drop(_ entries: inout [Entry]?, _ glob: Glob) {
            let before = entries?.count ?? 0
            entries?.removeAll { $0.member === member && $0.glob == glob }
            endsFiled -= before - (entries?.count ?? 0)
            if entries?.isEmpty == true { entries = nil }
        }
        for glob in globs {
            switch PatternIndex.shape(of: glob) {
            case .exact(let id):
                exact[id]?.removeAll { $0 === member }
                if exact[id]?.isEmpty == true { exact.removeValue(forKey: id) }
            case .head(let key, let length): drop(&heads[length - 1][key], glob)
            case .tail(let key, let length): drop(&tails[length - 1][key], glob)
            case .scanned:
                scanned.removeAll { $0.member === member && $0.glob == glob }
                scannedAnswers.removeAll()
            }
        }
    }

    /// Calls `body` for every member with a pattern matching `id`; a member matching by several
    /// patterns is called once per pattern (the caller de-duplicates). Answers how many patterns it
    /// had to run the matcher for: 0 for an id no indexed pattern's literal ends fit.
    @discardableResult
    mutating func forEachMatch(_ id: String, _ body: (Member) -> Void) -> Int {
        if let members = exact[id] { members.forEach(body) }
        var checked = 0
        let utf8 = id.utf8
        // The id's bytes are gathered for the first pattern looked at: a dashboard's `*` is answered
        // from `scannedAnswers` for every update of a task, and then needs none of this.
        var gathered: ByteSet?
        func matches(_ glob: Glob) -> Bool {
            checked += 1
            let present = gathered ?? ByteSet(utf8)
            gathered = present
            return glob.matches(id, holding: present)
        }
        if endsFiled > 0 {
            var key: UInt64 = 0
            for (i, byte) in utf8.prefix(PatternIndex.keyLength).enumerated() {
                key |= UInt64(byte) << UInt64(8 * i)
                if !heads[i].isEmpty, let entries = heads[i][key] {
                    for entry in entries where matches(entry.glob) { body(entry.member) }
                }
            }
            // The last n bytes, packed first byte lowest, grown one byte at a time from the end.
            key = 0
            for (i, byte) in utf8.suffix(PatternIndex.keyLength).reversed().enumerated() {
                key = key << 8 | UInt64(byte)
                if !tails[i].isEmpty, let entries = tails[i][key] {
                    for entry in entries where matches(entry.glob) { body(entry.member) }
                }
            }
        }
        guard !scanned.isEmpty else { return checked }
        if let members = scannedAnswers[id] {
            members.forEach(body)
            return checked
        }
        var answer: [Member] = []
        for entry in scanned where matches(entry.glob) { answer.append(entry.member) }
        answer.forEach(body)
        if scannedAnswers.count >= PatternIndex.answersKept { scannedAnswers.removeAll(keepingCapacity: true) }
        scannedAnswers[id] = answer
        return checked
    }
}
