// swift-tools-version:6.0
import PackageDescription

// Layers, bottom up: C (libwebsockets + a small shim) → pure-Swift core → server and client → the load
// tester → thin executable.
let package = Package(
    name: "Ringcast",
    products: [
        .executable(name: "ringcast", targets: ["ringcast"]),
        .library(name: "RingcastCore", targets: ["RingcastCore"]),
        .library(name: "RingcastServer", targets: ["RingcastServer"]),
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
        // libcurl (OpenSSL flavour, the TLS library lws uses too) for every HTTP request a client makes.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // libcrypto of OpenSSL 3 (libssl-dev), already in the process through lws and libcurl.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(name: "RingcastCore"),
        // The core's `Cryptography` on libcrypto (hashes, MACs, randomness, JWK signatures): its own
        // small target, so what needs crypto and nothing else of the operating system (a fuzz
        // target, the core's tests) takes no libcurl with it.
        .target(name: "RingcastCrypto", dependencies: ["RingcastCore", "COpenSSL"]),
        // What the server, the client and the tools share of the operating system: a lock, the
        // clocks, server URLs, the blocking HTTP client on libcurl.
        .target(name: "RingcastPlatform", dependencies: ["RingcastCore", "CCurl"]),
        // The one Swift layer over hiredis: blocking connections for the Redis engine's own threads.
        .target(name: "RingcastRedis", dependencies: ["CHiredis", "RingcastPlatform"]),
        // The one Swift layer over libwebsockets that the server and the client share.
        // libssl too: a client's failed handshake is named from OpenSSL's verification result,
        // and a reload loads a renewed certificate into the server's TLS contexts (libcrypto's
        // error queue says why one does not load).
        .target(
            name: "RingcastLWS",
            dependencies: ["CLibWebSockets", "CRingcastShims", "RingcastCore", "RingcastPlatform"],
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        .target(
            name: "RingcastServer",
            dependencies: ["RingcastCore", "RingcastCrypto", "RingcastPlatform", "RingcastLWS", "RingcastRedis", "CSQLite"]
        ),
        // What a Swift service imports to push progress; its transport types are `package`.
        .target(
            name: "RingcastClient",
            dependencies: ["RingcastCore", "RingcastPlatform", "RingcastLWS"]
        ),
        // The load tester behind `ringcast load`: many watchers, latency measured at each.
        .target(name: "RingcastLoad", dependencies: ["RingcastClient", "RingcastCore", "RingcastPlatform", "RingcastLWS"]),
        .executableTarget(
            name: "ringcast",
            dependencies: ["RingcastServer", "RingcastClient", "RingcastLoad", "RingcastCore", "RingcastCrypto", "RingcastPlatform", "RingcastLWS"]
        ),
        // Tests: one target per library target, the command line's own, and end-to-end ones that
        // run the built executable; what they share is a library of its own, never a copy.
        .target(
            name: "RingcastTestSupport",
            dependencies: ["RingcastServer", "RingcastClient", "RingcastCore", "RingcastPlatform", "RingcastLWS"],
            path: "Tests/RingcastTestSupport"
        ),
        // Checks JSON against the OpenAPI document's schemas: the core's tests and the fuzz targets use it.
        .target(name: "SchemaValidation", dependencies: ["RingcastCore"], path: "Tests/SchemaValidation"),
        .testTarget(name: "RingcastCoreTests", dependencies: ["RingcastCore", "RingcastCrypto", "SchemaValidation"]),
        .testTarget(name: "RingcastCryptoTests", dependencies: ["RingcastCrypto", "RingcastCore"]),
        // The shim's fixes are tested through lws itself (a timeout armed with lws_set_timeout).
        .testTarget(
            name: "RingcastLWSTests", dependencies: ["RingcastLWS", "RingcastCore", "RingcastPlatform", "CLibWebSockets", "RingcastTestSupport"]),
        .testTarget(name: "RingcastRedisTests", dependencies: ["RingcastRedis", "RingcastTestSupport"]),
        .testTarget(
            name: "RingcastServerTests",
            dependencies: ["RingcastServer", "RingcastClient", "RingcastCore", "RingcastCrypto", "RingcastTestSupport", "RingcastPlatform"]),
        .testTarget(
            name: "RingcastClientTests",
            dependencies: ["RingcastServer", "RingcastClient", "RingcastCore", "RingcastLWS", "RingcastTestSupport", "RingcastPlatform"]),
        .testTarget(
            name: "RingcastLoadTests",
            dependencies: ["RingcastLoad", "RingcastClient", "RingcastCore", "RingcastLWS", "RingcastTestSupport", "RingcastPlatform"]),
        .testTarget(name: "CommandLineTests", dependencies: ["ringcast", "RingcastClient", "RingcastPlatform"]),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "RingcastServer", "RingcastClient", "RingcastCore", "RingcastLoad", "RingcastLWS", "RingcastTestSupport", "RingcastPlatform",
            ]),
    ]
)

// The benchmarks' own executables reach the `package` API of RingcastLoad and RingcastLWS, so they
// are targets of this package (a package beside it could not see that API), but they are no part of
// the product: they are declared only when RINGCAST_BENCHMARKS is set, as the scripts in Benchmarks/
// set it (Benchmarks/lib.sh), so that a plain `swift build`, `make test` and a package that depends
// on this one never build them. `make lint` formats their sources all the same.
if !Context.environment["RINGCAST_BENCHMARKS", default: ""].isEmpty {
    package.targets += [
        // Publish throughput against Ringcast and the raw lws reference: Benchmarks/publish.sh runs it.
        .executableTarget(
            name: "ringcast-bench",
            dependencies: ["RingcastClient", "RingcastLoad", "RingcastCore", "RingcastPlatform", "RingcastLWS"],
            path: "Benchmarks/ringcast-bench"
        ),
        // What one event costs where it must not grow (pattern sets, a task's age), and SQLite against
        // memory: Benchmarks/costs.sh runs it.
        .executableTarget(
            name: "ringcast-costs",
            dependencies: ["RingcastClient", "RingcastLoad", "RingcastCore", "RingcastPlatform", "RingcastLWS"],
            path: "Benchmarks/ringcast-costs"
        ),
        // Signed tokens verified per CPU-second, HS256 against RS256, PS256 and ES256:
        // Benchmarks/tokens.sh runs it.
        .executableTarget(
            name: "ringcast-tokens",
            dependencies: ["RingcastCore", "RingcastCrypto"],
            path: "Benchmarks/ringcast-tokens"
        ),
    ]
}
