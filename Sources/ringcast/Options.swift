import Foundation
import RingcastCore

/// One option of a command. A command's table of these is the one source of both what it accepts
/// and what its `--help` says (as swift-argument-parser's property wrappers give, built by hand).
struct Option {
    enum Kind {
        /// `--name VALUE`; the placeholder is what the help shows for VALUE.
        case value(placeholder: String)
        /// A bare `--name`.
        case flag
    }

    let name: String
    let kind: Kind
    /// One sentence or two; the help wraps it.
    let help: String
    /// Read when the option is not on the command line (and the variable is set and not empty).
    var environment: String?
    /// Used when neither the command line nor the environment gives a value; shown in the help.
    var defaultValue: String?
    /// Other spellings accepted for the same option (without the leading `--`).
    var aliases: [String] = []

    static func value(
        _ name: String, _ placeholder: String, _ help: String, environment: String? = nil,
        default defaultValue: String? = nil, aliases: [String] = []
    ) -> Option {
        Option(
            name: name, kind: .value(placeholder: placeholder), help: help, environment: environment,
            defaultValue: defaultValue, aliases: aliases)
    }

    static func flag(_ name: String, _ help: String) -> Option {
        Option(name: name, kind: .flag, help: help)
    }

    static let help = Option.flag("help", "show this help")

    var takesValue: Bool {
        if case .value = kind { return true }
        return false
    }

    /// `--name PLACEHOLDER` or `--name`, as the help's left column shows it.
    var synopsis: String {
        switch kind {
        case .value(let placeholder): return "--\(name) \(placeholder)"
        case .flag: return "--\(name)"
        }
    }

    /// The help sentence with where the value comes from when it is not given (after its first
    /// clause, before a "; "), and the other spellings.
    var fullHelp: String {
        let origin: String
        switch (environment, defaultValue) {
        // No-break spaces keep "default: X" on one line of the wrapped help.
        case (let variable?, let value?): origin = " (default:\u{A0}$\(variable), else\u{A0}\(value))"
        case (let variable?, nil): origin = " (default:\u{A0}$\(variable))"
        case (nil, let value?): origin = " (default:\u{A0}\(value))"
        case (nil, nil): origin = ""
        }
        var text = help
        if let clause = text.range(of: "; ") { text.insert(contentsOf: origin, at: clause.lowerBound) } else { text += origin }
        if !aliases.isEmpty { text += "; also " + aliases.map { "--\($0)" }.joined(separator: ", ") }
        return text
    }
}

/// Options shown together under one heading of a command's help.
struct OptionGroup {
    let title: String
    let options: [Option]

    init(_ title: String, _ options: [Option]) {
        self.title = title
        self.options = options
    }

    /// The same group with `alias` accepted for option `name` too.
    func adding(alias: String, to name: String) -> OptionGroup {
        OptionGroup(
            title,
            options.map { option in
                var option = option
                if option.name == name { option.aliases.append(alias) }
                return option
            })
    }
}

/// A wrong argument: exit status 2, one line that says what to type instead.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    /// Whether the line ends by pointing at the command's `--help` (not for a config file's error,
    /// which names its own field).
    let pointsAtHelp: Bool

    init(_ description: String, pointsAtHelp: Bool = true) {
        self.description = description
        self.pointsAtHelp = pointsAtHelp
    }
}

/// One command's arguments, read against its option table: `--name value`, `--name=value` or a
/// bare `--flag`; anything else is positional; what follows `--` is passed through.
struct ParsedOptions {
    private let table: [String: Option]
    private var values: [String: String] = [:]
    private var flags: Set<String> = []
    /// How each option given was spelled (`--url` for `--server`), for messages.
    private var spelling: [String: String] = [:]
    private(set) var positional: [String] = []
    private(set) var passthrough: [String] = []
    let environment: [String: String]

    init(
        _ arguments: [String], options: [Option], takesPassthrough: Bool = false,
        environment: [String: String] = [:]
    ) throws(UsageError) {
        var table: [String: Option] = [:]
        for option in options {
            for name in [option.name] + option.aliases { table[name] = option }
        }
        self.table = table
        self.environment = environment
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                guard takesPassthrough else { throw UsageError("'--' is only for `ringcast run`") }
                passthrough = Array(arguments[index...])
                return
            }
            guard argument.hasPrefix("--") else {
                positional.append(argument)
                continue
            }
            var spelled = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = spelled.firstIndex(of: "=") {
                inlineValue = String(spelled[spelled.index(after: equals)...])
                spelled = String(spelled[..<equals])
            }
            guard let option = table[spelled] else { throw UsageError("unknown option --\(spelled)") }
            spelling[option.name] = "--" + spelled
            if option.takesValue {
                if let inlineValue {
                    values[option.name] = inlineValue
                } else {
                    guard index < arguments.count else { throw UsageError("--\(spelled) needs a value") }
                    values[option.name] = arguments[index]
                    index += 1
                }
            } else {
                guard inlineValue == nil else { throw UsageError("--\(spelled) takes no value") }
                flags.insert(option.name)
            }
        }
    }

    private func option(_ name: String) -> Option {
        guard let option = table[name] else { preconditionFailure("--\(name) is not in the command's option table") }
        return option
    }

    /// Whether the option was given on the command line.
    func isGiven(_ name: String) -> Bool {
        _ = option(name)
        return values[name] != nil || flags.contains(name)
    }

    func flag(_ name: String) -> Bool {
        _ = option(name)
        return flags.contains(name)
    }

    /// The value from the command line, else from the option's environment variable (set and not
    /// empty), else its default.
    func value(_ name: String) -> String? {
        let option = option(name)
        if let given = values[name] { return given }
        if let variable = option.environment, let text = environment[variable], !text.isEmpty { return text }
        return option.defaultValue
    }

    /// Where `value(name)` came from, as the user would name it: `--server`, `RINGCAST_URL`, `the default`.
    func source(_ name: String) -> String {
        let option = option(name)
        if values[name] != nil { return spelling[name] ?? "--\(name)" }
        if let variable = option.environment, environment[variable]?.isEmpty == false { return variable }
        return "the default"
    }

    // MARK: Typed values, each with the message a wrong one gets

    func integer(_ name: String) throws(UsageError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text) else { throw UsageError("\(source(name)) takes a whole number, not '\(text)'") }
        return number
    }

    func decimal(_ name: String) throws(UsageError) -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number.isFinite else { throw UsageError("\(source(name)) takes a number, not '\(text)'") }
        return number
    }

    /// A duration in seconds (`3`, `0.5`), within the protocol's range.
    func seconds(_ name: String, minimum: Double = 0.001) throws(UsageError) -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number.isFinite, number >= minimum, number <= 31_536_000 else {
            throw UsageError("\(source(name)) wants seconds, at least \(minimum.plain), not '\(text)'")
        }
        return number
    }

    /// A text field with the protocol's length limit.
    func text(_ name: String, maxLength: Int) throws(UsageError) -> String? {
        guard let text = value(name) else { return nil }
        guard text.count <= maxLength else { throw UsageError("\(source(name)) is longer than \(maxLength) characters") }
        return text
    }

    /// Exactly one positional argument, a valid task id.
    func taskID() throws(UsageError) -> String {
        guard let id = positional.first else { throw UsageError("give the task id, e.g. ci.build-42") }
        guard positional.count == 1 else { throw UsageError("unexpected argument '\(positional[1])'") }
        guard TaskID.isValid(id) else {
            throw UsageError("'\(id)' is not a task id: 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit")
        }
        return id
    }

    /// `--kind K`: a kind is spelled like a task id.
    func kind() throws(UsageError) -> String? {
        guard let kind = value("kind") else { return nil }
        guard TaskID.isValid(kind) else { throw UsageError("\(source("kind")) '\(kind)' is not a kind: spell it like a task id, e.g. ci.build") }
        return kind
    }

    /// No positional argument at all.
    func noPositional() throws(UsageError) {
        if let extra = positional.first { throw UsageError("unexpected argument '\(extra)'") }
    }
}

/// A command's `--help`, laid out from its option table: usage, what it does, each group of
/// options in aligned columns (help wrapped at `width`), then whatever the command adds.
struct HelpText {
    static let width = 100

    static func render(usage: [String], discussion: String, groups: [OptionGroup], epilogue: String) -> String {
        var text = usage.enumerated().map { index, line in (index == 0 ? "usage: " : "       ") + line }.joined(separator: "\n")
        if !discussion.isEmpty { text += "\n\n" + discussion }
        let column = min(28, (groups.flatMap(\.options).map(\.synopsis.count).max() ?? 0) + 4)
        for group in groups where !group.options.isEmpty {
            text += "\n\n\(group.title):"
            for option in group.options {
                let left = "  " + option.synopsis
                let lines = wrap(option.fullHelp, width: width - column).map { $0.replacingOccurrences(of: "\u{A0}", with: " ") }
                let first =
                    left.count + 2 <= column
                    ? left.padding(toLength: column, withPad: " ", startingAt: 0) + lines[0]
                    : left + "\n" + String(repeating: " ", count: column) + lines[0]
                text += "\n" + first
                for line in lines.dropFirst() { text += "\n" + String(repeating: " ", count: column) + line }
            }
        }
        if !epilogue.isEmpty { text += "\n\n" + epilogue }
        return text
    }

    /// Words of `text` in lines of at most `width` characters (a longer word stands alone).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        return lines + [line]
    }
}
