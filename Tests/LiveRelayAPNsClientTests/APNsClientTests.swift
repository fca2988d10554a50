import LiveRelayAPNs
import LiveRelayMockAPNs
import LiveRelayTestSupport
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayAPNsClient

/// The APNs client owns the pools: one per destination and key, shared by the apps that have both.
@Suite struct APNsClientTests {
    static let key = PoolIntegrationTests.key
    let client = APNsClient(group: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "apns-client-test"))

    @Test func appsWithOneKeyAndDestinationShareOneTransport() throws {
        let mock = APNsDestination.custom(host: "127.0.0.1", port: 1)
        let first = try client.register(APNsCredentials(key: Self.key, destination: mock))
        let second = try client.register(APNsCredentials(key: Self.key, destination: mock))
        #expect(first == second)
        #expect(first == APNsRoute(destination: mock, teamID: Self.key.teamID, keyID: Self.key.keyID))
        let transport = try #require(client.transport(for: first) as? APNsConnectionPool)
        #expect(client.transport(for: second) as? APNsConnectionPool === transport)
        let other = try APNsSigningKey.generate(keyID: "OTHERKEY01", teamID: Self.key.teamID)
        let third = try client.register(APNsCredentials(key: other, destination: mock))
        #expect(third != first)
        #expect(client.transport(for: third) as? APNsConnectionPool !== transport)
        #expect(client.transport(for: testRoute("never-registered")) == nil)
        try client.shutdown().wait()
    }

    @Test func appleRoutesEachTokenToItsEnvironment() throws {
        let route = try client.register(APNsCredentials(key: Self.key, destination: .apple))
        let router = try #require(client.transport(for: route) as? APNsEnvironmentRouter)
        #expect((router.production as? APNsConnectionPool)?.configuration.endpoint == .production)
        #expect((router.sandbox as? APNsConnectionPool)?.configuration.endpoint == .sandbox)
        // Both pools sign with one provider token source: APNs limits how often a key's token changes.
        #expect((router.production as? APNsConnectionPool)?.tokenSource === (router.sandbox as? APNsConnectionPool)?.tokenSource)
        try client.shutdown().wait()
    }

    /// Replaced credentials reach the next send; the mock sees the new key's token.
    @Test func credentialsReplacedWhileRunningTakeEffectOnTheNextSend() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let mock = try await MockAPNsServer.start(configuration: PoolIntegrationTests.mockConfiguration(), group: group)
        let destination = APNsDestination.custom(host: "127.0.0.1", port: mock.port)
        // First without trusting the mock's certificate: the connection fails.
        let route = try client.register(APNsCredentials(key: Self.key, destination: destination))
        let untrusted = await PoolIntegrationTests.outcome(client.transport(for: route)!.send(PoolIntegrationTests.request(1)))
        guard case .failure(.connectFailed) = untrusted else {
            Issue.record("expected a failed connect, got \(untrusted)"); return
        }
        // Then the same route with the mock's certificate: a new pool, and the push is delivered.
        let again = try client.register(APNsCredentials(key: Self.key, destination: destination, trustPEM: mock.certificatePEM))
        #expect(again == route)
        let response = try await client.transport(for: route)!.send(PoolIntegrationTests.request(2)).get()
        #expect(response.status == 200)
        try await client.shutdown().get()
        try await mock.shutdown()
    }
}
