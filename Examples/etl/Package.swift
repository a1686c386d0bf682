// swift-tools-version:6.0
import PackageDescription

// A user's package: it depends on Ringcast by path, as a service in the same checkout would, and
// imports only the RingcastClient library. `name:` pins the dependency's identity, which for a
// path is otherwise the checkout's directory name (ringcast, wt-client, a CI clone's).
let package = Package(
    name: "etl",
    dependencies: [.package(name: "Ringcast", path: "../..")],
    targets: [
        // A nightly ETL job reported the three ways: update, withTask (with children), track.
        .executableTarget(name: "etl", dependencies: [.product(name: "RingcastClient", package: "Ringcast")]),
        // The client's calls (update, withTask returning and throwing, track) in one short program as a
        // user writes it, without the ETL around it; ExampleTests runs it.
        .executableTarget(name: "must-show", dependencies: [.product(name: "RingcastClient", package: "Ringcast")]),
    ]
)
