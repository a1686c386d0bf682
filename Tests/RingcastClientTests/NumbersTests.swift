import Foundation
import RingcastClient
import RingcastCore
import RingcastTestSupport
import XCTest

/// Progress as a Swift service has it: computed Doubles, Floats, CGFloats and integer unit counts.
final class NumbersTests: XCTestCase {
    func testComputedFractionsOfAnyFloatingPointTypeAndIntegerUnitCountsArrive() async throws {
        let server = try producerServer()
        let rc = try RingcastClient(url: server.httpURL)
        for i in 0...20 { try await rc.update("n.double", progress: Double(i) / 20) }
        let share: Float = 0.25
        try await rc.update("n.float", progress: share, title: "Float")
        try await rc.update("n.cgfloat", progress: CGFloat(3) / 4)
        try await rc.update("n.literal", progress: 0.42)
        try await rc.update("n.value", progress: ProgressValue(Double(1) / 8))
        let rows: Int64 = 30
        try await rc.update("n.units", completed: rows, total: 120, title: "Rows")
        try await rc.update("n.count", completed: 3, total: 12)
        try await rc.update("n.count", completed: 6)
        try await rc.update("n.spin", progress: .indeterminate)
        try await rc.update("n.double", state: .done)
        try await rc.flush(timeout: 5)

        func number(_ id: String, _ key: String) throws -> Double? {
            if case .number(let value)? = try server.task(id)?[key] { return value }
            return nil
        }
        XCTAssertEqual(try number("n.double", "progress"), 1)
        XCTAssertEqual(try server.task("n.double")?["state"], .string("done"))
        XCTAssertEqual(try number("n.float", "progress"), 0.25)
        XCTAssertEqual(try number("n.cgfloat", "progress"), 0.75)
        XCTAssertEqual(try number("n.literal", "progress"), 0.42)
        XCTAssertEqual(try number("n.value", "progress"), 0.125)
        XCTAssertEqual(try number("n.units", "completed"), 30)
        XCTAssertEqual(try number("n.units", "total"), 120)
        XCTAssertEqual(try number("n.units", "progress"), 0.25)
        XCTAssertEqual(try number("n.count", "progress"), 0.5, "a later count alone keeps the total")
        XCTAssertEqual(try server.task("n.spin")?["progress"], .null)
        await rc.close()
    }

    func testValuesOutOfRangeThrowTheServersErrorBeforeAnythingIsSent() async throws {
        let rc = try RingcastClient(url: "http://127.0.0.1:\(closedLoopbackPort())")
        func refusal(_ call: () async throws -> Void) async -> (code: String, field: String?, message: String)? {
            do {
                try await call()
                return nil
            } catch let RingcastClientError.invalid(code, message, field) {
                return (code, field, message)
            } catch { return ("\(error)", nil, "") }
        }
        let tooMuch = await refusal { try await rc.update("x", progress: Double(3) / 2) }
        XCTAssertEqual(tooMuch?.code, "invalid_field")
        XCTAssertEqual(tooMuch?.field, "progress")
        XCTAssertTrue(tooMuch?.message.contains("send 0.42 for 42%") ?? false, "\(String(describing: tooMuch))")
        let notANumber = await refusal { try await rc.update("x", progress: Float.nan) }
        XCTAssertEqual(notANumber?.field, "progress")
        let negative = await refusal { try await rc.update("x", progress: -0.1 as CGFloat) }
        XCTAssertEqual(negative?.field, "progress")
        let negativeCount = await refusal { try await rc.update("x", completed: -1, total: 10) }
        XCTAssertEqual(negativeCount?.field, "completed")
        let zeroTotal = await refusal { try await rc.update("x", completed: 0, total: 0) }
        XCTAssertEqual(zeroTotal?.field, "total")
        XCTAssertEqual(rc.statistics.accepted, 0, "nothing out of range was queued")
        await rc.close(timeout: 0.1)
    }
}
