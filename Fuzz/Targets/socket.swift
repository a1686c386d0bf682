import RingcastCore

/// A WebSocket's messages through API.receive. The first step is the upgrade (`GET /ws?query` and
/// headers, as in the http target); each later step is one message (`TOO LARGE` stands for one over
/// maxMessageBytes). Every frame the sender gets is JSON — an `auth` reply or an error event with
/// the protocol's body — every refused event gets its own error, and what is refused changes nothing.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSocket(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let parts = steps(bytes(data, size))
    let api = fixture()
    let upgrade = FuzzRequest(parts[0]).request
    let socketRequest: SocketRequest
    switch SocketRequest.parse(upgrade.query) {
    case let .success(parsed): socketRequest = parsed
    case let .failure(error):
        checkFrame(api.refusalFrame(error), "the refusal")
        return 0
    }
    let opened = api.openSocket(socketRequest, headers: upgrade.headers, fromLoopback: upgrade.fromLoopback, now: t0)
    var session = opened.0
    for frame in opened.1 { _ = parseJSON(frame, "an opening frame") }
    for (index, step) in parts.dropFirst().prefix(16).enumerated() {
        let now = t0 + 500 * Double(index + 1)
        let message: SocketMessage = step.elementsEqual("TOO LARGE".utf8) ? .tooLarge : .text(step)
        let (seq, tasks) = (api.store.seq, api.store.tasks)
        let reply = api.receive(message, on: &session, now: now)
        let what = "message \(index)"
        for frame in reply.frames { checkFrame(frame, what) }
        checkEvents(reply.events, after: seq, store: api.store, what)
        let json = try? JSONParser.parse(step)
        let items: Int
        switch json {
        case .none: items = 1
        case let .array(elements)?: items = elements.count
        case let .some(value): items = value["type"] == .string("auth") ? 0 : 1
        }
        let errors = reply.frames.filter { (try? JSONParser.parse($0))?["type"] == .string("error") }.count
        expect(errors <= max(items, 1), "\(what): \(errors) errors for \(items) events")
        if items > 0, errors == items {
            expect(api.store.seq == seq && api.store.tasks == tasks && reply.events.isEmpty, "\(what): refused events changed the state")
        }
    }
    return 0
}

/// A frame for the sender alone: `{"type":"auth","ok":true,…}` or an error event.
private func checkFrame(_ frame: [UInt8], _ what: String) {
    let json = parseJSON(frame, "\(what): a frame")
    switch json["type"] {
    case .string("auth")?:
        expect(members(json).map(\.0) == ["type", "ok", "publisher", "patterns"] && json["ok"] == .bool(true), "\(what): an auth reply")
    case .string("error")?:
        let body = JSONValue.object(members(json).filter { $0.0 != "type" && $0.0 != "id" })
        conforms(body, to: "Error", "\(what): an error event")
        if case let .string(id)? = json["id"] { expect(TaskID.isValid(id), "\(what): an error event names the invalid id \(id.prefix(80))") }
    default:
        fatalError("invariant broken: \(what): a frame of type \(String(describing: json["type"]))")
    }
}
