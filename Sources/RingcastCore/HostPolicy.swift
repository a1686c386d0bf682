/// The names a request's `Host` header may carry: the configured host, `localhost`, loopback literals
/// and `allowedHosts`. A page that rebinds its DNS name to 127.0.0.1 still sends its own name, so it
/// gets 421 before anything is routed (the DNS-rebinding hole Jupyter and webpack-dev-server closed
/// the same way). A request without `Host` (HTTP/1.0 tools) is not a browser's and passes.
public struct HostPolicy: Equatable, Sendable {
    private let configuredHost: String
    private let names: Set<String>
    private let suffixes: [String]
    private let allowsEverything: Bool

    public init(host: String, allowedHosts: [String]) {
        configuredHost = HostPolicy.name(ofHost: host)
        names = Set(allowedHosts.filter { !$0.hasPrefix(".") }.map { $0.lowercased() })
        suffixes = allowedHosts.filter { $0.hasPrefix(".") }.map { $0.lowercased() }
        allowsEverything = allowedHosts.contains("*")
    }

    public init(config: ServerConfig) { self.init(host: config.host, allowedHosts: config.allowedHosts) }

    public func allows(_ header: String?) -> Bool {
        guard let header else { return true }
        if allowsEverything { return true }
        guard let name = HostPolicy.name(ofHeader: header) else { return false }
        if name == configuredHost || name == "localhost" || name.hasSuffix(".localhost") || HostPolicy.isLoopbackLiteral(name) {
            return true
        }
        if names.contains(name) { return true }
        return suffixes.contains { name.hasSuffix($0) || name == $0.dropFirst() }
    }

    /// The 421 a request for another name gets.
    public func refusal(_ header: String) -> APIError {
        let name = HostPolicy.name(ofHeader: header) ?? header
        return APIError(.misdirected, "this server does not answer to the name '\(name.prefix(100))': if it is yours, add it to \"allowedHosts\" in config.json", field: "Host")
    }

    /// `Example.COM:8080` → `example.com`; `[::1]:80` → `::1`; nil when the header is not a host.
    static func name(ofHeader header: String) -> String? {
        var text = Substring(header.lowercased())
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            return String(text[text.index(after: text.startIndex)..<close])
        }
        if let colon = text.lastIndex(of: ":") {
            let port = text[text.index(after: colon)...]
            guard port.allSatisfy(\.isNumber) else { return nil }
            text = text[..<colon]
        }
        if text.hasSuffix(".") { text = text.dropLast() }  // "localhost." is "localhost"
        guard !text.isEmpty, text.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }) else { return nil }
        return String(text)
    }

    /// The configured `host` as a name: `[::1]` and `::1` alike.
    private static func name(ofHost host: String) -> String {
        var text = host.lowercased()
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        return text
    }

    static func isLoopbackLiteral(_ name: String) -> Bool {
        if name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in part.count <= 3 && !part.isEmpty && part.allSatisfy(\.isNumber) && Int(part)! <= 255 }
    }

    /// An `allowedHosts` entry: a host name (letters, digits, '.', '-'), one starting with '.', or `*`.
    static func isValidEntry(_ entry: String) -> Bool {
        if entry == "*" { return true }
        let name = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":") }
    }
}
