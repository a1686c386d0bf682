import RingcastCore

/// Whole HTTP requests through API.handle, several to an input (`---` between them), against a server
/// state with a task of each kind, the clock moving 700 ms a request and the server's deadlines run
/// in between. Every answer must be one the OpenAPI document gives; a refused request or a read
/// changes nothing; a change numbers its events from the seq before it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let api = fixture()
    for (index, step) in steps(bytes(data, size)).prefix(16).enumerated() {
        let now = t0 + 700 * Double(index + 1)
        let seqBeforeDeadlines = api.store.seq
        checkEvents(api.store.runDue(now: now), after: seqBeforeDeadlines, store: api.store, "deadlines before request \(index)")

        let request = FuzzRequest(step).request
        let (seq, tasks) = (api.store.seq, api.store.tasks)
        let response = api.handle(request, now: now)
        let what = "request \(index) (\(request.method) \(request.path))"
        checkAnswer(request, response, what)
        if response.status >= 400 || request.method == "GET" {
            expect(api.store.seq == seq && api.store.tasks == tasks, "\(what): a refusal or a read changed the state")
            expect(response.events.isEmpty, "\(what): a refusal or a read published events")
        } else {
            checkEvents(response.events, after: seq, store: api.store, what)
            if request.path != "/api/events" { expect(!response.events.isEmpty, "\(what): a change published nothing") }
        }
    }
    let list = api.handle(APIRequest(method: "GET", path: "/api/tasks"), now: t0 + 60_000)
    checkAnswer(APIRequest(method: "GET", path: "/api/tasks"), list, "the final list")
    let count = parseJSON(list.body, "the final list")["tasks"].map { if case let .array(tasks) = $0 { tasks.count } else { -1 } }
    expect(count == api.store.tasks.count, "the list holds \(count ?? -1) of \(api.store.tasks.count) tasks")
    return 0
}
