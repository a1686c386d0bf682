import Glibc

/// A parsed `ws://host:port/path?query` (or `http://`, taken to mean the same server).
package struct ServerURL: Sendable, Equatable {
    package var host: String
    package var port: Int
    package var path: String
    package var secure: Bool

    package init?(_ text: String, defaultPath: String = "/") {
        var rest = Substring(text)
        if rest.hasPrefix("ws://") || rest.hasPrefix("http://") {
            secure = false
        } else if rest.hasPrefix("wss://") || rest.hasPrefix("https://") {
            secure = true
        } else {
            return nil
        }
        rest = rest[rest.index(after: rest.firstIndex(of: "/")!)...].dropFirst()
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        let remainder = rest[authority.endIndex...]
        path = remainder.isEmpty ? defaultPath : (remainder.hasPrefix("?") ? defaultPath + remainder : String(remainder))
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            port = after.hasPrefix(":") ? Int(after.dropFirst()) ?? -1 : (secure ? 443 : 80)
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = Int(authority[authority.index(after: colon)...]) ?? -1
        } else {
            host = String(authority)
            port = secure ? 443 : 80
        }
        guard !host.isEmpty, (1...65535).contains(port) else { return nil }
    }

    package var hostHeader: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
