/// Who a request really comes from when a reverse proxy carries it: the proxy's `Forwarded`
/// (RFC 7239) or `X-Forwarded-For` header, believed only when the peer itself is one of
/// config's `trustedProxies`. Without that, a proxy on the same machine makes every client look
/// like loopback, and loopback may read (and by default publish) without a token.
public enum ForwardedFor {
    /// The client's address: the peer's own, or, from a trusted proxy, the nearest address in the
    /// chain that is not a trusted proxy too (the rightmost, since each proxy appends the address
    /// it heard from). `Forwarded` wins over `X-Forwarded-For`; a header that cannot be read
    /// leaves the peer's address.
    public static func clientAddress(peer: String, forwarded: String?, xForwardedFor: String?, trusted: [String]) -> String {
        let peer = normalized(peer)
        guard !trusted.isEmpty, trusted.contains(peer) else { return peer }
        let chain: [String]
        if let forwarded, !forwarded.isEmpty {
            chain = forwardedAddresses(forwarded)
        } else if let xForwardedFor, !xForwardedFor.isEmpty {
            chain = xForwardedFor.split(separator: ",").map { normalized(String($0)) }
        } else {
            return peer
        }
        guard !chain.isEmpty, chain.allSatisfy(isAddress) else { return peer }
        return chain.last { !trusted.contains($0) } ?? chain.first!
    }

    /// The `for=` of each element of `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`.
    static func forwardedAddresses(_ header: String) -> [String] {
        header.split(separator: ",").compactMap { element in
            for pair in element.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " }
                guard trimmed.lowercased().hasPrefix("for=") else { continue }
                return normalized(String(trimmed.dropFirst(4)))
            }
            return nil
        }
    }

    /// `" 10.0.0.7 "`, `"\"[2001:db8::1]:4711\""`, `10.0.0.7:8080`, `::FFFF:10.0.0.7` → the bare
    /// address, lowercased, an IPv4-mapped IPv6 address as its IPv4.
    public static func normalized(_ text: String) -> String {
        var value = Substring(text).drop { $0 == " " }
        while value.last == " " { value = value.dropLast() }
        if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
        if value.hasPrefix("["), let close = value.firstIndex(of: "]") {
            value = value[value.index(after: value.startIndex)..<close]
        } else if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") {
            value = value[..<colon]  // IPv4 with a port
        }
        var address = value.lowercased()
        if address.hasPrefix("::ffff:"), address.dropFirst(7).contains(".") { address = String(address.dropFirst(7)) }
        return address
    }

    /// An IPv4 address in dotted decimal, or an IPv6 address (hex groups and colons, an embedded
    /// IPv4 tail allowed): what a proxy names and `trustedProxies` lists.
    public static func isAddress(_ text: String) -> Bool {
        let address = normalized(text)
        if address.contains(":") {
            guard address.count <= 45, address.filter({ $0 == ":" }).count >= 2 else { return false }
            return address.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        let parts = address.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in part.count <= 3 && !part.isEmpty && part.allSatisfy(\.isNumber) && Int(part)! <= 255 }
    }
}
