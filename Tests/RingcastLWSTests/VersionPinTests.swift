import Foundation
import XCTest

/// The shim reads libwebsockets 4.1's private layout: built against another version it must stop
/// the build with a message that says why, and build against the installed 4.1 headers.
final class VersionPinTests: XCTestCase {
    private let shim = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/CRingcastShims").standardized

    private func compileShim(extraIncludes: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/cc")
        process.arguments =
            ["-fsyntax-only"] + extraIncludes.map { "-I" + $0 } + [
                "-I" + shim.appendingPathComponent("include").path, shim.appendingPathComponent("rc_shims.c").path,
            ]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    func testAnotherLibwebsocketsVersionIsABuildErrorThatSaysWhy() throws {
        let fake = FileManager.default.temporaryDirectory.appendingPathComponent("ringcast-fake-lws-\(getpid())")
        try FileManager.default.createDirectory(at: fake, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: fake) }
        // The real headers, claiming 4.3.
        try "#include_next <libwebsockets.h>\n#undef LWS_LIBRARY_VERSION_MINOR\n#define LWS_LIBRARY_VERSION_MINOR 3\n"
            .write(to: fake.appendingPathComponent("libwebsockets.h"), atomically: true, encoding: .utf8)
        let other = try compileShim(extraIncludes: [fake.path])
        XCTAssertNotEqual(other.status, 0)
        XCTAssertTrue(other.output.contains("relies on libwebsockets 4.1's private layout"), other.output)

        let installed = try compileShim(extraIncludes: [])
        XCTAssertEqual(installed.status, 0, installed.output)
    }
}
