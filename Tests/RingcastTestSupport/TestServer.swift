import Foundation
import RingcastClient
import RingcastCore
import RingcastPlatform
import RingcastServer
import XCTest

/// A real server on an ephemeral loopback port, serving the repository's Public/.
package final class TestServer {
    package let server: Server
    package let port: Int

    package init(persistence: TaskPersistence = MemoryOnlyPersistence(), logger: Logger = .silent, configure: (inout ServerConfig) -> Void = { _ in })
        throws
    {
        var config = ServerConfig()
        config.port = 0
        config.logLevel = .error
        // The suite runs once with the default (a thread per core) and once with RINGCAST_TEST_THREADS=1.
        if let threads = ProcessInfo.processInfo.environment["RINGCAST_TEST_THREADS"].flatMap(Int.init) { config.threads = threads }
        configure(&config)
        server = Server(config: config, baseDirectory: repositoryRoot, logger: logger, persistence: persistence)
        port = try server.start()
    }

    deinit { server.stop() }

    package var wsURL: String { "ws://127.0.0.1:\(port)/ws" }
    package var httpURL: String { "http://127.0.0.1:\(port)" }

    package func http() -> HTTPClient { HTTPClient(host: "127.0.0.1", port: port) }

    @discardableResult
    package func post(_ path: String, _ json: String = "{}", file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let response = try http().request("POST", path, json: json)
        XCTAssertEqual(response.status, 200, "POST \(path) \(json): \(response.text)", file: file, line: line)
        return try JSONParser.parse(response.body)
    }

    /// One task as the server holds it (nil when there is none).
    package func task(_ id: String) throws -> JSONValue? {
        let response = try http().request("GET", "/api/tasks/\(id)")
        return response.status == 200 ? try JSONParser.parse(response.body) : nil
    }

    /// The server's current seq, from /healthz.
    package func seq() throws -> Double {
        guard case .number(let seq)? = try JSONParser.parse(try http().request("GET", "/healthz").body)["seq"] else { return -1 }
        return seq
    }
}

/// A real server for publishing tests: the API only, no dashboard files.
package func producerServer(configure: (inout ServerConfig) -> Void = { _ in }) throws -> TestServer {
    try TestServer { config in
        config.publicDir = emptyPublicDirectory
        configure(&config)
    }
}
