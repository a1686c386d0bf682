/// Finds the pattern sets that match a task id in time proportional to the sets that match, not to
/// all of them: exact ids by hash, `prefix*` patterns by their prefix (one hash lookup per distinct
/// prefix length), and only the rest (`?`, a `*` inside) scanned one by one.
struct PatternIndex<Member: AnyObject> {
    private var exact: [String: [Member]] = [:]
    private var prefixes: [String: [Member]] = [:]
    /// Distinct prefix lengths in use, ascending, with how many patterns use each.
    private var prefixLengths: [(length: Int, uses: Int)] = []
    private var scanned: [(glob: Glob, member: Member)] = []

    /// What kind of lookup a glob needs.
    enum Shape: Equatable {
        case exact(String)
        case prefix(String)
        case scanned
    }

    static func shape(of glob: Glob) -> Shape {
        let bytes = Array(glob.pattern.utf8)
        let wildcards = bytes.indices.filter { bytes[$0] == UInt8(ascii: "*") || bytes[$0] == UInt8(ascii: "?") }
        if wildcards.isEmpty { return .exact(glob.pattern) }
        if wildcards == [bytes.count - 1], bytes.last == UInt8(ascii: "*") { return .prefix(String(glob.pattern.dropLast())) }
        return .scanned
    }

    mutating func insert(_ member: Member, for globs: [Glob]) {
        for glob in globs {
            switch PatternIndex.shape(of: glob) {
            case .exact(let id):
                exact[id, default: []].append(member)
            case .prefix(let prefix):
                prefixes[prefix, default: []].append(member)
                let length = prefix.utf8.count
                if let index = prefixLengths.firstIndex(where: { $0.length == length }) {
                    prefixLengths[index].uses += 1
                } else {
                    prefixLengths.append((length, 1))
                    prefixLengths.sort { $0.length < $1.length }
                }
            case .scanned:
                scanned.append((glob, member))
            }
        }
    }

    mutating func remove(_ member: Member, for globs: [Glob]) {
        for glob in globs {
            switch PatternIndex.shape(of: glob) {
            case .exact(let id):
                exact[id]?.removeAll { $0 === member }
                if exact[id]?.isEmpty == true { exact.removeValue(forKey: id) }
            case .prefix(let prefix):
                prefixes[prefix]?.removeAll { $0 === member }
                if prefixes[prefix]?.isEmpty == true { prefixes.removeValue(forKey: prefix) }
                let length = prefix.utf8.count
                if let index = prefixLengths.firstIndex(where: { $0.length == length }) {
                    prefixLengths[index].uses -= 1
                    if prefixLengths[index].uses == 0 { prefixLengths.remove(at: index) }
                }
            case .scanned:
                scanned.removeAll { $0.member === member && $0.glob == glob }
            }
        }
    }

    /// Calls `body` for every member with a pattern matching `id`; a member matching by several
    /// patterns is called once per pattern (the caller de-duplicates).
    func forEachMatch(_ id: String, _ body: (Member) -> Void) {
        if let members = exact[id] { members.forEach(body) }
        let utf8 = id.utf8
        for (length, _) in prefixLengths {
            guard length <= utf8.count else { break }
            let prefix = length == utf8.count ? id : String(Substring(utf8.prefix(length)))
            if let members = prefixes[prefix] { members.forEach(body) }
        }
        for (glob, member) in scanned where glob.matches(id) { body(member) }
    }
}
