/// A JSON Schema `pattern` of the subset the OpenAPI document uses, matched as JSON Schema reads
/// one (ECMA-262: found anywhere in the text unless anchored) over Unicode scalars: anchors `^` `$`,
/// literals, classes (`[a-z0-9._-]`, `[^/\r\n\x00]`: ranges, negation, escapes), groups `(…)` and
/// `(?:…)`, alternation `|`, and the quantifiers `*` `+` `?` `{n}` `{n,m}`.
///
/// Not Swift's Regex: compiling one from a String leaks in this toolchain (the boxes of its parse,
/// which LeakSanitizer reports). Any other syntax is refused with where it is and what to write
/// instead, so a pattern this cannot read never lets a value pass unchecked. It runs as a Thompson
/// automaton, every state in step, so no input makes it backtrack: time is text length × pattern size.
public struct SchemaPattern: Sendable {
    public let source: String
    private let program: [Instruction]
    /// Whether it begins with `^`, so that no match starts after the first position.
    private let anchored: Bool

    public init(_ source: String) throws(SchemaPatternError) {
        self.source = source
        var parser = Parser(source)
        let tree = try parser.parse()
        var compiler = Compiler()
        compiler.emit(tree)
        compiler.program.append(.match)
        program = compiler.program
        if case .start = program[0] { anchored = true } else { anchored = false }
    }

    /// Whether the pattern is found in `text` (anchors tie it to the ends).
    public func matches(_ text: String) -> Bool {
        let scalars = text.unicodeScalars.map(\.value)
        var current = StateSet(count: program.count)
        var next = StateSet(count: program.count)
        for position in 0...scalars.count {
            // Unanchored, a match may start at every position; anchored, only at the first.
            if position == 0 || !anchored { add(0, at: position, of: scalars.count, to: &current) }
            if current.contains(program.count - 1) { return true }
            // No state left (only once anchored: unanchored, state 0 was just added): no match.
            guard position < scalars.count, !current.states.isEmpty else { break }
            next.removeAll()
            for state in current.states {
                if case .scalars(let set) = program[state], set.contains(scalars[position]) {
                    add(state + 1, at: position + 1, of: scalars.count, to: &next)
                }
            }
            swap(&current, &next)
        }
        return current.contains(program.count - 1)
    }

    /// Adds `state` and every state reachable from it without reading a scalar at `position`.
    private func add(_ state: Int, at position: Int, of length: Int, to set: inout StateSet) {
        guard set.insert(state) else { return }
        switch program[state] {
        case .split(let first, let second):
            add(first, at: position, of: length, to: &set)
            add(second, at: position, of: length, to: &set)
        case .jump(let target):
            add(target, at: position, of: length, to: &set)
        case .start:
            if position == 0 { add(state + 1, at: position, of: length, to: &set) }
        case .end:
            if position == length { add(state + 1, at: position, of: length, to: &set) }
        case .scalars, .match:
            break
        }
    }
}

/// A pattern SchemaPattern does not read: where, and why.
public struct SchemaPatternError: Error, Equatable, CustomStringConvertible, Sendable {
    public let pattern: String
    /// In Unicode scalars from the pattern's start.
    public let offset: Int
    public let reason: String

    public var description: String { "the pattern \(pattern) is not supported at offset \(offset): \(reason)" }
}

/// Unicode scalars: what a class or a literal takes.
private struct ScalarSet: Sendable {
    var ranges: [ClosedRange<UInt32>]
    var negated = false

    func contains(_ scalar: UInt32) -> Bool {
        for range in ranges where range.contains(scalar) { return !negated }
        return negated
    }
}

private indirect enum Node {
    case scalars(ScalarSet)
    case start
    case end
    case sequence([Node])
    case alternation([Node])
    /// `maximum` nil: no bound.
    case repetition(Node, minimum: Int, maximum: Int?)
}

private enum Instruction: Sendable {
    /// Reads one scalar in the set, then goes on to the next instruction.
    case scalars(ScalarSet)
    case split(Int, Int)
    case jump(Int)
    case start
    case end
    case match
}

/// Reads a pattern into a tree, refusing what is not in the subset.
private struct Parser {
    let source: String
    let scalars: [Unicode.Scalar]
    var position = 0
    /// A count past this is refused: each repetition is that many copies in the automaton.
    static let largestCount = 1000

    init(_ source: String) {
        self.source = source
        scalars = Array(source.unicodeScalars)
    }

    func refuse(_ reason: String, at offset: Int? = nil) -> SchemaPatternError {
        SchemaPatternError(pattern: source, offset: offset ?? position, reason: reason)
    }

    var peek: Unicode.Scalar? { position < scalars.count ? scalars[position] : nil }

    mutating func parse() throws(SchemaPatternError) -> Node {
        let tree = try alternation()
        if let extra = peek { throw refuse(extra == ")" ? "a ) that closes no group" : "unexpected \(extra)") }
        return tree
    }

    mutating func alternation() throws(SchemaPatternError) -> Node {
        var choices = [try sequence()]
        while peek == "|" {
            position += 1
            choices.append(try sequence())
        }
        return choices.count == 1 ? choices[0] : .alternation(choices)
    }

    mutating func sequence() throws(SchemaPatternError) -> Node {
        var items: [Node] = []
        while let scalar = peek, scalar != "|", scalar != ")" {
            let atomStart = position
            let item = try atom()
            items.append(try quantified(item, atomStart: atomStart))
        }
        return .sequence(items)
    }

    mutating func quantified(_ item: Node, atomStart: Int) throws(SchemaPatternError) -> Node {
        guard let scalar = peek, "*+?{".unicodeScalars.contains(scalar) else { return item }
        if case .start = item { throw refuse("an anchor cannot repeat") }
        if case .end = item { throw refuse("an anchor cannot repeat") }
        let quantifierStart = position
        position += 1
        let bounds: (Int, Int?)
        switch scalar {
        case "*": bounds = (0, nil)
        case "+": bounds = (1, nil)
        case "?": bounds = (0, 1)
        default: bounds = try counts(from: quantifierStart)
        }
        if let next = peek, "*+?{".unicodeScalars.contains(next) {
            throw refuse(next == "?" ? "lazy quantifiers are not supported" : "a quantifier cannot repeat a quantifier")
        }
        return .repetition(item, minimum: bounds.0, maximum: bounds.1)
    }

    /// `{n}` or `{n,m}`, the `{` read already.
    mutating func counts(from start: Int) throws(SchemaPatternError) -> (Int, Int?) {
        let minimum = try number(at: start)
        var maximum = minimum
        if peek == "," {
            position += 1
            if peek == "}" { throw refuse("{n,} is not supported: write {n,m} or *", at: start) }
            maximum = try number(at: start)
        }
        guard peek == "}" else { throw refuse("a { that starts no {n} or {n,m}: escape it as \\{", at: start) }
        position += 1
        guard minimum <= maximum else { throw refuse("{\(minimum),\(maximum)}: the least count is above the most", at: start) }
        return (minimum, maximum)
    }

    mutating func number(at start: Int) throws(SchemaPatternError) -> Int {
        var digits = ""
        while let scalar = peek, ("0"..."9").contains(scalar) {
            digits.unicodeScalars.append(scalar)
            position += 1
        }
        guard let value = Int(digits) else { throw refuse("a { that starts no {n} or {n,m}: escape it as \\{", at: start) }
        guard value <= Parser.largestCount else { throw refuse("a count above \(Parser.largestCount)", at: start) }
        return value
    }

    mutating func atom() throws(SchemaPatternError) -> Node {
        let start = position
        let scalar = scalars[position]
        position += 1
        switch scalar {
        case "^": return .start
        case "$": return .end
        case "(":
            if peek == "?" {
                guard position + 1 < scalars.count, scalars[position + 1] == ":" else {
                    throw refuse("only (…) and (?:…) groups are supported, not lookarounds or named groups", at: start)
                }
                position += 2
            }
            let inside = try alternation()
            guard peek == ")" else { throw refuse("a ( that is never closed", at: start) }
            position += 1
            return inside
        case "[": return .scalars(try characterClass(from: start))
        case "\\": return .scalars(ScalarSet(ranges: [try escape(from: start, inClass: false)]))
        case ".": throw refuse(". is not supported: write the class it means, e.g. [^\\n]", at: start)
        case "*", "+", "?": throw refuse("\(scalar) repeats nothing", at: start)
        case "{": throw refuse("{ repeats nothing: escape it as \\{", at: start)
        case "]", "}": throw refuse("a lone \(scalar): escape it as \\\(scalar)", at: start)
        default: return .scalars(ScalarSet(ranges: [scalar.value...scalar.value]))
        }
    }

    /// `[…]` or `[^…]`, the `[` read already.
    mutating func characterClass(from start: Int) throws(SchemaPatternError) -> ScalarSet {
        var set = ScalarSet(ranges: [])
        if peek == "^" {
            set.negated = true
            position += 1
        }
        while peek != "]" {
            guard let first = try classMember(from: start) else { throw refuse("a [ that is never closed", at: start) }
            if peek == "-", position + 1 < scalars.count, scalars[position + 1] != "]" {
                let dash = position
                position += 1
                guard let last = try classMember(from: start) else { throw refuse("a [ that is never closed", at: start) }
                guard first.lowerBound <= last.lowerBound else { throw refuse("a range whose start is above its end", at: dash) }
                set.ranges.append(first.lowerBound...last.lowerBound)
            } else {
                set.ranges.append(first)
            }
        }
        position += 1
        guard !set.ranges.isEmpty else { throw refuse("an empty class matches nothing (or, negated, anything)", at: start) }
        return set
    }

    /// One scalar of a class, or nil at the pattern's end.
    mutating func classMember(from start: Int) throws(SchemaPatternError) -> ClosedRange<UInt32>? {
        guard let scalar = peek else { return nil }
        let at = position
        position += 1
        if scalar == "\\" { return try escape(from: at, inClass: true) }
        return scalar.value...scalar.value
    }

    /// The scalar an escape stands for, the `\` read already.
    mutating func escape(from start: Int, inClass: Bool) throws(SchemaPatternError) -> ClosedRange<UInt32> {
        guard let scalar = peek else { throw refuse("a \\ that escapes nothing", at: start) }
        position += 1
        func one(_ value: UInt32) -> ClosedRange<UInt32> { value...value }
        switch scalar {
        case "r": return one(0x0D)
        case "n": return one(0x0A)
        case "t": return one(0x09)
        case "x":
            let digits = scalars[position..<min(position + 2, scalars.count)]
            guard digits.count == 2, digits.allSatisfy(\.properties.isASCIIHexDigit),
                let value = UInt32(String(String.UnicodeScalarView(digits)), radix: 16)
            else { throw refuse("\\x takes two hex digits", at: start) }
            position += 2
            return one(value)
        case "u":
            let digits = scalars[position..<min(position + 4, scalars.count)]
            guard digits.count == 4, digits.allSatisfy(\.properties.isASCIIHexDigit),
                let value = UInt32(String(String.UnicodeScalarView(digits)), radix: 16)
            else { throw refuse("\\u takes four hex digits", at: start) }
            position += 4
            return one(value)
        case "d", "D", "w", "W", "s", "S":
            throw refuse("\\\(scalar) is not supported: write the class it means, e.g. [0-9] for \\d", at: start)
        case "1"..."9", "b", "B", "p", "P", "c", "k", "0", "f", "v":
            throw refuse("\\\(scalar) is not supported", at: start)
        default:
            let syntax = inClass ? "\\]^-[/." : "\\^$.*+?()[]{}|/-"
            guard syntax.unicodeScalars.contains(scalar) else { throw refuse("\\\(scalar) is not an escape this reads", at: start) }
            return one(scalar.value)
        }
    }
}

/// Turns a tree into instructions: a split tries both ways at once, a jump goes on elsewhere.
private struct Compiler {
    var program: [Instruction] = []

    mutating func emit(_ node: Node) {
        switch node {
        case .scalars(let set):
            program.append(.scalars(set))
        case .start:
            program.append(.start)
        case .end:
            program.append(.end)
        case .sequence(let items):
            for item in items { emit(item) }
        case .alternation(let choices):
            var jumpsToEnd: [Int] = []
            for (index, choice) in choices.enumerated() {
                if index < choices.count - 1 {
                    let split = placeholder()
                    emit(choice)
                    jumpsToEnd.append(placeholder())
                    program[split] = .split(split + 1, program.count)
                } else {
                    emit(choice)
                }
            }
            for jump in jumpsToEnd { program[jump] = .jump(program.count) }
        case .repetition(let item, let minimum, let maximum):
            for _ in 0..<minimum { emit(item) }
            if let maximum {
                // Each optional copy may be skipped, ending the repetition.
                var skips: [Int] = []
                for _ in minimum..<maximum {
                    skips.append(placeholder())
                    emit(item)
                }
                for skip in skips { program[skip] = .split(skip + 1, program.count) }
            } else {
                let loop = placeholder()
                emit(item)
                program.append(.jump(loop))
                program[loop] = .split(loop + 1, program.count)
            }
        }
    }

    /// An instruction to be written once its target is known.
    private mutating func placeholder() -> Int {
        program.append(.match)
        return program.count - 1
    }
}

/// Automaton states, each at most once, in the order they were added.
private struct StateSet {
    private(set) var states: [Int] = []
    private var present: [Bool]

    init(count: Int) { present = Array(repeating: false, count: count) }

    func contains(_ state: Int) -> Bool { present[state] }

    /// False when it was there already.
    mutating func insert(_ state: Int) -> Bool {
        guard !present[state] else { return false }
        present[state] = true
        states.append(state)
        return true
    }

    mutating func removeAll() {
        for state in states { present[state] = false }
        states.removeAll(keepingCapacity: true)
    }
}
