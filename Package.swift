// swift-tools-version:6.0
// LiveRelay: a Live Activity push gateway.
//
// The module layout follows the path of one call: the wire (framing and the
// connection state machines) -> the protobuf messages (hand-written protobuf-c
// bindings) -> ... (server, domain, store and APNs dispatch arrive with their issues).
import PackageDescription

let package = Package(
    name: "LiveRelay",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "LiveRelayWire", targets: ["LiveRelayWire"]),
        .library(name: "LiveRelayMessages", targets: ["LiveRelayMessages"]),
        .library(name: "CLiveRelayProto", targets: ["CLiveRelayProto"]),
        .library(name: "LiveRelayTLS", targets: ["LiveRelayTLS"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // Hand-written protobuf-c descriptors for Protos/liverelay/v1/*.proto.
        .target(
            name: "CLiveRelayProto",
            linkerSettings: [.linkedLibrary("protobuf-c")]
        ),
        // Swift value types for every message, encoded and decoded through protobuf-c, and validated.
        .target(
            name: "LiveRelayMessages",
            dependencies: [
                "CLiveRelayProto",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The framing: frame codec, incremental decoder, server and client connection state machines. No I/O.
        .target(
            name: "LiveRelayWire",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Test support: hand-written protobuf-c descriptors for the part of
        // descriptor.proto the contract check reads from `protoc --descriptor_set_out`.
        .target(
            name: "CDescriptorSet",
            path: "Tests/Support/CDescriptorSet",
            linkerSettings: [.linkedLibrary("protobuf-c")]
        ),
        // OpenSSL 3 (libssl, libcrypto), with inline shims for the macros Swift cannot import.
        .systemLibrary(name: "COpenSSL"),
        // TLS over OpenSSL 3 as a SwiftNIO channel handler, for both server and client roles.
        .target(
            name: "LiveRelayTLS",
            dependencies: [
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LiveRelayTLSTests",
            dependencies: [
                "LiveRelayTLS",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LiveRelayMessagesTests",
            dependencies: ["LiveRelayMessages", "CLiveRelayProto", "CDescriptorSet"],
            resources: [.copy("Vectors")]
        ),
        .testTarget(
            name: "LiveRelayWireTests",
            dependencies: [
                "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
