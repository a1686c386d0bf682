import Foundation
import RingcastClient
import RingcastCore

/// The options every producer command shares: which server, and who we are to it.
struct ConnectionOptions {
    static let valued: Set<String> = ["server", "token"]
    static let flags: Set<String> = ["help"]
    static let defaultServer = "http://127.0.0.1:8080"
    static let help = """
      --server URL      the Ringcast server (default: $RINGCAST_URL, else \(defaultServer))
      --token TOKEN     a publisher token, sent as Authorization: Bearer (default: $RINGCAST_TOKEN);
                        not needed from this machine while the server's anonymousLocalPublish is on
      --help            show this help
    """

    let server: ServerURL
    let serverText: String
    let token: String?

    /// Flags first, then the environment, then the default.
    init(_ options: ParsedOptions, environment: [String: String]) throws(UsageError) {
        let text = options.values["server"] ?? environment["RINGCAST_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? ConnectionOptions.defaultServer
        let source = options.values["server"] != nil ? "--server" : (environment["RINGCAST_URL"]?.isEmpty == false ? "RINGCAST_URL" : "the default")
        guard let server = ServerURL(text) else {
            throw UsageError("\(source) '\(text)' is not a server URL: write http://HOST:PORT, e.g. \(ConnectionOptions.defaultServer)")
        }
        guard !server.secure else {
            throw UsageError("\(source) '\(text)': https is not supported by this tool; use http:// (for example through a local TLS proxy)")
        }
        self.server = server
        serverText = text
        let token = options.values["token"] ?? environment["RINGCAST_TOKEN"]
        if let token, !token.isEmpty {
            guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw UsageError("the token must be printable ASCII without spaces or line breaks")
            }
            self.token = token
        } else {
            self.token = nil
        }
    }
}

/// A runtime failure (the server is unreachable, or refused the request): exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One keep-alive HTTP connection to the server, speaking the API in JSON.
final class ProducerSession {
    let options: ConnectionOptions
    private let http: HTTPClient

    init(_ options: ConnectionOptions, timeoutSeconds: Double = 10) {
        self.options = options
        http = HTTPClient(host: options.server.host, port: options.server.port, timeoutSeconds: timeoutSeconds)
    }

    /// Sends one request; a 2xx answer's JSON comes back, anything else throws a one-line failure.
    @discardableResult
    func send(_ method: String, _ path: String, _ body: JSONValue? = nil) throws(CommandFailure) -> JSONValue {
        var headers: [(String, String)] = []
        if let token = options.token { headers.append(("Authorization", "Bearer \(token)")) }
        let response: HTTPResponse
        do {
            response = try http.request(method, options.server.endpoint(path), body: body.map(JSONWriter.encode), headers: headers)
        } catch {
            throw CommandFailure("cannot reach the server at \(options.serverText): \(error)")
        }
        let json = try? JSONParser.parse(response.body)
        guard (200..<300).contains(response.status) else {
            var message = "the server answered \(response.status)"
            if case let .string(code)? = json?["error"], case let .string(text)? = json?["message"] {
                message = "\(code): \(text)"
            }
            if response.status == 401 { message += " (pass --token TOKEN or set RINGCAST_TOKEN)" }
            throw CommandFailure(message)
        }
        guard let json else { throw CommandFailure("the server at \(options.serverText) answered \(response.status) without JSON; is it a Ringcast server?") }
        return json
    }

    /// Closes the kept-alive connection; the next request opens a new one.
    func disconnect() { http.disconnect() }

    static func taskPath(_ id: String) -> String { "/api/tasks/\(id)" }
}

/// A producer command: its options, one validation step that turns them into the command's values
/// (or a usage error saying what to type instead), and the work itself.
protocol ProducerCommand {
    static var name: String { get }
    /// The usage line and what the command does; the shared options are appended.
    static var summary: String { get }
    /// The command's own options: `--name value` ones, and bare flags.
    static var valued: Set<String> { get }
    static var flags: Set<String> { get }
    /// Whether everything after `--` is the command's (only `run`).
    static var takesPassthrough: Bool { get }
    /// Seconds to wait for the server's answer.
    static var requestTimeout: Double { get }

    /// The one validation step: every check on the arguments, before anything is sent.
    init(validating options: ParsedOptions) throws(UsageError)

    /// Does the work; returns the exit status (0, or a status of its own such as `run`'s).
    func run(_ session: ProducerSession) throws(CommandFailure) -> Int32
}

extension ProducerCommand {
    static var valued: Set<String> { [] }
    static var flags: Set<String> { [] }
    static var takesPassthrough: Bool { false }
    static var requestTimeout: Double { 10 }

    static var help: String { summary + "\n\nshared options:\n" + ConnectionOptions.help }

    /// Parses, validates, runs: 0 or the command's status; 2 for a usage error, 1 for a failure,
    /// each with one line on stderr.
    static func main(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32 {
        let own = takesPassthrough ? Array(arguments.prefix { $0 != "--" }) : arguments
        if own.contains("--help") || own.contains("-h") {
            print(help)
            return 0
        }
        let command: Self
        let session: ProducerSession
        do {
            let options = try ParsedOptions(arguments, valued: valued.union(ConnectionOptions.valued), flags: flags.union(ConnectionOptions.flags))
            if !takesPassthrough, arguments.contains("--") {
                throw UsageError("'--' is only for `ringcast run`")
            }
            let connection = try ConnectionOptions(options, environment: environment)
            command = try Self(validating: options)
            session = ProducerSession(connection, timeoutSeconds: requestTimeout)
        } catch {
            fail("\(name): \(error); see `ringcast \(name) --help`")
            return 2
        }
        do {
            return try command.run(session)
        } catch {
            fail("\(name): \(error)")
            return 1
        }
    }
}

// MARK: Validation helpers, shared by the commands

extension ParsedOptions {
    /// Exactly one positional argument, a valid task id.
    func taskID() throws(UsageError) -> String {
        guard let id = positional.first else { throw UsageError("give the task id, e.g. ci.build-42") }
        guard positional.count == 1 else { throw UsageError("unexpected argument '\(positional[1])'") }
        guard TaskID.isValid(id) else {
            throw UsageError("'\(id)' is not a task id: 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit")
        }
        return id
    }

    /// A duration in seconds (`3`, `0.5`), within the protocol's range.
    func seconds(_ name: String, minimum: Double = 0.001) throws(UsageError) -> Double? {
        guard let text = values[name] else { return nil }
        guard let value = Double(text), value.isFinite, value >= minimum, value <= 31_536_000 else {
            throw UsageError("--\(name) wants seconds, at least \(minimum.plain), not '\(text)'")
        }
        return value
    }

    /// A text field with the protocol's length limit.
    func text(_ name: String, maxLength: Int) throws(UsageError) -> String? {
        guard let text = values[name] else { return nil }
        guard text.count <= maxLength else { throw UsageError("--\(name) is longer than \(maxLength) characters") }
        return text
    }
}

extension Double {
    /// `3`, not `3.0`; `0.5` stays.
    var plain: String { self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self) }
}
