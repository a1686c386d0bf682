import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform

/// Pushes progress to a Ringcast server from a Swift service, over one WebSocket.
///
/// ```swift
/// let rc = try RingcastClient(url: "http://127.0.0.1:8080", token: ProcessInfo.processInfo.environment["RINGCAST_TOKEN"])
/// try await rc.update("ci.build-42", progress: 0.42, title: "Build 42")
/// try await rc.update("ci.build-42", state: .done)
/// await rc.close()
/// ```
///
/// Three ways to report work, from the plainest: ``update(_:progress:title:detail:state:staleAfter:parent:controls:)``
/// and its overloads (any floating-point fraction, integer unit counts);
/// ``withTask(_:title:parent:staleAfter:cancellable:isolation:_:)``, which ends the task the way a
/// body ends (done, failed, cancelled) and gives it children; ``track(_:as:title:parent:staleAfter:)``,
/// which publishes a Foundation `Progress`. Cancel, pause and resume requests from the dashboard
/// arrive on ``controlRequests``. docs/SWIFT-CLIENT.md shows each in a few lines.
///
/// **What a call awaits.** A call returns once its event is checked (with the server's own
/// validation rules, so a malformed event throws `.invalid` right there) and queued; it suspends
/// only while the queue is full (`maxQueuedEvents` distinct events waiting). `flush()` waits until
/// the server acknowledges that everything queued before it is kept (committed to its storage);
/// `close()` does the same before it closes. Events the server refuses (an unknown task, a token
/// without the pattern) arrive on `errors`.
///
/// **Coalescing.** Updates wait in an ordered map, one slot per task: a burst of updates to a task
/// merges into the latest before it is sent, and keeps the place of the first. `show`, `hide`,
/// timers, `remove` and updates that change `state`, `visible`, `modal` or `hideAfter` are never
/// merged away: an update after one of them starts a new slot, so each task's changes keep their
/// order. A frame carries everything waiting (up to `maxEventsPerFrame`) when the socket can take it.
///
/// **Reconnecting.** The socket connects at once and, when it closes for any reason but `close()`,
/// reconnects after a capped full-jitter back-off (a random delay between 0 and
/// min(`reconnectCap`, `reconnectBase`·2^attempt)). Events queued meanwhile wait and go when it
/// opens (after the server's `hello`); an event already written when a connection dies may be lost
/// (at most once), and a `flush()` waiting for it then throws instead of returning.
public final class RingcastClient: Sendable {
    /// Settings a service rarely needs to change.
    public struct Options: Sendable {
        /// Distinct events (task slots and non-mergeable events) that may wait; calls suspend beyond.
        public var maxQueuedEvents = 10_000
        /// Events in one WebSocket frame (the server takes at most 10 000 per message).
        public var maxEventsPerFrame = 1_000
        /// A frame is closed once it holds this many bytes (the server's default limit is 1 MiB).
        public var maxFrameBytes = 256 * 1024
        /// Seconds: the first reconnect waits up to `reconnectBase`, doubling per failed attempt ...
        public var reconnectBase = 0.25
        /// ... up to `reconnectCap`.
        public var reconnectCap = 10.0
        /// Seconds the end of `withTask` waits for the server to acknowledge the task's final state.
        public var acknowledgementTimeout = 5.0
        /// Seconds between two looks at a tracked `Progress` (see `track`): 0.25 sends at most four
        /// updates a second, none while nothing changes.
        public var trackingInterval = 0.25
        /// A PEM file of the CA(s) to trust for a wss:// server instead of the system's store (or the
        /// file `SSL_CERT_FILE` names); nil takes `RINGCAST_CA_FILE` from the environment, as the
        /// command line does.
        public var caFile: String?
        /// No check of a wss:// server's certificate at all: for a test bench only.
        public var insecure = false

        /// The defaults, each as documented above.
        public init() {}
    }

    /// A task state a publisher may set.
    public enum State: String, Sendable {
        /// Work is going on (the state of a new task).
        case running
        /// Work is held; the dashboard shows it paused.
        case paused
        /// Finished; also sets the progress to 1.
        case done
        /// Ended with an error; say which in `detail`.
        case failed
        /// Ended before it finished, on request.
        case cancelled
    }

    /// What a dashboard may ask of the publisher of a task that offers it (a task says which it
    /// offers with `controls:`). `pause` offered implies `resume`.
    public enum ControlAction: String, Sendable, CaseIterable {
        /// Stop the work for good.
        case cancel
        /// Hold the work until a `resume`.
        case pause
        /// Go on with paused work.
        case resume
    }

    /// A request from the server, on this client's socket, to cancel, pause or resume a task this
    /// client published: `{"type":"control","id":"etl.copy","action":"cancel","seq":812}`.
    public struct ControlRequest: Sendable, Equatable {
        /// The task it is for.
        public var id: String
        /// What is asked.
        public var action: ControlAction
        /// The server's sequence number for the request, when it sent one.
        public var seq: Int?

        /// A request as the server sends it.
        public init(id: String, action: ControlAction, seq: Int? = nil) {
            self.id = id
            self.action = action
            self.seq = seq
        }
    }

    /// Counters since the client was made.
    public struct Statistics: Sendable, Equatable {
        /// Events the calls queued.
        public var accepted = 0
        /// Of those, updates merged into an update of the same task that was still waiting.
        public var coalesced = 0
        /// Events written to a socket (flush messages not counted).
        public var sent = 0
        /// The frames that carried them.
        public var frames = 0
        /// Connections opened (1 plus the reconnects).
        public var connections = 0
    }

    let core: ClientCore

    /// Problems the calls cannot throw: `error` events from the server, and connection failures
    /// (the client keeps reconnecting). One consumer; the newest 256 are kept when nobody reads.
    public var errors: AsyncStream<RingcastClientError> { core.errors }

    /// Cancel, pause and resume requests the server sends for tasks this client published (a task
    /// offers them with `controls:` in `update`; `track` and `withTask` offer theirs and act on them,
    /// and their requests appear here too). One consumer; the newest 256 are kept when nobody reads.
    /// Requests the server sends with an action this client does not know are left out.
    public var controlRequests: AsyncStream<ControlRequest> { core.controlRequests }

    /// Makes a client and starts connecting; calls may be made at once (they wait in the queue).
    ///
    /// - Parameters:
    ///   - url: the server, as `http://HOST:PORT` (or `ws://HOST:PORT/ws`); a path before `/ws` is kept as a prefix.
    ///   - token: a publisher token, sent as `Authorization: Bearer` on the upgrade; nil publishes anonymously
    ///     (allowed from loopback while the server's `anonymousLocalPublish` is on).
    ///   - options: limits and timings, rarely changed.
    /// - Throws: ``RingcastClientError/invalid(code:message:field:)`` for a URL that is not a server's
    ///   or a token with spaces; an error when the client's thread cannot start.
    public init(url: String, token: String? = nil, options: Options = Options()) throws {
        guard let server = ServerURL(url) else {
            throw RingcastClientError.invalid(code: "invalid_url", message: "'\(url)' is not a server URL: use http://HOST:PORT", field: "url")
        }
        var headers: [(String, String)] = []
        if let token, !token.isEmpty {
            guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw RingcastClientError.invalid(code: "invalid_token", message: "a token is printable ASCII without spaces", field: "token")
            }
            headers.append(("Authorization", "Bearer \(token)"))
        }
        var socketURL = server
        // A publish-only socket: the server echoes no task events back, only errors and heartbeats.
        socketURL.path = server.endpoint("/ws") + "?mode=publish"
        core = try ClientCore(url: socketURL, headers: headers, options: options)
        core.start()
    }

    /// Makes a client for a server given as a `URL`; as the initializer that takes the URL as a `String`.
    public convenience init(url: URL, token: String? = nil, options: Options = Options()) throws {
        try self.init(url: url.absoluteString, token: token, options: options)
    }

    deinit { core.abandon() }

    /// Creates or updates a task; only the arguments given change.
    ///
    /// `progress` is a ``ProgressValue``: a fraction literal (`0.42`), `.units(completed:total:)`, or
    /// `.indeterminate` (a spinner). For a computed fraction, the overload that takes any
    /// `BinaryFloatingPoint` applies: `progress: Double(i) / 20`.
    ///
    /// - Parameters:
    ///   - id: the task's id: 1–128 letters, digits, `.`, `_` or `-`, starting with a letter or digit.
    ///   - progress: the new progress; nil leaves it as it is.
    ///   - title: the title the dashboard shows (at most 200 characters).
    ///   - detail: a line under the title (at most 1000 characters).
    ///   - state: a new state; `.done` also sets the progress to 1.
    ///   - staleAfter: a lease in seconds: with no update for that long the task turns `stalled`.
    ///   - parent: the id of the task this one rolls up into (it must exist).
    ///   - controls: the control requests the task takes (`[.cancel]`; `[]`: none): the dashboard
    ///     offers them, and requests arrive on ``controlRequests``. Sent as an event of its own, so
    ///     a server from before control requests refuses only it (once, on `errors`).
    /// - Throws: ``RingcastClientError/invalid(code:message:field:)`` when a value breaks the
    ///   protocol's rules (as the server would refuse it), before anything is sent;
    ///   ``RingcastClientError/closed`` after `close()`.
    public func update(
        _ id: String, progress: ProgressValue? = nil, title: String? = nil, detail: String? = nil,
        state: State? = nil, staleAfter: Double? = nil, parent: String? = nil,
        controls: [ControlAction]? = nil
    ) async throws {
        let fields =
            (progress.map(\.fields) ?? []) + RingcastClient.fields(title: title, detail: detail, state: state, staleAfter: staleAfter, parent: parent)
        try await core.enqueue("update", id, fields, controls: controls)
    }

    /// Creates or updates a task with a fraction from 0 to 1 of any floating-point type:
    /// `progress: Double(i) / 20`, a `Float`, a `CGFloat`. A value outside 0…1 (or NaN) throws
    /// ``RingcastClientError/invalid(code:message:field:)`` before anything is sent. The other
    /// arguments are those of ``update(_:progress:title:detail:state:staleAfter:parent:controls:)``.
    public func update<Fraction: BinaryFloatingPoint>(
        _ id: String, progress: Fraction, title: String? = nil, detail: String? = nil,
        state: State? = nil, staleAfter: Double? = nil, parent: String? = nil,
        controls: [ControlAction]? = nil
    ) async throws {
        try await update(
            id, progress: ProgressValue(progress), title: title, detail: detail, state: state, staleAfter: staleAfter,
            parent: parent, controls: controls)
    }

    /// Creates or updates a task with unit counts of any integer type (`completed: rows, total:
    /// 5_000`); the server derives the fraction and weighs a parent's children by their totals.
    /// `total` nil keeps the total the task has. A negative count or a total of 0 throws
    /// ``RingcastClientError/invalid(code:message:field:)`` before anything is sent. The other
    /// arguments are those of ``update(_:progress:title:detail:state:staleAfter:parent:controls:)``.
    public func update<Count: BinaryInteger>(
        _ id: String, completed: Count, total: Count? = nil, title: String? = nil, detail: String? = nil,
        state: State? = nil, staleAfter: Double? = nil, parent: String? = nil,
        controls: [ControlAction]? = nil
    ) async throws {
        var fields: [(String, JSONValue)] = [("completed", .number(Double(completed)))]
        if let total { fields.append(("total", .number(Double(total)))) }
        fields += RingcastClient.fields(title: title, detail: detail, state: state, staleAfter: staleAfter, parent: parent)
        try await core.enqueue("update", id, fields, controls: controls)
    }

    /// The fields of an update other than its progress, in the order the server checks them.
    static func fields(title: String?, detail: String?, state: State?, staleAfter: Double?, parent: String?) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        if let title { fields.append(("title", .string(title))) }
        if let detail { fields.append(("detail", .string(detail))) }
        if let state { fields.append(("state", .string(state.rawValue))) }
        if let staleAfter { fields.append(("staleAfter", .number(staleAfter))) }
        if let parent { fields.append(("parent", .string(parent))) }
        return fields
    }

    /// Shows a task (creating it if new); with `hideAfter` the server hides it by itself that many seconds later.
    public func show(_ id: String, hideAfter: Double? = nil, modal: Bool = false, detail: String? = nil) async throws {
        var fields: [(String, JSONValue)] = []
        if let hideAfter { fields.append(("hideAfter", .number(hideAfter))) }
        if modal { fields.append(("modal", .bool(true))) }
        if let detail { fields.append(("detail", .string(detail))) }
        try await core.enqueue("show", id, fields)
    }

    /// Hides a task (it must exist), cancelling a pending `hideAfter`.
    public func hide(_ id: String) async throws { try await core.enqueue("hide", id, []) }

    /// Starts (or restarts) a countdown of `seconds` that the server ticks every `interval`.
    public func startTimer(_ id: String, seconds: Double, interval: Double = 1, title: String? = nil, hideAfter: Double? = nil) async throws {
        var fields: [(String, JSONValue)] = [("seconds", .number(seconds)), ("interval", .number(interval))]
        if let title { fields.append(("title", .string(title))) }
        if let hideAfter { fields.append(("hideAfter", .number(hideAfter))) }
        try await core.enqueue("timer", id, fields)
    }

    /// Pauses a running timer: its ticks stop until `resumeTimer`.
    public func pauseTimer(_ id: String) async throws { try await core.enqueue("pause", id, []) }
    /// Resumes a paused timer; every remaining tick moves by the length of the pause.
    public func resumeTimer(_ id: String) async throws { try await core.enqueue("resume", id, []) }
    /// Ends a timer as `cancelled`.
    public func cancelTimer(_ id: String) async throws { try await core.enqueue("cancel", id, []) }
    /// Deletes a task; watchers get a `remove` event.
    public func remove(_ id: String) async throws { try await core.enqueue("remove", id, []) }

    /// Waits until the server has kept every event queued before this call.
    ///
    /// With `durable` (the default) a `flush` message follows the events, and the call returns when
    /// the server's `flushed` answer says everything before it is committed to storage (with
    /// `"storage": "memory"`: applied); errors for those events have arrived on `errors` by then.
    /// With `durable: false` it returns once they have been written to the socket. A server of
    /// protocol 1, which has no acknowledgement, is treated as `durable: false`.
    ///
    /// - Throws: ``RingcastClientError/timedOut`` after `timeout` seconds (nil: no limit);
    ///   ``RingcastClientError/connection(_:)`` when the connection closed before the server
    ///   acknowledged what was written on it (it may be lost; later flushes answer for what follows);
    ///   ``RingcastClientError/closed`` when the client closes.
    public func flush(durable: Bool = true, timeout: Double? = nil) async throws {
        try await core.flush(durable: durable, timeout: timeout)
    }

    /// Sends what is queued and waits for the server to acknowledge it as kept (at most `timeout`
    /// seconds in all, a connection included), closes the socket and stops the client's thread.
    /// Later calls throw `.closed`.
    public func close(timeout: Double = 5) async { await core.close(timeout: timeout) }

    /// Whether a connection is open and the server has greeted it.
    public var isConnected: Bool { core.isConnected }
    /// The counters so far.
    public var statistics: Statistics { core.statistics }

    /// Calls suspended until the queue has room (`maxQueuedEvents` distinct events wait): for this
    /// package's tests, which wait on it instead of sleeping.
    package var callsWaitingForSpace: Int { core.callsWaitingForSpace }
}

/// What went wrong, thrown by a call or delivered on `errors`.
public enum RingcastClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Refused before sending: the event breaks the protocol's rules (code and field as the server would say).
    case invalid(code: String, message: String, field: String?)
    /// An `error` event from the server: an event it refused after it was sent.
    case server(code: String, message: String, field: String?)
    /// The socket failed or closed; the client is reconnecting. Thrown by a `flush()` whose
    /// connection closed before the server acknowledged what was written on it.
    case connection(String)
    /// A `flush` (or the end of `withTask`) waited longer than its timeout.
    case timedOut
    /// The client is closed: `close()` was called.
    case closed

    /// The code and message, as a log line would print them.
    public var description: String {
        switch self {
        case .invalid(let code, let message, _), .server(let code, let message, _): return "\(code): \(message)"
        case .connection(let message): return "connection: \(message)"
        case .timedOut: return "timed out"
        case .closed: return "the client is closed"
        }
    }
}

extension ServerURL {
    /// The path before the API: "" for `http://host:port`, `/prefix` for `http://host/prefix` (a
    /// reverse proxy), also when the URL given was the WebSocket's `…/ws`.
    package var basePath: String {
        var base = Substring(path.prefix { $0 != "?" })
        while base.hasSuffix("/") { base = base.dropLast() }
        if base.hasSuffix("/ws") { base = base.dropLast(3) }
        return String(base)
    }

    /// `/api/tasks` under the base path.
    package func endpoint(_ path: String) -> String { basePath + path }
}
