/// Someone allowed to publish: a named token and the id patterns it may change.
public struct Publisher: Equatable, Sendable {
    public let name: String
    let token: [UInt8]
    public let patterns: WatchSet

    public init(name: String, token: String, patterns: WatchSet) {
        self.name = name
        self.token = Array(token.utf8)
        self.patterns = patterns
    }
}

/// Who is asking to change state, as far as the server can tell.
public enum Credential: Equatable, Sendable {
    /// No token, from loopback, while `anonymousLocalPublish` is on: may change anything.
    case anonymousLocal
    case publisher(Publisher)
    /// No token where one is needed.
    case missing
    /// A token that matches no publisher.
    case invalid
}

/// The rules of config.json's `publishers` and `anonymousLocalPublish`.
public struct PublishPolicy: Equatable, Sendable {
    public var publishers: [Publisher]
    public var anonymousLocalPublish: Bool

    public init(publishers: [Publisher] = [], anonymousLocalPublish: Bool = true) {
        self.publishers = publishers
        self.anonymousLocalPublish = anonymousLocalPublish
    }

    /// `Authorization: Bearer TOKEN` (or a bare token, as sent in a WebSocket `auth` message).
    public func identify(authorization: String?, fromLoopback: Bool) -> Credential {
        guard let authorization, !authorization.isEmpty else {
            return fromLoopback && anonymousLocalPublish ? .anonymousLocal : .missing
        }
        var token = Substring(authorization)
        if token.lowercased().hasPrefix("bearer ") { token = token.dropFirst(7).drop { $0 == " " } }
        let presented = Array(token.utf8)
        // Every publisher is compared, in time that depends only on the lengths, so timing
        // reveals neither which token nor how much of one matched.
        var found: Publisher?
        for publisher in publishers where PublishPolicy.constantTimeEqual(presented, publisher.token) && found == nil {
            found = publisher
        }
        return found.map(Credential.publisher) ?? .invalid
    }

    /// Throws 401 or 403 (with the protocol's error body) unless `credential` may change task `id`.
    public func authorize(_ credential: Credential, id: String) throws(APIError) {
        switch credential {
        case .anonymousLocal:
            return
        case .publisher(let publisher):
            guard publisher.patterns.matches(id) else {
                throw APIError(
                    .forbidden, "publisher '\(publisher.name)' may not change '\(id)': its patterns are \(publisher.patterns.key)", field: "id")
            }
        case .missing:
            throw APIError(
                .unauthorized,
                anonymousLocalPublish
                    ? "publishing from another machine needs a token: send Authorization: Bearer TOKEN (see \"publishers\" in config.json)"
                    : "publishing needs a token: send Authorization: Bearer TOKEN (see \"publishers\" in config.json)")
        case .invalid:
            throw APIError(.unauthorized, "the token matches no publisher in config.json; check it, or the publisher's tokenEnv variable")
        }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        let length = max(a.count, b.count)
        for index in 0..<length {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0 && a.count == b.count
    }
}

/// Loopback is 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6.
public func isLoopbackAddress(_ address: String) -> Bool {
    var bytes = address.utf8[...]
    if bytes.starts(with: "::ffff:".utf8) { bytes = bytes.dropFirst(7) }
    return bytes.elementsEqual("::1".utf8) || bytes.starts(with: "127.".utf8)
}
