import CCurl
import Foundation
import RingcastCore

package struct HTTPResponse: Sendable {
    package var status: Int
    /// Names lower-cased; a repeated header keeps its last value.
    package var headers: [String: String]
    package var body: [UInt8]

    package init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    package var text: String { String(decoding: body, as: UTF8.self) }
}

/// How a client checks the servers it reaches over https. By default everything is verified
/// against the system's CA store (or the file `SSL_CERT_FILE` names): the chain, the name the
/// client asked for, the dates, TLS 1.2 or later.
package struct TLSSettings: Sendable, Equatable {
    /// A PEM file of the CAs to trust instead of the system's store (a private CA).
    package var caFile: String?
    /// No check of the server's certificate at all; whoever sets it warns on every use.
    package var insecure: Bool
    /// A certificate and its key (PEM files) for a receiver that asks the client for one.
    package var clientCertificate: String?
    package var clientKey: String?

    package init(caFile: String? = nil, insecure: Bool = false, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.caFile = caFile
        self.insecure = insecure
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }

    /// The CA file a verified connection trusts: the one given, else the one `SSL_CERT_FILE` names
    /// (as OpenSSL's own tools read it), else nil for the system's store.
    package var effectiveCAFile: String? {
        if let caFile { return caFile }
        if let named = ProcessInfo.processInfo.environment["SSL_CERT_FILE"], !named.isEmpty { return named }
        return nil
    }
}

/// A blocking HTTP/1.1 client on libcurl, one easy handle per client, so its connection (and TLS
/// session) is kept and reused from one request to the next: the producer commands, the load
/// tester's HTTP publisher, the server's webhook senders and the tests all speak through it. It
/// distrusts its peer: an answer body past `maxBodyBytes` fails the exchange, a chunked body is read
/// by the core's bounded `ChunkedBodyDecoder`, `timeoutSeconds` is one deadline for the whole
/// exchange (connect, TLS, send, receive), redirects are never followed, and proxies come from the
/// environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`) unless `proxy` names one. Whatever a peer
/// does is a thrown `ClientError` with a reason, never a trap or an unbounded wait. One caller at a time.
package final class HTTPClient {
    package let host: String
    package let port: Int
    package let secure: Bool
    package let timeoutSeconds: Double
    /// The largest answer body read; a longer one fails the exchange.
    package let maxBodyBytes: Int
    package let tls: TLSSettings
    /// A proxy URL for every request; nil takes the environment's, "" goes direct.
    package let proxy: String?
    /// What the command line reads of an answer by default.
    package static let defaultMaxBodyBytes = 16 * 1024 * 1024

    /// The easy handle (curl's `CURL *`), made on first use and kept: it holds the connection.
    private var handle: UnsafeMutableRawPointer?
    /// curl writes a failure's details here; it must outlive every transfer on the handle.
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    package init(
        host: String, port: Int, secure: Bool = false, tls: TLSSettings = TLSSettings(), proxy: String? = nil, timeoutSeconds: Double = 10,
        maxBodyBytes: Int = HTTPClient.defaultMaxBodyBytes
    ) {
        self.host = host
        self.port = port
        self.secure = secure
        self.tls = tls
        self.proxy = proxy
        self.timeoutSeconds = timeoutSeconds
        self.maxBodyBytes = maxBodyBytes
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    package convenience init(
        url: ServerURL, tls: TLSSettings = TLSSettings(), proxy: String? = nil, timeoutSeconds: Double = 10,
        maxBodyBytes: Int = HTTPClient.defaultMaxBodyBytes
    ) {
        self.init(
            host: url.host, port: url.port, secure: url.secure, tls: tls, proxy: proxy, timeoutSeconds: timeoutSeconds, maxBodyBytes: maxBodyBytes)
    }

    deinit {
        disconnect()
        errorBuffer.deallocate()
    }

    private var authority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    package func request(_ method: String, _ path: String, body: [UInt8]? = nil, headers: [(String, String)] = []) throws -> HTTPResponse {
        guard CurlLibrary.ready else { throw ClientError("libcurl could not be initialised") }
        if handle == nil { handle = curl_easy_init() }
        guard let handle else { throw ClientError("libcurl could not make a handle") }
        // A reset keeps the handle's live connection and TLS session: only the options start over.
        curl_easy_reset(handle)
        errorBuffer[0] = 0
        let transfer = Transfer(maxBodyBytes: maxBodyBytes)
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        var names = Set<String>()
        for (name, value) in headers {
            names.insert(name.lowercased())
            list = curl_slist_append(list, "\(name): \(value)")
        }
        // No `Expect: 100-continue` wait before a larger body: one round trip, one deadline.
        list = curl_slist_append(list, "Expect:")
        if body != nil && !names.contains("content-type") { list = curl_slist_append(list, "Content-Type: application/json") }

        let url = "\(secure ? "https" : "http")://\(authority)\(path.hasPrefix("/") ? path : "/" + path)"
        var failed: String?
        func set(_ result: CURLcode, _ what: String) {
            if result != CURLE_OK, failed == nil { failed = "\(what): \(String(cString: curl_easy_strerror(result)))" }
        }
        let milliseconds = max(1, Int((timeoutSeconds * 1000).rounded(.up)))
        set(rc_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer), "CURLOPT_ERRORBUFFER")
        set(rc_curl_set_string(handle, CURLOPT_URL, url), "the URL \(url)")
        set(rc_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"), "CURLOPT_PROTOCOLS_STR")
        set(rc_curl_set_long(handle, CURLOPT_FOLLOWLOCATION, 0), "CURLOPT_FOLLOWLOCATION")
        // Paths go as given (`/../x` too): the server's own tests send such paths on purpose.
        set(rc_curl_set_long(handle, CURLOPT_PATH_AS_IS, 1), "CURLOPT_PATH_AS_IS")
        // No signals from a client that runs on a server's threads too.
        set(rc_curl_set_long(handle, CURLOPT_NOSIGNAL, 1), "CURLOPT_NOSIGNAL")
        set(rc_curl_set_long(handle, CURLOPT_TIMEOUT_MS, milliseconds), "CURLOPT_TIMEOUT_MS")
        set(rc_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds), "CURLOPT_CONNECTTIMEOUT_MS")
        set(rc_curl_set_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)), "CURLOPT_HTTP_VERSION")
        // A chunked body reaches the write callback as sent and is read by the core's bounded decoder.
        set(rc_curl_set_long(handle, CURLOPT_HTTP_TRANSFER_DECODING, 0), "CURLOPT_HTTP_TRANSFER_DECODING")
        set(rc_curl_set_offset(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxBodyBytes)), "CURLOPT_MAXFILESIZE_LARGE")
        set(rc_curl_set_long(handle, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2)), "CURLOPT_SSLVERSION")
        if tls.insecure {
            set(rc_curl_set_long(handle, CURLOPT_SSL_VERIFYPEER, 0), "CURLOPT_SSL_VERIFYPEER")
            set(rc_curl_set_long(handle, CURLOPT_SSL_VERIFYHOST, 0), "CURLOPT_SSL_VERIFYHOST")
        } else if let caFile = tls.effectiveCAFile {
            set(rc_curl_set_string(handle, CURLOPT_CAINFO, caFile), "the CA file \(caFile)")
        }
        if let certificate = tls.clientCertificate { set(rc_curl_set_string(handle, CURLOPT_SSLCERT, certificate), "the client certificate") }
        if let key = tls.clientKey { set(rc_curl_set_string(handle, CURLOPT_SSLKEY, key), "the client key") }
        if let proxy = proxy ?? HTTPClient.upperCaseHTTPProxy(secure: secure) {
            set(rc_curl_set_string(handle, CURLOPT_PROXY, proxy), "the proxy \(proxy)")
        }
        // Through a proxy, always a CONNECT tunnel (as for https): the same kept connection, end to end.
        set(rc_curl_set_long(handle, CURLOPT_HTTPPROXYTUNNEL, 1), "CURLOPT_HTTPPROXYTUNNEL")
        set(rc_curl_set_list(handle, CURLOPT_HTTPHEADER, list), "CURLOPT_HTTPHEADER")
        set(rc_curl_set_data_callback(handle, CURLOPT_WRITEFUNCTION, curlTakeBody), "CURLOPT_WRITEFUNCTION")
        set(rc_curl_set_data_callback(handle, CURLOPT_HEADERFUNCTION, curlTakeHeader), "CURLOPT_HEADERFUNCTION")
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        set(rc_curl_set_pointer(handle, CURLOPT_WRITEDATA, context), "CURLOPT_WRITEDATA")
        set(rc_curl_set_pointer(handle, CURLOPT_HEADERDATA, context), "CURLOPT_HEADERDATA")
        switch method {
        case "GET" where body == nil: set(rc_curl_set_long(handle, CURLOPT_HTTPGET, 1), "CURLOPT_HTTPGET")
        case "HEAD": set(rc_curl_set_long(handle, CURLOPT_NOBODY, 1), "CURLOPT_NOBODY")
        default:
            if body != nil || method == "POST" || method == "PUT" {
                let bytes = body ?? []
                set(rc_curl_set_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count)), "CURLOPT_POSTFIELDSIZE_LARGE")
                set(
                    bytes.withUnsafeBufferPointer {
                        rc_curl_set_pointer(
                            handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress ?? UnsafePointer(bitPattern: 1)))
                    }, "the body")
            }
            if method != "POST" { set(rc_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, method), "the method \(method)") }
        }
        if let failed { throw ClientError("\(authority): \(failed)") }

        let result = withExtendedLifetime(transfer) { curl_easy_perform(handle) }
        if result != CURLE_OK { throw failure(result, transfer, handle) }
        var status = 0
        _ = rc_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        let body: [UInt8]
        do {
            body = try transfer.finishedBody()
        } catch {
            disconnect()
            throw ClientError("\(authority) answered badly: \(error)", kind: .badAnswer)
        }
        return HTTPResponse(status: status, headers: transfer.headers, body: body)
    }

    package func request(_ method: String, _ path: String, json: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request(method, path, body: Array(json.utf8), headers: headers)
    }

    /// libcurl takes `http_proxy` only in lower case (an upper-case one may come from a CGI request's
    /// `Proxy:` header); a command line is no CGI script, and CI runners set `HTTP_PROXY`.
    /// `HTTPS_PROXY`, `https_proxy`, `NO_PROXY` and `no_proxy` libcurl reads itself.
    private static func upperCaseHTTPProxy(secure: Bool) -> String? {
        let environment = ProcessInfo.processInfo.environment
        guard !secure, (environment["http_proxy"] ?? "").isEmpty, let proxy = environment["HTTP_PROXY"], !proxy.isEmpty else { return nil }
        return proxy
    }

    /// Closes the kept connection; the next request opens a new one.
    package func disconnect() {
        if let handle { curl_easy_cleanup(handle) }
        handle = nil
    }

    /// One reason for a failed transfer, named where a user can act on it.
    private func failure(_ result: CURLcode, _ transfer: Transfer, _ handle: UnsafeMutableRawPointer) -> ClientError {
        let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(result))
        // What curl half-read is of no use to the next request.
        defer { disconnect() }
        switch result {
        case CURLE_WRITE_ERROR where transfer.refusal != nil:
            return ClientError("\(authority) answered badly: \(transfer.refusal!)", kind: transfer.refusalKind)
        case CURLE_FILESIZE_EXCEEDED:
            return ClientError(
                "\(authority) answered badly: a body over \(maxBodyBytes) bytes (its Content-Length is more, or not a length at all)", kind: .tooLarge
            )
        case CURLE_OPERATION_TIMEDOUT:
            return ClientError("no answer from \(authority) within \(timeoutSeconds) s (\(detail))", kind: .timeout)
        case CURLE_COULDNT_CONNECT:
            var osError = 0
            _ = rc_curl_get_long(handle, CURLINFO_OS_ERRNO, &osError)
            let refused = osError == Int(ECONNREFUSED)
            if refused { return ClientError("cannot connect to \(authority): connection refused; is the server running?", kind: .refused) }
            return ClientError("cannot connect to \(authority): \(detail); is the server running?", kind: .unreachable)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return ClientError("cannot resolve \(detail.contains("proxy") ? "the proxy for " : "")\(host): \(detail)", kind: .unreachable)
        case CURLE_PEER_FAILED_VERIFICATION:
            var verify = 0
            _ = rc_curl_get_long(handle, CURLINFO_SSL_VERIFYRESULT, &verify)
            return verificationFailure(verify, detail)
        case CURLE_SSL_CACERT_BADFILE:
            return ClientError("cannot use the CA file \(tls.effectiveCAFile ?? "(system store)"): \(detail)", kind: .other)
        case CURLE_SSL_CERTPROBLEM:
            return ClientError("cannot use the client certificate \(tls.clientCertificate ?? ""): \(detail)", kind: .other)
        case CURLE_SSL_CONNECT_ERROR:
            return ClientError("the TLS handshake with \(authority) failed: \(detail)", kind: .handshake)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return ClientError("\(authority): \(detail)", kind: .other)
        default:
            return ClientError("\(authority) answered badly: \(detail)", kind: .badAnswer)
        }
    }

    /// OpenSSL's verification result (X509_V_ERR_*), or curl's own check of the name, as one of the
    /// three reasons a user can fix: the CA, the name, the dates.
    private func verificationFailure(_ verify: Int, _ detail: String) -> ClientError {
        let prefix = "the TLS certificate of \(authority)"
        switch verify {
        case 2, 18, 19, 20, 21:
            return ClientError("\(prefix) is signed by an unknown CA (\(detail))", kind: .unknownCA)
        case 10:
            return ClientError("\(prefix) has expired (\(detail))", kind: .expired)
        case 9:
            return ClientError("\(prefix) is not valid yet (\(detail))", kind: .expired)
        case 62, 64:
            return ClientError("\(prefix) is for another host, not \(host) (wrong host: \(detail))", kind: .wrongHost)
        default:
            if detail.contains("host name") || detail.contains("subject name") {
                return ClientError("\(prefix) is for another host, not \(host) (wrong host: \(detail))", kind: .wrongHost)
            }
            return ClientError("\(prefix) did not verify: \(detail)", kind: .handshake)
        }
    }
}

/// curl's global setup, done once before the first handle (curl_global_init is not for every thread).
private enum CurlLibrary {
    static let ready: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}

/// What one transfer has received, filled by curl's callbacks on the calling thread.
private final class Transfer {
    let maxBodyBytes: Int
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    var chunked: ChunkedBodyDecoder?
    var chunkedBody: [UInt8]?
    /// Why the write callback stopped the transfer.
    var refusal: String?
    var refusalKind = ClientError.Kind.badAnswer

    init(maxBodyBytes: Int) { self.maxBodyBytes = maxBodyBytes }

    func header(_ line: UnsafeRawBufferPointer) {
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // Each status line (an interim 1xx, a proxy's answer to CONNECT) starts a new head.
        if text.hasPrefix("HTTP/") {
            headers = [:]
            chunked = nil
            return
        }
        guard let colon = text.firstIndex(of: ":") else { return }
        let name = text[..<colon].lowercased()
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        headers[name] = value
        if name == "transfer-encoding", value.lowercased().contains("chunked") { chunked = ChunkedBodyDecoder(maxBodyBytes: maxBodyBytes) }
    }

    /// False stops the transfer: the answer is over the cap, or its chunks are not chunks.
    func take(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if chunked != nil {
            chunked!.append(bytes)
            do {
                if let whole = try chunked!.next(closed: false) { chunkedBody = whole }
            } catch {
                refusal = error.description
                refusalKind = error.tooLarge ? .tooLarge : .badAnswer
                return false
            }
            return true
        }
        guard body.count + bytes.count <= maxBodyBytes else {
            refusal = "body over \(maxBodyBytes) bytes"
            refusalKind = .tooLarge
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    /// The body once curl says the answer is complete.
    func finishedBody() throws -> [UInt8] {
        guard chunked != nil else { return body }
        if let chunkedBody { return chunkedBody }
        if let whole = try chunked!.next(closed: true) { return whole }
        throw ChunkedBodyError("the chunked body did not end")
    }
}

private let curlTakeBody: rc_curl_data_callback = { data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.take(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
}

private let curlTakeHeader: rc_curl_data_callback = { data, size, count, context in
    guard let context else { return 0 }
    Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().header(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

package struct ClientError: Error, CustomStringConvertible {
    /// What went wrong, for callers that act on it (a hint to give, a count to keep).
    package enum Kind: String, Sendable {
        case unknownCA = "unknown CA"
        case wrongHost = "wrong host"
        case expired
        case timeout
        case refused
        case unreachable
        case handshake
        case tooLarge = "too large"
        case badAnswer = "bad answer"
        case other
    }

    package let description: String
    package let kind: Kind
    package init(_ description: String, kind: Kind = .other) {
        self.description = description
        self.kind = kind
    }

    /// The certificate did not verify: a private CA, a name or dates a user can fix.
    package var isVerification: Bool { kind == .unknownCA || kind == .wrongHost || kind == .expired }
}
