import Foundation
import SchemaValidation
import XCTest

@testable import RingcastCore

/// Holds `GET /api/openapi.json` to the API: every operation it names is routed and answers as it
/// says, nothing else is routed, its bounds are the parsers' bounds, and docs/PROTOCOL.md agrees.
final class OpenAPITests: XCTestCase {
    override class func setUp() {
        super.setUp()
        installCryptography()
    }

    private let validator = SchemaValidator()
    private static let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]

    /// A server's state with one of each kind of task the operations need; ci.build-42 offers every
    /// control, has a pause request waiting (so cancel, pause and resume can each be asked) and a log.
    private func fixture() -> API {
        var config = ServerConfig()
        // The token POST /api/session's example signs in with.
        config.access = AccessPolicy(readers: [.reader(name: "team", token: "reader-token-0123456789", patterns: WatchSet([Glob("ci.*")]))])
        let api = API(store: TaskStore(epoch: "fixtureepoch"), config: config)
        for (method, path, body) in [
            ("POST", "/api/tasks/ci", #"{"title": "CI"}"#),
            (
                "POST", "/api/tasks/ci.build-42",
                #"{"title": "Build 42", "progress": 0.42, "parent": "ci", "controls": ["cancel", "pause", "resume"]}"#
            ),
            ("POST", "/api/tasks/ci.build-42/pause", ""),
            ("POST", "/api/tasks/ci.build-42/log", #"{"lines": ["compiling a.c"]}"#),
            ("POST", "/api/tasks/save/show", #"{"hideAfter": 3}"#),
            ("POST", "/api/timers/tea", #"{"seconds": 180}"#),
        ] {
            XCTAssertEqual(api.handle(APIRequest(method: method, path: path, body: Array(body.utf8)), now: t0).status, 200, path)
        }
        return api
    }

    /// The id each path's operations are tried with: one that exists and suits them.
    private func concrete(_ template: String) -> String {
        let id = template.hasPrefix("/api/timers") ? "tea" : template.hasSuffix("/show") || template.hasSuffix("/hide") ? "save" : "ci.build-42"
        return template.replacingOccurrences(of: "{id}", with: id)
    }

    /// Every operation the document names, the server's sign-in (`/auth/…`) among them.
    private var documentedOperations: [(template: String, method: String, operation: JSONValue)] {
        guard case .object(let paths)? = OpenAPI.document["paths"] else { return [] }
        return paths.flatMap { template, item -> [(String, String, JSONValue)] in
            guard case .object(let members) = item else { return [] }
            return members.filter { $0.0 != "parameters" }.map { (template, $0.0.uppercased(), $0.1) }
        }
    }

    /// The operations `API` answers: all but the sign-in at an identity provider, which the
    /// server's transport answers before the API sees the request (RouteTableTests sends those to a server).
    private var operations: [(template: String, method: String, operation: JSONValue)] {
        documentedOperations.filter { Routes.match($0.template)?.route.handler.isSignIn == false }
    }

    private func examples(of operation: JSONValue) -> [(name: String, body: JSONValue)] {
        guard case .object(let named)? = operation["requestBody"]?["content"]?["application/json"]?["examples"] else { return [] }
        return named.map { ($0.0, $0.1["value"] ?? .null) }
    }

    /// The answer must be one the operation documents: its status, a media type it lists for that
    /// status (none and no body for an answer without content, a 304), a body that media type's schema
    /// takes, and the headers it names.
    private func assertConforms(
        _ response: APIResponse, to operation: JSONValue, _ context: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        guard let answer = operation["responses"]?[String(response.status)] else {
            return XCTFail("\(context): status \(response.status) is not documented: \(text(response.body))", file: file, line: line)
        }
        if case .object(let headers)? = answer["headers"] {
            for (name, header) in headers {
                // cache-control is the answer's own field; the transport writes it with the others.
                let sent =
                    name.lowercased() == "cache-control"
                    ? [response.cacheControl] : response.headers.filter { $0.0 == name.lowercased() + ":" }.map(\.1)
                guard sent.count == 1, let value = sent.first else {
                    XCTFail("\(context): header \(name) sent \(sent.count) times", file: file, line: line)
                    continue
                }
                if let violation = validator.violation(of: .string(value), against: header["schema"] ?? .null) {
                    XCTFail("\(context): header \(name): \(violation)", file: file, line: line)
                }
            }
        }
        guard case .object(let content)? = answer["content"] else {
            return XCTAssertTrue(response.body.isEmpty, "\(context): a body where the document names none", file: file, line: line)
        }
        guard let (mediaType, media) = content.first(where: { response.contentType.hasPrefix($0.0) }) else {
            return XCTFail("\(context): \(response.contentType) is not one of \(content.map(\.0))", file: file, line: line)
        }
        let body: JSONValue = mediaType == "application/json" ? json(response.body, file: file, line: line) : .string(text(response.body))
        if let violation = validator.violation(of: body, against: media["schema"] ?? .null) {
            XCTFail("\(context): \(violation) in \(text(response.body).prefix(300))", file: file, line: line)
        }
    }

    func testTheDocumentIsServedAsItIsBuilt() {
        let response = fixture().handle(APIRequest(method: "GET", path: "/api/openapi.json"), now: t0)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.contentType, "application/json")
        XCTAssertEqual(json(response.body), OpenAPI.document)
        XCTAssertEqual(OpenAPI.document["openapi"], .string("3.1.0"))
        XCTAssertTrue(response.events.isEmpty)
        XCTAssertEqual(fixture().handle(APIRequest(method: "POST", path: "/api/openapi.json"), now: t0).status, 405)
    }

    /// The validator refuses keywords it does not know, so every keyword the document uses must be one it checks.
    func testEverySchemaUsesOnlyKeywordsTheValidatorChecks() {
        let known: Set<String> = [
            "$ref", "type", "enum", "const", "properties", "required", "additionalProperties", "items",
            "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "pattern",
            "oneOf", "description", "examples",
        ]
        var schemas: [(String, JSONValue)] = []
        if case .object(let components)? = OpenAPI.document["components"]?["schemas"] { schemas += components }
        for (template, method, operation) in documentedOperations {
            if case .object(let content)? = operation["requestBody"]?["content"] {
                for (type, media) in content { schemas.append(("\(method) \(template) \(type) body", media["schema"] ?? .null)) }
            }
            if case .object(let answers)? = operation["responses"] {
                for (status, answer) in answers {
                    if case .object(let content)? = answer["content"] {
                        for (_, media) in content { schemas.append(("\(method) \(template) \(status)", media["schema"] ?? .null)) }
                    }
                    if case .object(let headers)? = answer["headers"] {
                        for (name, header) in headers { schemas.append(("\(method) \(template) \(status) \(name)", header["schema"] ?? .null)) }
                    }
                }
            }
        }
        if case .object(let paths)? = OpenAPI.document["paths"] {
            for (template, item) in paths {
                for case .array(let parameters)? in [item["parameters"], item["get"]?["parameters"]] {
                    for parameter in parameters {
                        schemas.append(("\(template) \(parameter["name"]?.stringValue ?? "?")", parameter["schema"] ?? .null))
                    }
                }
            }
        }
        func walk(_ schema: JSONValue, _ place: String) {
            guard case .object(let keywords) = schema else { return XCTFail("\(place): not a schema object") }
            for (keyword, argument) in keywords {
                XCTAssertTrue(known.contains(keyword), "\(place): \(keyword)")
                switch keyword {
                case "$ref":
                    let name = argument.stringValue?.replacingOccurrences(of: "#/components/schemas/", with: "") ?? ""
                    XCTAssertNotNil(validator.component(name), "\(place): $ref \(argument)")
                case "properties":
                    if case .object(let properties) = argument { for (name, property) in properties { walk(property, "\(place).\(name)") } }
                case "items": walk(argument, "\(place)[]")
                case "oneOf": for (index, choice) in (argument.arrayValue ?? []).enumerated() { walk(choice, "\(place).oneOf[\(index)]") }
                default: break
                }
            }
        }
        XCTAssertGreaterThan(schemas.count, 30)
        for (place, schema) in schemas { walk(schema, place) }
    }

    /// Each documented operation, sent with its first example body (or none), answers 200 as documented;
    /// so no documented operation is a 404 or a 405.
    func testEveryDocumentedOperationIsRoutedAndAnswersAsDocumented() {
        XCTAssertEqual(operations.count, 29)
        for (template, method, operation) in operations {
            let body = examples(of: operation).first.map { JSONWriter.encode($0.body) } ?? []
            let response = fixture().handle(APIRequest(method: method, path: concrete(template), body: body), now: t0 + 1000)
            XCTAssertEqual(response.status, 200, "\(method) \(template): \(text(response.body))")
            assertConforms(response, to: operation, "\(method) \(template)")
        }
    }

    func testEveryExampleBodyIsAccepted() {
        var count = 0
        for (template, method, operation) in operations {
            let schema = operation["requestBody"]?["content"]?["application/json"]?["schema"] ?? .null
            for (name, example) in examples(of: operation) {
                count += 1
                XCTAssertNil(validator.violation(of: example, against: schema), "\(method) \(template) example \(name)")
                let response = fixture().handle(
                    APIRequest(method: method, path: concrete(template), body: JSONWriter.encode(example)), now: t0 + 1000)
                XCTAssertEqual(response.status, 200, "\(method) \(template) example \(name): \(text(response.body))")
                assertConforms(response, to: operation, "\(method) \(template) example \(name)")
            }
        }
        XCTAssertGreaterThanOrEqual(count, 20)
    }

    /// The API routes nothing the document does not name: a path it does not name is a 404 (no
    /// endpoint, `field` null), and a method it does not name on a path it does, a 405 whose Allow
    /// header lists exactly the methods the document names there.
    func testNothingUndocumentedIsRouted() {
        var paths = operations.map { concrete($0.template) }
        paths += [
            "/api", "/api/", "/api/task", "/api/tasks/ci.build-42/show/again", "/api/tasks/ci.build-42/start",
            "/api/tasks/save/HIDE", "/api/tasks/ci.build-42/log/1", "/api/tasks/ci.build-42/logs", "/api/tasks/ci.build-42/Cancel",
            "/api/tasks/ci.build-42/stop", "/api/tasks/ci.build-42/cancel/now", "/api/timers/tea/log",
            "/api/timers", "/api/timers/tea/stop", "/api/timers/tea/pause/now",
            "/api/events/1", "/api/openapi.json/x", "/api/openapi", "/api/healthz", "/healthz/x", "/metrics/x",
            "/api/kinds/ci.build", "/api/kind", "/readyz/x", "/api/readyz", "/badge", "/badge/", "/badge/.svg", "/badge/x",
            "/badge/x.svg/y", "/badge/a/b.svg", "/badge/x.png", "/badges/x.svg", "/api/badge/x.svg",
            "/", "/index.html", "/ws",
        ]
        var refused = 0
        for path in Set(paths).sorted() {
            let allowed = OpenAPITests.methods.filter { OpenAPI.operation(method: $0, path: path) != nil }
            let documented = !allowed.isEmpty
            for method in OpenAPITests.methods where OpenAPI.operation(method: method, path: path) == nil {
                let response = fixture().handle(APIRequest(method: method, path: path), now: t0)
                let body = json(response.body)
                XCTAssertEqual(response.status, documented ? 405 : 404, "\(method) \(path): \(text(response.body))")
                let allow = response.headers.filter { $0.0 == "allow:" }.map(\.1)
                XCTAssertEqual(allow.map { Set($0.components(separatedBy: ", ")) }, documented ? [Set(allowed)] : [], "\(method) \(path): Allow")
                XCTAssertEqual(body["error"], .string(documented ? "method_not_allowed" : "not_found"), "\(method) \(path)")
                XCTAssertEqual(body["field"], .null, "\(method) \(path)")
                XCTAssertTrue(response.events.isEmpty)
                refused += 1
            }
        }
        XCTAssertGreaterThan(refused, 150)
    }

    // MARK: The document's bounds are the parsers' bounds

    /// The document names every field the update parser takes (a field added to the parser and not
    /// here would go untested by everything that reads the document).
    func testTheDocumentNamesEveryFieldOfAnUpdate() throws {
        guard case .object(let properties)? = validator.component("TaskPatch")?["properties"] else { return XCTFail("no TaskPatch") }
        XCTAssertEqual(properties.map(\.0).sorted(), TaskPatch.fields.sorted())
    }

    /// Each query parameter of each GET, at each side of its bounds and outside its enum: 200 exactly
    /// when the document takes the value, else a 4xx naming the parameter.
    func testEveryBoundOfAQueryParameterIsTheRoutersBound() throws {
        var tried = 0
        for (template, method, operation) in operations where method == "GET" {
            guard case .array(let parameters)? = operation["parameters"] else { continue }
            for parameter in parameters where parameter["in"] == .string("query") {
                let name = try XCTUnwrap(parameter["name"]?.stringValue)
                let schema = parameter["schema"] ?? .null
                var values = ["", "x", "0", "-1", "1.5", "text", "json", "TEXT", "ci.*", "*", "a b"]
                for bound in [schema["minimum"], schema["maximum"]].compactMap({ $0?.numberValue.map(Int.init) }) {
                    values += [bound - 1, bound, bound + 1].map(String.init)
                }
                for value in values {
                    let integer = schema["type"] == .string("integer")
                    let documented =
                        (!integer || Int(value) != nil)
                        && validator.violation(
                            of: integer ? Int(value).map { .number(Double($0)) } ?? .string(value) : .string(value), against: schema) == nil
                    let response = fixture().handle(APIRequest(method: method, path: concrete(template), query: [name: value]), now: t0)
                    XCTAssertEqual(response.status == 200, documented, "\(template)?\(name)=\(value): \(text(response.body).prefix(200))")
                    assertConforms(response, to: operation, "\(template)?\(name)=\(value)")
                    if !documented { XCTAssertEqual(json(response.body)["field"], .string(name), "\(template)?\(name)=\(value)") }
                    tried += 1
                }
            }
        }
        XCTAssertGreaterThan(tried, 60)
    }

    /// Bodies at each documented bound and just past it, a wrong type, null, and an unknown field: the
    /// document and the parser must agree on each, directly and as an event of a batch.
    func testEveryBoundOfARequestBodyIsTheParsersBound() throws {
        let cases: [(schema: String, path: String, base: [(String, JSONValue)], eventType: String)] = [
            ("TaskPatch", "/api/tasks/ci.build-42", [], "update"),
            ("ShowOptions", "/api/tasks/save/show", [], "show"),
            ("TimerStart", "/api/timers/tea", [("seconds", .number(10))], "timer"),
            ("LogLines", "/api/tasks/ci.build-42/log", [("lines", .array([.string("x")]))], "log"),
        ]
        var tried = 0
        for (name, path, base, eventType) in cases {
            let schema = try XCTUnwrap(validator.component(name))
            guard case .object(let properties)? = schema["properties"] else { return XCTFail(name) }
            for (field, property) in properties {
                for candidate in candidates(for: property) {
                    let body = JSONValue.object(base.filter { $0.0 != field } + [(field, candidate)])
                    let documented = validator.violation(of: body, against: schema) == nil
                    let response = fixture().handle(APIRequest(method: "POST", path: path, body: JSONWriter.encode(body)), now: t0)
                    let place = "\(name).\(field) = \(text(JSONWriter.encode(candidate)).prefix(60))"
                    XCTAssertEqual(
                        response.status == 200, documented,
                        "\(place): the document says \(documented ? "valid" : "invalid"), the API answered \(text(response.body))")
                    if !documented {
                        // Too many lines for one log request is 413, like a batch of too many events.
                        let tooMany = property["maxItems"]?.numberValue.map { Double(candidate.arrayValue?.count ?? 0) > $0 } ?? false
                        XCTAssertEqual(response.status, tooMany ? 413 : 422, place)
                        XCTAssertEqual(json(response.body)["field"], .string(field), place)
                    }
                    let event = JSONValue.object([("type", .string(eventType)), ("id", .string("ci.build-42"))] + (body.objectMembers))
                    let batch = fixture().handle(APIRequest(method: "POST", path: "/api/events", body: JSONWriter.encode(.array([event]))), now: t0)
                    XCTAssertEqual(
                        batch.status == 200, validator.violation(of: .array([event]), against: validator.component("Batch")!) == nil, "event \(place)"
                    )
                    if !documented { XCTAssertEqual(json(batch.body)["field"], .string("events[0].\(field)"), "event \(place)") }
                    tried += 1
                }
            }
            let unknown = JSONValue.object(base + [("bogus", .number(1))])
            XCTAssertNotNil(validator.violation(of: unknown, against: schema))
            let response = fixture().handle(APIRequest(method: "POST", path: path, body: JSONWriter.encode(unknown)), now: t0)
            XCTAssertEqual(response.status, 422)
            XCTAssertEqual(json(response.body)["error"], .string("unknown_field"))
        }
        XCTAssertGreaterThan(tried, 150)
    }

    /// hide, the timers' pause, resume and cancel, and the control requests take no fields: nothing,
    /// `{}`, and no other JSON.
    func testOperationsWithoutFieldsTakeOnlyNothingOrAnEmptyObject() throws {
        let schema = try XCTUnwrap(validator.component("NoFields"))
        for path in [
            "/api/tasks/save/hide", "/api/timers/tea/pause", "/api/timers/tea/resume", "/api/timers/tea/cancel",
            "/api/tasks/ci.build-42/cancel", "/api/tasks/ci.build-42/pause", "/api/tasks/ci.build-42/resume",
        ] {
            for body in ["", " ", "{}", " { } ", "null", "[]", "0", "\"x\"", "true", #"{"now": true}"#, "{", "[{}]"] {
                let response = fixture().handle(APIRequest(method: "POST", path: path, body: Array(body.utf8)), now: t0 + 1000)
                let value = try? JSONParser.parse(body)
                let documented = body.allSatisfy(\.isWhitespace) || value.map { validator.violation(of: $0, against: schema) == nil } == true
                XCTAssertEqual(response.status == 200, documented, "\(path) \(body): \(text(response.body))")
                let expected = documented ? 200 : value.map { if case .object = $0 { return 422 } else { return 400 } } ?? 400
                XCTAssertEqual(response.status, expected, "\(path) \(body): \(text(response.body))")
            }
        }
    }

    /// The log's text form: every text/plain example is accepted, sent with its content type, and
    /// is the lines it holds; an empty body, which the schema refuses, is refused.
    func testTheLogTakesTextOneLineALine() throws {
        let operation = try XCTUnwrap(OpenAPI.document["paths"]?["/api/tasks/{id}/log"]?["post"])
        let media = try XCTUnwrap(operation["requestBody"]?["content"]?["text/plain"])
        guard case .object(let examples)? = media["examples"] else { return XCTFail("no text/plain examples") }
        XCTAssertFalse(examples.isEmpty)
        for (name, example) in examples {
            let body = try XCTUnwrap(example["value"]?.stringValue)
            XCTAssertNil(validator.violation(of: .string(body), against: media["schema"] ?? .null), name)
            let api = fixture()
            let response = api.handle(
                APIRequest(
                    method: "POST", path: "/api/tasks/ci.build-42/log", body: Array(body.utf8),
                    headers: RequestHeaders(contentType: "text/plain; charset=utf-8")), now: t0 + 1000)
            XCTAssertEqual(response.status, 200, "\(name): \(text(response.body))")
            assertConforms(response, to: operation, "text/plain example \(name)")
            XCTAssertEqual(api.store.log(of: "ci.build-42")?.lines.dropFirst(), ArraySlice(body.split(separator: "\n").map(String.init)), name)
        }
        XCTAssertNotNil(validator.violation(of: .string(""), against: media["schema"] ?? .null))
        let empty = fixture().handle(
            APIRequest(method: "POST", path: "/api/tasks/ci.build-42/log", headers: RequestHeaders(contentType: "text/plain")), now: t0)
        XCTAssertEqual(empty.status, 422, text(empty.body))
        assertConforms(empty, to: operation, "an empty text/plain log")
    }

    /// Values on each side of every bound the property names, and of every type it might be sent as.
    private func candidates(for property: JSONValue) -> [JSONValue] {
        var values: [JSONValue] = [.null, .bool(true), .string("1"), .number(1), .array([]), .object([])]
        if let items = property["items"] {
            // A list: one good element, bad ones, each option of an enum, and each side of its length bounds.
            let good: JSONValue = items["enum"]?.arrayValue?.first ?? .string("x")
            values += [.array([good]), .array([good, good]), .array([.number(1)]), .array([.null]), .array([.string("bogus")])]
            values += (items["enum"]?.arrayValue ?? []).map { JSONValue.array([$0]) }
            for limit in [property["minItems"], property["maxItems"]].compactMap({ $0?.numberValue.map(Int.init) }) {
                values += [limit - 1, limit, limit + 1].filter { $0 >= 0 }.map { JSONValue.array(Array(repeating: good, count: $0)) }
            }
        }
        if let minimum = property["minimum"]?.numberValue { values += [.number(minimum), .number(minimum.nextDown)] }
        if let bound = property["exclusiveMinimum"]?.numberValue { values += [.number(bound), .number(bound.nextUp)] }
        if let maximum = property["maximum"]?.numberValue {
            values.append(.number(maximum))
            if maximum.nextUp.isFinite { values.append(.number(maximum.nextUp)) }
        }
        if let limit = property["maxLength"]?.numberValue.map(Int.init) {
            // Two scalars a character: a limit counted in characters instead of scalars would show.
            let accent = String(repeating: "e\u{301}", count: limit / 2)
            values += [.string(accent), .string(accent + "x"), .string(String(repeating: "x", count: limit)), .string("")]
        }
        if let pattern = property["pattern"]?.stringValue {
            if pattern == TaskURL.pattern {
                values += [
                    "https://ci.example.com/runs/42", "HTTP://x", "http://", "https:///x", "ftp://x", "javascript:alert(1)",
                    "https://a b", "https://x/\u{7f}", "http://x?q=1#f", "https://x/\u{85}", "https://x\u{202E}y/",
                    "https://x/\u{2066}a", "https://user@x/", "https://x/a@b",
                ].map(JSONValue.string)
            } else {
                XCTAssertEqual(pattern, TaskID.pattern)
                values += ["ci", "ci.build-42", "-ci", "ci/x", "ci build", String(repeating: "a", count: 129)].map(JSONValue.string)
            }
        }
        for case .array(let options)? in [property["enum"]] { values += options + [.string("bogus"), .string("stalled")] }
        return values
    }

    func testTheIDAndWatchPatternsAreTheParsers() throws {
        let id = try SchemaPattern(TaskID.pattern)
        let watch = try SchemaPattern(OpenAPI.watchListPattern)
        let samples = [
            "", "a", "ci.build-42", "ci.*", "*", "?", ".ci", "_x", "-x", "ci,", ",ci", "ci,,cd", "a b", "ci/x", "é",
            "ci*,deploy?.web", "ci.\n", String(repeating: "a", count: 128), String(repeating: "a", count: 129),
            String(repeating: "a", count: 128) + ",b", "*.*.*", "ci;x", "ci%2F",
        ]
        for sample in samples {
            XCTAssertEqual(id.matches(sample), TaskID.isValid(sample), sample.debugDescription)
            let parsed: Bool
            if case .success = WatchSet.parse(sample) { parsed = true } else { parsed = false }
            XCTAssertEqual(watch.matches(sample), parsed, "watch \(sample.debugDescription)")
        }
    }

    // MARK: docs/PROTOCOL.md agrees

    private func protocolText() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
    }

    /// The error table: each row's status and codes are the API's, and the document names the same codes.
    func testTheProtocolsErrorTableIsTheDocuments() throws {
        var codes: [String] = []
        for line in try protocolText().split(separator: "\n") where line.hasPrefix("| 4") || line.hasPrefix("| 5") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let status = Int(cells[0])
            let names = cells[1].replacingOccurrences(of: #"\*\(v[0-9]+\)\*"#, with: "", options: .regularExpression)
            for code in names.split(separator: ",").map({ $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) }) {
                XCTAssertEqual(APIError.Code(rawValue: code)?.status, status, code)
                codes.append(code)
            }
        }
        XCTAssertEqual(Set(codes), Set(OpenAPI.errorCodes.map(\.code.rawValue)))
        XCTAssertEqual(codes.count, OpenAPI.errorCodes.count)
    }

    /// Every endpoint heading of docs/PROTOCOL.md names a documented operation and every documented
    /// operation has a heading. Each curl command in a section runs an operation of its heading, and
    /// its body (`-d '…'`) is accepted; each complete JSON block after a curl is that command's
    /// answer and conforms to its operation's 200 schema (in a section without curl, the heading's).
    func testTheProtocolsEndpointsAndExamplesAreTheDocuments() throws {
        var named: Set<String> = []
        var checked = (bodies: 0, answers: 0)
        let sections = try protocolText().components(separatedBy: "\n### ").dropFirst()
        for section in sections {
            let heading = section.prefix { $0 != "\n" }
            var headingOperations: [(method: String, template: String)] = []
            let tokens = heading.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            for token in tokens.map({ String($0.element) }) {
                let words = token.split(separator: " ").map(String.init)
                if words.count == 2 {
                    headingOperations.append((words[0], words[1]))
                } else if let last = headingOperations.last, token.hasPrefix("/") {
                    // `/resume` after `POST /api/timers/{id}/pause`: the same path with another last segment.
                    let parent = last.template.split(separator: "/").dropLast().joined(separator: "/")
                    headingOperations.append((last.method, "/" + parent + token))
                } else if let last = headingOperations.last, words.count == 1, OpenAPITests.methods.contains(token) {
                    headingOperations.append((token, last.template))
                }
            }
            for (method, template) in headingOperations {
                XCTAssertNotNil(OpenAPI.document["paths"]?[template]?[method.lowercased()], "PROTOCOL.md names \(method) \(template)")
                named.insert("\(method) \(template)")
            }
            guard let first = headingOperations.first, OpenAPI.document["paths"]?[first.template]?[first.method.lowercased()] != nil else { continue }
            let blocks = section.components(separatedBy: "```").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
            let runsCurl = blocks.contains { $0.hasPrefix("sh\n") && $0.contains("curl ") }
            var answering: (method: String, template: String)?
            for block in blocks {
                if block.hasPrefix("sh\n") {
                    for curl in curlCommands(block) {
                        guard let (template, _) = OpenAPI.operation(method: curl.method, path: curl.path),
                            headingOperations.contains(where: { $0 == (curl.method, template) })
                        else {
                            XCTFail("PROTOCOL.md's \(heading) runs \(curl.method) \(curl.path), not an operation of its heading")
                            continue
                        }
                        answering = (curl.method, template)
                        guard let body = curl.body else { continue }
                        let response = fixture().handle(APIRequest(method: curl.method, path: concrete(template), body: Array(body.utf8)), now: t0)
                        XCTAssertEqual(response.status, 200, "PROTOCOL.md's \(curl.method) \(template) body \(body): \(text(response.body))")
                        checked.bodies += 1
                    }
                } else if block.hasPrefix("json\n"), !block.contains("\"…\":"), !runsCurl || answering != nil {
                    let (method, template) = answering ?? first
                    let operation = OpenAPI.document["paths"]?[template]?[method.lowercased()]
                    // The 200 answer's schema, or another answer the operation names by schema (not an
                    // error): /readyz's 503.
                    var schemas = [operation?["responses"]?["200"]?["content"]?["application/json"]?["schema"] ?? .null]
                    if case .object(let answers)? = operation?["responses"] {
                        schemas += answers.filter { $0.0 != "200" }.compactMap { $0.1["content"]?["application/json"]?["schema"] }.filter {
                            $0["$ref"] != nil
                        }
                    }
                    let answer = json(String(block.dropFirst(5)))
                    if !schemas.contains(where: { validator.violation(of: answer, against: $0) == nil }),
                        let violation = validator.violation(of: answer, against: schemas[0])
                    {
                        XCTFail("PROTOCOL.md's answer to \(method) \(template): \(violation)")
                    }
                    checked.answers += 1
                }
            }
        }
        XCTAssertEqual(named, Set(documentedOperations.map { "\($0.method) \($0.template)" }))
        XCTAssertGreaterThanOrEqual(checked.bodies, 5)
        XCTAssertGreaterThanOrEqual(checked.answers, 8)
    }

    /// The curl commands of a shell block: the method (`-X`, else POST when it sends data, else GET),
    /// the URL's path and the `-d '…'` body.
    private func curlCommands(_ block: String) -> [(method: String, path: String, body: String?)] {
        block.components(separatedBy: "curl ").dropFirst().compactMap { command in
            let line = command.replacingOccurrences(of: "\\\n", with: " ").prefix { $0 != "\n" }
            let body = line.range(of: "-d '").map { String(line[$0.upperBound...].prefix { $0 != "'" }) }
            let words = line.split(separator: " ")
            let method = words.firstIndex(of: "-X").map { String(words[$0 + 1]) } ?? (body != nil || words.contains("--data-binary") ? "POST" : "GET")
            guard let url = words.first(where: { $0.hasPrefix("http://") || $0.hasPrefix("https://") }),
                let path = URLComponents(string: String(url))?.path
            else { return nil }
            return (method, path, body)
        }
    }
}

extension JSONValue {
    fileprivate var objectMembers: [(String, JSONValue)] { if case .object(let members) = self { return members } else { return [] } }
}
