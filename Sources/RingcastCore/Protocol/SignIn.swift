/// What a browser signs in with, and what the kinds and a session show of a reader's scope.
/// `POST /api/session` trades a token (in the body, never a query string) for an `HttpOnly`,
/// `SameSite=Strict` cookie that `/ws` and the API accept as they accept `Authorization`;
/// `GET` says who the request is signed in as and what it may read and publish (the dashboard
/// shows Cancel and Pause only where it may publish); `DELETE` signs out. Service thread only.
extension API {
    /// The longest token a sign-in trades for a cookie: browsers keep 4 096 bytes of a cookie's
    /// name, value and attributes (RFC 6265 §6.1), and the attributes take up to about 90.
    public static let maxSignInTokenBytes = 3_900

    func sessionAnswer(_ request: APIRequest, credential: Credential, now: Double) throws(APIError) -> APIResponse {
        switch request.method {
        case "GET":
            guard let grant = credential.grant else { throw APIError(.unauthorized, "not signed in") }
            return APIResponse(body: sessionBody(grant, signedIn: credential != .anonymous(grant)))
        case "POST":
            // The body, when there is one, is checked whatever else carries a token.
            let isEmpty = request.body.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
            let fields = try FieldReader(isEmpty ? .object([]) : try JSONParser.parseForAPI(request.body), allowed: ["token"])
            let given = try fields.string("token", maxLength: SignedToken.maxBytes)
            if given?.isEmpty == true { throw APIError(.invalidField, "token is empty: send the token itself", field: "token") }
            let fromHeader = given == nil ? try AccessPolicy.presentedToken(authorization: request.headers.authorization, cookie: nil) : nil
            guard let token = given ?? fromHeader else {
                throw APIError(
                    .missingField, "sign in with {\"token\": \"…\"}: the token a publisher, reader or backend gave you", field: "token")
            }
            // Refused with the reason (unknown, expired, wrongly signed) before any cookie is set;
            // a token that holds but will not fit a cookie is told so.
            let grant = try AccessPolicy.granted(policy.identify(token: token, now: now))
            guard token.utf8.count <= API.maxSignInTokenBytes else {
                throw APIError(
                    .invalidRequest,
                    "the token is \(token.utf8.count) bytes; a sign-in cookie holds at most \(API.maxSignInTokenBytes) (browsers keep about 4 KB a cookie): send it as \"Authorization: Bearer …\" instead, or mint a shorter one",
                    field: "token")
            }
            var response = APIResponse(body: sessionBody(grant, signedIn: true))
            response.headers = [("set-cookie:", cookie(token, expiresAt: grant.expiresAt, now: now))]
            return response
        case "DELETE":
            // A signed token the cookie held is refused from now on, wherever it is presented: a
            // copy of the cookie taken before is worth nothing after signing out.
            if let token = try? AccessPolicy.presentedToken(authorization: nil, cookie: request.headers.cookie, named: policy.signInCookie),
                case .token(let grant) = policy.identify(token: token, now: now), let expiresAt = grant.expiresAt
            {
                signedOut.add(token, until: expiresAt, now: now)
            }
            var response = APIResponse(body: Array(#"{"signedIn":false}"#.utf8))
            response.headers = [("set-cookie:", cookie("", expiresAt: nil, now: now, clear: true))]
            return response
        default:
            throw APIError(.methodNotAllowed, "\(request.method) is not allowed on \(request.path); use GET, POST, DELETE")
        }
    }

    /// `ringcast_token=…; Path=/; HttpOnly; SameSite=Strict` (over TLS `__Host-ringcast_token=…`
    /// and `Secure`, which the prefix requires), kept until a
    /// signed token's `exp`, else for the browser's session.
    public func cookie(_ token: String, expiresAt: Double?, now: Double, clear: Bool = false) -> String {
        var parts = ["\(policy.signInCookie)=\(token)", "Path=/", "HttpOnly", "SameSite=Strict"]
        if config.tls != nil { parts.append("Secure") }
        if clear {
            parts.append("Max-Age=0")
        } else if let expiresAt {
            parts.append("Max-Age=\(UnixTime.seconds(until: expiresAt, now: now))")
        }
        return parts.joined(separator: "; ")
    }

    /// `{"signedIn", "name", "kind", "read": [patterns], "publish": [patterns], "expiresAt"?}`;
    /// `["*"]` for every id, `[]` for none.
    func sessionBody(_ grant: Grant, signedIn: Bool) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("signedIn")
        writer.bool(signedIn)
        writer.key("name")
        writer.string(grant.name)
        writer.key("kind")
        writer.string(grant.kind.rawValue)
        for (key, scope) in [("read", grant.read), ("publish", grant.publish)] {
            writer.key(key)
            writer.beginArray()
            for glob in scope.patterns?.globs ?? [Glob("*")] { writer.string(glob.pattern) }
            writer.endArray()
        }
        if let expiresAt = grant.expiresAt {
            writer.key("expiresAt")
            writer.number(expiresAt.rounded())
        }
        writer.endObject()
        return writer.bytes
    }

    /// The kinds a scope may see: those its patterns cover, and those of the tasks it may read.
    func kindsAnswer(within scope: Scope) -> [UInt8] {
        guard !scope.isEverything else { return store.history.encoded() }
        var seen: Set<String> = []
        for task in store.tasks.values where scope.allows(task.id) { seen.insert(task.resolvedKind) }
        return store.history.encoded { scope.allows($0) || seen.contains($0) }
    }
}
