import RingcastCore
import RingcastLWS
import RingcastPlatform

/// The Swift side of one lws connection, kept (retained) in its session memory: what the connection
/// is for now. lws reuses the same memory for the next request of a kept-alive connection and for
/// its WebSocket upgrade, so a connection changes role by being replaced. Service thread only.
final class Connection {
    enum Role {
        /// One HTTP request being read and answered.
        case http(HTTPExchange)
        /// A WebSocket receiving the events of the tasks it watches.
        case watcher(SocketPeer)
        /// A WebSocket that publishes (`?mode=publish`): it hears only its own replies and heartbeats.
        case publisher(SocketPeer)
        /// `GET /api/stream`: a watcher whose events go out as Server-Sent Events or JSON lines
        /// over a chunked HTTP answer (StreamRole.swift).
        case stream(SocketPeer)
    }

    let role: Role

    init(_ role: Role) { self.role = role }

    var exchange: HTTPExchange? {
        if case .http(let exchange) = role { return exchange }
        return nil
    }

    var socket: SocketPeer? {
        switch role {
        case .watcher(let socket), .publisher(let socket), .stream(let socket): return socket
        case .http: return nil
        }
    }
}

/// What the server knows of one socket for its whole life — its kept-alive requests and its upgrade:
/// where it comes from and how much it may still publish. Held by its service thread's worker from the
/// socket's `created` to its `destroyed` (lws's per-socket user pointer is its own). Service thread only.
final class Peer {
    let address: PeerAddress
    let isLoopback: Bool
    /// The address as `Server.connections` counts it, when it counts against `maxConnectionsPerAddress`
    /// (every socket counts against `maxConnections`).
    let countedAs: String?
    var allowance: TokenBucket

    init(address: PeerAddress, isLoopback: Bool, countedAs: String?, allowance: TokenBucket) {
        self.address = address
        self.isLoopback = isLoopback
        self.countedAs = countedAs
        self.allowance = allowance
    }
}

/// The sockets a service thread holds, by their connection's identity (`LWSConnection.identifier`),
/// from `created` to `destroyed`: what admission counted them as. Service thread only.
struct PeerTable {
    private var byLink: [Int: Peer] = [:]
    /// The socket just accepted, for the `created` that follows.
    var accepted: Peer?

    subscript(identifier: Int) -> Peer? {
        get { byLink[identifier] }
        set { byLink[identifier] = newValue }
    }

    mutating func removeValue(forKey identifier: Int) -> Peer? { byLink.removeValue(forKey: identifier) }
}

/// One HTTP request: collected (headers, then the body up to `maxMessageBytes`, as its length says
/// or decoded from chunks), answered by the API, written in one send. Service thread only.
final class HTTPExchange {
    @exclusivity(unchecked) var request: APIRequest?
    @exclusivity(unchecked) var body: MessageAssembler
    /// A chunked body's decoder; nil for a body of known length.
    @exclusivity(unchecked) var chunks: ChunkedBodyDecoder?
    /// The connection closes once the answer has left: lws 4.1.6 reads a request without a
    /// Content-Length (chunked, or none at all) as a body of up to 100 MB, so the next request on
    /// it would be swallowed as this one's body.
    @exclusivity(unchecked) var closesConnection = false
    @exclusivity(unchecked) var response: APIResponse?
    /// False once lws has let go of the connection: an answer held for storage is then dropped.
    @exclusivity(unchecked) var isOpen = true
    /// Set by lws's body completion, which comes once a request unless the client pipelines.
    @exclusivity(unchecked) var isBodyComplete = false
    /// Answered before its body (a length past `maxMessageBytes`): the body is still read, and
    /// dropped, and the connection closes once both the answer has left and the body is in, so
    /// the close does not reset the connection under the answer.
    @exclusivity(unchecked) var drainsBody = false
    @exclusivity(unchecked) var isAnswerWritten = false
    /// Its body did not arrive whole in time: the connection is closing.
    @exclusivity(unchecked) var isPastDeadline = false

    init(request: APIRequest, bodyLimit: Int) {
        self.request = request
        body = MessageAssembler(limit: bodyLimit)
    }
}

/// One WebSocket: its protocol session, its place in the fan-out, and the message being received.
/// Service thread only.
final class SocketPeer: FanOutWriter {
    let link: LWSConnection
    /// Unretained: a worker outlives the sockets of its loop.
    unowned(unsafe) let worker: ServiceWorker
    @exclusivity(unchecked) var session: SocketSession?
    @exclusivity(unchecked) var subscription: Subscription?
    @exclusivity(unchecked) var incoming: MessageAssembler
    /// Set when the socket must close once what is queued has left (a refused query, shutdown).
    @exclusivity(unchecked) var closeReason: (status: CloseStatus, text: String)?
    /// Set when the peer's close frame has come: lws answers it and makes no more writeable
    /// callbacks, so nothing is written at once either.
    @exclusivity(unchecked) var peerIsClosing = false
    /// permessage-deflate was agreed: lws 4.1.6 sends a frame its deflater cannot take whole in
    /// pieces over the next writeable callbacks, and a frame written before the last piece would
    /// land inside it. Such a socket gets one frame per writeable callback, and none outside one.
    @exclusivity(unchecked) var isCompressed = false
    /// A message larger than `ServiceWorker.fragmentBytes` being written a fragment per writeable
    /// callback: its bytes (shared with every watcher sent the same) and how far it has gone.
    @exclusivity(unchecked) var unfinished: (bytes: [UInt8], offset: Int)?
    /// Queued in its worker's `SocketRole`, to be written to when this round of the loop ends.
    @exclusivity(unchecked) var isQueuedToWrite = false
    /// The entry whose `maxConnections` this socket counts against (`Server.connectionsByEntry`).
    @exclusivity(unchecked) var countedEntry: String?
    /// Set for a stream (`GET /api/stream`): how its frames are written, over HTTP, not WebSocket.
    /// A reference, so the `/ws` sockets that are most of them carry one word for it, not the framing.
    @exclusivity(unchecked) var stream: StreamOutput?
    /// When it opened (Unix ms): a watcher waiting for its `auth` waits `handshakeTimeoutSeconds` from here.
    let openedAt = Clock.now()

    init(link: LWSConnection, worker: ServiceWorker, messageLimit: Int) {
        self.link = link
        self.worker = worker
        incoming = MessageAssembler(limit: messageLimit)
    }

    func requestWrite() { link.requestWrite() }

    func queueWriteAtRoundEnd() -> Bool {
        assertOnThread(of: worker.loop)
        return worker.sockets.queueWriteAtRoundEnd(self)
    }
}

/// How a stream (`GET /api/stream`) frames what it writes, and the epoch its event ids name: the
/// state's when the stream opened or last resynced. Service thread only.
final class StreamOutput {
    let framing: StreamFraming
    let heartbeatEvents: Bool
    @exclusivity(unchecked) var epoch: [UInt8]

    init(_ request: StreamRequest, epoch: String) {
        framing = request.framing
        heartbeatEvents = request.heartbeatEvents
        self.epoch = Array(epoch.utf8)
    }
}

/// In debug builds, stops the process when the caller is not `loop`'s service thread
/// (`ServiceLoop.assertOnLoopThread`); the service-thread types call it where they are entered.
/// In release builds it is empty and inlined here, where a call to the loop's would remain.
@inline(__always)
func assertOnThread(of loop: ServiceLoop?, file: StaticString = #fileID, line: UInt = #line) {
    #if DEBUG
        loop?.assertOnLoopThread(file: file, line: line)
    #endif
}
