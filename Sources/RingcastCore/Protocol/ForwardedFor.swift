/// Who a request really comes from when a reverse proxy carries it, as nginx's `real_ip` decides:
/// only a peer listed in config's `trustedProxies` is believed, and only in the one header config's
/// `forwardedHeader` names (a client's own `Forwarded` passes through nginx untouched, so letting it
/// pick would let it pick its address). Without this, a proxy on the same machine makes every
/// client look like loopback, and loopback may read (and by default publish) without a token.
public enum ForwardedFor {
    /// The header a trusted proxy names the client in.
    public enum Header: String, Sendable, CaseIterable {
        case xForwardedFor = "X-Forwarded-For"
        case forwarded = "Forwarded"

        /// `"x-forwarded-for"` or `"forwarded"`, in any case; nil for anything else.
        public init?(named name: String) {
            guard let header = Header.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
            self = header
        }
    }

    /// The client's address, or nil when it cannot be known. A peer that is no trusted proxy is its
    /// own address, whatever its headers say. From a trusted proxy: the header walked from the
    /// right (each proxy appends the address it heard from), trusted proxies skipped; the first
    /// other entry is the client. Any entry that is not an address (`x`, `1.2.3`,
    /// `unknown`, a `Forwarded` element without `for=`) makes the client unknown, and so does a
    /// missing or empty header: never the proxy's own address, which on this machine is loopback.
    /// A chain of trusted proxies only is its leftmost, as with nginx's `real_ip_recursive`.
    public static func clientAddress(peer: IPAddress, header: String?, form: Header, trusted: [AddressRange]) -> IPAddress? {
        guard trusted.contains(where: { $0.contains(peer) }) else { return peer }
        guard let header else { return nil }
        let entries: [Substring?]
        switch form {
        case .xForwardedFor: entries = header.split(separator: ",", omittingEmptySubsequences: false).map { $0 }
        case .forwarded: entries = forwardedFor(header)
        }
        // Every entry is read, not only those up to the client's: a chain with anything in it that
        // is not an address was written by someone who is not a proxy.
        var chain: [IPAddress] = []
        for entry in entries {
            guard let entry, let address = IPAddress(entry: entry) else { return nil }
            chain.append(address)
        }
        return chain.last { address in !trusted.contains { $0.contains(address) } } ?? chain.first
    }

    /// The `for=` of each element of `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`
    /// (RFC 7239), nil for an element that has none. A quoted comma splits an element in two, whose
    /// halves then read as no address: the client is unknown, which is the safe way to be wrong.
    static func forwardedFor(_ header: String) -> [Substring?] {
        header.split(separator: ",", omittingEmptySubsequences: false).map { element in
            for pair in element.split(separator: ";") {
                let trimmed = pair.withoutListBlanks
                guard trimmed.count > 4, trimmed.prefix(4).lowercased() == "for=" else { continue }
                return trimmed.dropFirst(4)
            }
            return nil
        }
    }

    /// A `trustedProxies` entry: an address, or a range of them in CIDR form (`10.0.0.0/8`).
    public static func isTrustedProxyEntry(_ text: String) -> Bool { AddressRange(text) != nil }
}

/// An IPv4 or IPv6 address as its bytes; an IPv4-mapped IPv6 address (`::ffff:10.0.0.7`) is its IPv4.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Exactly an address: dotted-quad IPv4 (four decimal parts, each 0–255) or IPv6 (RFC 4291
    /// text, `::` and an IPv4 tail allowed; no zone). `1.2.3`, `x`, a name or a port is nil.
    public init?(_ text: some StringProtocol) {
        let text = Substring(text)
        if text.contains(":") {
            guard var bytes = IPAddress.ipv6(text) else { return nil }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { bytes = Array(bytes[12...]) }
            self.bytes = bytes
        } else {
            guard let bytes = IPAddress.ipv4(text) else { return nil }
            self.bytes = bytes
        }
    }

    /// A forwarded entry as proxies write it: blanks around it, quotes (`Forwarded`), brackets and a
    /// port (`"[2001:db8::1]:4711"`, `192.0.2.7:8080`) taken off before the address is read.
    init?(entry: Substring) {
        var value = entry.withoutListBlanks
        if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
        if value.first == "[" {
            guard let close = value.firstIndex(of: "]") else { return nil }
            let rest = value[value.index(after: close)...]
            guard rest.isEmpty || IPAddress.isPort(rest) else { return nil }
            value = value[value.index(after: value.startIndex)..<close]
        } else if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") {
            guard IPAddress.isPort(value[colon...]) else { return nil }
            value = value[..<colon]
        }
        self.init(value)
    }

    public var isLoopback: Bool { bytes.count == 4 ? bytes[0] == 127 : bytes == Array(repeating: 0, count: 15) + [1] }

    public var description: String {
        if bytes.count == 4 { return bytes.map { String($0) }.joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(Int(bytes[$0]) << 8 | Int(bytes[$0 + 1]), radix: 16) }.joined(separator: ":")
    }

    private static func isPort(_ text: Substring) -> Bool {
        let digits = text.dropFirst()
        return text.first == ":" && (1...5).contains(digits.count) && digits.allSatisfy { $0.isASCII && $0.isNumber }
    }

    private static func ipv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }), let value = UInt8(part) else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    private static func ipv6(_ text: Substring) -> [UInt8]? {
        guard text.count <= 45 else { return nil }
        let halves = text.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count <= 2, !halves.contains(where: { $0.contains("::") }) else { return nil }
        func groups(_ half: Substring, tailMayBeIPv4: Bool) -> [UInt8]? {
            guard !half.isEmpty else { return [] }
            let parts = half.split(separator: ":", omittingEmptySubsequences: false)
            var bytes: [UInt8] = []
            for (index, part) in parts.enumerated() {
                if tailMayBeIPv4, index == parts.count - 1, part.contains(".") {
                    guard let ipv4 = ipv4(part) else { return nil }
                    bytes += ipv4
                } else {
                    guard (1...4).contains(part.count), part.allSatisfy(\.isHexDigit), let value = UInt16(part, radix: 16) else { return nil }
                    bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
                }
            }
            return bytes
        }
        if halves.count == 1 {
            guard let bytes = groups(halves[0], tailMayBeIPv4: true), bytes.count == 16 else { return nil }
            return bytes
        }
        guard let head = groups(halves[0], tailMayBeIPv4: false), let tail = groups(halves[1], tailMayBeIPv4: true), head.count + tail.count <= 14
        else { return nil }
        return head + Array(repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}

/// An address, or a CIDR range of them (`10.0.0.0/8`, `fd00::/8`), as `trustedProxies` lists them.
public struct AddressRange: Hashable, Sendable {
    public let base: IPAddress
    public let prefixBits: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let base = IPAddress(parts[0]) else { return nil }
        // A range written for IPv4 in mapped form (::ffff:10.0.0.0/104) counts from the mapped bytes.
        let written = parts[0].contains(":") ? 128 : 32
        if parts.count == 2 {
            guard (1...3).contains(parts[1].count), parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let bits = Int(parts[1]), bits <= written
            else { return nil }
            prefixBits = bits - (written - base.bytes.count * 8)
            guard prefixBits >= 0 else { return nil }
        } else {
            prefixBits = base.bytes.count * 8
        }
        self.base = base
    }

    public func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == base.bytes.count else { return false }
        var bits = prefixBits
        for (a, b) in zip(address.bytes, base.bytes) where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            guard a & mask == b & mask else { return false }
            bits -= 8
        }
        return true
    }
}

extension Substring {
    /// Without the spaces and tabs HTTP allows around a list element.
    var withoutListBlanks: Substring {
        var value = self.drop { $0 == " " || $0 == "\t" }
        while value.last == " " || value.last == "\t" { value = value.dropLast() }
        return value
    }
}
