import CLibWebSockets
import CRingcastShims
import Foundation
import RingcastCore
import RingcastPlatform

/// What happened on a connection, as lws's callback reported it, in the order lws reports it.
package enum ServiceEvent {
    /// A socket was accepted from `address` (lws has not made a connection of it yet): answer false
    /// to close it at once. The `created` that follows is that socket's.
    case accepted(address: PeerAddress)
    /// A connection object exists (accepted sockets, and lws's own listener).
    case created
    /// The connection object is going away: the last event it gets.
    case destroyed
    /// Any HTTP request (static files too) is about to be served: answer false to refuse it, after
    /// writing the refusal (`writeHTTP`); the connection then closes.
    case httpFilter
    /// An HTTP request for a callback path; its headers are in, a body may follow in `httpBody` pieces.
    case httpRequest
    /// A piece of the body, lent for the duration of the call.
    case httpBody(UnsafeRawBufferPointer)
    case httpBodyComplete
    case httpWriteable
    /// The HTTP connection (or the exchange an upgrade replaced) is gone.
    case httpClosed
    /// A WebSocket upgrade asks to be accepted: answer false to refuse it.
    case upgradeRequested
    /// A WebSocket is open (server side: upgraded; client side: connected).
    case opened
    /// A piece of a message, lent for the duration of the call; `isLast` when it ends the message,
    /// `isBinary` when the message is a binary one.
    case received(UnsafeRawBufferPointer, isLast: Bool, isBinary: Bool)
    case writeable
    /// The peer sent a close frame, with its status code when it gave one.
    case peerClosing(code: Int?, reason: String)
    case closed
    /// A client connection could not be made.
    case connectFailed(String)
    /// A client handshake is being written: add headers to it.
    case appendHandshakeHeaders(HandshakeHeaders)
    /// Bytes read from a raw client socket (one that speaks its protocol itself), lent for the
    /// duration of the call. Its connect, writeable and close arrive as `opened`, `writeable`, `closed`.
    case rawReceived(UnsafeRawBufferPointer)
}

/// What a context's connections do. Called on the context's service thread only.
package protocol ServiceHandler: AnyObject {
    /// Returns false to close the connection (for `.upgradeRequested`: to refuse the upgrade).
    func handle(_ event: ServiceEvent, on connection: LWSConnection) -> Bool
    /// The loop is about to destroy its context: the last moment to send close frames, with `loop.service(forAtMost:until:)`.
    func loopWillStop(_ loop: ServiceLoop)
    /// Another thread called `notify()` (once per wake-up, however many calls).
    func loopWasNotified(_ loop: ServiceLoop)
    /// A round of the loop is over: every socket that was ready and every timer that was due has
    /// been handled, and the loop is about to wait again.
    func loopRoundEnded(_ loop: ServiceLoop)
    /// Accepting stopped: the process is out of descriptors (or the kernel of socket memory), so
    /// new connections wait in the listener's backlog; `reason` says which. Once per pause.
    func loopPausedAccepting(_ loop: ServiceLoop, reason: String)
    /// Accepting works again after `loopPausedAccepting`.
    func loopResumedAccepting(_ loop: ServiceLoop)
}

extension ServiceHandler {
    package func loopWillStop(_ loop: ServiceLoop) {}
    package func loopWasNotified(_ loop: ServiceLoop) {}
    package func loopRoundEnded(_ loop: ServiceLoop) {}
    package func loopPausedAccepting(_ loop: ServiceLoop, reason: String) {}
    package func loopResumedAccepting(_ loop: ServiceLoop) {}
}

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

/// One event loop, the libwebsockets contexts on it (one, or `ContextSettings.contexts` made alike,
/// which share its sockets) and the one thread that services them (lws is single-threaded: Debian
/// builds it with `LWS_MAX_SMP` 1). Other threads hand work in with `post`, which wakes the loop with
/// `lws_cancel_service`; the work runs on the service thread in `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
/// Connection callbacks of every context reach the `ServiceHandler` through one C trampoline.
///
/// `@unchecked Sendable`: `lifecycle`, `context`, `boundPort` and `jobs` are guarded by `lock`; every
/// other stored property is touched only on the service thread, between `start` and `stop`.
package final class ServiceLoop: @unchecked Sendable {
    package enum Lifecycle: Sendable { case initial, starting, running, stopping, stopped }

    package let name: String
    let logger: Logger

    private let lock = NSLock()
    private var lifecycle = Lifecycle.initial
    /// The first context: the one other threads wake (every context is on the same event loop, so
    /// one wake-up is enough), and the one a client or a listener uses.
    private var context: OpaquePointer?
    /// Every context on the loop, the first first, and each one's server vhost (service thread).
    private var contexts: [OpaquePointer] = []
    private var vhosts: [OpaquePointer] = []
    /// Each server vhost's OpenSSL context, as lws hands it over while it makes the vhost
    /// (`LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS`): lws 4.1.6 has no accessor for it,
    /// and `replaceCertificate` loads a renewed certificate into it (service thread). lws's own
    /// `lws_tls_cert_updated` does the same for vhosts made with the very same paths, but returns
    /// 0 whatever happened (lib/tls/tls.c, in later releases too), so a key that does not load would
    /// leave new handshakes failing unseen; here each step's result is checked.
    private var serverTLSContexts: [OpaquePointer] = []
    /// lws connections each context holds now (`WSI_CREATE` to `WSI_DESTROY`; adopted listeners too),
    /// by the index of its context (service thread).
    @exclusivity(unchecked) private var heldByContext: [Int] = []
    /// `ContextSettings.descriptorRange`, or what it defaults to (service thread).
    private var descriptorRange = Int.max
    private var boundPort = 0
    private var jobs: [@Sendable () -> Void] = []
    private var notified = false

    /// Held strongly while the loop runs; `dispatch` reads the unretained copy beside it, since
    /// that runs for every callback and the strong one keeps it alive.
    @exclusivity(unchecked) private var handler: ServiceHandler? { didSet { borrowedHandler = handler } }
    @exclusivity(unchecked) private unowned(unsafe) var borrowedHandler: ServiceHandler?
    /// The context's one protocol, which adopted listeners are bound to.
    private var protocolName = ""
    /// `ContextSettings.staticFileHeaders`, for `LWS_CALLBACK_ADD_HEADERS`.
    @exclusivity(unchecked) private var staticFileHeaders: [(String, String)] = []
    /// The listening sockets adopted into this context, by the identity of their raw connection.
    @exclusivity(unchecked) private var listeners: [Int: ListeningSocket] = [:]
    /// Whether accepting is paused (`pauseAccepting`), and the listeners whose polling is off meanwhile.
    @exclusivity(unchecked) private var acceptingPaused = false
    @exclusivity(unchecked) private var unpolledListeners: [Int: OpaquePointer] = [:]
    @exclusivity(unchecked) private var acceptRetryTimer: LoopTimer?
    private var resources = CResources()
    private var timers: [LoopTimer] = []
    /// The epoll loop under the context, from `run`'s start to its end (service thread).
    private var eventLoop: OpaquePointer?
    private var wakeTimer: LoopTimer?
    private var startError: Error?
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// The service thread, joined by whoever stops the loop (guarded by `lock`).
    private var thread: JoinableThread?
    /// Every write on this loop goes through one buffer with lws's headroom.
    let writeBuffer = WriteBuffer()
    /// Connections that do not read while lws holds output of theirs (`LWSConnection.stopReadingWhileOutputIsHeld`).
    @exclusivity(unchecked) var readingStopped: Set<Int> = []
    #if DEBUG
        /// The service thread while `run` runs, for `assertOnLoopThread`; written and read on it.
        @usableFromInline var serviceThread: pthread_t?
    #endif

    package init(name: String, logger: Logger) {
        self.name = name
        self.logger = logger
    }

    package var port: Int { lock.withLock { boundPort } }

    /// In debug builds, stops the process, naming the caller, when it is not this loop's service
    /// thread while the loop runs: the types that belong to a service thread call it where they are
    /// entered, so the ownership their comments state is checked (as NIO's `preconditionInEventLoop`).
    /// In release builds it is empty, and inlined away in this module; another module's release build
    /// still calls it (SwiftPM builds it with -enable-testing), so the server calls it through
    /// `assertOnThread(of:)`, which compiles to nothing there.
    @inlinable
    package func assertOnLoopThread(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
            guard let serviceThread, pthread_equal(serviceThread, pthread_self()) != 0 else {
                preconditionFailure("touched off the service thread of \(name)", file: file, line: line)
            }
        #endif
    }

    package var isRunning: Bool { lock.withLock { lifecycle == .running } }

    /// Creates the context on a new service thread, runs `prepare` there (timers, first state), and
    /// returns once the loop runs: the port it listens on, or 0 without a listener.
    @discardableResult
    package func start(
        _ settings: ContextSettings, handler: ServiceHandler,
        prepare: @escaping @Sendable (ServiceLoop) throws -> Void = { _ in }
    ) throws -> Int {
        lock.withLock {
            precondition(lifecycle == .initial, "a ServiceLoop starts once")
            lifecycle = .starting
        }
        self.handler = handler
        // The handler is handed to the service thread here, before it starts, and is touched only there.
        let thread = try JoinableThread(name: name) { [self] in run(settings, prepare: prepare) }
        lock.withLock { self.thread = thread }
        started.wait()
        if let startError {
            finished.wait()
            thread.join()
            throw startError
        }
        return port
    }

    /// Stops the loop, lets the handler say goodbye, destroys the context and returns when it is
    /// gone. Any thread but the service thread; a loop that is not running is left as it is.
    package func stop() {
        let wasRunning: Bool = lock.withLock {
            guard lifecycle == .running else { return false }
            lifecycle = .stopping
            lws_cancel_service(context)
            return true
        }
        guard wasRunning else { return }
        finished.wait()
        // Joined, not only signalled: the thread's own clean-up (OpenSSL's per-thread state among
        // it) runs after `finished`, and a process that exits meanwhile frees that state twice
        // (seen under AddressSanitizer in a `ringcast run` that closed its client, then exited).
        lock.withLock { thread }?.join()
    }

    /// Runs `job` on the service thread soon; false when the loop is not running (the job is dropped).
    /// Any thread.
    @discardableResult
    package func post(_ job: @escaping @Sendable () -> Void) -> Bool {
        lock.withLock {
            guard lifecycle == .running || lifecycle == .starting, let context else { return false }
            jobs.append(job)
            // The context is destroyed only after `context` is cleared under this lock, so it is alive here.
            lws_cancel_service(context)
            return true
        }
    }

    /// Wakes the loop to call the handler's `loopWasNotified`, once however many threads call it
    /// before it runs: cheaper than `post` for "look at your inbox". Any thread; false when stopped.
    @discardableResult
    package func notify() -> Bool {
        lock.withLock {
            guard lifecycle == .running || lifecycle == .starting, let context else { return false }
            if !notified {
                notified = true
                lws_cancel_service(context)
            }
            return true
        }
    }

    /// Serves the connections `socket` accepts on this loop: each is offered to the handler as
    /// `accepted(address:)`, then adopted (TLS too, when the contexts have a certificate) by one
    /// of the contexts, chosen by its descriptor (`context(for:)`). The first context watches the
    /// socket and closes it when it is destroyed. Service thread only (e.g. in `prepare`).
    package func adoptListener(_ socket: ListeningSocket) throws(CCallError) {
        assertOnLoopThread()
        guard let vhost = vhosts.first else {
            throw CCallError("lws_get_vhost_by_name", "the loop has no server vhost to adopt a listener into")
        }
        var descriptor = lws_sock_file_fd_type()
        descriptor.filefd = socket.descriptor
        let raw = try checkedNotNil(
            lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, protocolName, nil),
            "lws_adopt_descriptor_vhost", detail: { _, _ in "could not watch the listening socket on port \(socket.port)" })
        socket.adopted = true
        listeners[Int(bitPattern: UnsafeRawPointer(raw))] = socket
    }

    /// Accepts everything waiting on a listener (level-triggered: what is left wakes us again).
    private func acceptConnections(_ socket: ListeningSocket, on listener: LWSConnection) {
        guard let handler, !vhosts.isEmpty else { return }
        for _ in 0..<256 {
            switch socket.accept() {
            case .none:
                endAcceptPause()
                return
            case .outOfResources(let code):
                pauseAccepting(listener, errno: code)
                return
            case .connection(let descriptor, let address):
                endAcceptPause()
                guard handler.handle(.accepted(address: address), on: listener) else {
                    close(descriptor)
                    continue
                }
                // lws makes the connection (WSI_CREATE, so `created` reaches the handler and the count
                // grows) or closes the descriptor.
                _ = lws_adopt_socket_vhost(vhosts[context(for: descriptor)], descriptor)
            }
        }
    }

    /// Out of descriptors: the listener stays readable while a connection waits, so a loop that
    /// kept polling it would try, and fail, on every turn (a core's worth of CPU, for nothing). It
    /// is left unpolled, the connections waiting in its backlog, until a connection of this loop
    /// closes or a second has passed (descriptors freed elsewhere); then one accept tries again.
    private func pauseAccepting(_ listener: LWSConnection, errno code: Int32) {
        if unpolledListeners[listener.identifier] == nil {
            _ = lws_rx_flow_control(listener.wsi, 0)
            unpolledListeners[listener.identifier] = listener.wsi
        }
        if acceptRetryTimer == nil { acceptRetryTimer = try? makeTimer { [unowned self] in pollListenersAgain() } }
        acceptRetryTimer?.schedule(seconds: 1)
        guard !acceptingPaused else { return }
        acceptingPaused = true
        borrowedHandler?.loopPausedAccepting(self, reason: CCallError.errnoText(code))
    }

    /// Polls the listeners accepting left alone again; the next accept says whether the pause is over.
    private func pollListenersAgain() {
        for (_, wsi) in unpolledListeners { _ = lws_rx_flow_control(wsi, 1) }
        unpolledListeners.removeAll()
    }

    private func endAcceptPause() {
        guard acceptingPaused else { return }
        acceptingPaused = false
        acceptRetryTimer?.cancel()
        borrowedHandler?.loopResumedAccepting(self)
    }

    /// The context an accepted descriptor goes to: the one for its range (`descriptorRange`), whose
    /// fd table reaches it. Not the context that holds fewest: lws's scan on close follows every
    /// filled slot of the table to its connection, and slots filled one here and one there cost a
    /// cache miss and a mispredicted branch each (measured slower than one context,
    /// Benchmarks/NOTES.md); a range's slots are filled densely, since the kernel hands out the
    /// lowest free descriptor.
    private func context(for descriptor: Int32) -> Int {
        min(Int(max(0, descriptor)) / descriptorRange, max(0, vhosts.count - 1))
    }

    /// The index of the context `wsi` belongs to (service thread).
    private func contextIndex(of wsi: OpaquePointer) -> Int {
        guard contexts.count > 1, let context = lws_get_context(wsi) else { return 0 }
        return contexts.firstIndex(of: context) ?? 0
    }

    /// The connections each context on the loop holds now, the first context first: accepted
    /// sockets from their adoption to their close (a listener is not counted). Service thread only
    /// (from another thread, through `post`).
    package var connectionsByContext: [Int] {
        assertOnLoopThread()
        var held = heldByContext
        if !held.isEmpty { held[0] -= listeners.count }
        return held
    }

    /// A one-shot timer on this loop; it fires on the service thread. Service thread only.
    package func makeTimer(_ fire: @escaping () -> Void) throws(CCallError) -> LoopTimer {
        assertOnLoopThread()
        guard let eventLoop else { throw CCallError("rc_timer_new", "the loop is not running, so it can have no timer") }
        let timer = LoopTimer(fire: fire)
        let user = Unmanaged.passUnretained(timer).toOpaque()
        timer.pointer = try checkedNotNil(
            rc_timer_new(eventLoop, user) { Unmanaged<LoopTimer>.fromOpaque($0!).takeUnretainedValue().fire() },
            "rc_timer_new", detail: { _, _ in "out of memory for a timer" })
        timers.append(timer)
        return timer
    }

    /// Services connections for at most `milliseconds`, or until `done()` holds; for `loopWillStop`.
    package func service(forAtMost milliseconds: Int, until done: () -> Bool) {
        assertOnLoopThread()
        guard serviceContext != nil, let eventLoop else { return }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        while !done(), DispatchTime.now().uptimeNanoseconds < deadline {
            // A timer wakes the loop even when no socket does.
            wakeTimer?.schedule(microseconds: 20_000)
            turn(eventLoop)
        }
    }

    /// One round of the loop, and the handler told it has ended.
    private func turn(_ eventLoop: OpaquePointer) {
        rc_loop_run_once(eventLoop)
        borrowedHandler?.loopRoundEnded(self)
    }

    /// The first context, read on the service thread, which alone creates and destroys it.
    var serviceContext: OpaquePointer? { context }

    // MARK: The service thread

    /// glibc gives each thread but the main one a heap of its own and grows it by the pages a
    /// malloc needs, one `mprotect` each (the main heap grows by 128 KiB with `brk`): every new
    /// connection's memory cost a system call (741 for 500 connections under strace). Growing the
    /// heap once, here, to what thousands of connections take moves that to start-up; glibc keeps
    /// the pages mapped but gives their memory back (`MADV_DONTNEED`) when they are freed.
    static let reservedHeapBytes = 32 << 20

    private static func reserveThreadHeap() {
        let blockBytes = 64 << 10  // under glibc's mmap threshold (128 KiB), so from the heap
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(reservedHeapBytes / blockBytes)
        for _ in 0..<(reservedHeapBytes / blockBytes) {
            guard let block = malloc(blockBytes) else { break }
            blocks.append(block)
        }
        for block in blocks { free(block) }
    }

    private func run(_ settings: ContextSettings, prepare: (ServiceLoop) throws -> Void) {
        #if DEBUG
            serviceThread = pthread_self()
            defer { serviceThread = nil }
        #endif
        if settings.reservesThreadHeap { ServiceLoop.reserveThreadHeap() }
        precondition(settings.contexts >= 1 && (settings.contexts == 1 || settings.listener == nil), "several contexts share adopted sockets only")
        guard let eventLoop = rc_loop_new(Int32(settings.contexts)) else {
            startError = CCallError("rc_loop_new", "could not make an epoll event loop (out of memory or file descriptors)")
            handler = nil
            lock.withLock { lifecycle = .stopped }
            started.signal()
            finished.signal()
            return
        }
        self.eventLoop = eventLoop
        do {
            try makeContexts(settings, on: eventLoop)
            lock.withLock { context = contexts.first }
            wakeTimer = try makeTimer {}
            try prepare(self)
        } catch {
            startError = error
            lock.withLock { context = nil }
            releaseTimers()
            destroyContexts(on: eventLoop)
            resources.release()
            handler = nil
            self.eventLoop = nil
            rc_loop_free(eventLoop)
            lock.withLock { lifecycle = .stopped }
            started.signal()
            finished.signal()
            return
        }
        lock.withLock { lifecycle = .running }
        started.signal()
        logger.debug("\(name): service loop running with \(contexts.count) context(s)")
        while lock.withLock({ lifecycle == .running }) {
            turn(eventLoop)
        }
        handler?.loopWillStop(self)
        releaseTimers()
        lock.withLock {
            context = nil
            jobs = []
        }
        listeners = [:]
        unpolledListeners = [:]
        acceptRetryTimer = nil
        // Connections still open are closed in here, with callbacks: the handler must still be set.
        destroyContexts(on: eventLoop)
        self.eventLoop = nil
        rc_loop_free(eventLoop)
        resources.release()
        handler = nil
        lock.withLock { lifecycle = .stopped }
        logger.debug("\(name): service loop stopped")
        finished.signal()
    }

    /// Makes `settings.contexts` contexts on `eventLoop`, all from one creation info (so from the
    /// same protocol, mounts, headers, certificate and limits, which lws keeps pointers to: they
    /// live in `resources` until the last context is gone). A context that cannot be made leaves
    /// those made before it in `contexts`, for `destroyContexts`.
    private func makeContexts(_ settings: ContextSettings, on eventLoop: OpaquePointer) throws {
        var info = creationInfo(settings, on: eventLoop)
        let count = LWS.contexts(settings.contexts, tablesWithin: settings.contextTableBudgetBytes)
        let limit = LWS.openFileLimit
        if count < settings.contexts {
            logger.info(
                "\(name): \(count) of \(settings.contexts) contexts fit their fd tables in \(settings.contextTableBudgetBytes >> 20) MiB at \(limit.map(String.init) ?? "no") open-file limit"
            )
        }
        descriptorRange = max(1, settings.descriptorRange ?? limit.map { ($0 + count - 1) / count } ?? Int.max)
        var tables: [String] = []
        for index in 0..<count {
            // The last context takes every descriptor above the others' ranges: the whole table.
            let (reach, overflow) = (index + 1).multipliedReportingOverflow(by: descriptorRange)
            let slots = index == count - 1 || overflow ? nil : reach
            let (created, tableSlots) = try LWS.withDescriptorTable(slots) { try createContext(&info, settings) }
            contexts.append(created)
            heldByContext.append(0)
            tables.append(tableSlots.map(String.init) ?? "?")
            try checked(
                rc_loop_attach(eventLoop, created), "rc_loop_attach", detail: { _, _ in "the event loop has room for \(count) contexts" })
            if let vhost = lws_get_vhost_by_name(created, "default") { vhosts.append(vhost) }
        }
        if count > 1 {
            logger.debug(
                "\(name): \(count) contexts, descriptors in ranges of \(descriptorRange), fd tables of \(tables.joined(separator: ", ")) slots")
        }
        if settings.listener != nil, let vhost = vhosts.first {
            let port = Int(lws_get_vhost_listen_port(vhost))
            lock.withLock { boundPort = port }
        }
    }

    /// Forgets the loop's contexts and destroys them, the last first (the first holds the listeners).
    private func destroyContexts(on eventLoop: OpaquePointer) {
        rc_loop_detach(eventLoop)
        for created in contexts.reversed() { lws_context_destroy(created) }
        contexts = []
        vhosts = []
        serverTLSContexts = []
        heldByContext = []
    }

    private func releaseTimers() {
        for timer in timers { timer.release() }
        timers = []
        wakeTimer = nil
    }

    /// How every context of this loop is made.
    private func creationInfo(_ settings: ContextSettings, on eventLoop: OpaquePointer) -> lws_context_creation_info {
        protocolName = settings.name
        staticFileHeaders = settings.staticFileHeaders
        var info = lws_context_creation_info()
        info.protocols = resources.protocols(
            name: settings.name, callback: serviceCallback,
            sessionSize: settings.sessionBytes, rxBufferSize: settings.receiveBufferBytes)
        if let listener = settings.listener {
            info.port = Int32(listener.port)
            info.iface = resources.string(listener.host)
        } else {
            // CONTEXT_PORT_NO_LISTEN_SERVER, or CONTEXT_PORT_NO_LISTEN (a client).
            info.port = settings.acceptsAdoptedSockets ? -2 : -1
        }
        if let files = settings.staticFiles {
            info.mounts = resources.mounts(
                publicDirectory: files.directory, maxAge: files.maxAge, callbackPaths: files.callbackPaths,
                protocolName: settings.name)
        }
        info.headers = resources.headers(settings.headers)
        if let trusted = settings.trustedCertificates { info.client_ssl_ca_filepath = resources.string(trusted) }
        if let certificate = settings.certificate {
            info.ssl_cert_filepath = resources.string(certificate.cert)
            info.ssl_private_key_filepath = resources.string(certificate.key)
            info.ssl_cipher_list = resources.string(certificate.ciphers)
            // HTTP/1.1 only: an answer leaves as headers and body in one write, which HTTP/2's
            // framing does not allow, and browsers then open WebSockets the usual way.
            info.alpn = resources.string("http/1.1")
        }
        info.user = Unmanaged.passUnretained(self).toOpaque()
        // Only where the sockets are our own accepts, which carry the kernel's check instead
        // (`ListeningSocket.accept`); a client context keeps lws's.
        if settings.acceptsAdoptedSockets { info.retry_and_idle_policy = resources.retryPolicyWithoutValidityChecks() }
        if settings.offersCompression { info.extensions = resources.permessageDeflate() }
        info.timeout_secs = UInt32(max(1, settings.timeoutSeconds))
        if let limit = settings.headerLimit {
            info.max_http_header_data = UInt16(limit.totalBytes)
            info.token_limits = resources.tokenLimits(each: UInt16(limit.eachBytes))
        }
        // A connection idle in the middle of its request headers holds one of lws's header tables:
        // the same limit (lws's default is 10 s whatever timeout_secs says).
        info.timeout_secs_ah_idle = UInt32(max(1, settings.timeoutSeconds))
        if let connect = settings.connectTimeoutSeconds { info.connect_timeout_secs = UInt32(max(1, connect)) }
        var options: UInt64 = 0
        if settings.enforceSecurityHeaders { options |= UInt64(LWS_SERVER_OPTION_HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE) }
        if settings.validateUTF8 { options |= UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8) }
        if settings.initializeTLS || settings.certificate != nil { options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT) }
        // With IPv6 on, lws binds [::] whatever iface says: an IPv4 address must turn it off.
        if let listener = settings.listener, !listener.host.contains(":") { options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        // lws services its sockets from libev's epoll loop, which we turn (`rc_loop_run_once`).
        options |= UInt64(LWS_SERVER_OPTION_LIBEV)
        info.foreign_loops = rc_loop_foreign(eventLoop)
        info.options = options
        return info
    }

    private func createContext(_ info: inout lws_context_creation_info, _ settings: ContextSettings) throws -> OpaquePointer {
        // A context lws fails to make (a port in use, a certificate it cannot load) is not all given
        // back: lws 4.1.6 keeps its system-message peer, and through it the vhost's OpenSSL state
        // with the system's CA store (warmcat/libwebsockets#3466, still in 4.4). Not reported under
        // the address sanitizer (LeakSanitizer.swift says why here rather than in lsan.supp); a
        // context that is made is destroyed when its loop ends (`run`).
        guard let context = LeakSanitizer.ignoringAllocations({ lws_create_context(&info) }) else {
            if let certificate = settings.certificate {
                throw CCallError(
                    "lws_create_context",
                    "could not listen with TLS on \(settings.listener.map { "\($0.host):\($0.port)" } ?? "no address"): the port may be in use, or \(certificate.cert) and \(certificate.key) are not a PEM certificate and its private key (the log says which)"
                )
            }
            if let listener = settings.listener {
                throw CCallError(
                    "lws_create_context",
                    "could not listen on \(listener.host):\(listener.port): the port is in use or the address is not on this machine; pick another \"port\" or \"host\""
                )
            }
            throw CCallError("lws_create_context", "could not create a libwebsockets context")
        }
        return context
    }

    fileprivate func runJobs() {
        let (due, wasNotified) = lock.withLock { () -> ([@Sendable () -> Void], Bool) in
            defer {
                jobs.removeAll(keepingCapacity: true)
                notified = false
            }
            return (jobs, notified)
        }
        for job in due { job() }
        if wasNotified { handler?.loopWasNotified(self) }
    }

    fileprivate func dispatch(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        guard let handler = borrowedHandler else { return lws_callback_http_dummy(wsi, reason, user, input, length) }
        let connection = LWSConnection(wsi: wsi, session: user, loop: self)
        func bytes() -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length) }
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            // Other threads wake the first context only; should lws wake another itself, the queue
            // is simply empty or drained early: each job is taken from it once, under the lock.
            runJobs()
            return 0
        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            // lws passes the accepted descriptor as `in` (the connection does not exist yet).
            let descriptor = Int32(truncatingIfNeeded: Int(bitPattern: input))
            let address = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
                PeerAddress(
                    text: lws_get_peer_simple_fd(descriptor, buffer.baseAddress, buffer.count) == nil ? "" : String(cString: buffer.baseAddress!))
            }
            return handler.handle(.accepted(address: address), on: connection) ? 0 : 1
        case LWS_CALLBACK_RAW_RX_FILE:
            if let socket = listeners[connection.identifier] { acceptConnections(socket, on: connection) }
            return 0
        case LWS_CALLBACK_RAW_ADOPT_FILE, LWS_CALLBACK_RAW_CLOSE_FILE, LWS_CALLBACK_RAW_WRITEABLE_FILE:
            return 0
        case LWS_CALLBACK_WSI_CREATE:
            heldByContext[contextIndex(of: wsi)] += 1
            _ = handler.handle(.created, on: connection)
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            heldByContext[contextIndex(of: wsi)] -= 1
            // A descriptor is free: a paused accept may take it.
            if !unpolledListeners.isEmpty && listeners[connection.identifier] == nil { pollListenersAgain() }
            if !readingStopped.isEmpty { readingStopped.remove(connection.identifier) }
            _ = handler.handle(.destroyed, on: connection)
            return 0
        case LWS_CALLBACK_FILTER_HTTP_CONNECTION:
            return handler.handle(.httpFilter, on: connection) ? 0 : 1
        case LWS_CALLBACK_HTTP:
            return handler.handle(.httpRequest, on: connection) ? 0 : -1
        case LWS_CALLBACK_HTTP_BODY:
            return handler.handle(.httpBody(bytes()), on: connection) ? 0 : -1
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            return handler.handle(.httpBodyComplete, on: connection) ? 0 : -1
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return handler.handle(.httpWriteable, on: connection) ? 0 : -1
        case LWS_CALLBACK_CLOSED_HTTP, LWS_CALLBACK_HTTP_DROP_PROTOCOL:
            _ = handler.handle(.httpClosed, on: connection)
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            return handler.handle(.upgradeRequested, on: connection) ? 0 : 1
        case LWS_CALLBACK_ESTABLISHED, LWS_CALLBACK_CLIENT_ESTABLISHED:
            return handler.handle(.opened, on: connection) ? 0 : -1
        case LWS_CALLBACK_RECEIVE, LWS_CALLBACK_CLIENT_RECEIVE:
            let isLast = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            let isBinary = lws_frame_is_binary(wsi) != 0
            return handler.handle(.received(bytes(), isLast: isLast, isBinary: isBinary), on: connection) ? 0 : -1
        case LWS_CALLBACK_SERVER_WRITEABLE, LWS_CALLBACK_CLIENT_WRITEABLE:
            if !readingStopped.isEmpty { connection.resumeReading() }
            return handler.handle(.writeable, on: connection) ? 0 : -1
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            var code: Int?
            var reason = ""
            if let input, length >= 2 {
                let status = input.assumingMemoryBound(to: UInt8.self)
                code = Int(status[0]) << 8 | Int(status[1])
                reason = String(decoding: UnsafeBufferPointer(start: status + 2, count: length - 2), as: UTF8.self)
            }
            return handler.handle(.peerClosing(code: code, reason: reason), on: connection) ? 0 : -1
        case LWS_CALLBACK_CLOSED, LWS_CALLBACK_CLIENT_CLOSED:
            _ = handler.handle(.closed, on: connection)
            return 0
        case LWS_CALLBACK_RAW_CONNECTED:
            return handler.handle(.opened, on: connection) ? 0 : -1
        case LWS_CALLBACK_RAW_RX:
            return handler.handle(.rawReceived(bytes()), on: connection) ? 0 : -1
        case LWS_CALLBACK_RAW_WRITEABLE:
            return handler.handle(.writeable, on: connection) ? 0 : -1
        case LWS_CALLBACK_RAW_CLOSE:
            _ = handler.handle(.closed, on: connection)
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            var message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            // lws 4.1.6 says a certificate refused in the handshake only as "SSL err 1": OpenSSL's
            // verification result, still on the connection here, says which check failed.
            if let ssl = lws_get_ssl(wsi) {
                let verify = SSL_get_verify_result(ssl)
                if verify != X509_V_OK { message += " (X509_V_ERR = \(verify))" }
            }
            _ = handler.handle(.connectFailed(message), on: connection)
            return 0
        case LWS_CALLBACK_ADD_HEADERS:
            // lws asks this only while it writes a static file's headers (lws_serve_http_file).
            guard let input, !staticFileHeaders.isEmpty else { return 0 }
            let arguments = input.assumingMemoryBound(to: lws_process_html_args.self)
            guard let start = arguments.pointee.p else { return 0 }
            let first = UnsafeMutableRawPointer(start).assumingMemoryBound(to: UInt8.self)
            let end = first + Int(arguments.pointee.max_len)
            var cursor: UnsafeMutablePointer<UInt8>? = first
            for (name, value) in staticFileHeaders {
                guard lws_add_http_header_by_name(wsi, name, value, Int32(value.utf8.count), &cursor, end) == 0 else { return 1 }
            }
            guard let cursor else { return 1 }
            arguments.pointee.max_len -= Int32(cursor - first)
            arguments.pointee.p = UnsafeMutableRawPointer(cursor).assumingMemoryBound(to: CChar.self)
            return 0
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input else { return 0 }
            let cursor = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
            guard let start = cursor.pointee else { return -1 }
            let headers = HandshakeHeaders(wsi: wsi, cursor: cursor, end: start + length)
            return handler.handle(.appendHandshakeHeaders(headers), on: connection) ? 0 : -1
        case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
            // `user` is the vhost's SSL_CTX, alive as long as its context.
            if let user { serverTLSContexts.append(OpaquePointer(user)) }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    /// Serves new TLS handshakes on every context of the loop with this certificate and key (PEM
    /// files) and cipher list, as lws loaded the first ones; connections already open keep theirs
    /// (each holds its own reference to what it was handshaken with). Check the files first
    /// (`checkCertificate`): a pair that does not load leaves a context without a usable key.
    /// Service thread only.
    package func replaceCertificate(_ certificate: (cert: String, key: String, ciphers: String)) throws(CCallError) {
        assertOnLoopThread()
        for tls in serverTLSContexts {
            // The certificate first: OpenSSL drops a held key that does not match it, and the
            // new key then goes in beside it.
            guard SSL_CTX_use_certificate_chain_file(tls, certificate.cert) == 1,
                SSL_CTX_use_PrivateKey_file(tls, certificate.key, SSL_FILETYPE_PEM) == 1,
                SSL_CTX_check_private_key(tls) == 1,
                SSL_CTX_set_cipher_list(tls, certificate.ciphers) == 1
            else {
                let reason = ServiceLoop.openSSLReason()
                throw CCallError(
                    "SSL_CTX_use_certificate_chain_file", "\(name): could not load \(certificate.cert) and \(certificate.key): \(reason)")
            }
        }
    }

    /// How many server TLS contexts the loop holds (one per context, with a certificate). Service thread only.
    package var serverTLSContextCount: Int { serverTLSContexts.count }

    /// Whether PEM files hold a certificate (with its chain) and its private key, and the cipher
    /// list is one OpenSSL takes: loaded into a throwaway OpenSSL context, so nothing that serves
    /// is touched. Any thread.
    package static func checkCertificate(_ certificate: (cert: String, key: String, ciphers: String)) throws(CCallError) {
        guard let tls = SSL_CTX_new(TLS_server_method()) else { throw CCallError("SSL_CTX_new", "OpenSSL could not make a context") }
        defer { SSL_CTX_free(tls) }
        let steps: [(String, () -> Bool)] = [
            ("tls.cert: '\(certificate.cert)' is not a PEM certificate", { SSL_CTX_use_certificate_chain_file(tls, certificate.cert) == 1 }),
            // OpenSSL checks the key against the certificate as it loads it; the reason says which failed.
            (
                "tls.key: '\(certificate.key)' is not the PEM private key of '\(certificate.cert)'",
                { SSL_CTX_use_PrivateKey_file(tls, certificate.key, SSL_FILETYPE_PEM) == 1 }
            ),
            ("tls.key: '\(certificate.key)' is not the PEM private key of '\(certificate.cert)'", { SSL_CTX_check_private_key(tls) == 1 }),
            ("tls.ciphers: OpenSSL takes none of '\(certificate.ciphers)'", { SSL_CTX_set_cipher_list(tls, certificate.ciphers) == 1 }),
        ]
        for (failure, step) in steps where !step() {
            throw CCallError("SSL_CTX_use_certificate_chain_file", "\(failure) (\(openSSLReason()))")
        }
    }

    /// The newest OpenSSL error of this thread, in words, and the thread's error queue emptied.
    private static func openSSLReason() -> String {
        let code = ERR_peek_last_error()
        defer { ERR_clear_error() }
        guard code != 0, let text = ERR_reason_error_string(code) else { return "no reason given" }
        return String(cString: text)
    }
}

/// The one C entry point of every context: finds the loop through the context's user pointer
/// (unretained: the loop outlives its context).
private func serviceCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let owner = lws_context_user(lws_get_context(wsi)) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    // Borrowed, not retained: this runs for every callback, the delivery path included.
    return Unmanaged<ServiceLoop>.fromOpaque(owner)._withUnsafeGuaranteedRef { $0.dispatch(wsi, reason, user, input, length) }
}

/// A one-shot timer on a loop's service thread (a libev timer of the shim's, `rc_timer`). The loop holds it and
/// frees it when it stops; schedule and cancel on the service thread only.
package final class LoopTimer {
    fileprivate var pointer: OpaquePointer?
    fileprivate let fire: () -> Void

    fileprivate init(fire: @escaping () -> Void) {
        self.fire = fire
    }

    /// (Re)arms the timer; an earlier schedule is replaced.
    package func schedule(microseconds: Int64) {
        guard let pointer else { return }
        rc_timer_schedule(pointer, microseconds)
    }

    package func schedule(seconds: Double) { schedule(microseconds: Int64((seconds * 1_000_000).rounded(.up))) }

    package func cancel() {
        if let pointer { rc_timer_cancel(pointer) }
    }

    fileprivate func release() {
        guard let pointer else { return }
        rc_timer_cancel(pointer)
        rc_timer_free(pointer)
        self.pointer = nil
    }
}

/// The headers of a client handshake being written (`LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER`).
package struct HandshakeHeaders {
    let wsi: OpaquePointer
    let cursor: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>
    let end: UnsafeMutablePointer<UInt8>

    /// Adds `name: value`; false when there is no room left.
    package func add(_ name: String, _ value: String) -> Bool {
        "\(name.lowercased()):".withCString { namePointer in
            value.withCString { valuePointer in
                lws_add_http_header_by_name(
                    wsi, UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self),
                    UnsafeRawPointer(valuePointer).assumingMemoryBound(to: UInt8.self),
                    Int32(strlen(valuePointer)), cursor, end) == 0
            }
        }
    }
}
