// swift-tools-version:6.0
// Codec microbenchmark: LiveRelayMessages (hand-written protobuf-c
// bindings) next to swift-protobuf 1.39 on the same request messages, in the same
// run, plus the frame codec. Its own package so swift-protobuf never enters the
// main build. Run it with scripts/bench.sh codec (release build); results and how
// to read them are in docs/BENCHMARKS.md.
//
// The swift-protobuf messages come from Benchmarks/SwiftProtobufMessages, the one
// generated copy that the gRPC peer (Benchmarks/RPC) uses too.
import PackageDescription

let package = Package(
    name: "LiveRelayCodecBenchmarks",
    dependencies: [
        .package(path: "SwiftProtobufMessages"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // The modules under test, built here from the main package's sources (Sources/<name>
        // link to ../../Sources/<name>): the main package ships only the client library.
        .target(name: "CLiveRelayProto", linkerSettings: [.linkedLibrary("protobuf-c")]),
        .target(name: "LiveRelayEndpoint"),
        .target(name: "LiveRelayMessages", dependencies: ["CLiveRelayProto", "LiveRelayEndpoint", .product(name: "NIOCore", package: "swift-nio")]),
        .target(name: "LiveRelayWire", dependencies: [.product(name: "NIOCore", package: "swift-nio")]),
        .executableTarget(
            name: "CodecBenchmark",
            dependencies: [
                .product(name: "SwiftProtobufMessages", package: "SwiftProtobufMessages"),
                "LiveRelayMessages",
                "CLiveRelayProto",
                "LiveRelayWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
