import XCTest

@testable import RingcastCore

/// The router and the OpenAPI document come from one table (Routes.swift): the document names
/// exactly the table's documented routes and their methods, and the router answers every route of
/// the table with each method it lists (none is a 404 or a 405), so the two cannot drift apart.
/// The sign-in's routes are answered by the server: SignInTests sends those to one.
final class RouteTableTests: XCTestCase {
    override class func setUp() {
        super.setUp()
        installCryptography()
    }

    func testTheDocumentsPathsAreTheTablesDocumentedRoutes() throws {
        guard case .object(let paths)? = OpenAPI.document["paths"] else { return XCTFail("the document has no paths") }
        let documented = Routes.table.filter(\.isDocumented)
        XCTAssertEqual(paths.map(\.0), documented.map(\.path), "the document's paths, in the table's order")
        for route in documented {
            guard case .object(let members)? = OpenAPI.document["paths"]?[route.path] else {
                XCTFail("\(route.path) is not in the document")
                continue
            }
            XCTAssertEqual(members.map(\.0).filter { $0 != "parameters" }, route.methods.map { $0.lowercased() }, route.path)
        }
        XCTAssertEqual(Set(Routes.table.map(\.path)).count, Routes.table.count, "a path listed twice")
        XCTAssertEqual(Routes.table.filter { !$0.isDocumented }.map(\.path), ["/tasks/{id}"], "only the task page is left out")
        XCTAssertEqual(
            Routes.table.filter(\.handler.isSignIn).map(\.path), ["/auth/providers", "/auth/login", "/auth/callback", "/auth/logout"])
    }

    /// Each route of the table the API answers, with each method it lists, on a task that suits it:
    /// never a 405, and never the router's 404 (a handler's "no task" is not one); the other methods
    /// are a 405 whose Allow is the route's.
    func testTheRouterAnswersEveryMethodOfEveryRouteInTheTable() throws {
        func fixture() -> API {
            let api = API(store: TaskStore(epoch: "fixtureepoch"))
            api.taskPage = Array("<!doctype html>".utf8)
            for (path, body) in [
                ("/api/tasks/ci.build-42", #"{"title": "Build 42", "controls": ["cancel", "pause", "resume"]}"#),
                ("/api/timers/tea", #"{"seconds": 180}"#),
            ] {
                XCTAssertEqual(api.handle(APIRequest(method: "POST", path: path, body: Array(body.utf8)), now: t0).status, 200, path)
            }
            return api
        }
        var answered = 0
        for route in Routes.table where !route.handler.isSignIn {
            let path = route.path.replacingOccurrences(of: "{id}", with: route.path.hasPrefix("/api/timers") ? "tea" : "ci.build-42")
            for method in route.methods {
                let response = fixture().handle(APIRequest(method: method, path: path, body: Array("{}".utf8)), now: t0 + 1000)
                XCTAssertNotEqual(response.status, 405, "\(method) \(path): \(text(response.body))")
                XCTAssertFalse(text(response.body).contains("no endpoint"), "\(method) \(path): \(text(response.body))")
                answered += 1
            }
            for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] where !route.methods.contains(method) {
                let response = fixture().handle(APIRequest(method: method, path: path), now: t0 + 1000)
                XCTAssertEqual(response.status, 405, "\(method) \(path): \(text(response.body))")
                XCTAssertEqual(json(response.body)["message"], .string("\(method) is not allowed on \(path); use \(route.allow)"))
                XCTAssertEqual(response.headers.filter { $0.0 == "allow:" }.map(\.1), route.isDocumented ? [route.allow] : [], "\(method) \(path)")
            }
        }
        XCTAssertEqual(answered, 30)
    }

    /// A path matches the route whose template it fills, with the id it names; a badge's id is the
    /// file name without `.svg`; what fills no template matches nothing.
    func testAPathMatchesTheRouteItsTemplateNames() {
        XCTAssertEqual(Routes.match("/api/tasks/ci.build-42/log")?.route.path, "/api/tasks/{id}/log")
        XCTAssertEqual(Routes.match("/api/tasks/ci.build-42/log")?.id, "ci.build-42")
        XCTAssertEqual(Routes.match("/api/tasks/")?.route.path, "/api/tasks/{id}", "an empty id is the handler's to refuse")
        XCTAssertEqual(Routes.match("/badge/ci.svg")?.id, "ci")
        XCTAssertEqual(Routes.match("/api/tasks")?.id, "")
        XCTAssertEqual(Routes.match("/api/tasks/ci/cancel")?.route.handler, .control(.cancel))
        for unknown in ["/badge/.svg", "/badge/x.png", "/api/tasks/ci/stop", "/api", "api/tasks", "/auth", "/healthz/x", "/api/timers"] {
            XCTAssertNil(Routes.match(unknown), unknown)
        }
        XCTAssertEqual(Routes.allowedMethods(path: "/api/tasks/x"), "GET, POST, PUT, PATCH, DELETE")
        XCTAssertEqual(Routes.allowedMethods(path: "/auth/login"), "GET")
        XCTAssertNil(Routes.allowedMethods(path: "/tasks/x"), "the task page is not in the document")
    }
}
