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
        if name == configuredHost || name == "localhost" || name.utf8.hasSuffix(".localhost".utf8) || HostPolicy.isLoopbackLiteral(name) {
            return true
        }
        if names.contains(name) { return true }
        return suffixes.contains { name.utf8.hasSuffix($0.utf8) || name == $0.dropFirst() }
    }

    /// The 421 a request for another name gets.
    public func refusal(_ header: String) -> APIError {
        let name = HostPolicy.name(ofHeader: header) ?? header
        return APIError(
            .misdirected, "this server does not answer to the name '\(name.prefix(100))': if it is yours, add it to \"allowedHosts\" in config.json",
            field: "Host")
    }

    /// `Example.COM:8080` → `example.com`; `[::1]:80` → `::1`; nil when the header is not a host.
    /// Read as bytes: this runs for every request and upgrade, and a header is ASCII but for
    /// a rare raw international name, which takes the Unicode path.
    static func name(ofHeader header: String) -> String? {
        var header = header
        let ascii = header.withUTF8 { bytes -> String?? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return .none }
            return .some(asciiName(ofHeader: bytes))
        }
        if let ascii { return ascii }
        return unicodeName(ofHeader: header)
    }

    private static func asciiName(ofHeader bytes: UnsafeBufferPointer<UInt8>) -> String? {
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        func isPort(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool { bytes.allSatisfy(isDigit) }
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let rest = bytes[(close + 1)...]
            guard rest.isEmpty || (rest.first == UInt8(ascii: ":") && isPort(rest.dropFirst())) else { return nil }
            return lowercased(bytes[1..<close])
        }
        var end = bytes.count
        if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
            guard isPort(bytes[(colon + 1)...]) else { return nil }
            end = colon
        }
        if end > 0, bytes[end - 1] == UInt8(ascii: ".") { end -= 1 }  // "localhost." is "localhost"
        let name = bytes[0..<end]
        guard !name.isEmpty,
            name.allSatisfy({ byte in
                isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            })
        else { return nil }
        return lowercased(name)
    }

    private static func lowercased(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for (offset, byte) in bytes.enumerated() {
                buffer[offset] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            }
            return bytes.count
        }
    }

    private static func unicodeName(ofHeader header: String) -> String? {
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
        if text.hasSuffix(".") { text = text.dropLast() }
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
        let parts = name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].elementsEqual("127".utf8) else { return false }
        return parts.allSatisfy { part in
            guard !part.isEmpty, part.count <= 3 else { return false }
            var value = 0
            for byte in part {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return false }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value <= 255
        }
    }

    /// An `allowedHosts` entry: a host name (letters, digits, '.', '-'), one starting with '.', or `*`.
    static func isValidEntry(_ entry: String) -> Bool {
        if entry == "*" { return true }
        let name = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":") }
    }
}

extension String.UTF8View {
    /// Byte-wise, unlike `String.hasSuffix`, which compares by Unicode equivalence: host names are ASCII.
    func hasSuffix(_ suffix: String.UTF8View) -> Bool {
        count >= suffix.count && self.suffix(suffix.count).elementsEqual(suffix)
    }
}
