// swift-tools-version:6.0
// LiveRelay: a Live Activity push gateway.
//
// The module layout follows the path of one call: the wire (framing and the
// connection state machines) -> the protobuf messages (hand-written protobuf-c
// bindings) -> TLS -> the RPC server and its service seam -> the domain rules
// -> the stores (the store protocols with the memory engine; SQLite; PostgreSQL,
// one module per engine) -> APNs values and provider tokens -> the dispatcher
// (per-app queues) -> the HTTP/2 client to APNs. The mock APNs and the load
// harness are users of the same modules.
import PackageDescription

let package = Package(
    name: "LiveRelay",
    platforms: [.macOS(.v14)],
    // What users link: the Swift client library (its modules come along as
    // dependencies). Every other module is internal to this package.
    products: [
        .library(name: "LiveRelayClient", targets: ["LiveRelayClient"]),
        .executable(name: "liverelay", targets: ["liverelay"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
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
                "LiveRelayEndpoint",
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
        // The system SQLite 3 (libsqlite3), with inline shims for what Swift cannot import (SQLITE_TRANSIENT).
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        // libnghttp2, the APNs client's HTTP/2 engine, with a shim over its API's renames between releases.
        .systemLibrary(name: "CNGHTTP2", path: "Sources/CNGHTTP2"),
        // An HTTP/2 client session driven by libnghttp2 with no I/O: bytes in, bytes out, events as values.
        .target(
            name: "LiveRelayHTTP2",
            dependencies: [
                "CNGHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // TLS over OpenSSL 3 as a SwiftNIO channel handler, for both server and client roles.
        .target(
            name: "LiveRelayTLS",
            dependencies: [
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The seam between the RPC server and the domain: the service protocol, call context, RPC errors.
        .target(
            name: "LiveRelayService",
            dependencies: [
                "LiveRelayMessages",
                "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The RPC server: listener, per-connection handler over the wire state machine, API-key auth, graceful shutdown.
        .target(
            name: "LiveRelayServer",
            dependencies: [
                "LiveRelayWire",
                "LiveRelayMessages",
                "LiveRelayTLS",
                "LiveRelayService",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Collections that grow without stalling (a hash index of record numbers keyed elsewhere, an array in
        // chunks, a map of both, a map by counter-issued key): the memory store's tables and the dispatcher's
        // lanes, pushes and calls. No dependencies.
        .target(name: "LiveRelayCollections"),
        // The syntax of an APNs endpoint (apple or host:port), for the message layer and the APNs
        // client alike, which import neither the other. No dependencies.
        .target(name: "LiveRelayEndpoint"),
        // Capped exponential back-off with one jitter rule, for every wait after a failure. No I/O.
        .target(
            name: "LiveRelayBackoff",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The Swift client library: connection pool, pipelining, deadlines, cancellation, reconnect.
        .target(
            name: "LiveRelayClient",
            dependencies: [
                "LiveRelayBackoff",
                "LiveRelayWire",
                "LiveRelayMessages",
                "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Activities and tokens as pure rules and values, and the APNs payload builder. No I/O, no store engine.
        .target(
            name: "LiveRelayDomain",
            dependencies: ["LiveRelayMessages", "LiveRelayAPNs", "LiveRelayPushOutlet", "LiveRelayEndpoint"]
        ),
        // The push outlet: what the service hands the dispatcher (batches, admission,
        // enqueue options and results, pruned tokens). Both import it; neither imports the other.
        .target(
            name: "LiveRelayPushOutlet",
            dependencies: [
                "LiveRelayAPNs",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Where tokens and activities live: the store protocols (activities, channels, the tenant
        // registry), what the SQL engines share, and the memory engine (a state per app behind its own lock).
        .target(
            name: "LiveRelayStore",
            dependencies: [
                "LiveRelayDomain",
                "LiveRelayAPNs",
                "LiveRelayMessages",
                "LiveRelayPushOutlet",
                "LiveRelayCollections",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The embedded durable store: the store protocols on SQLite (WAL, one writer thread, fsync per batch).
        .target(
            name: "LiveRelayStoreSQLite",
            dependencies: [
                "LiveRelayStore",
                "LiveRelayDomain",
                "LiveRelayAPNs",
                "LiveRelayMessages",
                "LiveRelayPushOutlet",
                "CSQLite",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The service the server dispatches to: domain rules + store, pushes to the outlet.
        .target(
            name: "LiveRelayActivities",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "LiveRelayService",
                "LiveRelayWire",
                "LiveRelayDomain",
                "LiveRelayAPNs",
                "LiveRelayPushOutlet",
                "LiveRelayStore",
                "LiveRelayMessages",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The admin API (liverelay.admin.v1) over the tenant registry.
        .target(
            name: "LiveRelayAdmin",
            dependencies: [
                "LiveRelayService",
                "LiveRelayStore",
                "LiveRelayDomain",
                "LiveRelayMessages",
                "LiveRelayAPNs",
                "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // PostgreSQL store for deployments where several nodes share state (postgres-nio).
        .target(
            name: "LiveRelayStorePostgres",
            dependencies: [
                "LiveRelayStore",
                "LiveRelayBackoff",
                "LiveRelayDomain",
                "LiveRelayAPNs",
                "LiveRelayMessages",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // APNs as values and crypto, no I/O: requests, responses and the reason table,
        // .p8 signing keys, ES256 provider tokens (sign and verify) and their refresh rules.
        .target(
            name: "LiveRelayAPNs",
            dependencies: [
                "COpenSSL",
                "LiveRelayEndpoint",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // The HTTP/2 client to APNs: swift-nio-http2 over the project's OpenSSL handler, pooled per endpoint and key.
        .target(
            name: "LiveRelayAPNsClient",
            dependencies: [
                "LiveRelayAPNs",
                "LiveRelayBackoff",
                "LiveRelayHTTP2",
                "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Webhook delivery's leaf parts: the URL rules, the signature, the address policy and one HTTPS POST.
        .target(
            name: "LiveRelayWebhooks",
            dependencies: [
                "LiveRelayEndpoint",
                "LiveRelayTLS",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Each app's event feed delivered to its webhook: the schedule (pure), the JSON body, the deliverer service.
        .target(
            name: "LiveRelayWebhookDelivery",
            dependencies: [
                "LiveRelayWebhooks",
                "LiveRelayActivities",
                "LiveRelayStore",
                "LiveRelayDomain",
                "LiveRelayBackoff",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The dispatcher pool: per-app bounded queues, fair scheduling, ordering, coalescing, retries, accounting.
        .target(
            name: "LiveRelayDispatch",
            dependencies: [
                "LiveRelayAPNs",
                "LiveRelayCollections",
                "LiveRelayBackoff",
                "LiveRelayPushOutlet",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // `liverelay mock-apns`: an HTTP/2 TLS server that validates pushes like APNs and records them.
        .target(
            name: "LiveRelayMockAPNs",
            dependencies: [
                "LiveRelayAPNs",
                "LiveRelayMessages",
                "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // `liverelay bench`: open- and closed-loop load generation over LiveRelayClient with HdrHistogram latencies.
        .target(
            name: "LiveRelayBench",
            dependencies: [
                "LiveRelayClient",
                "LiveRelayMessages",
                "LiveRelayWire",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The operations port: /metrics (Prometheus text), /healthz and /readyz over Hummingbird 2, apart from the RPC port.
        .target(
            name: "LiveRelayOps",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The one place a server is assembled: a description of it (listen, TLS, store, registry
        // seed, APNs, limits, admission, quotas, ops port) and the builder that turns it into
        // the server's services in start order; the tenant runtime that applies the registry.
        .target(
            name: "LiveRelayComposition",
            dependencies: [
                "LiveRelayAdmin",
                "LiveRelayBackoff",
                "LiveRelayServer",
                "LiveRelayActivities",
                "LiveRelayDomain",
                "LiveRelayPushOutlet",
                "LiveRelayStore",
                "LiveRelayStoreSQLite",
                "LiveRelayStorePostgres",
                "LiveRelayService",
                "LiveRelayTLS",
                "LiveRelayWire",
                "LiveRelayMessages",
                "LiveRelayAPNs",
                "LiveRelayAPNsClient",
                "LiveRelayDispatch",
                "LiveRelayMockAPNs",
                "LiveRelayOps",
                "LiveRelayWebhooks",
                "LiveRelayWebhookDelivery",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The `liverelay` command: serve, and one subcommand per RPC.
        .executableTarget(
            name: "liverelay",
            dependencies: [
                "LiveRelayComposition",
                "LiveRelayAdmin",
                "LiveRelayServer",
                "LiveRelayClient",
                "LiveRelayActivities",
                "LiveRelayDomain",
                "LiveRelayPushOutlet",
                "LiveRelayStore",
                "LiveRelayStoreSQLite",
                "LiveRelayService",
                "LiveRelayTLS",
                "LiveRelayWire",
                "LiveRelayStorePostgres",
                "LiveRelayAPNs",
                "LiveRelayAPNsClient",
                "LiveRelayDispatch",
                "LiveRelayMockAPNs",
                "LiveRelayBench",
                "LiveRelayOps",
                "LiveRelayBackoff",
                "LiveRelayWebhookDelivery",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/LiveRelayCLI"
        ),
        // Test support shared by the test targets: waiting with a time limit, temporary
        // directories, a manual wall clock, a recording push sink, fake APNs transports and a
        // dispatcher on a test-driven loop. Never linked into a product.
        .target(
            name: "LiveRelayTestSupport",
            dependencies: [
                "LiveRelayAPNs",
                "LiveRelayDomain",
                "LiveRelayStore",
                "LiveRelayPushOutlet",
                "LiveRelayDispatch",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/Support/LiveRelayTestSupport"
        ),
        // Valgrind's callgrind client requests (start and stop counting) for the instruction-count gate.
        .target(
            name: "CCallgrind",
            path: "Tests/Support/CCallgrind"
        ),
        // Run by scripts/instruction-gate.sh (release, under callgrind): one workload per run, its
        // measured loop bracketed so callgrind counts only it. In-process, no sockets.
        .executableTarget(
            name: "liverelay-instructions",
            dependencies: [
                "CCallgrind",
                "LiveRelayComposition",
                "LiveRelayTestSupport",
                "LiveRelayServer",
                "LiveRelayService",
                "LiveRelayActivities",
                "LiveRelayStore",
                "LiveRelayDomain",
                "LiveRelayDispatch",
                "LiveRelayPushOutlet",
                "LiveRelayAPNs",
                "LiveRelayAPNsClient",
                "LiveRelayTLS",
                "LiveRelayMessages",
                "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Support/InstructionCounts"
        ),
        .testTarget(
            name: "LiveRelayServerTests",
            dependencies: ["LiveRelayTestSupport",
                "LiveRelayServer", "LiveRelayService", "LiveRelayWire", "LiveRelayMessages", "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LiveRelayClientTests",
            dependencies: ["LiveRelayComposition", "LiveRelayDomain", "LiveRelayTestSupport",
                "LiveRelayClient", "LiveRelayBackoff", "LiveRelayServer", "LiveRelayService", "LiveRelayWire", "LiveRelayMessages", "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "LiveRelayAdminTests",
            dependencies: [
                "LiveRelayAdmin", "LiveRelayAPNs", "LiveRelayDomain", "LiveRelayMessages", "LiveRelayService", "LiveRelayStore",
                "LiveRelayTLS", "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LiveRelayCompositionTests",
            dependencies: [
                "LiveRelayComposition", "LiveRelayAPNs", "LiveRelayActivities", "LiveRelayDomain", "LiveRelayOps", "LiveRelayServer",
                "LiveRelayStore", "LiveRelayDispatch", "LiveRelayPushOutlet", "LiveRelayAdmin", "LiveRelayTestSupport", "LiveRelayBackoff",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "LiveRelayCollectionsTests",
            dependencies: ["LiveRelayCollections"]
        ),
        .testTarget(
            name: "LiveRelayDomainTests",
            // LiveRelayStore for the memory engine's state, which the rules are run against.
            dependencies: ["LiveRelayTestSupport", "LiveRelayDomain", "LiveRelayStore", "LiveRelayMessages", "LiveRelayAPNs", "LiveRelayPushOutlet"]
        ),
        .testTarget(
            name: "LiveRelayStoreTests",
            dependencies: ["LiveRelayTestSupport", "LiveRelayStore", "LiveRelayStoreSQLite", "LiveRelayStorePostgres", "LiveRelayDomain", "LiveRelayMessages", "LiveRelayAPNs", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log"),
                           .target(name: "sqlite-crash-helper")]
        ),
        // Test support: opens a SQLite store and registers tokens until killed (the SIGKILL durability test).
        .executableTarget(
            name: "sqlite-crash-helper",
            dependencies: ["LiveRelayStore", "LiveRelayStoreSQLite", "LiveRelayDomain", "LiveRelayAPNs", "LiveRelayMessages", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            path: "Tests/Support/SQLiteCrashHelper"
        ),
        // What the three store benchmarks share (options, clock, tokens, /proc, formatting, the SQL stores' call timings).
        .target(
            name: "StoreBenchmarkSupport",
            dependencies: ["LiveRelayStore", "LiveRelayDomain", "LiveRelayAPNs", "LiveRelayMessages", .product(name: "NIOCore", package: "swift-nio")],
            path: "Tests/Support/StoreBenchmarkSupport"
        ),
        // Run by hand (release): SQLite store throughput and load times for docs/BENCHMARKS.md.
        .executableTarget(
            name: "sqlite-store-benchmark",
            dependencies: ["LiveRelayStore", "LiveRelayStoreSQLite", "LiveRelayDomain", "LiveRelayAPNs", "LiveRelayMessages", "StoreBenchmarkSupport", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            path: "Tests/Support/SQLiteStoreBenchmark"
        ),
        // Run by hand (release): bytes per registered token of the in-memory store, and one app's fan-outs against another's calls, for docs/BENCHMARKS.md.
        .executableTarget(
            name: "memory-store-benchmark",
            dependencies: ["LiveRelayDomain", "LiveRelayStore", "LiveRelayAPNs", "LiveRelayMessages", "StoreBenchmarkSupport", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"), .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            path: "Tests/Support/MemoryStoreBenchmark"
        ),
        // Run by hand (release): PostgreSQL store throughput and load times for docs/BENCHMARKS.md.
        .executableTarget(
            name: "postgres-store-benchmark",
            dependencies: ["LiveRelayStorePostgres", "LiveRelayDomain", "LiveRelayAPNs", "LiveRelayMessages", "StoreBenchmarkSupport", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            path: "Tests/Support/PostgresStoreBenchmark"
        ),
        .testTarget(
            name: "LiveRelayActivitiesTests",
            dependencies: ["LiveRelayTestSupport",
                "LiveRelayActivities", "LiveRelayService", "LiveRelayDomain", "LiveRelayStore", "LiveRelayMessages",
                "LiveRelayAPNs", "LiveRelayPushOutlet", "LiveRelayDispatch",
                "LiveRelayWire", "LiveRelayStorePostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        // Runs the `liverelay` binary as a process and talks to it: the CLI, and drivers written with the Python client package.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                .target(name: "liverelay"),
                "LiveRelayTestSupport",
                // The tenant registry opened beside a running server, as an operator's tool would.
                "LiveRelayStore",
                "LiveRelayStoreSQLite",
                "LiveRelayDomain",
                "LiveRelayAPNs",
                "LiveRelayServer",
                // The README's Swift example runs as written against a real server.
                "LiveRelayClient",
                // The webhook receiver's certificate.
                "LiveRelayTLS",
            ]
        ),
        .testTarget(
            name: "LiveRelayTLSTests",
            dependencies: ["LiveRelayTestSupport",
                "LiveRelayTLS",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LiveRelayMessagesTests",
            dependencies: ["LiveRelayMessages", "CLiveRelayProto", "CDescriptorSet", "LiveRelayTestSupport"],
            resources: [.copy("Vectors")]
        ),
        .testTarget(
            name: "LiveRelayAPNsTests",
            dependencies: ["LiveRelayTestSupport", "LiveRelayAPNs", "COpenSSL", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "LiveRelayHTTP2Tests",
            dependencies: ["LiveRelayHTTP2", "LiveRelayTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LiveRelayAPNsClientTests",
            dependencies: ["LiveRelayTestSupport",
                "LiveRelayAPNsClient", "LiveRelayAPNs", "LiveRelayBackoff", "LiveRelayHTTP2", "LiveRelayMessages", "LiveRelayMockAPNs",
                "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LiveRelayMockAPNsTests",
            dependencies: ["LiveRelayTestSupport",
                "LiveRelayMockAPNs", "LiveRelayAPNs", "LiveRelayMessages", "LiveRelayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LiveRelayDispatchTests",
            dependencies: ["LiveRelayTestSupport",
                "LiveRelayDispatch", "LiveRelayAPNs", "LiveRelayBackoff", "LiveRelayPushOutlet", "LiveRelayAPNsClient", "LiveRelayMockAPNs",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "LiveRelayBenchTests",
            dependencies: [
                "LiveRelayComposition", "LiveRelayDomain",
                "LiveRelayBench", "LiveRelayClient", "LiveRelayServer", "LiveRelayService", "LiveRelayMessages",
                "LiveRelayTLS", "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "LiveRelayOpsTests",
            dependencies: [
                "LiveRelayOps",
                "LiveRelayTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "LiveRelayBackoffTests",
            dependencies: [
                "LiveRelayBackoff",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LiveRelayWireTests",
            dependencies: [
                "LiveRelayWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The deliverer's schedule, body and loops; the loops against the real HTTPS receiver.
        .testTarget(
            name: "LiveRelayWebhookDeliveryTests",
            dependencies: [
                "LiveRelayWebhookDelivery",
                "LiveRelayWebhooks",
                "LiveRelayStore",
                "LiveRelayDomain",
                "LiveRelayAPNs",
                "LiveRelayBackoff",
                "LiveRelayMessages",
                "LiveRelayTLS",
                "LiveRelayTestSupport",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The test support's own guarantees (children started one at a time inherit nothing of each other).
        .testTarget(
            name: "LiveRelayTestSupportTests",
            dependencies: ["LiveRelayTestSupport"]
        ),
        // Webhooks against a real HTTPS receiver (Tests/Support/webhook_receiver.py, Python's standard library).
        .testTarget(
            name: "LiveRelayWebhooksTests",
            dependencies: [
                "LiveRelayWebhooks",
                "LiveRelayEndpoint",
                "LiveRelayTLS",
                "LiveRelayTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
