import XCTest

@testable import RingcastCore

/// The pieces of the text table and the badge that a terminal or an image viewer is strict about.
final class TextTableTests: XCTestCase {
    override class func setUp() {
        super.setUp()
        installCryptography()
    }

    func testTextIsChosenByFormatOrByAnAcceptThatRanksItFirst() throws {
        func wanted(_ accept: String?, format: String? = nil) throws -> Bool {
            var request = APIRequest(method: "GET", path: "/api/tasks", headers: RequestHeaders(accept: accept))
            if let format { request.query["format"] = format }
            return try TextTable.wanted(request)
        }
        XCTAssertTrue(try wanted("text/plain"))
        XCTAssertTrue(try wanted("text/*"))
        XCTAssertTrue(try wanted("application/json;q=0.5, text/plain"))
        XCTAssertTrue(try wanted("*/*", format: "text"))
        XCTAssertFalse(try wanted("text/plain", format: "json"), "the query wins")
        XCTAssertFalse(try wanted(nil))
        XCTAssertFalse(try wanted("*/*"))
        XCTAssertFalse(try wanted("application/json, text/plain"), "a tie stays JSON")
        XCTAssertFalse(try wanted("text/plain;q=0"))
        XCTAssertThrowsError(try wanted(nil, format: "csv"))
    }

    /// The last line counts the tasks by state within the table's width, however many states there
    /// are (the fuzz target found 61 columns in a 60-wide table)).
    func testTheCountLineFitsTheNarrowestTable() throws {
        let api = API(store: TaskStore())
        let states = Array(repeating: "running", count: 10) + ["paused", "done", "done", "done", "failed", "cancelled"]
        for (index, state) in states.enumerated() {
            let body = #"{"title":"T","state":"\#(state)"}"#
            XCTAssertEqual(api.handle(APIRequest(method: "POST", path: "/api/tasks/t\(index)", body: Array(body.utf8)), now: t0).status, 200)
        }
        let table = String(
            decoding: api.handle(APIRequest(method: "GET", path: "/api/tasks", query: ["format": "text", "width": "60"]), now: t0).body, as: UTF8.self
        )
        let last = try XCTUnwrap(table.split(separator: "\n").last.map(String.init))
        XCTAssertLessThanOrEqual(TerminalText.columns(of: last), 60, last)
        XCTAssertEqual(last, "16 tasks: 10 running, 1 paused, 3 done, 1 failed, …")
        let wide = String(
            decoding: api.handle(APIRequest(method: "GET", path: "/api/tasks", query: ["format": "text", "width": "120"]), now: t0).body,
            as: UTF8.self)
        XCTAssertTrue(wide.hasSuffix("\n16 tasks: 10 running, 1 paused, 3 done, 1 failed, 1 cancelled\n"), wide)
    }

    /// A width out of range is 422 whether the answer is text or JSON (docs/PROTOCOL.md; found
    /// writing the OpenAPI document, whose width parameter schemathesis sends with format=json).
    func testAWidthOutOfRangeIsRefusedForAJSONAnswerToo() {
        let api = API(store: TaskStore())
        XCTAssertEqual(api.handle(APIRequest(method: "POST", path: "/api/tasks/ci", body: Array(#"{"title": "CI"}"#.utf8)), now: t0).status, 200)
        for path in ["/api/tasks", "/api/tasks/ci"] {
            for query in [["width": "5"], ["width": "201"], ["width": "wide"], ["format": "json", "width": "59"], ["format": "text", "width": "5"]] {
                let response = api.handle(APIRequest(method: "GET", path: path, query: query), now: t0)
                XCTAssertEqual(response.status, 422, "\(path) \(query)")
                XCTAssertEqual(try? JSONParser.parse(response.body)["field"], .string("width"), "\(path) \(query)")
            }
            XCTAssertEqual(api.handle(APIRequest(method: "GET", path: path, query: ["format": "csv", "width": "5"]), now: t0).status, 422)
            for query in [["width": "60"], ["format": "json", "width": "200"], ["format": "text", "width": "120"]] {
                XCTAssertEqual(api.handle(APIRequest(method: "GET", path: path, query: query), now: t0).status, 200, "\(path) \(query)")
            }
        }
    }

    func testPercentagesBarsAndDurations() {
        XCTAssertEqual(TextTable.percent(0.29), " 29%", "29, not 28.999…")
        XCTAssertEqual(TextTable.percent(0.999), " 99%", "cut down: only done is 100 %")
        XCTAssertEqual(TextTable.percent(nil), "  --")
        XCTAssertEqual(TextTable.bar(0.999), "█████████░")
        XCTAssertEqual(TextTable.bar(1), "██████████")
        XCTAssertEqual(TextTable.duration(0.2), "1 s", "rounded up: never 0 s while there is time left")
        XCTAssertEqual(TextTable.duration(125), "2 min 5 s")
        XCTAssertEqual(TextTable.duration(3900), "1 h 5 min")
        XCTAssertEqual(TextTable.duration(7200), "2 h")
    }

    func testEveryRowFitsItsWidthWhateverTheTitle() {
        var tasks: [TaskRecord] = []
        for (index, title) in ["x", String(repeating: "long title ", count: 30), String(repeating: "宽", count: 80)].enumerated() {
            var task = TaskRecord(id: "t\(index)", now: t0)
            task.title = title
            task.detail = "detail"
            task.eta = 3599
            task.slow = true
            tasks.append(task)
        }
        for width in [60, 80, 200] {
            for line in TextTable.render(tasks, width: width).split(separator: "\n") {
                XCTAssertLessThanOrEqual(TerminalText.columns(of: String(line)), width, "\(width): \(line)")
            }
        }
        XCTAssertTrue(TextTable.render(tasks).contains("running    59 min 59 s slow"))
        var spinner = TaskRecord(id: "deploy-3", now: t0)
        spinner.eta = 180
        spinner.expectedSeconds = 180
        XCTAssertEqual(TextTable.eta(spinner, now: t0 + 60_000), "2 min", "a spinner's ETA from its kind is time: it counts down")
        XCTAssertEqual(TextTable.eta(spinner, now: t0 + 200_000), "")
    }

    func testABadgeSaysItsTextInValidXMLWhateverTheTitle() {
        let svg = String(decoding: Badge.svg(Badge.Look(label: "a <b> & \"c\"\u{1}\u{FFFF}", message: "done", color: "#2a8a3e")), as: UTF8.self)
        XCTAssertTrue(svg.contains(">a &lt;b&gt; &amp; &quot;c&quot;</text>"), svg)
        XCTAssertFalse(svg.contains("\u{1}"))
        XCTAssertFalse(svg.contains("<script"))
        let long = Badge.look(for: nil, id: String(repeating: "a", count: 100), label: nil)
        XCTAssertEqual(long.message, "unknown")
        XCTAssertTrue(String(decoding: Badge.svg(long), as: UTF8.self).contains(String(repeating: "a", count: 59) + "…"), "a long label is cut")
        let tag = Badge.etag(Array(svg.utf8))
        XCTAssertTrue(Badge.matches(tag, tag))
        XCTAssertTrue(Badge.matches("\"other\", W/\(tag)", tag))
        XCTAssertTrue(Badge.matches("*", tag))
        XCTAssertFalse(Badge.matches("\"other\"", tag))
        XCTAssertFalse(Badge.matches(nil, tag))
    }

    /// The file name is read by bytes: an id that ends in a Prepend character (U+0600) forms one
    /// Character with the dot of `.svg`, and the badge was a 404 (found writing the OpenAPI document).
    func testABadgeOfAnyFileNameEndingInSVGIsABadge() {
        let api = API(store: TaskStore())
        XCTAssertEqual(
            api.handle(APIRequest(method: "POST", path: "/api/tasks/ci.build-42", body: Array(#"{"progress": 0.5}"#.utf8)), now: t0).status, 200)
        for (file, id) in [
            ("ci.build-42.svg", "ci.build-42"), ("\u{600}.svg", "\u{600}"), ("a\u{600}.svg", "a\u{600}"), ("e\u{301}.svg", "e\u{301}"),
        ] {
            let response = api.handle(APIRequest(method: "GET", path: "/badge/" + file), now: t0)
            XCTAssertEqual(response.status, 200, file.debugDescription)
            XCTAssertEqual(response.contentType, Badge.contentType)
            let svg = String(decoding: response.body, as: UTF8.self)
            XCTAssertTrue(svg.contains(id == "ci.build-42" ? ">50%</text>" : ">unknown</text>"), svg)
        }
        for file in [".svg", "x.svg.png", "x", "svg"] {
            XCTAssertEqual(api.handle(APIRequest(method: "GET", path: "/badge/" + file), now: t0).status, 404, file)
        }
    }
}
