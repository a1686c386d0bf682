import RingcastCore

/// A WebSocket's messages through API.receive. The first step is the upgrade (`GET /ws?query` and
/// headers, as in the http target); each later step is one message (`TOO LARGE` stands for one over
/// maxMessageBytes), or `CONTROL ACTION ID`, a watcher's `POST /api/tasks/ID/ACTION` on another
/// connection. Every frame the sender gets is JSON — an `auth` reply, a `flushed`, a `control` for a
/// task it published, or an error event with the protocol's body — every refused event gets its own
/// error, and what is refused changes nothing. A control request reaches this socket exactly when it
/// published the task. When the socket closes, the running leased tasks it alone published stall.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSocket(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let parts = steps(bytes(data, size))
    let api = fixture()
    let upgrade = FuzzRequest(parts[0]).request
    let socketRequest: SocketRequest
    switch SocketRequest.parse(upgrade.query) {
    case .success(let parsed): socketRequest = parsed
    case .failure(let error):
        checkFrame(api.refusalFrame(error), "the refusal")
        return 0
    }
    let opened = api.openSocket(socketRequest, headers: upgrade.headers, fromLoopback: upgrade.fromLoopback, now: t0)
    var session = opened.session
    let sink = FrameSink()
    api.socketOpened(session, sink: sink)
    for frame in opened.frames { _ = parseJSON(frame, "an opening frame") }
    var published: Set<String> = []
    for (index, step) in parts.dropFirst().prefix(16).enumerated() {
        let now = t0 + 500 * Double(index + 1)
        let what = "message \(index)"
        if step.starts(with: "CONTROL ".utf8) {
            control(String(decoding: step.dropFirst(8), as: UTF8.self), api: api, sink: sink, published: published, now: now, what)
            continue
        }
        let message: SocketMessage = step.elementsEqual("TOO LARGE".utf8) ? .tooLarge : .text(step)
        let (seq, tasks) = (api.store.seq, api.store.tasks)
        let reply = api.receive(message, on: &session, now: now)
        for frame in reply.frames { checkFrame(frame, what) }
        checkEvents(reply.events, after: seq, store: api.store, what)
        checkTasks(api.store, now: now, what)
        let json = try? JSONParser.parse(step)
        let items: Int
        switch json {
        case .none: items = 1
        case .array(let elements)?: items = elements.count
        case .some(let value): items = value["type"] == .string("auth") || value["type"] == .string("flush") ? 0 : 1
        }
        let errors = reply.frames.filter { (try? JSONParser.parse($0))?["type"] == .string("error") }.count
        expect(errors <= max(items, 1), "\(what): \(errors) errors for \(items) events")
        if items > 0, errors == items {
            expect(api.store.seq == seq && api.store.tasks == tasks && reply.events.isEmpty, "\(what): refused events changed the state")
        }
        // A request waiting on a task this socket publishes for the first time reaches it at once.
        for frame in reply.frames.compactMap({ try? JSONParser.parse($0) }) where frame["type"] == .string("control") {
            guard case .string(let id)? = frame["id"], case .string(let action)? = frame["action"] else { continue }
            let waiting = action == "cancel" ? tasks[id]?.cancelRequested : action == "pause" ? tasks[id]?.pauseRequested : nil
            expect(!published.contains(id) && waiting == true, "\(what): a \(action) frame for \(id), which it published before or had none waiting")
        }
        for (id, publishes) in applied(json, reply.frames) {
            if publishes { published.insert(id) } else { published.remove(id) }
        }
    }
    // The socket closes: what it alone published that runs with a lease stalls now.
    let seq = api.store.seq
    let closing = api.socketClosed(session, now: t0 + 9000)
    checkEvents(closing, after: seq, store: api.store, "the close")
    for event in closing {
        expect(event.type == .state && api.store.task(event.id)?.state == .stalled, "the close: \(event.type) for \(event.id)")
    }
    return 0
}

/// `CONTROL cancel ci.build`: the request as a watcher makes it over HTTP. Delivered to this socket
/// (`delivered: 1`, one frame naming the task, the action and the change's seq) exactly when the
/// socket has published the task; refused or answered as the document says.
private func control(_ line: String, api: API, sink: FrameSink, published: Set<String>, now: Double, _ what: String) {
    let words = line.split(separator: " ", maxSplits: 1).map(String.init)
    guard words.count == 2 else { return }
    let request = APIRequest(method: "POST", path: "/api/tasks/\(words[1])/\(words[0])")
    let response = api.handle(request, now: now)
    checkAnswer(request, response, "\(what): \(line)")
    sink.frames = []
    for delivery in response.controls { delivery.send() }
    guard response.status == 200 else {
        expect(sink.frames.isEmpty, "\(what): a refused request was delivered")
        return
    }
    let answer = parseJSON(response.body, "\(what): the answer")
    let expected = published.contains(words[1]) ? 1 : 0
    expect(
        answer["delivered"] == .number(Double(expected)) && sink.frames.count == expected,
        "\(what): \(line) delivered \(sink.frames.count), answered \(String(describing: answer["delivered"])), published \(expected)")
    for frame in sink.frames {
        checkFrame(frame, what)
        let json = parseJSON(frame, "\(what): the control frame")
        expect(
            json["id"] == .string(words[1]) && json["action"] == .string(words[0]) && json["seq"] == .number(Double(api.store.seq)),
            "\(what): the frame \(text(frame))")
    }
}

/// The events of a message that applied, in order: each names its task and whether the socket now
/// publishes it (a remove forgets it). An event applied unless an error frame names its place (in a
/// batch, `events[N]…`; alone, any error).
private func applied(_ json: JSONValue?, _ frames: [[UInt8]]) -> [(String, Bool)] {
    guard let json, json["type"] != .string("auth"), json["type"] != .string("flush") else { return [] }
    let items: [JSONValue]
    if case .array(let elements) = json { items = elements } else { items = [json] }
    var failed: Set<Int> = []
    for frame in frames {
        guard let error = try? JSONParser.parse(frame), error["type"] == .string("error") else { continue }
        guard items.count > 1 else {
            failed.insert(0)
            continue
        }
        if case .string(let field)? = error["field"], field.hasPrefix("events["), let index = Int(field.dropFirst(7).prefix { $0 != "]" }) {
            failed.insert(index)
        }
    }
    return items.enumerated().compactMap { index, item in
        guard !failed.contains(index), case .string(let id)? = item["id"] else { return nil }
        return (id, item["type"] != .string("remove"))
    }
}

/// The control frames the API hands this socket's sink.
private final class FrameSink: ControlSink, @unchecked Sendable {
    // @unchecked Sendable: one fuzz input runs on one thread.
    var frames: [[UInt8]] = []
    func send(_ frame: [UInt8]) { frames.append(frame) }
}

/// A frame for the sender alone: `auth`, `flushed`, `control` or an error event.
private func checkFrame(_ frame: [UInt8], _ what: String) {
    let json = parseJSON(frame, "\(what): a frame")
    switch json["type"] {
    case .string("auth")?:
        let names = members(json).map(\.0)
        let publishes = names.starts(with: ["type", "ok", "publisher", "patterns"])
        let rest = Array(names.dropFirst(publishes ? 4 : 2))
        expect(
            json["ok"] == .bool(true) && (names.starts(with: ["type", "ok"]))
                && (rest == ["name", "kind", "read"] || rest == ["name", "kind", "read", "expiresAt"]), "\(what): an auth reply")
    case .string("flushed")?:
        let names = members(json).map(\.0)
        expect(names == ["type", "ref", "seq"] || names == ["type", "seq"], "\(what): a flushed reply \(text(frame).prefix(200))")
    case .string("control")?:
        let names = members(json).map(\.0)
        expect(
            names == ["type", "id", "action", "seq"] || names == ["type", "id", "action", "seq", "by"],
            "\(what): a control frame \(text(frame).prefix(200))")
        if case .string(let id)? = json["id"] { expect(TaskID.isValid(id), "\(what): a control frame for \(id)") }
        expect(TaskControl.allCases.map { JSONValue.string($0.rawValue) }.contains(json["action"] ?? .null), "\(what): a control frame's action")
    case .string("error")?:
        let body = JSONValue.object(members(json).filter { $0.0 != "type" && $0.0 != "id" })
        conforms(body, to: "Error", "\(what): an error event")
        if case .string(let id)? = json["id"] { expect(TaskID.isValid(id), "\(what): an error event names the invalid id \(id.prefix(80))") }
    default:
        fatalError("invariant broken: \(what): a frame of type \(String(describing: json["type"]))")
    }
}
