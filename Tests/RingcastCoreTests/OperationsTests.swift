import XCTest

@testable import RingcastCore

/// What operators get from the core: the version everywhere it is shown, readiness and its answer.
final class OperationsTests: XCTestCase {
    func testTheVersionIsInHelloAndHealth() {
        let store = TaskStore(epoch: "versionepoch")
        XCTAssertEqual(json(store.encodeHello(now: t0, heartbeatSeconds: 15))["server"], .string(RingcastVersion.version))
        let health = API(store: store).handle(APIRequest(method: "GET", path: "/healthz"), now: t0)
        XCTAssertEqual(json(health.body)["server"], .string(RingcastVersion.version))
        XCTAssertEqual(RingcastVersion.version.split(separator: ".").count, 3, "x.y.z")
    }

    // MARK: Readiness

    func testADependencyIsReadyOnlyOnceItAnsweredAndWhileItKeepsAnswering() {
        var tracker = ReadinessTracker(name: "storage", deadlineSeconds: 5)
        XCTAssertEqual(tracker.status(now: t0).failure, "storage has not answered yet")
        tracker.asked(now: t0)
        XCTAssertFalse(tracker.isIdle)
        tracker.answered(nil, now: t0 + 3)
        XCTAssertTrue(tracker.status(now: t0 + 3).ready)
        XCTAssertEqual(tracker.lastLatency, 3)

        tracker.asked(now: t0 + 2000)
        XCTAssertTrue(tracker.status(now: t0 + 6999).ready, "a question may wait until its deadline")
        XCTAssertEqual(tracker.status(now: t0 + 7000).failure, "storage has not answered for 5 s (the deadline is 5 s)")
        tracker.answered("database is locked", now: t0 + 7500)
        XCTAssertEqual(tracker.status(now: t0 + 7500).failure, "storage: database is locked")
        tracker.asked(now: t0 + 9000)
        tracker.answered(nil, now: t0 + 9001)
        XCTAssertTrue(tracker.status(now: t0 + 9001).ready, "ready again once it answers")
    }

    func testReadyzAnswers503WithTheReasons() {
        let api = API(store: TaskStore(epoch: "readyepoch"))
        let ready = api.handle(APIRequest(method: "GET", path: "/readyz"), now: t0) {
            var status = TransportStatus()
            status.readiness = [ReadinessStatus(name: "storage")]
            return status
        }
        XCTAssertEqual(ready.status, 200)
        XCTAssertEqual(text(ready.body), #"{"ready":true,"server":"\#(RingcastVersion.version)","checks":{"storage":{"ready":true}}}"#)

        let failing = api.handle(APIRequest(method: "GET", path: "/readyz"), now: t0) {
            var status = TransportStatus()
            status.readiness = [
                ReadinessStatus(name: "storage", failure: "storage: disk I/O error"),
                ReadinessStatus(name: "redis", failure: "redis has not answered for 6 s"),
            ]
            return status
        }
        XCTAssertEqual(failing.status, 503)
        let body = json(failing.body)
        XCTAssertEqual(body["ready"], .bool(false))
        XCTAssertEqual(body["reason"], .string("storage: disk I/O error; redis has not answered for 6 s"))
        XCTAssertEqual(body["checks"]?["redis"]?["ready"], .bool(false))
    }
}
