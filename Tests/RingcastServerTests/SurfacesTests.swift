import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastServer
import RingcastTestSupport
import XCTest

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Progress read outside the dashboard, through the real server: the text table for terminals,
/// the SVG badge, and the ETA a kind's past runs give a new one.
final class SurfacesTests: XCTestCase {
    private func get(_ server: TestServer, _ path: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try server.http().request("GET", path, headers: headers)
    }

    // MARK: Text for terminals

    /// A row of the table, read back by the header's columns.
    private struct Row: Equatable {
        var bar: String, percent: String, task: String, state: String, eta: String
    }

    private func parseTable(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> (rows: [Row], summary: String) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines.last, "", "the table ends with a line break", file: file, line: line)
        lines.removeLast()
        let header = try XCTUnwrap(lines.first, file: file, line: line)
        func column(_ name: String) throws -> Int { header.distance(from: header.startIndex, to: try XCTUnwrap(header.range(of: name)).lowerBound) }
        let (task, state, eta) = (try column("TASK"), try column("STATE"), try column("ETA"))
        XCTAssertEqual(try column("PROGRESS"), 0, file: file, line: line)
        let rows = lines.dropFirst().dropLast().map { text -> Row in
            let characters = Array(text)
            func cells(_ from: Int, _ to: Int?) -> String {
                guard from < characters.count else { return "" }
                return String(characters[from..<min(to ?? characters.count, characters.count)]).trimmingCharacters(in: .whitespaces)
            }
            return Row(bar: cells(0, 10), percent: cells(10, task), task: cells(task, state), state: cells(state, eta), eta: cells(eta, nil))
        }
        return (rows, try XCTUnwrap(lines.last, file: file, line: line))
    }

    func testTasksAsATableOfBarsThatFitsEightyColumnsAndReadsBack() throws {
        let server = try producerServer()
        try server.post("/api/tasks/ci.build-42", #"{"title":"Build 42","progress":0.7,"detail":"compiling"}"#)
        try server.post("/api/tasks/ci.wait", #"{"title":"Waiting for a runner","progress":null}"#)
        try server.post("/api/tasks/ml.train", #"{"title":"Training","completed":21,"total":50,"state":"failed","detail":"input ended at 21/50"}"#)
        try server.post("/api/tasks/rel", #"{"title":"Release"}"#)
        try server.post("/api/tasks/rel.notes", #"{"title":"Notes","state":"done","parent":"rel"}"#)
        try server.post(
            "/api/tasks/rel.pkg", #"{"title":"\#(String(repeating: "Packages for every platform ", count: 4))","progress":0.25,"parent":"rel"}"#)
        try server.post("/api/timers/tea", #"{"seconds":185,"title":"Tea"}"#)

        let answer = try get(server, "/api/tasks", headers: [("Accept", "text/plain")])
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.headers["content-type"], "text/plain; charset=utf-8")
        XCTAssertTrue(answer.text.split(separator: "\n").allSatisfy { $0.count <= 80 }, answer.text)
        let (rows, summary) = try parseTable(answer.text)
        XCTAssertEqual(
            rows,
            [
                Row(bar: "███████░░░", percent: "70%", task: "Build 42 · compiling", state: "running", eta: ""),
                Row(bar: "··········", percent: "--", task: "Waiting for a runner", state: "running", eta: ""),
                Row(bar: "████░░░░░░", percent: "42%", task: "Training · input ended at 21/50", state: "failed", eta: ""),
                Row(bar: "██████░░░░", percent: "62%", task: "Release", state: "running", eta: ""),
                Row(bar: "██████████", percent: "100%", task: "Notes", state: "done", eta: ""),
                Row(bar: "██░░░░░░░░", percent: "25%", task: "Packages for every platform Pac…", state: "running", eta: ""),
                Row(bar: "░░░░░░░░░░", percent: "0%", task: "Tea", state: "running", eta: "3 min 5 s"),
            ], answer.text)
        XCTAssertTrue(answer.text.contains("\n██████████ 100%    Notes"), "a child sits under its parent, indented")
        XCTAssertEqual(summary, "7 tasks: 5 running, 1 done, 1 failed")

        // ?format=text does the same; ?watch= filters; one task's table holds it and what is under it.
        XCTAssertEqual(try get(server, "/api/tasks?format=text").text, answer.text)
        XCTAssertEqual(
            try parseTable(try get(server, "/api/tasks?format=text&watch=ci.*").text).rows.map(\.task),
            ["Build 42 · compiling", "Waiting for a runner"])
        let release = try get(server, "/api/tasks/rel", headers: [("Accept", "text/plain;q=0.9, application/json;q=0.5")])
        XCTAssertEqual(try parseTable(release.text).rows.map(\.task), ["Release", "Notes", "Packages for every platform Pac…"])
        let wide = try get(server, "/api/tasks?format=text&width=120").text
        XCTAssertTrue(wide.contains("  Packages for every platform Packages for every platform Packages for ev…"), wide)

        // JSON stays the default, for curl's */* and a browser's Accept alike.
        for accept in ["*/*", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/json, text/plain"] {
            XCTAssertEqual(try get(server, "/api/tasks", headers: [("Accept", accept)]).headers["content-type"], "application/json", accept)
        }
        XCTAssertEqual(try get(server, "/api/tasks?format=yaml").status, 422)
        XCTAssertEqual(try get(server, "/api/tasks?format=text&width=20").status, 422)
        XCTAssertEqual(try get(server, "/api/tasks/nope?format=text").status, 404)
    }

    // MARK: Badges

    /// The SVG's rects (their fill) and texts, as an XML parser reads them.
    private final class SVGReader: NSObject, XMLParserDelegate {
        var root: String?
        var fills: [String] = []
        var texts: [String] = []
        var title = ""
        private var inText = false, inTitle = false
        var scripts = 0

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]
        ) {
            if root == nil { root = name }
            switch name {
            case "rect": if let fill = attributes["fill"] { fills.append(fill) }
            case "text":
                inText = true
                texts.append("")
            case "title": inTitle = true
            case "script", "foreignObject": scripts += 1
            default: break
            }
            if attributes.keys.contains(where: { $0.lowercased().hasPrefix("on") || $0 == "style" }) { scripts += 1 }
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if name == "text" { inText = false }
            if name == "title" { inTitle = false }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if inText { texts[texts.count - 1] += string }
            if inTitle { title += string }
        }
    }

    private func readBadge(_ response: HTTPResponse, file: StaticString = #filePath, line: UInt = #line) -> SVGReader {
        let reader = SVGReader()
        let parser = XMLParser(data: Data(response.body))
        parser.delegate = reader
        XCTAssertTrue(parser.parse(), "not XML: \(parser.parserError.map(String.init(describing:)) ?? "") \(response.text)", file: file, line: line)
        XCTAssertEqual(reader.root, "svg", file: file, line: line)
        XCTAssertEqual(reader.scripts, 0, "no script, no handler, no style", file: file, line: line)
        return reader
    }

    func testABadgeIsAnSVGInTheStateColourWithItsTextAndAnUnknownTaskIsGrey() throws {
        let server = try producerServer()
        try server.post("/api/tasks/ci.build-42", #"{"title":"Build 42","progress":0.42}"#)
        try server.post("/api/tasks/ci.test", #"{"title":"Tests <&> \"all\"","state":"failed"}"#)
        try server.post("/api/tasks/deploy", #"{"state":"done"}"#)

        let running = try get(server, "/badge/ci.build-42.svg")
        XCTAssertEqual(running.status, 200)
        XCTAssertEqual(running.headers["content-type"], "image/svg+xml")
        XCTAssertEqual(running.headers["cache-control"], "max-age=10")
        let etag = try XCTUnwrap(running.headers["etag"])
        XCTAssertTrue(etag.hasPrefix("\"") && etag.hasSuffix("\""), etag)
        let badge = readBadge(running)
        XCTAssertEqual(badge.texts, ["Build 42", "42%"])
        XCTAssertEqual(badge.title, "Build 42: 42%")
        XCTAssertEqual(badge.fills, ["#555", "#234a6b", "#1f78c1"], "grey label, then the bar of 42 % in running's blue")

        let failed = readBadge(try get(server, "/badge/ci.test.svg"))
        XCTAssertEqual(failed.texts, ["Tests <&> \"all\"", "failed"], "the title, escaped in the SVG, reads back whole")
        XCTAssertEqual(failed.fills.last, "#c9362c")
        XCTAssertEqual(readBadge(try get(server, "/badge/deploy.svg?label=production")).texts, ["production", "done"])
        XCTAssertEqual(readBadge(try get(server, "/badge/deploy.svg")).fills.last, "#2a8a3e")

        for path in ["/badge/nothing.here.svg", "/badge/bad%20id.svg"] {
            let unknown = try get(server, path)
            XCTAssertEqual(unknown.status, 200, "an image, never an error page")
            XCTAssertEqual(unknown.headers["content-type"], "image/svg+xml")
            let grey = readBadge(unknown)
            XCTAssertEqual(grey.texts.last, "unknown")
            XCTAssertEqual(grey.fills.last, "#8c8c8c")
        }
        XCTAssertEqual(readBadge(try get(server, "/badge/nothing.here.svg")).texts.first, "nothing.here")

        // The ETag names this very badge: asked again with it, 304 and no body; a change, a new badge.
        let again = try get(server, "/badge/ci.build-42.svg", headers: [("If-None-Match", etag)])
        XCTAssertEqual(again.status, 304)
        XCTAssertEqual(again.body, [])
        XCTAssertEqual(again.headers["etag"], etag)
        try server.post("/api/tasks/ci.build-42", #"{"progress":0.5}"#)
        let changed = try get(server, "/badge/ci.build-42.svg", headers: [("If-None-Match", etag)])
        XCTAssertEqual(changed.status, 200)
        XCTAssertNotEqual(changed.headers["etag"], etag)
        XCTAssertEqual(readBadge(changed).texts.last, "50%")

        XCTAssertEqual(try server.http().request("POST", "/badge/deploy.svg", json: "{}").status, 405)
        XCTAssertEqual(try get(server, "/badge/deploy").status, 404)
    }

    // MARK: ETA from history

    func testThreeFinishedRunsOfAKindGiveTheFourthAnExpectedSecondsNearTheirMedianAndARestartKeepsThem() throws {
        let folder = try TemporaryFolder("ringcast-history")
        defer { folder.remove() }
        let path = folder.file("ringcast.db").path
        var first: TestServer? = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent))
        // Runs of at least 0.2, 0.4 and 0.3 s: the server measures them from its own clock, so they
        // may come out longer on a loaded machine, never shorter.
        for (run, seconds) in [0.2, 0.4, 0.3].enumerated() {
            try first!.post("/api/tasks/ci.build-\(run + 1)", #"{"progress":null}"#)
            Thread.sleep(forTimeInterval: seconds)
            try first!.post("/api/tasks/ci.build-\(run + 1)", #"{"state":"done"}"#)
        }
        let kinds = try JSONParser.parse(try get(first!, "/api/kinds").body)
        guard case .array(let list)? = kinds["kinds"], let kind = list.first, list.count == 1 else { return XCTFail("\(kinds)") }
        XCTAssertEqual(kind["kind"], .string("ci.build"))
        XCTAssertEqual(kind["runs"], .number(3))
        let median = try XCTUnwrap(kind.number("median"))
        XCTAssertGreaterThanOrEqual(median, 0.3)
        XCTAssertLessThan(median, 3.3, "near 0.3 s, allowing a loaded machine its lateness")

        let fourth = try first!.post("/api/tasks/ci.build-4", #"{"title":"Build 4"}"#)
        XCTAssertEqual(fourth["task"]?["expectedSeconds"], .number(median), "the median of the three")
        XCTAssertNotNil(fourth["task"]?["eta"], "a spinner gets an ETA from its kind")
        first = nil

        let second = try TestServer(persistence: try SQLitePersistence(path: path, logger: .silent))
        XCTAssertEqual(try JSONParser.parse(try get(second, "/api/kinds").body), kinds, "the runs are kept across a restart")
        let fifth = try second.post("/api/tasks/ci.build-5", "{}")
        XCTAssertEqual(fifth["task"]?["expectedSeconds"], .number(median))
    }
}

extension JSONValue {
    fileprivate func number(_ key: String) -> Double? { if case .number(let value)? = self[key] { return value } else { return nil } }
}
