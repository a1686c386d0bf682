import RingcastCore

/// Whole HTTP requests through API.handle, several to an input (`---` between them), against a server
/// state with a task of each kind, the clock moving 700 ms a request and the server's deadlines run
/// in between. Every answer must be one the OpenAPI document gives; a refused request or a read
/// changes nothing; a change numbers its events from the seq before it; every task keeps what
/// checkTasks says. A log appended counts its lines and answers as GET /api/tasks/{id}/log then
/// reads it; a control request marks the task without changing its state, and tells no socket (there
/// is none here). A text table fits its width and holds no control character, a row a task; a badge
/// holds no control character, script or style, and its ETag sent back is a 304.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let api = fixture()
    for (index, step) in steps(bytes(data, size)).prefix(16).enumerated() {
        let now = t0 + 700 * Double(index + 1)
        let seqBeforeDeadlines = api.store.seq
        checkEvents(api.store.runDue(now: now), after: seqBeforeDeadlines, store: api.store, "deadlines before request \(index)")
        checkTasks(api.store, now: now, "deadlines before request \(index)")

        let request = FuzzRequest(step).request
        let (seq, tasks) = (api.store.seq, api.store.tasks)
        let response = api.handle(request, now: now)
        let what = "request \(index) (\(request.method) \(request.path))"
        checkAnswer(request, response, what)
        if response.status == 200, response.contentType.hasPrefix("text/plain"), request.path.hasPrefix("/api/tasks") {
            checkTable(request, response, api: api, what)
        }
        if response.status == 200, response.contentType == Badge.contentType { checkBadge(request, response, api: api, now: now, what) }
        // Signing in or out, and a CORS preflight, change no task: like reads.
        let touchesNoTask = request.method == "GET" || request.method == "OPTIONS" || request.path == "/api/session"
        if response.status >= 400 || touchesNoTask {
            expect(api.store.seq == seq && api.store.tasks == tasks, "\(what): a refusal, a read or a sign-in changed the state")
            expect(response.events.isEmpty, "\(what): a refusal or a read published events")
        } else {
            checkEvents(response.events, after: seq, store: api.store, what)
            if request.path != "/api/events" { expect(!response.events.isEmpty, "\(what): a change published nothing") }
            checkLoopAnswer(request, response, before: tasks, api: api, now: now, what)
        }
        checkTasks(api.store, now: now, what)
        checkHistory(api.store, what)
    }
    let list = api.handle(APIRequest(method: "GET", path: "/api/tasks"), now: t0 + 60_000)
    checkAnswer(APIRequest(method: "GET", path: "/api/tasks"), list, "the final list")
    let count = parseJSON(list.body, "the final list")["tasks"].map { if case .array(let tasks) = $0 { tasks.count } else { -1 } }
    expect(count == api.store.tasks.count, "the list holds \(count ?? -1) of \(api.store.tasks.count) tasks")
    return 0
}

/// What an accepted log or control request did to its task.
private func checkLoopAnswer(_ request: APIRequest, _ response: APIResponse, before: [String: TaskRecord], api: API, now: Double, _ what: String) {
    let parts = request.path.split(separator: "/").map(String.init)
    guard parts.count == 4, parts[0] == "api", parts[1] == "tasks", let task = api.store.task(parts[2]), let old = before[parts[2]] else { return }
    let answer = parseJSON(response.body, "\(what): answer")
    switch parts[3] {
    case "log":
        expect(task.logCount > old.logCount, "\(what): a log of \(task.logCount) lines after \(old.logCount)")
        expect(response.events.last?.type == .log, "\(what): no log event")
        let read = api.handle(APIRequest(method: "GET", path: request.path), now: now)
        checkAnswer(APIRequest(method: "GET", path: request.path), read, "\(what): reading it back")
        let tail = parseJSON(read.body, "\(what): the tail")
        let kept = api.store.log(of: task.id)
        expect(
            tail["logCount"] == .number(Double(task.logCount)) && tail["lines"] == .array((kept?.lines ?? []).map(JSONValue.string)),
            "\(what): GET answers another log than the store's")
    case "cancel", "pause", "resume":
        expect(task.state == old.state, "\(what): a control request changed the state from \(old.state) to \(task.state)")
        expect(answer["delivered"] == .number(0) && response.controls.isEmpty, "\(what): delivered to a socket that is not there")
        expect(response.events.map(\.type) == [.state], "\(what): a control request's events are \(response.events.map(\.type))")
        switch parts[3] {
        case "cancel": expect(task.cancelRequested && task.pauseRequested == old.pauseRequested, "\(what): cancel did not mark cancelRequested alone")
        case "pause":
            expect(
                task.pauseRequested && old.state != .paused && task.cancelRequested == old.cancelRequested,
                "\(what): pause did not mark pauseRequested alone")
        default:
            expect(
                !task.pauseRequested && (old.pauseRequested || old.state == .paused), "\(what): resume of a task neither paused nor asked to pause")
        }
    default:
        return
    }
}

/// A text table: every line within its width (as a terminal counts), no control character or
/// bidirectional override, and a last line that counts the rows above it.
private func checkTable(_ request: APIRequest, _ response: APIResponse, api: API, _ what: String) {
    let width = request.query["width"].flatMap { Int($0) } ?? TextTable.defaultWidth
    let table = text(response.body)
    expect(table.hasSuffix("\n"), "\(what): the table does not end its last line")
    let lines = table.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    expect(lines.count >= 2, "\(what): a table of \(lines.count) lines")
    for line in lines {
        expect(
            TerminalText.columns(of: line) <= width, "\(what): a line of \(TerminalText.columns(of: line)) columns in a table \(width) wide: \(line)")
        for scalar in line.unicodeScalars {
            let value = scalar.value
            expect(
                value >= 0x20 && !(0x7F..<0xA0).contains(value) && !(0x202A...0x202E).contains(value) && !(0x2066...0x2069).contains(value),
                "\(what): U+\(String(value, radix: 16)) in a table line")
        }
    }
    let rows = lines.count - 2
    expect(lines.last!.hasPrefix(rows == 1 ? "1 task" : "\(rows) tasks"), "\(what): \(rows) rows counted as '\(lines.last!)'")
    if request.path == "/api/tasks", (request.query["watch"] ?? "").isEmpty {
        // Every task the request may read, and no other (a token's patterns, or anonymousRead's).
        let scope = (try? api.policy.readScope(api.identify(request, now: t0))) ?? .nothing
        let readable = api.store.tasks.keys.filter { scope.allows($0) }.count
        expect(rows == readable, "\(what): \(rows) rows for \(readable) tasks it may read")
    }
}

/// A badge: SVG text with no control character but line ends, no script and no style attribute; its
/// ETag sent back gets a 304 without a body and the same tag.
private func checkBadge(_ request: APIRequest, _ response: APIResponse, api: API, now: Double, _ what: String) {
    let svg = text(response.body)
    expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.hasSuffix("</svg>\n"), "\(what): not an SVG: \(svg.prefix(80))")
    expect(!svg.contains("<script") && !svg.contains("style="), "\(what): a script or style in a badge")
    expect(svg.unicodeScalars.allSatisfy { $0.value >= 0x20 || $0 == "\n" }, "\(what): a control character in a badge")
    let tag = response.headers.first { $0.0 == "etag:" }?.1
    var again = request
    again.headers.ifNoneMatch = tag
    let cached = api.handle(again, now: now)
    expect(
        cached.status == 304 && cached.body.isEmpty && cached.headers.first { $0.0 == "etag:" }?.1 == tag,
        "\(what): its ETag \(tag ?? "none") sent back answered \(cached.status)")
}
