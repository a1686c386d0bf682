// swift-tools-version:6.0
import PackageDescription

// Layers, bottom up: C (libwebsockets + a small shim) → pure-Swift core → server and client → the load
// tester → thin executable.
let package = Package(
    name: "Ringcast",
    products: [
        .executable(name: "ringcast", targets: ["ringcast"]),
        .library(name: "RingcastCore", targets: ["RingcastCore"]),
        .library(name: "Ringcast", targets: ["Ringcast"]),
        .library(name: "RingcastClient", targets: ["RingcastClient"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibWebSockets",
            pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]
        ),
        // libev (libev-dev, which libwebsockets-dev depends on) for the loop lws runs on.
        .target(name: "CRingcastShims", dependencies: ["CLibWebSockets"], linkerSettings: [.linkedLibrary("ev")]),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CHiredis",
            pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        .target(name: "RingcastCore"),
        // The one Swift layer over hiredis: blocking connections for the Redis engine's own threads.
        .target(name: "RingcastRedis", dependencies: ["CHiredis"]),
        // The one Swift layer over libwebsockets that the server and the client share.
        .target(
            name: "RingcastLWS",
            dependencies: ["CLibWebSockets", "CRingcastShims", "RingcastCore"]
        ),
        .target(
            name: "Ringcast",
            // RingcastClient for its small HTTP client, which the webhook senders POST with.
            dependencies: ["RingcastCore", "RingcastLWS", "RingcastRedis", "CSQLite", "RingcastClient"]
        ),
        // What a Swift service imports to push progress; its transport types are `package`.
        .target(
            name: "RingcastClient",
            dependencies: ["RingcastCore", "RingcastLWS"]
        ),
        // The load tester behind `ringcast load`: many watchers, latency measured at each.
        .target(name: "RingcastLoad", dependencies: ["RingcastClient", "RingcastCore", "RingcastLWS"]),
        .executableTarget(
            name: "ringcast",
            dependencies: ["Ringcast", "RingcastClient", "RingcastLoad", "RingcastCore", "RingcastLWS"]
        ),
        // Publish throughput against Ringcast and the raw lws reference: Benchmarks/publish.sh runs it.
        .executableTarget(
            name: "ringcast-bench",
            dependencies: ["RingcastClient", "RingcastLoad", "RingcastCore", "RingcastLWS"],
            path: "Benchmarks/ringcast-bench"
        ),
        // What one event costs where it must not grow (pattern sets, a task's age), and SQLite against
        // memory: Benchmarks/costs.sh runs it.
        .executableTarget(
            name: "ringcast-costs",
            dependencies: ["RingcastClient", "RingcastLoad", "RingcastCore", "RingcastLWS"],
            path: "Benchmarks/ringcast-costs"
        ),
        // Tests: one target per library target, the command line's own, and end-to-end ones that
        // run the built executable; what they share is a library of its own, never a copy.
        .target(
            name: "RingcastTestSupport",
            dependencies: ["Ringcast", "RingcastClient", "RingcastCore", "RingcastLWS"],
            path: "Tests/RingcastTestSupport"
        ),
        .testTarget(name: "RingcastCoreTests", dependencies: ["RingcastCore"]),
        .testTarget(name: "RingcastLWSTests", dependencies: ["RingcastLWS", "RingcastCore"]),
        .testTarget(name: "RingcastTests", dependencies: ["Ringcast", "RingcastClient", "RingcastCore", "RingcastTestSupport"]),
        .testTarget(name: "RingcastClientTests", dependencies: ["Ringcast", "RingcastClient", "RingcastCore", "RingcastLWS", "RingcastTestSupport"]),
        .testTarget(name: "RingcastLoadTests", dependencies: ["RingcastLoad", "RingcastClient", "RingcastCore", "RingcastLWS", "RingcastTestSupport"]),
        .testTarget(name: "CommandLineTests", dependencies: ["ringcast", "RingcastClient"]),
        .testTarget(name: "EndToEndTests", dependencies: ["Ringcast", "RingcastClient", "RingcastCore", "RingcastLoad", "RingcastLWS", "RingcastTestSupport"]),
    ]
)
