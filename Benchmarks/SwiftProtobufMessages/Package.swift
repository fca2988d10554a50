// swift-tools-version:6.0
// The swift-protobuf messages of Protos/, generated once by protoc-gen-swift 1.39.0 and
// committed, for the benchmarks only (the codec benchmark in Benchmarks/ and the gRPC
// peer in Benchmarks/RPC share this one copy). swift-protobuf never enters the main build.
// Regenerate only when the .proto files change:
//   protoc --plugin=protoc-gen-swift=<path>/protoc-gen-swift \
//     --swift_out=Visibility=Public:Benchmarks/SwiftProtobufMessages/Sources/SwiftProtobufMessages \
//     -I Protos liverelay/v1/liverelay.proto liverelay/v1/activity.proto
import PackageDescription

let package = Package(
    name: "SwiftProtobufMessages",
    products: [.library(name: "SwiftProtobufMessages", targets: ["SwiftProtobufMessages"])],
    dependencies: [
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
    ],
    targets: [
        .target(
            name: "SwiftProtobufMessages",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
