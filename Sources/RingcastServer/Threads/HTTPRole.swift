import RingcastCore
import RingcastLWS
import RingcastPlatform

/// The HTTP role of a service thread: the gate every request passes (hosts, origins, trusted
/// proxies), the sign-in at an identity provider that `/auth/` answers, and the deadlines of the
/// bodies still arriving. A body must be whole within
/// `handshakeTimeoutSeconds` of its request's head: lws's own timeout starts again with every
/// read, so a client sending a byte now and then would hold the connection (and its buffers) for
/// as long as it liked. Service thread only.
final class HTTPRole {
    /// Replaced by a reload (allowed origins), on the service thread.
    var gate: RequestGate
    /// The server's current sign-in, shared by every thread (`Server.applyIdentityProviders` may
    /// replace it); nil without an identity provider.
    private let signInHolder: Locked<ProviderSignIn?>
    var signIn: ProviderSignIn? { signInHolder.withLock { $0 } }
    private let bodySeconds: Double
    private var bodyTimer: LoopTimer?
    /// The requests whose body is still arriving, and when it must be whole (Unix ms).
    @exclusivity(unchecked) private var bodyDeadlines: [ObjectIdentifier: (exchange: HTTPExchange, link: LWSConnection, at: Double)] = [:]

    init(config: ServerConfig, signIn: Locked<ProviderSignIn?>) {
        gate = RequestGate(config: config)
        signInHolder = signIn
        bodySeconds = Double(config.handshakeTimeoutSeconds)
    }

    func prepare(_ loop: ServiceLoop, bodyDeadlineFell: @escaping () -> Void) throws { bodyTimer = try loop.makeTimer(bodyDeadlineFell) }

    /// The exchange's body starts its clock.
    func watchBody(of exchange: HTTPExchange, on link: LWSConnection) {
        bodyDeadlines[ObjectIdentifier(exchange)] = (exchange, link, Clock.now() + bodySeconds * 1000)
        armBodyTimer()
    }

    /// The exchange is answered: its body's clock stops.
    func bodyAnswered(_ exchange: HTTPExchange) {
        if bodyDeadlines.removeValue(forKey: ObjectIdentifier(exchange)) != nil { armBodyTimer() }
    }

    /// The exchange's connection is gone.
    func forget(_ exchange: HTTPExchange) { bodyDeadlines.removeValue(forKey: ObjectIdentifier(exchange)) }

    /// The exchanges whose body is past its deadline, let go of; the timer is armed for the next.
    func takeExpiredBodies(now: Double) -> [(exchange: HTTPExchange, link: LWSConnection)] {
        var expired: [(exchange: HTTPExchange, link: LWSConnection)] = []
        for (key, entry) in bodyDeadlines where entry.at <= now {
            bodyDeadlines.removeValue(forKey: key)
            expired.append((entry.exchange, entry.link))
        }
        return expired
    }

    func armBodyTimer() {
        guard let next = bodyDeadlines.values.lazy.map(\.at).min() else {
            bodyTimer?.cancel()
            return
        }
        // Deadlines are at most handshakeTimeoutSeconds (3600) ahead: no overflow.
        bodyTimer?.schedule(microseconds: max(1000, Int64(((next - Clock.now()) * 1000).rounded(.up))))
    }
}

/// The worker's HTTP callbacks: read a request, let the API answer it under the state's lock,
/// write the answer in one send once storage has kept what it changed.
extension ServiceWorker {
    /// Every request, static files included, must name one of our hosts (DNS rebinding gets 421).
    func admitsHTTP(_ link: LWSConnection) -> Bool {
        // lws 4.1.6 parses a pipelined request while the one before is still unanswered and then
        // loses that answer (or, after a body, spins for good): a connection that pipelines is
        // closed, and the client sends again one request at a time, as HTTP/1.1 lets a server ask.
        // A stream's connection carries nothing after its request either.
        if let connection = link.attachment(as: Connection.self), connection.exchange != nil || connection.socket != nil {
            logger.debug("closed a connection from \(link.peerAddress) that pipelined HTTP requests")
            return false
        }
        do throws(APIError) {
            try checkHead(link)
            return true
        } catch {
            refuseHTTP(error, on: link)
            return false
        }
    }

    /// What every request and every upgrade must pass before anything reads it: nothing cut at the
    /// header limit, a whole request line, and one of our hosts.
    /// The Host header it read, for the checks that follow.
    @discardableResult func checkHead(_ link: LWSConnection) throws(APIError) -> String? {
        try checkHeaderLimit(link)
        guard link.hasWholeRequestLine else { throw APIError.cutRequestLine }
        let host = link.header(.host)
        try http.gate.checkHost(host)
        return host
    }

    /// A request whose path, query argument or header lws cut at `Server.headerLimit`: 414 or 431,
    /// rather than an answer to what is left of it.
    private func checkHeaderLimit(_ link: LWSConnection) throws(APIError) {
        switch Server.headerLimit.exceeded(on: link) {
        case .requestLine?:
            throw APIError(
                .uriTooLong,
                "the path, or one query argument, is \(Server.headerLimit.eachBytes) bytes or more: send a shorter one (a batch goes in a POST body)")
        case .header(let name)?:
            throw APIError(.headerTooLarge, "the \(name) header is \(Server.headerLimit.eachBytes) bytes or more: send a shorter one", field: name)
        case nil: return
        }
    }

    /// Answers a request the transport refuses before the API sees it, then the connection closes
    /// (the caller returns false): what the client sends after it is not read as a request.
    func refuseHTTP(_ error: APIError, on link: LWSConnection) {
        state.record { metrics in
            metrics.httpRequests += 1
            metrics.httpErrors += 1
        }
        ledger.logRefusal(
            error.code == .misdirected ? "host" : "request", offender: link.peerAddress,
            "refused \(link.requestLine()?.path ?? "a request") from \(link.peerAddress): \(error.message)")
        _ = link.writeHTTP(
            status: error.status, contentType: "application/json", body: error.encodedBody,
            headers: [("cache-control:", "no-store"), ("connection:", "close")])
    }

    func beginHTTP(_ link: LWSConnection) -> Bool {
        guard let (method, path) = link.requestLine() else { return false }
        // Refused at once, and written here: lws would read what follows a length it cannot know as
        // the next request, before the answer's writeable callback.
        let framing: RequestFraming
        do throws(APIError) {
            framing = try RequestFraming.decide(
                method: method, contentLength: link.header(.contentLength), transferEncoding: link.header(.transferEncoding),
                version: link.header(.version))
        } catch {
            refuseHTTP(error, on: link)
            return false
        }
        let request = APIRequest(
            method: method, path: path, query: link.queryArguments(),
            headers: RequestHeaders(
                host: link.header(.host), origin: link.header(.origin), authorization: link.header(.authorization),
                contentType: link.header(.contentType), accept: link.header(.accept), ifNoneMatch: link.header(.ifNoneMatch),
                cookie: link.header(.cookie), proxied: proxiedIdentity(link)),
            fromLoopback: isFromLoopback(link),
            bodyIsAbsent: framing == .absent && RequestFraming.methodsWithBodies.contains(method))
        if framing == .absent, method == "GET", path == Self.streamPath { return openStream(link, request) }
        let exchange = HTTPExchange(request: request, bodyLimit: config.maxMessageBytes)
        // lws hands the same session memory to the next request of a kept-alive connection.
        release(link.attach(Connection(.http(exchange))))
        switch framing {
        case .length(let length):
            if length > config.maxMessageBytes {
                // Answered at once: a client that announced more than it may send learns so without
                // sending it, and one that never sends it is not left waiting for the deadline.
                exchange.body.refuse()
                exchange.closesConnection = true
                exchange.drainsBody = true
                answer(exchange, on: link)
                http.watchBody(of: exchange, on: link)
                return true
            }
            // Whatever the method: a GET's body left unread wedges lws's parser on the next request of
            // the connection (it spun for good in lws_service_do_ripe_rxflow). The API ignores it.
            if length > 0 {
                http.watchBody(of: exchange, on: link)
                return true  // the body follows
            }
        case .chunked:
            exchange.chunks = ChunkedBodyDecoder(maxBodyBytes: config.maxMessageBytes)
            exchange.closesConnection = true
            http.watchBody(of: exchange, on: link)
            return true  // the chunks follow, as lws's body pieces
        case .absent:
            exchange.closesConnection = request.bodyIsAbsent
        }
        answer(exchange, on: link)
        return true
    }

    /// False closes the connection: a body past its deadline.
    func receiveBody(_ piece: UnsafeRawBufferPointer, on link: LWSConnection) -> Bool {
        guard let exchange = link.attachment(as: Connection.self)?.exchange else { return true }
        // lws restarts its own timeout with each piece of a body, over the close asked at the
        // deadline: the next piece closes the connection here instead.
        guard !exchange.isPastDeadline else { return false }
        guard exchange.chunks != nil else {
            exchange.body.append(piece)
            return true
        }
        // Once answered, what follows the last chunk goes with the connection.
        guard exchange.request != nil else { return true }
        exchange.chunks!.append(piece)
        decodeChunks(of: exchange, closed: false, on: link)
        return true
    }

    /// Answers a chunked request once its body is whole, or as soon as it cannot be: over
    /// `maxMessageBytes` decoded (413), or not well-formed chunks (400).
    private func decodeChunks(of exchange: HTTPExchange, closed: Bool, on link: LWSConnection) {
        do throws(ChunkedBodyError) {
            guard let body = try exchange.chunks!.next(closed: closed) else { return }
            exchange.request?.body = body
        } catch {
            exchange.request?.refuseChunkedBody(error)
        }
        answer(exchange, on: link)
    }

    /// The body is in. False closes the connection: lws reports a second completion of one body
    /// only when it has a pipelined request buffered, and then loops on it without end.
    func completeBody(on link: LWSConnection) -> Bool {
        guard let exchange = link.attachment(as: Connection.self)?.exchange else { return true }
        guard !exchange.isBodyComplete else {
            logger.debug("closed a connection from \(link.peerAddress) that pipelined HTTP requests")
            return false
        }
        exchange.isBodyComplete = true
        if exchange.drainsBody { return !exchange.isAnswerWritten }
        if exchange.chunks != nil, exchange.request != nil {
            // lws ends a body without a length at 100 MB.
            exchange.request?.bodyRefusal = APIError(
                .invalidRequest, "the chunked body did not end within the 100 MB the server reads of a body without a length",
                field: "Transfer-Encoding")
        }
        answer(exchange, on: link)
        return true
    }

    func answer(_ exchange: HTTPExchange, on link: LWSConnection) {
        // Once per request: lws also reports BODY_COMPLETION for a POST with Content-Length: 0,
        // which beginHTTP has already answered.
        guard var request = exchange.request else { return }
        exchange.request = nil
        http.bodyAnswered(exchange)
        if exchange.chunks == nil { (request.body, request.bodyTooLarge) = exchange.body.take() }
        let now = Clock.now()
        let peer = peers[link.identifier]
        let publishes = request.method != "GET" && request.method != "HEAD"
        if request.bodyTooLarge {
            ledger.logRefusal(
                "oversize", offender: link.peerAddress,
                "refused \(request.method) \(request.path) from \(link.peerAddress): the body is larger than maxMessageBytes (\(config.maxMessageBytes))"
            )
        }
        if publishes, let peer, !peer.allowance.allows(now: now) {
            state.record { metrics in
                metrics.httpRequests += 1
                metrics.httpErrors += 1
                metrics.rateLimited += 1
            }
            ledger.logRefusal(
                "rate", offender: peer.address.text,
                "refused requests from \(peer.address): past maxPublishRate (\(config.maxPublishRate.plain) events a second)")
            exchange.response = APIResponse(
                APIError(
                    .rateLimited,
                    "this connection publishes more than \(config.maxPublishRate.plain) events a second (maxPublishRate): slow down, batch, or raise \"maxPublishRate\" in config.json"
                ))
            link.requestWrite()
            return
        }
        if request.path.hasPrefix("/auth/") {
            exchange.response = signInAnswer(request, now: now)
            link.requestWrite()
            return
        }
        prepareProviderKeys(request.headers, now: now)
        // The answer leaves once storage has kept what it changed; the connection may be gone by then.
        let cors = http.gate.corsHeaders(request.headers)
        let performed = perform(.request(request), now: now) { outcome in
            var response: APIResponse
            switch outcome {
            case .request(let applied): response = applied
            case .refused(let error): response = APIResponse(error)
            case .message: return
            }
            if !response.headers.contains(where: { $0.0 == "vary:" }) { response.headers += cors }
            // A control request reaches its publishers once it is kept.
            for control in response.controls { control.send() }
            guard exchange.isOpen else { return }
            exchange.response = response
            link.requestWrite()
        }
        if publishes { peer?.allowance.spend(max(1, performed.commands), now: now) }
    }

    /// `/auth/…`: the browser's sign-in at an identity provider (ProviderSignIn), counted as a request.
    private func signInAnswer(_ request: APIRequest, now: Double) -> APIResponse {
        var response: APIResponse
        if let host = request.headers.host, !http.gate.hosts.allows(host) {
            response = APIResponse(http.gate.hosts.refusal(host))
        } else if let refused = ProviderSignIn.refusedMethod(request) {
            response = refused
        } else if let signIn {
            response = signIn.answer(request, now: now) { body in state.signIn(body) }
        } else if request.path == "/auth/providers", request.method == "GET" {
            // The sign-in form asks whether to offer a provider: none is an answer, not an error.
            response = ProviderSignIn.providerList([])
        } else {
            response = APIResponse(APIError(.notFound, "no identity provider is configured (\"oidc\" in config.json): sign in with a token"))
        }
        let failed = response.status >= 400
        state.record { metrics in
            metrics.httpRequests += 1
            if failed { metrics.httpErrors += 1 }
        }
        return response
    }

    /// Closes each request whose body is still arriving at its deadline, unanswered: the answer
    /// would wait behind the body the client is still sending.
    func bodyDeadlineFell() {
        for entry in http.takeExpiredBodies(now: Clock.now()) {
            guard entry.exchange.isOpen else { continue }
            // One already answered (drainsBody) has been counted and logged.
            if let request = entry.exchange.request {
                entry.exchange.request = nil
                state.record { metrics in
                    metrics.httpRequests += 1
                    metrics.httpErrors += 1
                }
                let peer = entry.link.peerAddress
                ledger.logRefusal(
                    "request", offender: peer,
                    "closed \(request.method) \(request.path) from \(peer): its body did not arrive whole within \(config.handshakeTimeoutSeconds) s (handshakeTimeoutSeconds)"
                )
            }
            entry.exchange.isPastDeadline = true
            entry.link.closeSoon()
        }
        http.armBodyTimer()
    }

    /// Writes the answer, lets go of the exchange, then completes the transaction: lws may free the
    /// session memory inside it, so nothing may touch it afterwards.
    func writeHTTP(on link: LWSConnection) -> Bool {
        guard let connection = link.attachment(as: Connection.self) else { return true }
        guard let exchange = connection.exchange else { return connection.socket == nil ? true : writeSocket(on: link) }
        guard let response = exchange.response else { return true }
        exchange.response = nil
        count { $0.httpBytes += response.body.count }
        let closes = exchange.closesConnection
        let written = link.writeHTTP(
            status: response.status, contentType: response.contentType, body: response.body,
            headers: [("cache-control:", response.cacheControl)] + response.headers + (closes ? [("connection:", "close")] : []))
        if !written {
            logger.warning(
                "could not write the \(response.status) answer to \(link.peerAddress) (\(response.body.count) bytes); closed the connection")
        }
        exchange.isAnswerWritten = true
        // The body still arriving is read, and dropped, before the connection closes.
        if written, exchange.drainsBody, !exchange.isBodyComplete { return true }
        release(link.detach())
        guard written, !closes else { return false }
        return link.completeHTTPTransaction()
    }
}
