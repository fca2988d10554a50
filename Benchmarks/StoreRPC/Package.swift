// swift-tools-version:6.0
// Store through the RPC: durable RegisterToken calls per second through a real
// `liverelay serve` (TLS, SQLite store; the in-memory store for comparison).
//
// Its own package, depending on the root by path, so that the root manifest gains no benchmark
// target. One executable:
//   lr-store-load   closed-loop RegisterToken load through the LiveRelayClient library product,
//                   every call a new token for a new device (each one an INSERT and a CREATED reply)
// Benchmarks/StoreRPC/run.sh builds it and `liverelay` in release and runs every shape.
import PackageDescription

let package = Package(
    name: "LiveRelayStoreRPCBenchmark",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "LiveRelay", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "lr-store-load",
            dependencies: [
                .product(name: "LiveRelayClient", package: "LiveRelay"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
