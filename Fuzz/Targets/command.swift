import RingcastCore

/// Event and command parsing (Command.parse, API.parseBatch, TaskPatch, ShowOptions, TimerStart and a
/// log's lines) over any JSON. The parsers must agree with the document's schemas exactly — whatever
/// one accepts the other does — and with each other: one event parses as a batch of one, a batch
/// fails at its first bad event with that event's error. What parses applies to a server state
/// cleanly. Any bytes at all, sent as a text/plain log, are accepted exactly when the document's
/// text schema takes them (any text but none).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCommand(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let api = fixture()
    let plain = api.handle(
        APIRequest(
            method: "POST", path: "/api/tasks/ci.build/log", body: input,
            headers: RequestHeaders(contentType: "text/plain")), now: t0 + 500)
    let plainSchema = OpenAPI.document["paths"]?["/api/tasks/{id}/log"]?["post"]?["requestBody"]?["content"]?["text/plain"]?["schema"] ?? .null
    let plainDocumented = validator.violation(of: .string(text(input)), against: plainSchema) == nil
    expect(
        (plain.status == 200) == plainDocumented, "a text/plain log of \(input.count) bytes answered \(plain.status): \(text(plain.body).prefix(200))"
    )
    if plain.status >= 400 { checkErrorBody(plain.body, status: plain.status, "a text/plain log") }

    guard let json = try? JSONParser.parse(input) else { return 0 }
    agree(json, "TaskPatch") { () throws(APIError) in _ = try TaskPatch.parse(json) }
    agree(json, "ShowOptions") { () throws(APIError) in _ = try ShowOptions.parse(json) }
    agree(json, "TimerStart") { () throws(APIError) in _ = try TimerStart.parse(json) }
    agree(json, "Event") { () throws(APIError) in _ = try Command.parse(event: json) }
    // A log's body is a log event's fields: parsed as one, unless it names a type or an id of its own.
    if case .object(let fields) = json, !fields.contains(where: { $0.0 == "type" || $0.0 == "id" }) {
        agree(json, "LogLines") { () throws(APIError) in
            _ = try Command.parse(event: .object([("type", .string("log")), ("id", .string("ci.build"))] + fields))
        }
    }

    let batch = result { () throws(APIError) in try api.parseBatch(json) }
    let schema = validator.component("Batch")!
    expect((validator.violation(of: json, against: schema) == nil) == batch.isSuccess, "Batch: the parser and the document disagree")
    switch json {
    case .object:
        let single = result { () throws(APIError) in [try Command.parse(event: json)] }
        switch (single, batch) {
        case (.success(let a), .success(let b)): expect(a == b, "one event parses differently as a batch")
        case (.failure(let a), .failure(let b)): expect(a.within("events[0]") == b, "one event's error differs in a batch: \(a) / \(b)")
        default: fatalError("invariant broken: one event and a batch of it disagree")
        }
    case .array(let items):
        for (index, item) in items.enumerated() {
            switch result({ () throws(APIError) in try Command.parse(event: item) }) {
            case .success: continue
            case .failure(let error):
                guard case .failure(let batchError) = batch else { fatalError("invariant broken: a batch with a bad event \(index) parsed") }
                expect(error.within("events[\(index)]") == batchError, "the batch's error is not its first bad event's")
                return 0
            }
        }
        guard case .success(let commands) = batch else { fatalError("invariant broken: a batch of good events failed") }
        let before = api.store.seq
        let applied = api.applyBatch(commands, now: t0 + 1000)
        checkEvents(applied.events, after: before, store: api.store, "batch")
        expect(applied.applied + applied.errors.count == commands.count, "every event applies or says why not")
        for (_, error) in applied.errors {
            expect(OpenAPI.applyErrors.contains(error.code), "an applied event failed with \(error.code)")
        }
    default:
        expect(!batch.isSuccess, "a batch of \(json.typeName) parsed")
    }
    return 0
}

/// The parser accepts exactly what the schema does; its errors are 4xx with the protocol's body.
private func agree(_ json: JSONValue, _ schemaName: String, _ parse: () throws(APIError) -> Void) {
    let outcome = result { () throws(APIError) in try parse() }
    let documented = validator.violation(of: json, against: validator.component(schemaName)!)
    expect(
        (documented == nil) == outcome.isSuccess,
        "\(schemaName): the document says \(documented ?? "valid"), the parser says \(outcome.errorDescription): \(text(JSONWriter.encode(json)).prefix(300))"
    )
    if case .failure(let error) = outcome { checkErrorBody(error.encodedBody, status: error.status, schemaName) }
}

private func result<T>(_ body: () throws(APIError) -> T) -> Result<T, APIError> {
    do { return .success(try body()) } catch { return .failure(error) }
}

extension Result {
    var isSuccess: Bool { if case .success = self { return true } else { return false } }
    var errorDescription: String { if case .failure(let error) = self { return "\(error)" } else { return "valid" } }
}
