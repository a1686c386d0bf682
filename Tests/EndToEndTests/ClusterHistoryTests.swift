import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// ETA from history in a cluster: every node applies the same runs, and a node that starts from
/// the cluster's checkpoint has them too.
final class ClusterHistoryTests: XCTestCase {
    private var folder: TemporaryFolder!
    private var redis: RedisProcess!

    override func setUpWithError() throws {
        folder = try TemporaryFolder("ringcast-cluster-history")
        redis = try RedisProcess()
    }

    override func tearDown() {
        redis = nil
        folder?.remove()
    }

    private func node(_ name: String) throws -> ServeProcess {
        let config = folder.file("\(name).json")
        try Data(#"{"port":0,"publicDir":"\#(emptyPublicDirectory)","storage":"\#(redis.url)","logLevel":"error"}"#.utf8).write(to: config)
        return try ServeProcess(["--config", config.path])
    }

    private func kinds(_ node: ServeProcess) -> String? {
        (try? HTTPClient(host: "127.0.0.1", port: node.port).request("GET", "/api/kinds")).map(\.text)
    }

    func testEveryNodeKeepsTheSameRunsAndANodeStartedFromTheCheckpointHasThem() throws {
        let a = try node("a"), b = try node("b")
        let onA = HTTPClient(host: "127.0.0.1", port: a.port)
        for (run, seconds) in [0.1, 0.3, 0.2].enumerated() {
            XCTAssertEqual(try onA.request("POST", "/api/tasks/cl.build-\(run)", json: #"{"progress":null}"#).status, 200)
            Thread.sleep(forTimeInterval: seconds)
            XCTAssertEqual(try onA.request("POST", "/api/tasks/cl.build-\(run)", json: #"{"state":"done"}"#).status, 200)
        }
        let history = try XCTUnwrap(kinds(a))
        XCTAssertTrue(history.contains(#""kind":"cl.build","runs":3"#), history)
        XCTAssertTrue(eventually(timeout: 5) { self.kinds(b) == history }, "B applied the same runs: \(kinds(b) ?? "")")

        // Redis loses everything; A puts its state back as the cluster's checkpoint, and a node
        // that starts now has nothing but that checkpoint to start from.
        try redis.restart()
        XCTAssertTrue(eventually(timeout: 20) { (try? onA.request("POST", "/api/tasks/cl.after", json: "{}"))?.status == 200 },
                      "A never got back to Redis")
        let c = try node("c")
        XCTAssertEqual(kinds(c), history, "the checkpoint carries the history")
        let fresh = try JSONParser.parse(try HTTPClient(host: "127.0.0.1", port: c.port).request("POST", "/api/tasks/cl.build-9", json: "{}").body)
        guard case let .array(list)? = try JSONParser.parse(Array(history.utf8))["kinds"], let median = list.first?["median"] else { return XCTFail(history) }
        XCTAssertEqual(fresh["task"]?["expectedSeconds"], median)
    }
}
