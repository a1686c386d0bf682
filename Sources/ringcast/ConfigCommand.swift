import Foundation
import RingcastCore

/// `ringcast config check FILE` and `ringcast config example`: a configuration checked without
/// starting the server, and one to start from.
struct ConfigCommand: Subcommand {
    static let name = "config"
    static let summary = "check a configuration file, or print a commented example"
    static let usage = ["ringcast config check [FILE]", "ringcast config example"]
    static let discussion = """
        check: reads FILE (default config.json) as `serve` would — the file, then RINGCAST_HOST, \
        RINGCAST_PORT, RINGCAST_STORAGE, RINGCAST_LOG_LEVEL and the variables publishers' tokenEnv name — \
        and says whether it would start. example: prints every setting at its default, each with a \
        comment (`ringcast config example > config.json`). docs/CONFIG.md explains each setting.
        """
    static let optionGroups = [OptionGroup("options", [])]
    static let epilogue = "Exit status: 0 the file is good; 2 it is not, with the one line `serve` would stop with."

    enum Action {
        /// The file as `serve` would load it (the loading is this command's validation step).
        case check(path: String, loaded: LoadedConfig)
        case example
    }

    let action: Action

    init(validating options: ParsedOptions) throws(UsageError) {
        let words = options.positional
        switch words.first {
        case "check":
            guard words.count <= 2 else { throw UsageError("unexpected argument '\(words[2])'") }
            let path = words.count == 2 ? words[1] : "config.json"
            action = .check(path: path, loaded: try ServeCommand.load(path, environment: options.environment))
        case "example":
            guard words.count == 1 else { throw UsageError("unexpected argument '\(words[1])'") }
            action = .example
        case let other?:
            throw UsageError("unknown action '\(other)': say `ringcast config check FILE` or `ringcast config example`")
        case nil:
            throw UsageError("say what to do: `ringcast config check FILE` or `ringcast config example`")
        }
    }

    func run() throws(CommandFailure) -> Int32 {
        switch action {
        case .example:
            print(ConfigCommand.example, terminator: "")
            return 0
        case .check(let path, let loaded):
            print("\(path): ok (\(loaded.summary))")
            return 0
        }
    }

    /// Every setting at its default, each under a comment: a file to start from.
    static var example: String {
        var lines = [
            "// Ringcast configuration: every setting at its default (`ringcast config example`).",
            "// Comments run from // to the end of the line. Relative paths start at this file's folder.",
            "// `ringcast config check FILE` checks a file without starting; docs/CONFIG.md has the rest.",
            "{",
        ]
        let reference = ServerConfig.reference
        let lastActive = reference.lastIndex { !$0.commentedOut }
        for (index, entry) in reference.enumerated() {
            if index > 0 { lines.append("") }
            lines += HelpText.wrap(entry.meaning, width: 94).map { "  // " + $0 }
            let setting = "\"\(entry.key)\": \(entry.defaultJSON)"
            lines.append(entry.commentedOut ? "  // \(setting)," : "  \(setting)\(index == lastActive ? "" : ",")")
        }
        return (lines + ["}"]).joined(separator: "\n") + "\n"
    }
}
