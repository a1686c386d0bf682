import RingcastCore
import RingcastLWS
import RingcastServer

/// `ringcast version` (and `ringcast --version`): the release, and what it speaks and runs on.
struct VersionCommand: Subcommand {
    static let name = "version"
    static let summary = "print the version (also `ringcast --version`)"
    static let usage = ["ringcast version"]
    static let discussion = """
        Prints `ringcast X.Y.Z` first (all the root's version option prints), then the protocol version (the `protocol` of `hello` and /healthz), \
        the storage schema version and the libraries underneath.
        """
    static let optionGroups = [OptionGroup("options", [])]

    /// The first line, and all `ringcast --version` prints.
    static var line: String { "ringcast \(RingcastVersion.version)" }

    init(validating options: ParsedOptions) throws(UsageError) { try options.noPositional() }

    func run() throws(CommandFailure) -> Int32 {
        print(
            """
            \(VersionCommand.line)
            protocol \(ProtocolInfo.version)
            storage schema \(StorageInfo.schemaVersion) (SQLite \(StorageInfo.sqliteVersion))
            libwebsockets \(LWSLibrary.version)
            """)
        return 0
    }
}
