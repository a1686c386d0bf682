import RingcastCore

/// How a context is made: what it listens on, what it serves, and its limits.
package struct ContextSettings: Sendable {
    package struct Listener: Sendable {
        package var host: String
        package var port: Int
        package init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    /// `/` serves `directory` (and nothing outside it); `callbackPaths` go to the handler instead.
    package struct StaticFiles: Sendable {
        package var directory: String
        package var maxAge: Int
        package var callbackPaths: [String]
        package init(directory: String, maxAge: Int, callbackPaths: [String]) {
            self.directory = directory
            self.maxAge = maxAge
            self.callbackPaths = callbackPaths
        }
    }

    /// The protocol's name, which is also the service thread's.
    package var name: String
    /// nil: a context without a listening socket of lws's own (a client, or a server that accepts
    /// on `ListeningSocket`s of its own, with `acceptsAdoptedSockets`).
    package var listener: Listener?
    /// A server vhost that listens on nothing itself: it serves the sockets `adoptListener` accepts
    /// (lws's CONTEXT_PORT_NO_LISTEN_SERVER), TLS included.
    package var acceptsAdoptedSockets = false
    /// How many lws contexts the loop runs on its one thread and event loop, all made from these
    /// settings, the sockets `adoptListener` accepts spread over them by descriptor (more than one
    /// only without `listener`: each would bind it). Debian's lws walks its context's whole fd
    /// table, and reads every connection in it, on each close (`sanity_assert_no_sockfd_traces`),
    /// and sizes that table by the open-file limit: context k takes the descriptors of the k-th
    /// range (`descriptorRange`) and has a table only as long as its ranges reach, so a close walks
    /// about as many slots as its descriptor's number, and reads one range's connections
    /// (Benchmarks/NOTES.md, "Connections held"). At most: fewer are made where their tables would
    /// take more than `contextTableBudgetBytes` (`LWS.contexts(_:tablesWithin:descriptors:)`).
    package var contexts = 1
    /// The resident memory one loop's contexts may spend on lws's fd and poll tables (16 bytes a
    /// slot, zeroed at creation): 8 MiB makes 16 contexts at 20 000 descriptors, 15 at 65 536,
    /// 3 at 262 144, and one from 524 288.
    package var contextTableBudgetBytes = 8 << 20
    /// Grow this thread's heap once at start (`ServiceLoop.reservedHeapBytes`), for a server that
    /// will hold thousands of connections; off for a client loop inside somebody else's process.
    package var reservesThreadHeap = false
    /// With several contexts, descriptors below this many go to the first context, the next this
    /// many to the second, and so on, all above to the last. nil: the open-file limit over
    /// `contexts`, so the last context's range ends at the limit.
    package var descriptorRange: Int?
    package var staticFiles: StaticFiles?
    /// Per-connection memory lws allocates and zeroes; `LWSConnection.sessionBytes` for `attach`.
    package var sessionBytes = 0
    /// lws allocates this for every WebSocket, idle or not (0: 4096); bigger messages arrive in pieces.
    package var receiveBufferBytes = 0
    /// Headers added to every HTTP answer lws writes (static files included).
    package var headers: [(String, String)] = []
    /// Headers added only to the static files lws serves from `staticFiles` (`LWS_CALLBACK_ADD_HEADERS`).
    package var staticFileHeaders: [(String, String)] = []
    /// lws's own Content-Security-Policy and friends on every answer (no inline script or style).
    package var enforceSecurityHeaders = false
    /// Offer permessage-deflate on WebSockets (a server to clients that ask; a client to its servers).
    package var offersCompression = false
    /// Refuse WebSocket text that is not UTF-8 (close 1007) before it reaches the handler.
    package var validateUTF8 = false
    /// Seconds lws allows a connection's handshake or an idle HTTP exchange.
    package var timeoutSeconds = 10
    /// How much of a request's head lws keeps (0: lws's 4 096 bytes in all, past which it closes
    /// the connection without an answer), and how long one header or piece of the request line may
    /// be before lws cuts it there and goes on: `HeaderLimit` tells a cut one, which is answered.
    package var headerLimit: HeaderLimit?
    package var connectTimeoutSeconds: Int?
    /// Set up the TLS library (needed before any wss:// client connection).
    package var initializeTLS = false
    /// Serve TLS (https://, wss://) on the listener with this PEM certificate and key, offering
    /// these TLS 1.2 ciphers (OpenSSL's list syntax).
    package var certificate: (cert: String, key: String, ciphers: String)?
    /// A client context trusts servers whose certificates these PEM certificates sign (nil: the system's).
    package var trustedCertificates: String?

    package init(name: String) { self.name = name }
}
