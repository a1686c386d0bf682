import Foundation
import RingcastClient
import RingcastCore
import RingcastLWS
import RingcastPlatform

/// The options every command that talks to a server shares: which server, and who we are to it.
struct ConnectionOptions {
    static let defaultServer = "http://127.0.0.1:8080"
    static let group = OptionGroup(
        "shared options",
        [
            .value("server", "URL", "the Ringcast server", environment: "RINGCAST_URL", default: defaultServer),
            .value(
                "token", "TOKEN",
                "a publisher's or reader's token (or a signed one), sent as Authorization: Bearer; not needed from "
                    + "this machine while the server's anonymousLocalPublish and anonymousRead allow it", environment: "RINGCAST_TOKEN"),
        ])

    let server: ServerURL
    let serverText: String
    let token: String?

    /// The flag first, then the environment, then the default.
    init(_ options: ParsedOptions) throws(UsageError) {
        let text = options.value("server")!
        let source = options.source("server")
        guard let server = ServerURL(text) else {
            throw UsageError("\(source) '\(text)' is not a server URL: write http://HOST:PORT, e.g. \(ConnectionOptions.defaultServer)")
        }
        guard !server.secure else {
            throw UsageError("\(source) '\(text)': https is not supported by this tool; use http:// (for example through a local TLS proxy)")
        }
        self.server = server
        serverText = text
        if let token = options.value("token") {
            guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw UsageError("the token must be printable ASCII without spaces or line breaks")
            }
            self.token = token
        } else {
            self.token = nil
        }
    }
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
        let response = try exchange(method, path, body.map(JSONWriter.encode), headers: [])
        let json = try? JSONParser.parse(response.body)
        guard (200..<300).contains(response.status) else { throw refusal(response, json) }
        guard let json else {
            throw CommandFailure("the server at \(options.serverText) answered \(response.status) without JSON; is it a Ringcast server?")
        }
        return json
    }

    /// A GET of an answer that is not JSON (the text table, `Accept: text/plain`): its text when
    /// 2xx; otherwise the failure `send` would say (error bodies are JSON).
    func text(_ path: String) throws(CommandFailure) -> String {
        let response = try exchange("GET", path, nil, headers: [("Accept", "text/plain")])
        guard (200..<300).contains(response.status) else { throw refusal(response, try? JSONParser.parse(response.body)) }
        return response.text
    }

    /// A refusal in one line: the error's code and message when the body says them.
    private func refusal(_ response: HTTPResponse, _ json: JSONValue?) -> CommandFailure {
        var message = "the server answered \(response.status)"
        if case .string(let code)? = json?["error"], case .string(let text)? = json?["message"] {
            message = "\(code): \(text)"
        }
        if response.status == 401 { message += " (pass --token TOKEN or set RINGCAST_TOKEN)" }
        return CommandFailure(message)
    }

    /// One request with the token; only an unreachable server throws.
    private func exchange(_ method: String, _ path: String, _ body: [UInt8]?, headers: [(String, String)]) throws(CommandFailure) -> HTTPResponse {
        var headers = headers
        if let token = options.token { headers.append(("Authorization", "Bearer \(token)")) }
        do {
            return try http.request(method, options.server.endpoint(path), body: body, headers: headers)
        } catch {
            throw CommandFailure("cannot reach the server at \(options.serverText): \(error)")
        }
    }

    /// Closes the kept-alive connection; the next request opens a new one.
    func disconnect() { http.disconnect() }

    static func taskPath(_ id: String) -> String { "/api/tasks/\(id)" }
}

/// A command that sends to the server: its own options, followed by the shared connection options
/// from which its validation step gets one `ProducerSession`.
protocol ProducerCommand: Subcommand {
    /// The command's own options.
    static var ownOptions: [Option] { get }
    /// Seconds to wait for the server's answer.
    static var requestTimeout: Double { get }

    /// The validation step, with the session the shared options named.
    init(validating options: ParsedOptions, session: ProducerSession) throws(UsageError)
}

extension ProducerCommand {
    static var ownOptions: [Option] { [] }
    static var requestTimeout: Double { 10 }
    static var optionGroups: [OptionGroup] { [OptionGroup("options", ownOptions), ConnectionOptions.group] }

    init(validating options: ParsedOptions) throws(UsageError) {
        let session = ProducerSession(try ConnectionOptions(options), timeoutSeconds: Self.requestTimeout)
        try self.init(validating: options, session: session)
    }
}
