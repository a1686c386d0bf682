import RingcastCore
import RingcastPlatform

/// What the server reaches of each identity provider over the network (libcurl): its discovery
/// document and its JWKS. Blocking, on whichever thread asks: a service thread that meets a token
/// of an unknown `kid` waits for one fetch (at most `keysRefetchSeconds` apart per issuer, within
/// `timeoutSeconds`). Any thread.
final class ProviderDirectory: ProviderKeyFetching {
    /// What discovery says of a provider.
    struct Metadata: Sendable {
        let authorizationEndpoint: String
        let tokenEndpoint: String
        let jwksURI: String
        let endSessionEndpoint: String?
    }

    static let timeoutSeconds = 5.0
    /// A discovery document or a JWKS longer than this is no provider's.
    static let maxAnswerBytes = 1 << 20

    private let documents = Locked<[String: Metadata]>([:])

    /// GET or POST `url`; the answer, or why there is none.
    static func exchange(_ method: String, _ url: String, body: [UInt8]? = nil, headers: [(String, String)] = []) -> Result<
        HTTPResponse, ProviderFetchError
    > {
        guard let target = ServerURL(url) else { return .failure(ProviderFetchError("\(url) is not an http(s) address")) }
        // Loopback is never reached through the environment's proxy.
        let direct = target.host == "localhost" || isLoopbackAddress(target.host)
        let client = HTTPClient(
            url: target, proxy: direct ? "" : nil, timeoutSeconds: timeoutSeconds, maxBodyBytes: maxAnswerBytes)
        defer { client.disconnect() }
        do {
            let answer = try client.request(method, target.path, body: body, headers: [("Accept", "application/json")] + headers)
            return .success(answer)
        } catch {
            return .failure(ProviderFetchError("\(method) \(url): \(error)"))
        }
    }

    private static func json(_ url: String) -> Result<JSONValue, ProviderFetchError> {
        switch exchange("GET", url) {
        case .failure(let error): return .failure(error)
        case .success(let answer):
            guard answer.status == 200 else { return .failure(ProviderFetchError("GET \(url) answered \(answer.status)")) }
            guard let value = try? JSONParser.parse(answer.body) else { return .failure(ProviderFetchError("GET \(url) did not answer JSON")) }
            return .success(value)
        }
    }

    /// The provider's discovery document (`/.well-known/openid-configuration`), fetched once; its
    /// `issuer` must be the one configured (OpenID Connect Discovery §4.3), so a document served
    /// for another issuer is not believed.
    func metadata(for provider: IdentityProviderSettings) -> Result<Metadata, ProviderFetchError> {
        if let known = documents.withLock({ $0[provider.issuer] }) { return .success(known) }
        let url = provider.issuer + "/.well-known/openid-configuration"
        let document: JSONValue
        switch Self.json(url) {
        case .failure(let error): return .failure(error)
        case .success(let value): document = value
        }
        guard document["issuer"]?.stringValue == provider.issuer else {
            return .failure(
                ProviderFetchError("\(url) names the issuer \(document["issuer"]?.stringValue ?? "nothing"), not \(provider.issuer)"))
        }
        guard let authorization = document["authorization_endpoint"]?.stringValue, let token = document["token_endpoint"]?.stringValue,
            let jwks = provider.jwksURL ?? document["jwks_uri"]?.stringValue
        else {
            return .failure(ProviderFetchError("\(url) names no authorization_endpoint, token_endpoint or jwks_uri"))
        }
        for endpoint in [authorization, token, jwks] where !IdentityProviderSettings.isAcceptableURL(endpoint) {
            return .failure(ProviderFetchError("\(url) names \(endpoint), which is not https (http only on loopback)"))
        }
        let metadata = Metadata(
            authorizationEndpoint: authorization, tokenEndpoint: token, jwksURI: jwks,
            endSessionEndpoint: document["end_session_endpoint"]?.stringValue)
        documents.withLock { $0[provider.issuer] = metadata }
        return .success(metadata)
    }

    func fetchKeys(for provider: IdentityProviderSettings) -> Result<[JSONWebKey], ProviderFetchError> {
        let url: String
        if let given = provider.jwksURL {
            url = given
        } else {
            switch metadata(for: provider) {
            case .failure(let error): return .failure(error)
            case .success(let metadata): url = metadata.jwksURI
            }
        }
        switch Self.exchange("GET", url) {
        case .failure(let error): return .failure(error)
        case .success(let answer):
            guard answer.status == 200 else { return .failure(ProviderFetchError("GET \(url) answered \(answer.status)")) }
            do throws(JSONWebKeyError) {
                return .success(try JSONWebKeySet.parse(answer.body).keys)
            } catch {
                return .failure(ProviderFetchError("GET \(url): the key \(error)"))
            }
        }
    }
}

/// The browser's sign-in through an identity provider: the authorization code flow with PKCE
/// (RFC 7636, S256), `state` and `nonce` checked. `/auth/login` sends the browser to the provider;
/// `/auth/callback` trades the code for an ID token, checks it as every provider token is checked
/// (plus the nonce), and sets the dashboard's sign-in cookie to it, so the session ends with the
/// token's `exp` or `sessionMaxAgeSeconds`; `/auth/logout` signs it out. `/auth/providers` lists
/// the providers for the sign-in form. Any thread.
final class ProviderSignIn: Sendable {
    /// A sign-in begun and not yet come back.
    private struct Pending {
        let provider: Int
        let nonce: String
        let verifier: String
        let startedAt: Double
    }

    /// How long a browser may spend at the provider's login form.
    static let pendingSeconds = 600.0
    /// Sign-ins begun at once, past which the oldest is forgotten (each is a few hundred bytes).
    static let maxPending = 10_000
    /// The cookie that ties the callback to the browser that began the sign-in: `SameSite=Lax`,
    /// since the provider's redirect back is a cross-site navigation.
    static let stateCookie = "ringcast_signin"

    let settings: [IdentityProviderSettings]
    let directory = ProviderDirectory()
    let providers: IdentityProviders
    private let pending = Locked<[String: Pending]>([:])
    private let secure: Bool

    init(config: ServerConfig, keys: ProviderKeyCache = ProviderKeyCache()) {
        settings = config.oidc
        secure = config.tls != nil
        providers = IdentityProviders(config.oidc, keys: keys, fetcher: directory)
    }

    /// `key=value&…`, each part percent-encoded as a form (RFC 3986 unreserved characters kept).
    static func formEncoded(_ pairs: [(String, String)]) -> String {
        func encode(_ text: String) -> String {
            var out = ""
            for byte in text.utf8 {
                let unreserved =
                    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x2E
                    || byte == 0x5F || byte == 0x7E
                if unreserved {
                    out.unicodeScalars.append(UnicodeScalar(byte))
                } else {
                    let digits = Array("0123456789ABCDEF".utf8)
                    out += "%" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
                }
            }
            return out
        }
        return pairs.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }

    private func redirect(_ location: String, cookies: [String] = []) -> APIResponse {
        var response = APIResponse(status: 302, body: [], contentType: "text/plain")
        response.headers = [("location:", location)] + cookies.map { ("set-cookie:", $0) }
        return response
    }

    private func refusal(_ status: Int, _ message: String) -> APIResponse {
        APIResponse(APIError(status == 401 ? .unauthorized : status == 403 ? .forbidden : .invalidRequest, message))
    }

    private func callbackURL(_ request: APIRequest) -> String {
        "\(secure ? "https" : "http")://\(request.headers.host ?? "127.0.0.1")/auth/callback"
    }

    private func stateCookie(_ value: String, clear: Bool = false) -> String {
        var parts = ["\(Self.stateCookie)=\(value)", "Path=/auth", "HttpOnly", "SameSite=Lax"]
        if secure { parts.append("Secure") }
        parts.append(clear ? "Max-Age=0" : "Max-Age=\(Int(Self.pendingSeconds))")
        return parts.joined(separator: "; ")
    }

    /// Answers a request under `/auth/`. `api` is asked, under the state's lock, for the policy and
    /// the cookie; the network is reached outside it.
    func answer(_ request: APIRequest, now: Double, api: ((API) -> Void) -> Void) -> APIResponse {
        if let refused = Self.refusedMethod(request) { return refused }
        switch Routes.match(request.path)?.route.handler {
        case .signIn(.providers): return Self.providerList(settings)
        case .signIn(.login): return begin(request, now: now)
        case .signIn(.callback): return finish(request, now: now, api: api)
        case .signIn(.logout): return signOut(request, now: now, api: api)
        default:
            return APIResponse(APIError(.notFound, "no such path: \(request.path) (the sign-in takes /auth/login, /auth/callback, /auth/logout)"))
        }
    }

    /// The route table's: every step is a GET, and a method is refused before an unknown path,
    /// whether or not a provider is configured.
    static func refusedMethod(_ request: APIRequest) -> APIResponse? {
        guard request.method != "GET" else { return nil }
        var refused = APIResponse(APIError(.methodNotAllowed, "\(request.method) is not allowed on \(request.path); use GET"))
        if let route = Routes.match(request.path)?.route, route.handler.isSignIn { refused.headers = [("allow:", route.allow)] }
        return refused
    }

    /// `{"providers": [{"name", "login"}]}`: what the sign-in form offers.
    static func providerList(_ settings: [IdentityProviderSettings]) -> APIResponse {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("providers")
        writer.beginArray()
        for (index, provider) in settings.enumerated() {
            writer.beginObject()
            writer.key("name")
            writer.string(provider.displayName)
            writer.key("login")
            writer.string(index == 0 ? "auth/login" : "auth/login?provider=\(index)")
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return APIResponse(body: writer.bytes)
    }

    private func begin(_ request: APIRequest, now: Double) -> APIResponse {
        let index = request.query["provider"].flatMap { Int($0) } ?? 0
        guard settings.indices.contains(index) else {
            return refusal(400, "no identity provider \(request.query["provider"] ?? ""): the server has \(settings.count) (oidc)")
        }
        let provider = settings[index]
        let metadata: ProviderDirectory.Metadata
        switch directory.metadata(for: provider) {
        case .failure(let error):
            return APIResponse(status: 502, body: APIError(.storageFailed, "the identity provider cannot be reached: \(error.reason)").encodedBody)
        case .success(let found): metadata = found
        }
        let crypto = Crypto.current
        let state = crypto.randomToken()
        let nonce = crypto.randomToken()
        let verifier = crypto.randomToken()
        pending.withLock { pending in
            if pending.count >= Self.maxPending { pending = pending.filter { now - $0.value.startedAt < Self.pendingSeconds * 1000 } }
            if pending.count >= Self.maxPending, let oldest = pending.min(by: { $0.value.startedAt < $1.value.startedAt }) {
                pending.removeValue(forKey: oldest.key)
            }
            pending[state] = Pending(provider: index, nonce: nonce, verifier: verifier, startedAt: now)
        }
        let query = Self.formEncoded([
            ("response_type", "code"), ("client_id", provider.clientId), ("redirect_uri", callbackURL(request)),
            ("scope", provider.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", crypto.pkceChallenge(verifier: verifier)), ("code_challenge_method", "S256"),
        ])
        let separator = metadata.authorizationEndpoint.contains("?") ? "&" : "?"
        return redirect(metadata.authorizationEndpoint + separator + query, cookies: [stateCookie(state)])
    }

    private func finish(_ request: APIRequest, now: Double, api: ((API) -> Void) -> Void) -> APIResponse {
        if let error = request.query["error"] {
            return refusal(
                401, "the identity provider refused the sign-in: \(error.prefix(100)) \(request.query["error_description"]?.prefix(300) ?? "")")
        }
        guard let state = request.query["state"], let code = request.query["code"] else {
            return refusal(400, "the callback needs the provider's code and state: begin at /auth/login")
        }
        let cookieState = AccessPolicy.cookieValue(request.headers.cookie, named: Self.stateCookie)
        guard cookieState == state else {
            return refusal(400, "the sign-in's state is not this browser's (its cookie is missing or another's): begin again at /auth/login")
        }
        guard let begun = pending.withLock({ $0.removeValue(forKey: state) }), now - begun.startedAt < Self.pendingSeconds * 1000 else {
            return refusal(400, "the sign-in's state is unknown or older than \(Int(Self.pendingSeconds)) s: begin again at /auth/login")
        }
        let provider = settings[begun.provider]
        let metadata: ProviderDirectory.Metadata
        switch directory.metadata(for: provider) {
        case .failure(let error): return refusal(400, "the identity provider cannot be reached: \(error.reason)")
        case .success(let found): metadata = found
        }
        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", callbackURL(request)), ("client_id", provider.clientId),
            ("code_verifier", begun.verifier),
        ]
        if let secret = provider.clientSecret { form.append(("client_secret", secret)) }
        let answer: HTTPResponse
        switch ProviderDirectory.exchange(
            "POST", metadata.tokenEndpoint, body: Array(Self.formEncoded(form).utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")]
        )
        {
        case .failure(let error): return refusal(401, "the identity provider's token endpoint could not be reached: \(error.reason)")
        case .success(let found): answer = found
        }
        guard answer.status == 200, let body = try? JSONParser.parse(answer.body), let idToken = body["id_token"]?.stringValue else {
            return refusal(
                401, "the identity provider did not trade the code for an ID token (it answered \(answer.status): \(answer.text.prefix(300)))")
        }
        let identity: ProviderIdentity
        switch providers.verify(idToken, now: now) {
        case .failure(let error): return APIResponse(error)
        case .success(let found): identity = found
        }
        guard identity.issuer == provider.issuer, identity.nonce == begun.nonce else {
            return refusal(401, "the ID token's nonce is not this sign-in's: begin again at /auth/login")
        }
        guard idToken.utf8.count <= API.maxSignInTokenBytes else {
            return refusal(
                400,
                "the ID token is \(idToken.utf8.count) bytes, more than a cookie holds (\(API.maxSignInTokenBytes)): ask the provider for fewer claims in it"
            )
        }
        // Who the person is allowed to be is the policy's to say, as for every token.
        var outcome: (Credential, String)?
        api { api in
            let credential = api.policy.identify(token: idToken, now: now)
            outcome = (credential, api.cookie(idToken, expiresAt: credential.grant?.expiresAt, now: now))
        }
        guard let (credential, cookie) = outcome else { return refusal(401, "not signed in") }
        if case .refused(let error) = credential { return APIResponse(error) }
        // A page of our own site, not a redirect: the SameSite=Strict cookie is then sent with the
        // dashboard's requests, which a redirect chain begun at the provider's site would not do.
        var response = APIResponse(
            body: Array(
                #"<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/"><title>Signed in</title><p>Signed in. <a href="/">Open the dashboard</a>."#
                    .utf8), contentType: "text/html; charset=utf-8")
        response.headers = [("set-cookie:", cookie), ("set-cookie:", stateCookie("", clear: true))]
        return response
    }

    private func signOut(_ request: APIRequest, now: Double, api: ((API) -> Void) -> Void) -> APIResponse {
        var cleared = ""
        api { api in
            let policy = api.policy
            if let token = AccessPolicy.cookieValue(request.headers.cookie, named: policy.signInCookie),
                case .token(let grant) = policy.identify(token: token, now: now), let expiresAt = grant.expiresAt
            {
                api.signedOut.add(token, until: expiresAt, now: now)
            }
            cleared = api.cookie("", expiresAt: nil, now: now, clear: true)
        }
        return redirect("/", cookies: [cleared])
    }
}
