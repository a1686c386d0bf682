import Foundation
import RingcastClient

// A nightly ETL job, reported to Ringcast the three ways a Swift service would:
//   update    — a plain loop with a computed fraction (etl.download)
//   withTask  — a scoped job whose children roll up by weight, done when it returns (etl.run),
//               failed with the error when it throws (etl.validate)
//   track     — a Foundation Progress published as it moves (etl.archive)
//
//   RINGCAST_URL=http://127.0.0.1:8080 swift run --package-path Examples/etl etl

guard let server = ProcessInfo.processInfo.environment["RINGCAST_URL"] else {
    FileHandle.standardError.write(Data("etl: set RINGCAST_URL, e.g. RINGCAST_URL=http://127.0.0.1:8080\n".utf8))
    exit(2)
}
let rc = try RingcastClient(url: server, token: ProcessInfo.processInfo.environment["RINGCAST_TOKEN"])

// What the server refuses arrives here, and so do cancel requests from the dashboard (withTask and
// track act on their own; this only says so).
let refusals = Task {
    for await error in rc.errors { FileHandle.standardError.write(Data("etl: ringcast: \(error)\n".utf8)) }
}
let requests = Task {
    for await request in rc.controlRequests { print("etl: the dashboard asks to \(request.action) \(request.id)") }
}

// 1. update: a fraction computed in a loop.
let files = ["orders.csv", "customers.csv", "products.csv", "returns.csv"]
for (index, file) in files.enumerated() {
    try await rc.update("etl.download", progress: Double(index + 1) / Double(files.count), title: "Download", detail: file)
}
try await rc.update("etl.download", state: .done)

// 2. withTask: three steps as children, the transform weighing as much as the other two.
let loaded = try await rc.withTask("etl.run", title: "Nightly ETL") { job in
    let extract = try await job.child("extract", title: "Extract", weight: 1)
    let transform = try await job.child("transform", title: "Transform", weight: 2)
    let load = try await job.child("load", title: "Load", weight: 1)

    var rows: [Int] = []
    for batch in 0..<5 {
        rows += Array(batch * 100..<(batch + 1) * 100)
        try await extract.update(completed: rows.count, total: 500)
    }
    try await extract.finish()

    var totals: [Int] = []
    for (index, row) in rows.enumerated() {
        totals.append(row * 2)
        if (index + 1) % 50 == 0 { try await transform.update(progress: Double(index + 1) / Double(rows.count)) }
    }
    try await transform.finish()

    for written in stride(from: 125, through: totals.count, by: 125) {
        try await load.update(completed: written, total: totals.count, detail: "\(written) rows written")
    }
    // `load` is left running: it ends done with its parent.
    return totals.count
}

// A step that throws: its task ends failed, with the error as its detail.
struct MissingColumn: Error, CustomStringConvertible {
    var description: String { "column 'amount' is missing in returns.csv" }
}
do {
    try await rc.withTask("etl.validate", title: "Validate") { task in
        try await task.update(progress: 0.25)
        throw MissingColumn()
    }
} catch {
    print("etl: validate failed: \(error)")
}

// 3. track: a Foundation Progress, published as it moves and done when it finishes.
let archive = Progress(totalUnitCount: 8)
let tracking = rc.track(archive, as: "etl.archive", title: "Archive")
for _ in 0..<8 {
    archive.completedUnitCount += 1
    try await Task.sleep(nanoseconds: 10_000_000)
}
tracking.stop()

// flush() returns once the server has kept all of it; close() would too.
try await rc.flush(timeout: 10)
print("etl: loaded \(loaded) rows")
await rc.close()
_ = await (refusals.value, requests.value)
