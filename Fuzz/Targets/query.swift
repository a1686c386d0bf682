import RingcastCore

/// The WebSocket upgrade's query (`watch=ci.*,deploy.web&since=EPOCH:SEQ&mode=publish`), as
/// SocketRequest.parse and resumeSeq read it, and the patterns it names, matched against ids (the
/// query's `id=a,b` plus the fixture's) by Glob and by a plain reference matcher that must agree.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQuery(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let query = parseQuery(text(bytes(data, size)))
    let api = fixture()
    checkStreamRequest(query)
    let request: SocketRequest
    switch SocketRequest.parse(query) {
    case .failure(let error):
        expect(
            (error.code == .invalidField && error.field == "mode") || (error.code == .invalidPattern && error.field == "watch"),
            "refused with \(error)")
        checkErrorBody(error.encodedBody, status: error.status, "the refusal")
        return 0
    case .success(let parsed):
        request = parsed
    }
    if request.mode == .publish {
        expect(request.watch == SocketRequest.nothing && request.since == nil, "a publisher watches nothing")
    } else {
        expect(
            !request.watch.globs.isEmpty && Set(request.watch.globs).count == request.watch.globs.count, "watch has no duplicate and is never empty")
        expect(request.watch.globs.allSatisfy { Glob.isValid($0.pattern) }, "an invalid pattern was kept")
        expect(request.since == query["since"], "since is kept as sent")
    }
    let epoch = api.store.epoch
    if let seq = request.resumeSeq(in: epoch) {
        let since = request.since ?? ""
        expect(since.hasPrefix(epoch + ":") && UInt64(since.dropFirst(epoch.count + 1)) == seq, "resumeSeq \(seq) from \(since)")
    } else if let since = request.since, since.hasPrefix(epoch + ":") {
        expect(UInt64(since.dropFirst(epoch.count + 1)) == nil, "resumeSeq dropped a seq of this epoch: \(since)")
    }
    let frames = api.openSocket(request, headers: RequestHeaders(), fromLoopback: true, now: t0 + 1000).frames
    expect(frames.count == (request.mode == .watch ? 2 : 1), "hello, then a snapshot for a watcher")
    for frame in frames { _ = parseJSON(frame, "an opening frame") }
    if request.mode == .watch {
        let snapshot = parseJSON(frames[1], "the snapshot")
        let resumable = request.resumeSeq(in: epoch).flatMap { api.store.changes(since: $0, matching: request.watch) } != nil
        expect(snapshot["full"] == .bool(!resumable), "a snapshot is full exactly when it cannot resume")
        if case .array(let tasks)? = snapshot["tasks"] {
            for task in tasks {
                conforms(task, to: "Task", "a snapshot task")
                if case .string(let id)? = task["id"] { expect(request.watch.matches(id), "the snapshot holds \(id), which watch does not match") }
            }
        }
    }
    let ids = Array(api.store.tasks.keys) + (query["id"] ?? "").split(separator: ",").map(String.init).filter(TaskID.isValid)
    for glob in request.watch.globs {
        for id in ids {
            expect(glob.matches(id) == referenceMatch(Array(glob.pattern.utf8), Array(id.utf8)), "\(glob) on \(id)")
        }
    }
    return 0
}

/// The same query as `GET /api/stream` reads it, its `last` standing for a `Last-Event-ID` header:
/// refused only for a field it names, and a stream's resume point is the header's when there is one.
private func checkStreamRequest(_ query: [String: String]) {
    let lastEventID = query["last"]
    switch StreamRequest.parse(query, accept: query["accept"], lastEventID: lastEventID) {
    case .failure(let error):
        expect(["format", "heartbeat", "mode", "watch"].contains(error.field ?? ""), "a stream refused with \(error)")
        checkErrorBody(error.encodedBody, status: error.status, "a stream's refusal")
    case .success(let stream):
        expect(stream.socket.mode == .watch, "a stream only watches")
        let since = lastEventID.flatMap { $0.isEmpty ? nil : $0 } ?? query["since"]
        expect(stream.socket.since == since, "a stream resumes from Last-Event-ID, else since")
    }
}

/// Wildcard matching by dynamic programming: `*` any run, `?` one byte, anything else itself.
private func referenceMatch(_ pattern: [UInt8], _ text: [UInt8]) -> Bool {
    var next = Array(repeating: false, count: text.count + 1)
    next[text.count] = true
    for p in pattern.indices.reversed() {
        var row = Array(repeating: false, count: text.count + 1)
        for t in (0...text.count).reversed() {
            switch pattern[p] {
            case UInt8(ascii: "*"): row[t] = next[t] || (t < text.count && row[t + 1])
            case UInt8(ascii: "?"): row[t] = t < text.count && next[t + 1]
            default: row[t] = t < text.count && pattern[p] == text[t] && next[t + 1]
            }
        }
        next = row
    }
    return next[0]
}
