import XCTest

@testable import RingcastCore

final class ConfigTests: XCTestCase {
    private func parse(_ text: String) throws -> ServerConfig {
        try ServerConfig.parse(Array(text.utf8), source: "test.json")
    }

    /// Parsing fails with an error that names the field (and the file).
    private func assertFails(
        _ text: String, naming field: String, saying fragment: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try parse(text), "accepted \(text)", file: file, line: line) { error in
            let message = (error as? ConfigError)?.description ?? ""
            XCTAssertTrue(message.hasPrefix("test.json: "), message, file: file, line: line)
            XCTAssertTrue(message.contains("\"\(field)\""), "\(message) should name \(field)", file: file, line: line)
            if let fragment { XCTAssertTrue(message.contains(fragment), "\(message) should say \(fragment)", file: file, line: line) }
        }
    }

    func testDefaults() throws {
        let config = try parse("{}")
        XCTAssertEqual(config, ServerConfig())
        XCTAssertEqual(config.host, "127.0.0.1")
        XCTAssertEqual(config.port, 8080)
        XCTAssertEqual(config.publicDir, "Public")
        XCTAssertEqual(config.heartbeatSeconds, 15)
        XCTAssertEqual(config.logLevel, .info)
    }

    func testEverySetting() throws {
        let config = try parse(
            #"""
            {"host": "0.0.0.0", "port": 0, "publicDir": "/srv/www", "allowedOrigins": ["https://example.com/", "http://localhost:3000"],
             "heartbeatSeconds": 2.5, "maxMessageBytes": 4096, "fanOutLogEvents": 64, "maxEventsPerFrame": 8,
             "staticMaxAge": 0, "logLevel": "debug"}
            """#)
        XCTAssertEqual(config.host, "0.0.0.0")
        XCTAssertEqual(config.port, 0)
        XCTAssertEqual(config.publicDir, "/srv/www")
        XCTAssertEqual(config.allowedOrigins, ["https://example.com", "http://localhost:3000"], "a trailing slash is dropped")
        XCTAssertEqual(config.heartbeatSeconds, 2.5)
        XCTAssertEqual(config.maxMessageBytes, 4096)
        XCTAssertEqual(config.fanOutLogEvents, 64)
        XCTAssertEqual(config.maxEventsPerFrame, 8)
        XCTAssertEqual(config.staticMaxAge, 0)
        XCTAssertEqual(config.logLevel, .debug)
    }

    func testASettingTheServerDoesNotCarryOutIsRefusedNotIgnored() {
        assertFails(#"{"threads": -1}"#, naming: "threads", saying: "one per core")
        XCTAssertEqual(try parse(#"{"threads": 4}"#).threads, 4)
        XCTAssertEqual(try parse("{}").threads, 0, "by default one service thread per online core")
        assertFails(#"{"redis": "redis://127.0.0.1"}"#, naming: "redis", saying: "not supported")
        XCTAssertEqual(try parse(#"{"redisReplicas": 2}"#).redisReplicas, 2)
        XCTAssertEqual(try parse("{}").redisReplicas, 0, "by default an answer does not wait for replicas")
        assertFails(#"{"redisReplicas": -1}"#, naming: "redisReplicas", saying: "from 0 to 100")
        assertFails(#"{"redisReplicas": 1.5}"#, naming: "redisReplicas")
        assertFails(#"{"tls": {}}"#, naming: "tls", saying: "\"cert\"")
        assertFails(#"{"tls": {"cert": "c.pem"}}"#, naming: "tls")
        assertFails(#"{"tls": {"cert": "c.pem", "key": "k.pem", "protocols": "x"}}"#, naming: "tls", saying: "\"ciphers\"")
    }

    func testTheCoalescingWindowIsOffByDefaultAndBounded() throws {
        XCTAssertEqual(try parse("{}").flushMilliseconds, 0, "by default every event is written at once")
        XCTAssertEqual(try parse(#"{"flushMilliseconds": 16}"#).flushMilliseconds, 16)
        XCTAssertEqual(try parse(#"{"flushMilliseconds": 0}"#).flushMilliseconds, 0)
        XCTAssertEqual(try parse(#"{"flushMilliseconds": 1000}"#).flushMilliseconds, 1000)
        assertFails(#"{"flushMilliseconds": -16}"#, naming: "flushMilliseconds", saying: "from 0 (write every event at once) to 1000")
        assertFails(#"{"flushMilliseconds": -16}"#, naming: "flushMilliseconds", saying: "not -16")
        assertFails(#"{"flushMilliseconds": 60000}"#, naming: "flushMilliseconds", saying: "e.g. 16")
        assertFails(#"{"flushMilliseconds": 16.5}"#, naming: "flushMilliseconds", saying: "a whole number")
        assertFails(#"{"flushMilliseconds": "16ms"}"#, naming: "flushMilliseconds", saying: "not string")
    }

    func testTrustSettings() throws {
        let config = try parse(
            #"""
            {"tls": {"cert": "cert.pem", "key": "key.pem"}, "allowedHosts": ["Ringcast.Example.com", ".corp.example", "*"],
             "retentionSeconds": 3600, "maxTasks": 500, "maxPublishRate": 0, "maxConnectionsPerAddress": 10, "limitLoopback": true}
            """#)
        XCTAssertEqual(config.tls, TLSFiles(cert: "cert.pem", key: "key.pem"))
        XCTAssertEqual(config.allowedHosts, ["ringcast.example.com", ".corp.example", "*"])
        XCTAssertEqual(config.retentionSeconds, 3600)
        XCTAssertEqual(config.maxTasks, 500)
        XCTAssertEqual(config.maxPublishRate, 0)
        XCTAssertEqual(config.maxConnectionsPerAddress, 10)
        XCTAssertTrue(config.limitLoopback)
        let defaults = ServerConfig()
        XCTAssertNil(defaults.tls)
        XCTAssertEqual(defaults.retentionSeconds, 86_400, "a day")
        XCTAssertEqual(defaults.maxTasks, 10_000)
        assertFails(#"{"allowedHosts": ["http://a.com"]}"#, naming: "allowedHosts")
        assertFails(#"{"allowedHosts": "a.com"}"#, naming: "allowedHosts")
        assertFails(#"{"retentionSeconds": 0}"#, naming: "retentionSeconds")
        assertFails(#"{"maxTasks": 0}"#, naming: "maxTasks")
        assertFails(#"{"maxPublishRate": -1}"#, naming: "maxPublishRate")
        assertFails(#"{"limitLoopback": "yes"}"#, naming: "limitLoopback")
        assertFails(#"{"maxConnections": 0}"#, naming: "maxConnections")
        assertFails(#"{"sendBufferBytes": 100}"#, naming: "sendBufferBytes")
        assertFails(#"{"writeTimeoutSeconds": -1}"#, naming: "writeTimeoutSeconds")
        XCTAssertEqual(try parse(#"{"maxConnections": 500, "sendBufferBytes": 0, "writeTimeoutSeconds": 5}"#).maxConnections, 500)
        XCTAssertEqual(defaults.writeTimeoutSeconds, 30)
        XCTAssertEqual(defaults.sendBufferBytes, 262_144)
        XCTAssertFalse(defaults.compression, "off by default: a deflated snapshot costs each watcher its own CPU")
        XCTAssertTrue(try parse(#"{"compression": true}"#).compression)
        assertFails(#"{"compression": "deflate"}"#, naming: "compression")
    }

    func testTheProxySettingsNameOneHeaderAndAddressesOrRanges() throws {
        XCTAssertEqual(ServerConfig().forwardedHeader, .xForwardedFor)
        let config = try parse(#"{"trustedProxies": ["127.0.0.3", "10.0.0.0/8", "fd00::/8"], "forwardedHeader": "forwarded"}"#)
        XCTAssertEqual(config.forwardedHeader, .forwarded)
        XCTAssertEqual(config.trustedProxies, ["127.0.0.3", "10.0.0.0/8", "fd00::/8"])
        assertFails(#"{"forwardedHeader": "X-Real-IP"}"#, naming: "forwardedHeader", saying: #"not "X-Real-IP""#)
        assertFails(#"{"forwardedHeader": ["Forwarded"]}"#, naming: "forwardedHeader")
        assertFails(#"{"trustedProxies": ["1.2.3"]}"#, naming: "trustedProxies")
        assertFails(#"{"trustedProxies": ["10.0.0.0/33"]}"#, naming: "trustedProxies")
        assertFails(#"{"trustedProxies": ["proxy.internal"]}"#, naming: "trustedProxies")
    }

    func testStorageIsMemoryOrAFile() throws {
        XCTAssertEqual(try parse("{}").storage, "memory")
        XCTAssertEqual(try parse(#"{"storage": "data/ringcast.db"}"#).storage, "data/ringcast.db")
        assertFails(#"{"storage": {}}"#, naming: "storage", saying: "memory")
        assertFails(#"{"storage": ""}"#, naming: "storage")
    }

    func testErrorsNameTheField() {
        assertFails(#"{"host": ""}"#, naming: "host", saying: "a non-empty string")
        assertFails(#"{"host": 127}"#, naming: "host")
        assertFails(#"{"port": 70000}"#, naming: "port", saying: "0 to 65535")
        assertFails(#"{"port": -1}"#, naming: "port")
        assertFails(#"{"port": "8080"}"#, naming: "port", saying: "not string")
        assertFails(#"{"publicDir": false}"#, naming: "publicDir", saying: "not boolean")
        assertFails(#"{"allowedOrigins": "https://a.com"}"#, naming: "allowedOrigins")
        assertFails(#"{"allowedOrigins": ["a.com"]}"#, naming: "allowedOrigins")
        assertFails(#"{"allowedOrigins": [1]}"#, naming: "allowedOrigins")
        assertFails(#"{"heartbeatSeconds": 0}"#, naming: "heartbeatSeconds")
        assertFails(#"{"maxMessageBytes": 100}"#, naming: "maxMessageBytes")
        assertFails(#"{"fanOutLogEvents": 8}"#, naming: "fanOutLogEvents")
        assertFails(#"{"maxEventsPerFrame": 0}"#, naming: "maxEventsPerFrame")
        assertFails(#"{"staticMaxAge": -5}"#, naming: "staticMaxAge")
        assertFails(#"{"logLevel": "loud"}"#, naming: "logLevel", saying: "debug, info, warning, error")
        assertFails(#"{"prot": 80}"#, naming: "prot", saying: "unknown setting")
    }

    func testAnOutOfRangeNumberIsQuotedAsWritten() {
        // The message shows the number as the file has it, not Swift's debug form of a JSON value.
        assertFails(#"{"port": 70000}"#, naming: "port", saying: "not 70000")
        assertFails(#"{"heartbeatSeconds": 0.05}"#, naming: "heartbeatSeconds", saying: "not 0.05")
    }

    func testCountsMustBeWholeNumbers() {
        // 8080.5 is no port: it must not silently become 8080.
        assertFails(#"{"port": 8080.5}"#, naming: "port", saying: "must be a whole number, not 8080.5")
        assertFails(#"{"maxMessageBytes": 4096.5}"#, naming: "maxMessageBytes")
        assertFails(#"{"fanOutLogEvents": 64.2}"#, naming: "fanOutLogEvents")
        assertFails(#"{"maxEventsPerFrame": 1.5}"#, naming: "maxEventsPerFrame")
        assertFails(#"{"staticMaxAge": 0.5}"#, naming: "staticMaxAge")
        XCTAssertEqual(try parse(#"{"port": 8080.0}"#).port, 8080)
    }

    func testMalformedFiles() {
        XCTAssertThrowsError(try parse("{\"port\": 80,}")) { error in
            XCTAssertEqual("\(error)", "test.json: invalid JSON at byte 12: expected a string key")
        }
        XCTAssertThrowsError(try parse("[]")) { error in
            XCTAssertEqual("\(error)", "test.json: the top level must be a JSON object")
        }
    }

    func testLogLevels() {
        XCTAssertLessThan(LogLevel.debug, .info)
        XCTAssertLessThan(LogLevel.warning, .error)
        // @unchecked Sendable: the logger calls its sink on this thread only.
        final class Lines: @unchecked Sendable { var items: [String] = [] }
        let lines = Lines()
        let logger = Logger(level: .warning) { lines.items.append($0) }
        logger.debug("d")
        logger.info("i")
        logger.warning("w")
        logger.error("e")
        XCTAssertEqual(lines.items, ["[warning] w", "[error] e"])
    }
}
