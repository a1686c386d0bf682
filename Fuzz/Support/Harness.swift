import RingcastCore
import RingcastCrypto

// What every fuzz target shares: how an input is read, the server state it runs against, and the
// invariants every answer and event must keep. A broken invariant stops the run with a message;
// libFuzzer keeps the input that broke it (see docs/FUZZING.md).

/// libFuzzer calls this once before the first input: the core's hashes and token checks need the
/// process's Cryptography, as the executable installs it.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: OpaquePointer?) -> CInt {
    Crypto.install(LibCrypto())
    return 0
}

/// Stops the run as a finding when `condition` does not hold.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("invariant broken: \(message())") }
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// The test clock's start: every target counts from here.
let t0: Double = 1_700_000_000_000

/// An input of several steps: the parts between lines that hold only `---`.
func steps(_ input: [UInt8]) -> [[UInt8]] {
    var parts: [[UInt8]] = [[]]
    var lineStart = 0
    var index = 0
    while index <= input.count {
        if index == input.count || input[index] == 0x0A {
            let line = input[lineStart..<index]
            if line.elementsEqual("---".utf8) {
                if parts[parts.count - 1].last == 0x0A { parts[parts.count - 1].removeLast() }
                parts.append([])
            } else {
                parts[parts.count - 1] += line
                if index < input.count { parts[parts.count - 1].append(0x0A) }
            }
            lineStart = index + 1
        }
        index += 1
    }
    return parts
}

/// A request as an input spells it: `METHOD /path?query`, header lines, a blank line, the body.
/// Headers the API reads: Host, Origin, Authorization, Content-Type, Accept, If-None-Match, Cookie;
/// `X-Remote: 1` sends it from another machine and `X-Too-Large: 1` says the transport stopped
/// collecting the body at maxMessageBytes. `Content-Length`, `Transfer-Encoding` (chunks decoded as
/// the server decodes them) or `X-No-Length: 1` (neither) frame the body as the transport would;
/// without any of them the body is what follows the blank line.
struct FuzzRequest {
    var request: APIRequest

    init(_ input: [UInt8]) {
        let lines = input.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false)
        let requestLine = text(Array(lines.first ?? []))
        let space = requestLine.firstIndex(of: " ")
        let method = space.map { String(requestLine[..<$0]) } ?? requestLine
        let target = space.map { String(requestLine[requestLine.index(after: $0)...]) } ?? "/"
        let question = target.firstIndex(of: "?")
        let path = question.map { String(target[..<$0]) } ?? target
        let query = question.map { parseQuery(String(target[target.index(after: $0)...])) } ?? [:]
        var request = APIRequest(method: method, path: path, query: query)
        var rest = lines.count > 1 ? Array(lines[1]) : []
        var framing: (contentLength: String?, transferEncoding: String?, noLength: Bool) = (nil, nil, false)
        while !rest.isEmpty {
            let split = rest.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false)
            let line = text(Array(split[0]))
            rest = split.count > 1 ? Array(split[1]) : []
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = String(line[line.index(after: colon)...].drop { $0 == " " })
            switch name {
            case "host": request.headers.host = value
            case "origin": request.headers.origin = value
            case "authorization": request.headers.authorization = value
            case "content-type": request.headers.contentType = value
            case "accept": request.headers.accept = value
            case "if-none-match": request.headers.ifNoneMatch = value
            case "cookie": request.headers.cookie = value
            case "x-remote": request.fromLoopback = value != "1"
            case "x-too-large": request.bodyTooLarge = value == "1"
            case "content-length": framing.contentLength = value
            case "transfer-encoding": framing.transferEncoding = value
            case "x-no-length": framing.noLength = value == "1"
            default: break
            }
        }
        request.body = rest
        if framing.contentLength != nil || framing.transferEncoding != nil || framing.noLength { FuzzRequest.frame(&request, framing) }
        self.request = request
    }

    /// The body as the transport reads it by its framing (RequestFraming): so many bytes, decoded
    /// chunks, or none; a framing it refuses is the request's answer.
    private static func frame(_ request: inout APIRequest, _ framing: (contentLength: String?, transferEncoding: String?, noLength: Bool)) {
        let sent = request.body
        request.body = []
        do throws(APIError) {
            switch try RequestFraming.decide(
                method: request.method, contentLength: framing.contentLength, transferEncoding: framing.transferEncoding, version: "HTTP/1.1")
            {
            case .absent: request.bodyIsAbsent = RequestFraming.methodsWithBodies.contains(request.method)
            case .length(let length):
                if length > fixtureMaxMessageBytes { request.bodyTooLarge = true } else { request.body = Array(sent.prefix(length)) }
            case .chunked:
                var decoder = ChunkedBodyDecoder(maxBodyBytes: fixtureMaxMessageBytes)
                decoder.append(sent)
                do throws(ChunkedBodyError) {
                    let body = try decoder.next(closed: true)
                    expect(body != nil, "a chunked body neither ended nor failed with nothing more to come")
                    expect((body?.count ?? 0) <= fixtureMaxMessageBytes, "a decoded body past the cap")
                    request.body = body ?? []
                } catch {
                    request.refuseChunkedBody(error)
                }
            }
        } catch {
            request.bodyRefusal = error
        }
    }
}

/// `a=b&c=d` as the transport hands it over: split on `&`, then at the first `=`, as bytes (as
/// `LWSConnection.queryArguments` does); a repeated name keeps its last value.
func parseQuery(_ query: String) -> [String: String] {
    var arguments: [String: String] = [:]
    for fragment in query.utf8.split(separator: UInt8(ascii: "&")) {
        if let equals = fragment.firstIndex(of: UInt8(ascii: "=")) {
            arguments[text(Array(fragment[..<equals]))] = text(Array(fragment[fragment.index(after: equals)...]))
        } else {
            arguments[text(Array(fragment))] = ""
        }
    }
    return arguments
}

/// The token of the fixture's one publisher, who may change `ci.*`.
let publisherToken = "fuzz-token-ci-0123456789"

/// How many lines of a task's log the fixture keeps: few, so a log is cut within one input.
let fixtureLogLines = 8

/// The fixture's maxMessageBytes: small, so a chunked body passes it within one input.
let fixtureMaxMessageBytes = 2048

/// A server's state with a task of each kind: a parent with children, a shown modal task with a
/// hideAt, a running timer and a cancelled one. ci.build offers every control, has a log, a lease
/// and its own abandonAfter, so it stalls and is abandoned within one input; ci.lint has a cancel
/// request waiting for its publisher. The kind ci.test has three finished runs (2, 3 and 4 s), so
/// ci.test-4, running since t0, expects 3 s and turns slow 4 s in. Loopback may publish anonymously.
func fixture() -> API {
    var config = ServerConfig()
    config.allowedOrigins = ["https://allowed.example"]
    config.access = AccessPolicy(publishers: [.publisher(name: "ci", token: publisherToken, patterns: WatchSet([Glob("ci.*")]))])
    config.logLines = fixtureLogLines
    config.maxMessageBytes = fixtureMaxMessageBytes
    let api = API(store: TaskStore(epoch: "fuzzepoch001"), config: config)
    for (method, path, body) in [
        ("POST", "/api/tasks/ci", #"{"title":"CI"}"#),
        (
            "POST", "/api/tasks/ci.build",
            #"{"title":"Build","completed":5,"total":10,"parent":"ci","staleAfter":2,"controls":["cancel","pause","resume"],"abandonAfter":5}"#
        ),
        ("POST", "/api/tasks/ci.build/log", #"{"lines":["compiling a.c","compiling b.c"]}"#),
        ("POST", "/api/tasks/ci.lint", #"{"parent":"ci","detail":"waiting","controls":["cancel"]}"#),
        ("POST", "/api/tasks/ci.lint/cancel", ""),
        ("POST", "/api/tasks/save/show", #"{"hideAfter":3,"modal":true,"detail":"Saving"}"#),
        ("POST", "/api/timers/tea", #"{"seconds":5,"interval":1,"title":"Tea"}"#),
        ("POST", "/api/timers/egg", #"{"seconds":60,"hideAfter":1}"#),
        ("POST", "/api/timers/egg/cancel", ""),
    ] {
        let response = api.handle(APIRequest(method: method, path: path, body: Array(body.utf8)), now: t0)
        expect(response.status == 200, "fixture \(path): \(text(response.body))")
    }
    for (run, seconds) in [(1, 2.0), (2, 3.0), (3, 4.0)] {
        let path = "/api/tasks/ci.test-\(run)"
        let started = t0 - 60_000 + 10_000 * Double(run)
        for (body, now) in [(#"{"title":"Test","kind":"ci.test","progress":0}"#, started), (#"{"state":"done"}"#, started + seconds * 1000)] {
            let response = api.handle(APIRequest(method: "POST", path: path, body: Array(body.utf8)), now: now)
            expect(response.status == 200, "fixture \(path): \(text(response.body))")
        }
    }
    let running = api.handle(
        APIRequest(method: "POST", path: "/api/tasks/ci.test-4", body: Array(#"{"title":"Test 4","parent":"ci"}"#.utf8)), now: t0)
    expect(running.status == 200 && api.store.task("ci.test-4")?.expectedSeconds == 3, "fixture ci.test-4: \(text(running.body))")
    return api
}

nonisolated(unsafe) let validator = SchemaValidator()

func parseJSON(_ bytes: [UInt8], _ what: @autoclosure () -> String) -> JSONValue {
    do {
        return try JSONParser.parse(bytes)
    } catch {
        fatalError("invariant broken: \(what()) is not JSON (\(error)): \(text(bytes).prefix(400))")
    }
}

func conforms(_ value: JSONValue, to schemaName: String, _ what: @autoclosure () -> String) {
    guard let schema = validator.component(schemaName) else { fatalError("no schema \(schemaName)") }
    if let violation = validator.violation(of: value, against: schema) {
        fatalError("invariant broken: \(what()) breaks \(schemaName): \(violation): \(text(JSONWriter.encode(value)).prefix(400))")
    }
}

func members(_ value: JSONValue) -> [(String, JSONValue)] {
    if case .object(let members) = value { return members }
    return []
}

/// Events of one change: numbered in order from the seq before it, each JSON that says its type and
/// id, and each task event carrying a whole task object the document describes.
func checkEvents(_ events: [OutboundEvent], after seqBefore: UInt64, store: TaskStore, _ what: String) {
    expect(store.seq == seqBefore + UInt64(events.count), "\(what): seq went from \(seqBefore) to \(store.seq) with \(events.count) events")
    for (offset, event) in events.enumerated() {
        expect(event.seq == seqBefore + UInt64(offset) + 1, "\(what): event \(offset) has seq \(event.seq) after \(seqBefore)")
        let json = parseJSON(event.bytes, "\(what): event \(offset)")
        expect(json["type"] == .string(event.type.rawValue), "\(what): event type \(String(describing: json["type"])) is not \(event.type)")
        expect(json["id"] == .string(event.id), "\(what): event id")
        if event.type == .remove {
            let names = members(json).map(\.0)
            expect(names == ["type", "seq", "id"] || names == ["type", "seq", "id", "by"], "\(what): a remove event is {type, seq, id, by?}")
            continue
        }
        let extra: Set<String> =
            event.type == .tick ? ["type", "remaining", "elapsed", "now"] : event.type == .log ? ["type", "from", "lines"] : ["type"]
        conforms(.object(members(json).filter { !extra.contains($0.0) }), to: "Task", "\(what): \(event.type) event")
        if event.type == .log {
            // The lines kept of those appended, numbered from `from`: together they end at logCount.
            guard case .number(let from)? = json["from"], case .array(let lines)? = json["lines"], case .number(let count)? = json["logCount"] else {
                fatalError("invariant broken: \(what): a log event without from, lines and logCount")
            }
            expect(from >= 0 && from + Double(lines.count) == count, "\(what): a log event from \(from) with \(lines.count) lines of \(count)")
            expect(!lines.isEmpty && lines.count <= store.logLines, "\(what): a log event with \(lines.count) lines")
            conforms(
                .object([("id", .string(event.id)), ("logCount", .number(count)), ("from", .number(from)), ("lines", .array(lines))]),
                to: "LogTail", "\(what): a log event's lines")
        }
    }
}

/// What every task of a store keeps true whatever it was sent: a finished task has no request
/// waiting, a log keeps at most logLines of the lines it counts, and no stalled task is past its
/// abandonment once deadlines have run. (A request may outlive the offer of its control: a
/// publisher that drops `controls` has still been asked, and answers by publishing a state.)
func checkTasks(_ store: TaskStore, now: Double, _ what: String) {
    for (id, task) in store.tasks {
        if task.state.isTerminal { expect(!task.cancelRequested && !task.pauseRequested, "\(what): finished \(id) has a request waiting") }
        // ETA from history: a finished task is never slow; a timer knows its length; a kind is spelled like an id.
        expect(!(task.slow && task.state.isTerminal), "\(what): finished \(id) is slow")
        if task.timer != nil { expect(task.expectedSeconds == nil && !task.slow, "\(what): timer \(id) takes an expectation from history") }
        if let kind = task.kind { expect(TaskID.isValid(kind), "\(what): \(id)'s kind \(kind)") }
        if let expected = task.expectedSeconds { expect(expected >= 0 && expected.isFinite, "\(what): \(id) expects \(expected) s") }
        if let eta = task.eta { expect(eta >= 0 && eta.isFinite, "\(what): \(id)'s eta \(eta)") }
        expect(Set(task.controls).count == task.controls.count, "\(what): \(id) offers a control twice")
        let log = store.log(of: id)
        expect(
            log?.count == task.logCount && (log?.lines.count ?? 0) == min(task.logCount, store.logLines),
            "\(what): \(id)'s log keeps \(log?.lines.count ?? -1) lines of \(task.logCount)")
        if task.state == .stalled {
            let seconds = task.abandonAfter ?? store.abandonAfterSeconds
            expect(task.stalledAt != nil, "\(what): stalled \(id) does not say since when")
            if seconds > 0, let stalledAt = task.stalledAt {
                expect(stalledAt + seconds * 1000 > now, "\(what): \(id) stalled at \(stalledAt) is past its abandonment (\(seconds) s) at \(now)")
            }
        } else {
            expect(task.stalledAt == nil, "\(what): \(id) is \(task.state) but says it stalled")
        }
    }
}

/// What the history keeps: at most maxKinds kinds of at most runsKept runs each, none empty.
func checkHistory(_ store: TaskStore, _ what: String) {
    expect(store.history.kinds.count <= KindHistory.maxKinds, "\(what): \(store.history.kinds.count) kinds")
    for (kind, runs) in store.history.kinds {
        expect(
            !runs.seconds.isEmpty && runs.seconds.count <= KindHistory.runsKept && runs.seconds.allSatisfy { $0 >= 0 },
            "\(what): kind \(kind) keeps \(runs.seconds)")
    }
}

/// Every error body, wherever it comes from, is exactly `{"error", "message", "field"}` with a known code.
func checkErrorBody(_ body: [UInt8], status: Int, _ what: String) {
    let json = parseJSON(body, "\(what): error body")
    conforms(json, to: "Error", what)
    if case .string(let code)? = json["error"] {
        expect(APIError.Code(rawValue: code)?.status == status, "\(what): \(code) answered with \(status)")
    }
}

/// The answer conforms to the document: for a documented operation, a documented status whose schema
/// takes the body; for anything else, the answers an undocumented route may get.
func checkAnswer(_ request: APIRequest, _ response: APIResponse, _ what: String) {
    if response.status >= 400 { checkErrorBody(response.body, status: response.status, what) }
    // The sign-in's routes are the server's to answer (ProviderSignIn): to the API they are no endpoint.
    let answeredByAPI = Routes.match(request.path)?.route.handler.isSignIn != true
    guard answeredByAPI, let (template, operation) = OpenAPI.operation(method: request.method, path: request.path) else {
        let json = parseJSON(response.body, "\(what): answer")
        let code = json["error"]?.stringValueForFuzz ?? "none"
        // Before routing: the transport's body limit, the Origin check and, for a change, the token.
        // A documented path with another method: 405, or invalid_id when the id is checked first.
        // (Under /badge/, a path that names no {id}.svg is not_found like any other.)
        let allowed = [
            "misdirected_request", "body_too_large", "forbidden", "unauthorized", "not_found", "method_not_allowed", "invalid_id", "invalid_request",
            "not_implemented",
        ]
        expect(
            response.status >= 400 && allowed.contains(code),
            "\(what): undocumented \(request.method) \(request.path) answered \(response.status) \(code)")
        if code == "not_found" { expect(json["field"] == .null, "\(what): no endpoint names no field") }
        if response.status == 405 {
            let allow = response.headers.filter { $0.0 == "allow:" }.map(\.1)
            expect(allow.count == 1 && allow.first == OpenAPI.allowedMethods(path: request.path), "\(what): a 405 with Allow \(allow)")
        }
        if code == "invalid_id" {
            expect(request.path.hasPrefix("/api/tasks/") || request.path.hasPrefix("/api/timers/"), "\(what): invalid_id off an id path")
        }
        return
    }
    guard let answer = operation["responses"]?[String(response.status)] else {
        fatalError(
            "invariant broken: \(what): \(request.method) \(template) answered \(response.status), which the document does not list: \(text(response.body).prefix(300))"
        )
    }
    if case .object(let headers)? = answer["headers"] {
        for (name, header) in headers {
            // cache-control is the answer's own field; the transport writes it with the others.
            let sent =
                name.lowercased() == "cache-control" ? [response.cacheControl] : response.headers.filter { $0.0 == name.lowercased() + ":" }.map(\.1)
            expect(sent.count == 1, "\(what): header \(name) sent \(sent.count) times")
            if let violation = validator.violation(of: .string(sent[0]), against: header["schema"] ?? .null) {
                fatalError("invariant broken: \(what): header \(name): \(violation)")
            }
        }
    }
    guard case .object(let content)? = answer["content"] else {
        expect(response.body.isEmpty, "\(what): \(response.status) has a body where the document names none")
        return
    }
    guard let (mediaType, media) = content.first(where: { response.contentType.hasPrefix($0.0) }) else {
        fatalError("invariant broken: \(what): content type \(response.contentType), documented \(content.map(\.0))")
    }
    let body: JSONValue = mediaType == "application/json" ? parseJSON(response.body, "\(what): answer") : .string(text(response.body))
    if let violation = validator.violation(of: body, against: media["schema"] ?? .null) {
        fatalError(
            "invariant broken: \(what): \(request.method) \(template) \(response.status) breaks the document: \(violation): \(text(response.body).prefix(400))"
        )
    }
}

extension JSONValue {
    var stringValueForFuzz: String? { if case .string(let text) = self { return text } else { return nil } }
}
