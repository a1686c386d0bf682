import RingcastCrypto
import XCTest

@testable import RingcastCore

/// The core hashes (a badge's ETag, a signed-out token) and checks tokens through the process's
/// Cryptography: a class whose tests reach those installs libcrypto's in its `setUp()`, as the
/// executable does at start.
func installCryptography() { Crypto.install(LibCrypto()) }

/// A realistic Unix-ms start time: every test clock counts from here.
let t0: Double = 1_700_000_000_000

extension JSONValue {
    var keys: [String] { if case .object(let m) = self { return m.map(\.0) } else { return [] } }
}

func json(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
    do {
        return try JSONParser.parse(bytes)
    } catch {
        XCTFail("not JSON (\(error)): \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
        return .null
    }
}

func json(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
    json(Array(text.utf8), file: file, line: line)
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// An event's JSON object.
func decode(_ event: OutboundEvent, file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
    json(event.bytes, file: file, line: line)
}

extension TaskStore {
    /// Applies `POST /api/tasks/{id}` with a JSON body, as the API would parse it.
    @discardableResult
    func update(_ id: String, _ body: String, now: Double) throws -> Change {
        try apply(.update(id: id, patch: TaskPatch.parse(JSONParser.parse(body))), now: now)
    }

    @discardableResult
    func startTimer(_ id: String, seconds: Double, interval: Double, now: Double, hideAfter: Double? = nil) throws -> Change {
        try apply(.startTimer(id: id, spec: TimerStart(seconds: seconds, interval: interval, hideAfter: hideAfter)), now: now)
    }
}

/// The one event a change produced.
func single(_ change: Change, file: StaticString = #filePath, line: UInt = #line) -> OutboundEvent? {
    XCTAssertEqual(change.events.count, 1, "expected exactly one event", file: file, line: line)
    return change.events.first
}

/// Persistence that remembers what it was told: every save (with its urgency) and removal.
final class RecordingPersistence: TaskPersistence {
    var initial: PersistedState?
    var saved: [String: (TaskRecord, UInt64)] = [:]
    var urgentSaves: [String] = []
    var removed: [(String, UInt64)] = []
    init(initial: PersistedState? = nil) { self.initial = initial }
    func load() -> PersistedState? { initial }
    func save(_ task: TaskRecord, epoch: String, seq: UInt64, urgent: Bool) {
        saved[task.id] = (task, seq)
        if urgent { urgentSaves.append(task.id) }
    }
    func remove(id: String, epoch: String, seq: UInt64) { removed.append((id, seq)) }
    var hasPendingWrites: Bool { false }
    func flush() {}
}
