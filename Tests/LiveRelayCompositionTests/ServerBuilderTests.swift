import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayOps
import LiveRelayServer
import LiveRelayStore
import Logging
import ServiceLifecycle
import Testing

@testable import LiveRelayComposition

/// The builder on the memory store: what it assembles, in which order, from one description.
struct ServerBuilderTests {
    static let signingKey = try! APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")

    static func description() throws -> ServerDescription {
        var description = ServerDescription()
        description.port = 0
        description.apnsThreads = 1
        var logger = Logger(label: "server-builder-tests")
        logger.logLevel = .critical
        description.logger = logger
        description.seedApps = [
            RegisteredApp(
                id: "orders", bundleID: "com.example.orders", queueCapacity: 7,
                credentials: RegisteredCredentials(
                    teamID: "TEAM123456", keyID: "KEY1234567", endpoint: "127.0.0.1:1", keySource: .stored(pem: try signingKey.pkcs8PEM)),
                source: .seed),
            RegisteredApp(
                id: "broken", bundleID: "com.example.broken",
                credentials: RegisteredCredentials(
                    teamID: "TEAM123456", keyID: "KEY1234567", endpoint: "apple", keySource: .file(path: "/nonexistent/key.p8")),
                source: .seed),
        ]
        let key = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping])
        description.seedKeys = [try RegisteredAPIKey(seed: key.record)]
        return description
    }

    @Test func theSeedReachesTheDispatcherThroughTheRegistryBeforeTheServerRuns() async throws {
        let built = try await ServerBuilder.build(try Self.description())
        let dispatcher = try #require(built.dispatcher)
        #expect(dispatcher.route(appID: "orders") != nil)
        #expect(dispatcher.queueLevels.first { $0.appID == "orders" }?.capacity == 7)
        // A key this node cannot read leaves its app without a route here, not the server down; with
        // durable intents its pushes are left for a node that can read it.
        #expect(dispatcher.route(appID: "broken") == nil)
        #expect(!built.tenants.canServe(appID: "broken"))
        #expect(built.tenants.canServe(appID: "orders") && built.tenants.canServe(appID: "never-configured"))
        let snapshot = try await built.tenants.registry.snapshot()
        #expect(Set(snapshot.apps.keys) == ["orders", "broken"])
        #expect(snapshot.apps.values.allSatisfy { $0.source == .seed })
        #expect(snapshot.keys.count == 1)
        #expect(built.storeDescription == "in-memory store")
    }

    @Test func theServicesAreInStartOrder() async throws {
        let built = try await ServerBuilder.build(try Self.description())
        let services = built.services
        #expect(services.first is ActivityStoreService, "the store stops last (no ops port here)")
        #expect(services[1] is TenantRuntime, "the registry closes after everything that reads it")
        let server = try #require(services.firstIndex { $0 is RPCServer })
        #expect(server == services.count - 2, "the RPC server drains first, after the drain signal")
        let dispatcher = try #require(services.firstIndex { $0 is Dispatcher })
        let intents = services.firstIndex { $0 is DispatchIntents }
        #expect(intents == nil, "no durable intents on the memory store unless asked")
        #expect(dispatcher < server)
    }

    @Test func durableIntentsStopAfterTheDispatcherDrains() async throws {
        var description = try Self.description()
        description.durableIntents = true
        let built = try await ServerBuilder.build(description)
        let intents = try #require(built.services.firstIndex { $0 is DispatchIntents })
        let dispatcher = try #require(built.services.firstIndex { $0 is Dispatcher })
        #expect(intents < dispatcher)
    }

    @Test func theNullServiceOpensNoStoreOnDiskAndNoDispatcher() async throws {
        var description = try Self.description()
        description.calls = .null
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("builder-null-\(getpid())").path
        description.store = StoreSelection(kind: .sqlite, dataDirectory: directory)
        let built = try await ServerBuilder.build(description)
        #expect(built.dispatcher == nil)
        #expect(built.activities == nil)
        #expect(built.storeDescription == "in-memory store")
        #expect(!FileManager.default.fileExists(atPath: directory))
    }

    @Test func theBuiltServerRunsAndShutsDownGracefully() async throws {
        let built = try await ServerBuilder.build(try Self.description())
        let group = built.serviceGroup(gracefulShutdownSignals: [], logger: Logger(label: "server-builder-tests"))
        let running = Task { try await group.run() }
        let address = try await built.server.boundAddress
        #expect((address.port ?? 0) > 0)
        await group.triggerGracefulShutdown()
        try await running.value
    }

    @Test func aKeyThatCannotBeReadIsRefusedNamingItsApp() throws {
        let broken = try Self.description().seedApps[1]
        #expect {
            _ = try PushingApp(broken, allowance: CredentialAllowance().allowing(seeds: [broken]))
        } throws: { error in
            "\(error)".contains("app broken")
        }
    }
}
