/// A configuration as `serve` runs it: the file, then the environment variables operators set per
/// machine, then the command line, and where each setting's value came from (for the start-up log).

/// Where one setting's value came from.
public enum ConfigOrigin: Equatable, Sendable, CustomStringConvertible {
    case defaultValue
    case file
    /// An environment variable, by name.
    case environment(String)
    /// A command-line option, as spelled (`--port`).
    case option(String)

    public var description: String {
        switch self {
        case .defaultValue: return "default"
        case .file: return "file"
        case .environment(let name): return name
        case .option(let name): return name
        }
    }
}

/// The settings and where each came from. Precedence, lowest first: default, the file, the
/// environment, the command line.
public struct LoadedConfig: Sendable {
    public var config: ServerConfig
    /// The file, as named (`/etc/ringcast/config.json`).
    public let source: String
    public private(set) var origins: [String: ConfigOrigin] = [:]

    public init(config: ServerConfig, source: String) {
        self.config = config
        self.source = source
    }

    public func origin(of key: String) -> ConfigOrigin { origins[key] ?? .defaultValue }

    public mutating func note(_ key: String, from origin: ConfigOrigin) { origins[key] = origin }

    /// `host from RINGCAST_HOST, port from --port; from the file: publicDir, storage`: what is not a default.
    public var summary: String {
        let keys = ServerConfig.keys
        let overridden = keys.compactMap { key -> String? in
            switch origin(of: key) {
            case .environment, .option: return "\(key) from \(origin(of: key))"
            case .file, .defaultValue: return nil
            }
        }
        let fromFile = keys.filter { origin(of: $0) == .file }
        var parts = overridden
        parts.append(fromFile.isEmpty ? "nothing from the file" : "from the file: " + fromFile.joined(separator: ", "))
        return parts.joined(separator: "; ") + "; the rest default"
    }

    /// Every setting's origin, as a JSON object, for the start-up log's fields.
    public var originsJSON: JSONValue {
        .object(ServerConfig.keys.map { ($0, .string(origin(of: $0).description)) })
    }
}

extension ServerConfig {
    /// Variables that override the file, for what operators set per machine. (Tokens come from the
    /// variables publishers' `tokenEnv` names.)
    public static let environmentOverrides: [(variable: String, key: String)] = [
        ("RINGCAST_HOST", "host"), ("RINGCAST_PORT", "port"), ("RINGCAST_STORAGE", "storage"), ("RINGCAST_LOG_LEVEL", "logLevel"),
    ]

    /// The file's settings, then each override variable that is set and not empty, each checked as
    /// the file's setting would be (the error names the variable and the field).
    public static func load(_ bytes: [UInt8], source: String, environment: [String: String]) throws(ConfigError) -> LoadedConfig {
        var loaded = LoadedConfig(config: try parse(bytes, source: source, environment: environment), source: source)
        if case .object(let members)? = try? JSONParser.parse(ConfigText.withoutComments(bytes)) {
            for (key, _) in members { loaded.note(key, from: .file) }
        }
        for (variable, key) in environmentOverrides {
            guard let text = environment[variable], !text.isEmpty else { continue }
            let value: JSONValue
            if key == "port" {
                guard let port = Int(text) else { throw ConfigError("\(variable) must be a port number from 0 to 65535, not '\(text)'") }
                value = .number(Double(port))
            } else {
                value = .string(text)
            }
            let overlay: ServerConfig
            do {
                overlay = try parse(JSONWriter.encode(.object([(key, value)])), source: variable)
            } catch {
                // The file's message says what type it found; a variable's is always text: quote it.
                let message = error.description
                throw message.hasSuffix(", not string") ? ConfigError(String(message.dropLast(", not string".count)) + ", not '\(text)'") : error
            }
            switch key {
            case "host": loaded.config.host = overlay.host
            case "port": loaded.config.port = overlay.port
            case "storage": loaded.config.storage = overlay.storage
            case "logLevel": loaded.config.logLevel = overlay.logLevel
            default: preconditionFailure("no override for \(key)")
            }
            loaded.note(key, from: .environment(variable))
        }
        return loaded
    }
}
