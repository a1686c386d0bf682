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
            .value(
                "cacert", "FILE",
                "a PEM file of the CA(s) to trust for https:// and wss:// instead of the system's store (which SSL_CERT_FILE may name)",
                environment: "RINGCAST_CA_FILE"),
            .flag("insecure", "do not verify the server's TLS certificate at all (warns on every use; for a test bench only)"),
        ])

    let server: ServerURL
    let serverText: String
    let token: String?
    /// How https:// and wss:// servers are checked.
    let tls: TLSSettings

    /// The flag first, then the environment, then the default.
    init(_ options: ParsedOptions) throws(UsageError) {
        let text = options.value("server")!
        let source = options.source("server")
        guard let server = ServerURL(text) else {
            throw UsageError("\(source) '\(text)' is not a server URL: write http://HOST:PORT, e.g. \(ConnectionOptions.defaultServer)")
        }
        var tls = TLSSettings(insecure: options.flag("insecure"))
        if let file = options.value("cacert") {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw UsageError(
                    "\(options.source("cacert")) '\(file)' is not a readable file: give the PEM file of the CA that signed the server's certificate")
            }
            tls.caFile = file
        }
        if tls.insecure {
            fail("warning: --insecure: the server's TLS certificate is not checked, so anyone on the way can read and change what is sent")
        }
        self.tls = tls
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
        http = HTTPClient(url: options.server, tls: options.tls, timeoutSeconds: timeoutSeconds)
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
        } catch let error as ClientError where error.isVerification {
            let hint =
                switch error.kind {
                case .unknownCA: "trust a private CA with --cacert FILE (or RINGCAST_CA_FILE)"
                case .wrongHost: "use the host name the server's certificate was made for"
                default: "the server needs a certificate that is valid now"
                }
            throw CommandFailure("cannot reach the server at \(options.serverText): \(error); \(hint)")
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
