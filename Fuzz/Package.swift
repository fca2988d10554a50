// swift-tools-version:6.0
// LiveRelay's libFuzzer targets. A package of its own so the main build never
// sees sanitizer flags: run them with scripts/fuzz.sh, which builds with
// `-Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library`.
import PackageDescription

let package = Package(
    name: "LiveRelayFuzz",
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // The modules under test, built here from the main package's sources (Sources/<name>
        // link to ../../Sources/<name>): the main package ships only the client library.
        .target(name: "CLiveRelayProto", linkerSettings: [.linkedLibrary("protobuf-c")]),
        .target(name: "LiveRelayEndpoint"),
        .target(name: "LiveRelayMessages", dependencies: ["CLiveRelayProto", "LiveRelayEndpoint", .product(name: "NIOCore", package: "swift-nio")]),
        .target(name: "LiveRelayWire", dependencies: [.product(name: "NIOCore", package: "swift-nio")]),
        .systemLibrary(name: "CNGHTTP2", path: "Sources/CNGHTTP2"),
        .target(name: "LiveRelayHTTP2", dependencies: ["CNGHTTP2", .product(name: "NIOCore", package: "swift-nio")]),
        // The checks every target shares: message round trips, the frame
        // stream driver, seed writing. No fuzzer entry point of its own.
        .target(
            name: "FuzzSupport",
            dependencies: [
                "LiveRelayMessages",
                "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Declares LLVMFuzzerRunDriver for the targets' entry points.
        .target(name: "CFuzzerDriver"),
        .executableTarget(name: "FuzzFrameDecoder", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        .executableTarget(name: "FuzzRegisterTokenRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        .executableTarget(name: "FuzzStartActivityRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        .executableTarget(name: "FuzzUpdateActivityRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        .executableTarget(name: "FuzzEndActivityRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        .executableTarget(name: "FuzzPingRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        // The ten liverelay.admin.v1 requests; byte 0 of an input picks the type.
        .executableTarget(name: "FuzzAdminRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        // The three broadcast channel requests; byte 0 of an input picks the type.
        .executableTarget(name: "FuzzChannelRequest", dependencies: ["FuzzSupport", "CFuzzerDriver"]),
        // Server bytes into the APNs client's HTTP/2 session (libnghttp2), with streams open.
        .executableTarget(
            name: "FuzzHTTP2Session",
            dependencies: ["FuzzSupport", "CFuzzerDriver", "LiveRelayHTTP2", .product(name: "NIOCore", package: "swift-nio")]),
    ],
    swiftLanguageModes: [.v6]
)
