import CLibWebSockets
import CRingcastShims
import Foundation
import RingcastCore
import RingcastPlatform

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
    var vhosts: [OpaquePointer] = []
    /// Each server vhost's OpenSSL context, as lws hands it over while it makes the vhost
    /// (`LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS`): lws 4.1.6 has no accessor for it,
    /// and `replaceCertificate` loads a renewed certificate into it (service thread). lws's own
    /// `lws_tls_cert_updated` does the same for vhosts made with the very same paths, but returns
    /// 0 whatever happened (lib/tls/tls.c, in later releases too), so a key that does not load would
    /// leave new handshakes failing unseen; here each step's result is checked.
    var serverTLSContexts: [OpaquePointer] = []
    /// lws connections each context holds now (`WSI_CREATE` to `WSI_DESTROY`; adopted listeners too),
    /// by the index of its context (service thread).
    @exclusivity(unchecked) private var heldByContext: [Int] = []
    /// `ContextSettings.descriptorRange`, or what it defaults to (service thread).
    var descriptorRange = Int.max
    private var boundPort = 0
    private var jobs: [@Sendable () -> Void] = []
    private var notified = false

    /// Held strongly while the loop runs; `dispatch` reads the unretained copy beside it, since
    /// that runs for every callback and the strong one keeps it alive.
    @exclusivity(unchecked) var handler: ServiceHandler? { didSet { borrowedHandler = handler } }
    @exclusivity(unchecked) unowned(unsafe) var borrowedHandler: ServiceHandler?
    /// The context's one protocol, which adopted listeners are bound to.
    var protocolName = ""
    /// `ContextSettings.staticFileHeaders`, for `LWS_CALLBACK_ADD_HEADERS`.
    @exclusivity(unchecked) private var staticFileHeaders: [(String, String)] = []
    /// The listening sockets adopted into this context, by the identity of their raw connection.
    @exclusivity(unchecked) var listeners: [Int: ListeningSocket] = [:]
    /// Whether accepting is paused (`pauseAccepting`), and the listeners whose polling is off meanwhile.
    @exclusivity(unchecked) var acceptingPaused = false
    @exclusivity(unchecked) var unpolledListeners: [Int: OpaquePointer] = [:]
    @exclusivity(unchecked) var acceptRetryTimer: LoopTimer?
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
