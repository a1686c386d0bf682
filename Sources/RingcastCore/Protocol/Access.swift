/// Who may see what, and who may change what: one rule language for reading and publishing.
/// A token names an entry of config.json's `publishers` or `readers` (or is a signed token,
/// SignedToken.swift); no token gets what `anonymousRead` and `anonymousLocalPublish` give the
/// address it came from. Each grant is a pair of scopes, and every surface asks the same two
/// questions of it: may it read this id, may it change this id.

/// The task ids a grant reaches: every id, the ids some patterns match, or none.
public struct Scope: Equatable, Sendable, CustomStringConvertible {
    /// nil: every id.
    public let patterns: WatchSet?

    public init(_ patterns: WatchSet?) { self.patterns = patterns.flatMap { $0.matchesAll ? nil : $0 } }

    public static let everything = Scope(nil)
    public static let nothing = Scope(WatchSet([]))

    public var isEverything: Bool { patterns == nil }
    public var isNothing: Bool { patterns?.globs.isEmpty == true }

    public func allows(_ id: String) -> Bool { patterns?.matches(id) ?? true }

    /// `*`, `ci.*,deploy.web`, or nothing at all: as the error messages and `/api/session` say it.
    public var description: String { patterns?.key ?? "*" }

    /// What either scope reaches (a publisher reads what it may publish).
    public func union(_ other: Scope) -> Scope {
        guard let mine = patterns, let theirs = other.patterns else { return .everything }
        var globs = mine.globs
        for glob in theirs.globs where !globs.contains(glob) { globs.append(glob) }
        return Scope(WatchSet(globs))
    }

    /// Whether every id `glob` matches is inside the scope.
    public func covers(_ glob: Glob) -> Bool {
        guard let patterns else { return true }
        return patterns.globs.contains { $0.covers(glob) }
    }

    /// A watcher's patterns held to this scope: a pattern the scope covers is kept; one that
    /// covers some of the scope's patterns (`*` for a reader of `ci.*`) is narrowed to those; a
    /// pattern that is neither (`deploy.*`, or `*.build` across `ci.*`) is returned as refused,
    /// since the part of it the scope allows is not a pattern one could write.
    public enum Narrowed: Equatable, Sendable {
        case within(WatchSet)
        case outside(Glob)
    }

    public func narrow(_ watch: WatchSet) -> Narrowed {
        guard let patterns else { return .within(watch) }
        var kept: [Glob] = []
        func keep(_ glob: Glob) { if !kept.contains(glob) { kept.append(glob) } }
        for glob in watch.globs {
            if covers(glob) {
                keep(glob)
                continue
            }
            let inside = patterns.globs.filter { glob.covers($0) }
            guard !inside.isEmpty else { return .outside(glob) }
            inside.forEach(keep)
        }
        return .within(WatchSet(kept))
    }
}

/// What one caller may do: read and change the ids of two scopes, under a name that logs, events
/// and `by` fields record, within its quotas.
public struct Grant: Equatable, Sendable {
    public enum Kind: String, Sendable {
        case publisher, reader
        /// A signed token (JWT) minted by a backend with the server's `tokenSecretEnv` key.
        case signed
        /// No token: what `anonymousRead` and `anonymousLocalPublish` allow the address.
        case anonymous
        /// A person an identity provider (or an auth proxy in front) named, granted what the
        /// entries of their groups grant.
        case person
    }

    public let kind: Kind
    /// The entry's `name`, a signed token's `sub`, or `local` / `anonymous`.
    public let name: String
    public let read: Scope
    public let publish: Scope
    /// When a signed token stops being valid (Unix ms); nil: never.
    public let expiresAt: Double?
    /// The most tasks it may hold at once (nil: only the server's `maxTasks`).
    public let maxTasks: Int?
    /// The most WebSockets it may hold open at once, across the server's threads (nil: no limit).
    public let maxConnections: Int?

    public init(
        kind: Kind, name: String, read: Scope, publish: Scope, expiresAt: Double? = nil, maxTasks: Int? = nil, maxConnections: Int? = nil
    ) {
        self.kind = kind
        self.name = name
        self.read = read
        self.publish = publish
        self.expiresAt = expiresAt
        self.maxTasks = maxTasks
        self.maxConnections = maxConnections
    }

    /// `publisher 'ci'`, `reader 'team-a'`, `signed token 'deploy-bot'`: how refusals name it.
    public var described: String {
        switch kind {
        case .publisher, .reader: return "\(kind.rawValue) '\(name)'"
        case .signed: return "signed token '\(name)'"
        case .person: return "person '\(name)'"
        case .anonymous: return name == AccessPolicy.localName ? "anonymous loopback access" : "anonymous access"
        }
    }

    /// Who asked, as a change records it: the name, and the share of tasks it may hold.
    public var principal: Principal { Principal(name: name, maxTasks: maxTasks) }
}

/// Whoever a change is made for: its name (`by` in events, the task and the log line) and the
/// share of the server's tasks it may hold. Travels with the commands, through a cluster's log too.
public struct Principal: Equatable, Sendable {
    public let name: String
    public let maxTasks: Int?

    public init(name: String, maxTasks: Int? = nil) {
        self.name = name
        self.maxTasks = maxTasks
    }

    /// The server's own changes (ticks, hides, leases, retention) and tests that do not care.
    public static let server = Principal(name: "server")
}

/// Who is asking, as far as the server can tell.
public enum Credential: Equatable, Sendable {
    /// No token: what `anonymousRead` and `anonymousLocalPublish` give the address.
    case anonymous(Grant)
    /// A token that names an entry, or a signed token that holds.
    case token(Grant)
    /// A token that was sent and does not hold (unknown, expired, badly signed…): the 401 that says why.
    case refused(APIError)

    public var grant: Grant? {
        switch self {
        case .anonymous(let grant), .token(let grant): return grant
        case .refused: return nil
        }
    }
}

/// One entry of config.json's `publishers` or `readers`: a named token, its patterns and quotas.
public struct AccessEntry: Equatable, Sendable {
    public enum Role: String, Sendable { case publisher, reader }

    public let role: Role
    public let name: String
    /// Empty for an entry reached only through its groups.
    let token: [UInt8]
    public let patterns: WatchSet
    public var maxTasks: Int?
    public var maxConnections: Int?
    /// The groups (an identity provider's claim, an auth proxy's header) whose people get this
    /// entry's rights, beside whoever holds its token.
    public var groups: [String]

    public init(
        _ role: Role, name: String, token: String, patterns: WatchSet, maxTasks: Int? = nil, maxConnections: Int? = nil, groups: [String] = []
    ) {
        self.role = role
        self.name = name
        self.token = Array(token.utf8)
        self.patterns = patterns
        self.maxTasks = maxTasks
        self.maxConnections = maxConnections
        self.groups = groups
    }

    public var hasToken: Bool { !token.isEmpty }

    public static func publisher(name: String, token: String, patterns: WatchSet, maxTasks: Int? = nil) -> AccessEntry {
        AccessEntry(.publisher, name: name, token: token, patterns: patterns, maxTasks: maxTasks)
    }

    public static func reader(name: String, token: String, patterns: WatchSet) -> AccessEntry {
        AccessEntry(.reader, name: name, token: token, patterns: patterns)
    }

    /// A publisher reads what it may publish; a reader publishes nothing.
    var grant: Grant {
        let scope = Scope(patterns)
        return Grant(
            kind: role == .publisher ? .publisher : .reader, name: name, read: scope, publish: role == .publisher ? scope : .nothing,
            maxTasks: maxTasks, maxConnections: maxConnections)
    }
}

/// Who may read without a token (config `anonymousRead`).
public enum AnonymousRead: Equatable, Sendable {
    /// Loopback reads everything, anyone else nothing: the default, so a first local run needs no token.
    case loopback
    /// Anyone who reaches the port reads everything (`true`).
    case everyone
    /// Nobody without a token, loopback included (`false`).
    case nobody
    /// Anyone, loopback included, reads the ids these patterns match, and only those (public badges).
    case patterns(WatchSet)

    func scope(fromLoopback: Bool) -> Scope {
        switch self {
        case .loopback: return fromLoopback ? .everything : .nothing
        case .everyone: return .everything
        case .nobody: return .nothing
        case .patterns(let patterns): return Scope(patterns)
        }
    }
}

/// The rules of config.json's `publishers`, `readers`, `anonymousRead`, `anonymousLocalPublish`,
/// `anonymousLocalMaxTasks` and `tokenSecretEnv`.
public struct AccessPolicy: Equatable, Sendable {
    public var entries: [AccessEntry]
    public var anonymousLocalPublish: Bool
    public var anonymousRead: AnonymousRead
    /// The most tasks anonymous loopback publishing may hold (nil: only the server's `maxTasks`).
    public var anonymousLocalMaxTasks: Int?
    /// The HS256 key of signed tokens; nil: signed tokens are not accepted.
    public var tokenSecret: [UInt8]?
    /// The most tasks one signed token's `sub` may hold when the token names no
    /// `ringcast.maxTasks` (nil: only the server's `maxTasks`). config.json's `tokenMaxTasks`; the
    /// server fills in a tenth of `maxTasks` when it is unset (ServerConfig.effectiveAccess).
    public var tokenMaxTasks: Int?

    /// The name anonymous loopback access acts under, and the name of anonymous access from elsewhere.
    public static let localName = "local"
    public static let anonymousName = "anonymous"
    /// The cookie the dashboard's sign-in sets (`POST /api/session`).
    public static let cookieName = "ringcast_token"
    /// The cookie's name over TLS: a browser takes a `__Host-` cookie only from this very host, over
    /// TLS, for `Path=/`, so no sibling subdomain or plain-http page can plant one beside it.
    public static let securedCookieName = "__Host-ringcast_token"
    /// The sign-in cookie this server reads and sets: `securedCookieName` over TLS.
    public var signInCookie = AccessPolicy.cookieName
    /// Signed tokens signed out before their `exp` (the API's).
    public var signedOut: SignedOutTokens?
    /// config.json's `oidc`, with the keys and checks the server supplies; nil: none configured.
    public var providers: IdentityProviders?
    /// Names the server acts under itself: no publisher or reader may take one, and no signed
    /// token's `sub` either (`signed` is what a token without a `sub` is called, so a token may say it).
    public static let serverNames = [localName, anonymousName, Principal.server.name, "signed"]

    public init(
        publishers: [AccessEntry] = [], readers: [AccessEntry] = [], anonymousLocalPublish: Bool = true,
        anonymousRead: AnonymousRead = .loopback, anonymousLocalMaxTasks: Int? = nil, tokenSecret: [UInt8]? = nil
    ) {
        entries = publishers + readers
        self.anonymousLocalPublish = anonymousLocalPublish
        self.anonymousRead = anonymousRead
        self.anonymousLocalMaxTasks = anonymousLocalMaxTasks
        self.tokenSecret = tokenSecret
    }

    public var publishers: [AccessEntry] { entries.filter { $0.role == .publisher } }
    public var readers: [AccessEntry] { entries.filter { $0.role == .reader } }

    /// What no token gets from this address.
    public func anonymousGrant(fromLoopback: Bool) -> Grant {
        let publishes = fromLoopback && anonymousLocalPublish
        return Grant(
            kind: .anonymous, name: fromLoopback ? AccessPolicy.localName : AccessPolicy.anonymousName,
            read: anonymousRead.scope(fromLoopback: fromLoopback), publish: publishes ? .everything : .nothing,
            maxTasks: publishes ? anonymousLocalMaxTasks : nil)
    }

    /// The token of `Authorization: Bearer TOKEN`, else of the sign-in cookie: an entry's, a
    /// signed token, or none. An `Authorization` header in another form is refused.
    public func identify(
        authorization: String?, cookie: String? = nil, proxied: ProxiedIdentity? = nil, fromLoopback: Bool, now: Double
    ) -> Credential {
        // The proxy in front authenticated the person: what it says wins over a cookie left behind.
        if let proxied { return personCredential(name: proxied.user, groups: proxied.groups, expiresAt: nil) }
        let presented: String?
        do throws(APIError) {
            presented = try AccessPolicy.presentedToken(authorization: authorization, cookie: cookie, named: signInCookie)
        } catch {
            return .refused(error)
        }
        guard let token = presented else { return .anonymous(anonymousGrant(fromLoopback: fromLoopback)) }
        return identify(token: token, now: now)
    }

    /// A token that was presented, whatever carried it.
    public func identify(token: String, now: Double, crypto: any Cryptography = Crypto.current) -> Credential {
        let presented = Array(token.utf8)
        // Every entry is compared, in time that depends only on the lengths, so timing reveals
        // neither which token nor how much of one matched.
        var found: AccessEntry?
        for entry in entries where entry.hasToken && crypto.constantTimeEqual(presented, entry.token) && found == nil { found = entry }
        if let found { return .token(found.grant) }
        // A token that names one of the providers is theirs to judge; so is any JWT when there is
        // no signing key of our own, so that its refusal (an issuer not trusted, alg none) says why.
        if let providers, SignedToken.looksLikeOne(token), tokenSecret == nil || providers.claimsOneOfUs(token) {
            switch providers.verify(token, now: now, crypto: crypto) {
            case .success(let identity):
                if signedOut?.contains(token, now: now) == true {
                    return .refused(APIError(.unauthorized, "the session was signed out: sign in again"))
                }
                return personCredential(name: identity.name, groups: identity.groups, expiresAt: identity.expiresAt)
            case .failure(let error): return .refused(error)
            }
        }
        if let tokenSecret, SignedToken.looksLikeOne(token) {
            switch SignedToken.verify(token, secret: tokenSecret, now: now, crypto: crypto) {
            case .success(let grant):
                if signedOut?.contains(token, now: now) == true {
                    return .refused(APIError(.unauthorized, "the token was signed out: sign in with a new one"))
                }
                return signedCredential(grant)
            case .failure(let error): return .refused(error)
            }
        }
        return .refused(
            APIError(
                .unauthorized,
                tokenSecret == nil
                    ? "the token matches no publisher or reader in config.json; check it, or the entry's tokenEnv variable"
                    : "the token matches no publisher or reader in config.json and is not a signed token (header.claims.signature)"))
    }

    /// A person's grant: what every entry naming one of their groups grants, together. A person
    /// in none of them is refused with the groups they came with, so the fix is clear.
    func personCredential(name: String, groups: [String], expiresAt: Double?) -> Credential {
        let matched = entries.filter { entry in entry.groups.contains(where: groups.contains) }
        guard !matched.isEmpty else {
            let shown = groups.isEmpty ? "no groups" : "groups \(groups.prefix(20).map { "'\($0.prefix(60))'" }.joined(separator: ", "))"
            return .refused(
                APIError(
                    .forbidden,
                    "\(name.prefix(100)) is signed in with \(shown), and no publisher or reader in config.json names one of them in its \"groups\""
                ))
        }
        var read = Scope.nothing
        var publish = Scope.nothing
        for entry in matched {
            read = read.isNothing ? Scope(entry.patterns) : read.union(Scope(entry.patterns))
            if entry.role == .publisher { publish = publish.isNothing ? Scope(entry.patterns) : publish.union(Scope(entry.patterns)) }
        }
        return .token(
            Grant(
                kind: .person, name: String(name.prefix(SignedToken.maxSubjectLength)), read: read, publish: publish, expiresAt: expiresAt,
                maxTasks: tokenMaxTasks))
    }

    /// A verified signed token's grant, held to the policy: its `sub` may not be a name the
    /// server or config.json already uses (compared without case, so `CI` is not `ci`'s double),
    /// since `by`, the timeline, quotas and connection counts go by name; without its own
    /// `maxTasks` it gets `tokenMaxTasks`.
    private func signedCredential(_ grant: Grant) -> Credential {
        let name = grant.name.lowercased()
        let taken = AccessPolicy.serverNames.filter { $0 != "signed" }.contains(name) || entries.contains { $0.name.lowercased() == name }
        guard !taken else {
            return .refused(
                APIError(
                    .unauthorized,
                    "the signed token's \"sub\" '\(grant.name)' is a name the server or config.json uses already (\(AccessPolicy.serverNames.filter { $0 != "signed" }.joined(separator: ", ")) and every publisher and reader): mint it with a sub of its own"
                ))
        }
        return .token(
            Grant(
                kind: .signed, name: grant.name, read: grant.read, publish: grant.publish, expiresAt: grant.expiresAt,
                maxTasks: grant.maxTasks ?? tokenMaxTasks, maxConnections: grant.maxConnections))
    }

    /// The bearer token of an `Authorization` header, else the sign-in cookie's. A header that is
    /// not `Bearer TOKEN` (a bare token, another scheme) is a 401 that says how to write it: the
    /// protocol names only Bearer, and a header taken some other way would be a second syntax to keep.
    static func presentedToken(authorization: String?, cookie: String?, named cookieName: String = cookieName) throws(APIError) -> String? {
        if let authorization, !authorization.isEmpty {
            guard authorization.lowercased().hasPrefix("bearer ") else {
                throw APIError(
                    .unauthorized, "the Authorization header must read \"Bearer <token>\": write Bearer and a space before the token",
                    field: "Authorization")
            }
            let token = authorization.dropFirst(7).drop { $0 == " " }
            guard !token.isEmpty else {
                throw APIError(.unauthorized, "the Authorization header holds no token: write \"Bearer <token>\"", field: "Authorization")
            }
            return String(token)
        }
        return cookieValue(cookie, named: cookieName)
    }

    /// The value of the cookie `name` in a `Cookie` header; nil when absent or empty.
    public static func cookieValue(_ header: String?, named name: String) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.drop { $0 == " " }
            guard trimmed.hasPrefix(name + "=") else { continue }
            let value = trimmed.dropFirst(name.count + 1)
            return value.isEmpty ? nil : String(value)
        }
        return nil
    }

    /// Throws 401 or 403 (with the protocol's error body) unless `credential` may change task `id`.
    /// `field` names what named the id: `id`, or `parent` and `kind` when a task names another.
    public func authorizePublish(_ credential: Credential, id: String, field: String = "id") throws(APIError) {
        let grant = try AccessPolicy.granted(credential)
        guard !grant.publish.allows(id) else { return }
        if grant.kind == .anonymous {
            throw APIError(
                .unauthorized,
                anonymousLocalPublish
                    ? "publishing from another machine needs a token: send Authorization: Bearer TOKEN (see \"publishers\" in config.json)"
                    : "publishing needs a token: send Authorization: Bearer TOKEN (see \"publishers\" in config.json)")
        }
        if grant.publish.isNothing {
            throw APIError(.forbidden, "\(grant.described) may read but not publish: use a publisher's token to change '\(id)'", field: field)
        }
        let what = field == "id" ? "change '\(id)'" : "name '\(id)' as its \(field)"
        throw APIError(.forbidden, "\(grant.described) may not \(what): its patterns are \(grant.publish)", field: field)
    }

    /// Throws 401 or 403 unless `credential` may read task `id`.
    public func authorizeRead(_ credential: Credential, id: String) throws(APIError) {
        let grant = try AccessPolicy.granted(credential)
        guard !grant.read.allows(id) else { return }
        throw readRefusal(grant, what: "'\(id)'", field: "id")
    }

    /// What `credential` may read, for a list that it narrows; throws when it may read nothing.
    public func readScope(_ credential: Credential) throws(APIError) -> Scope {
        let grant = try AccessPolicy.granted(credential)
        guard grant.read.isNothing else { return grant.read }
        throw readRefusal(grant, what: "tasks", field: nil)
    }

    /// Throws unless `credential` may read every task (`/metrics`, which counts them all).
    public func authorizeReadingEverything(_ credential: Credential, fromLoopback: Bool, what: String) throws(APIError) {
        if fromLoopback, case .anonymous = credential { return }
        let grant = try AccessPolicy.granted(credential)
        guard !grant.read.isEverything else { return }
        throw readRefusal(grant, what: what, field: nil, needsEverything: true)
    }

    /// The refusal of a read: 401 when no token was sent, so one might help; 403 for a token
    /// that does not reach it.
    func readRefusal(_ grant: Grant, what: String, field: String?, needsEverything: Bool = false) -> APIError {
        if grant.kind == .anonymous {
            let scope = grant.read.isNothing ? "" : " (anonymousRead covers \(grant.read))"
            let place = grant.name == AccessPolicy.localName ? "reading \(what)" : "reading \(what) from another machine"
            return APIError(
                .unauthorized,
                "\(place) needs a token\(scope): send Authorization: Bearer TOKEN or sign in (see \"readers\" and \"anonymousRead\" in config.json)",
                field: field)
        }
        if needsEverything {
            return APIError(.forbidden, "\(grant.described) may not read \(what): that needs a token whose patterns cover every id (\"*\")")
        }
        return APIError(.forbidden, "\(grant.described) may not read \(what): its patterns are \(grant.read)", field: field)
    }

    static func granted(_ credential: Credential) throws(APIError) -> Grant {
        switch credential {
        case .anonymous(let grant), .token(let grant): return grant
        case .refused(let error): throw error
        }
    }

}

/// Loopback is 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6.
public func isLoopbackAddress(_ address: String) -> Bool {
    var bytes = address.utf8[...]
    if bytes.starts(with: "::ffff:".utf8) { bytes = bytes.dropFirst(7) }
    return bytes.elementsEqual("::1".utf8) || bytes.starts(with: "127.".utf8)
}
