import Foundation
import RingcastClient

struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }
let rc = try RingcastClient(url: ProcessInfo.processInfo.environment["RINGCAST_URL"]!, token: nil)
for i in 0...20 { try await rc.update("ex.loop", progress: Double(i) / 20) }
try await rc.update("ex.loop", state: .done)
let n = try await rc.withTask("ex.scoped", title: "Scoped") { task in
    try await task.update(progress: 0.5)
    return 42
}
precondition(n == 42)
_ = try? await rc.withTask("ex.throws") { _ in throw Boom() }
let copy = Progress(totalUnitCount: 10)
let tracking = rc.track(copy, as: "ex.copy", title: "Copy")
for _ in 0..<10 {
    copy.completedUnitCount += 1
    try await Task.sleep(nanoseconds: 20_000_000)
}
try await Task.sleep(nanoseconds: 500_000_000)
tracking.stop()
await rc.close()
