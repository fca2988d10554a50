import LiveRelayAPNs
import LiveRelayMessages
import LiveRelayMockAPNs
import LiveRelayTestSupport
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayAPNsClient

/// Channel management and broadcasts through the real client (its pools, its
/// HTTP/2 connection handler) against the real mock over TLS + HTTP/2.
@Suite("APNs channel management against the mock APNs")
struct ChannelManagementTests {
    static let group = MultiThreadedEventLoopGroup.singleton
    static let bundleID = PoolIntegrationTests.bundleID

    /// A mock, an APNs client registered for it, the route's channel manager and push transport.
    static func withClient(
        mock configure: (inout MockAPNsConfiguration) -> Void = { _ in },
        _ body: (any APNsChannelManaging, any APNsTransport, MockAPNsServer) async throws -> Void
    ) async throws {
        var configuration = PoolIntegrationTests.mockConfiguration()
        configure(&configuration)
        let mock = try await MockAPNsServer.start(configuration: configuration, group: group)
        let client = APNsClient(group: group, logger: Logger(label: "channel-management-test"))
        do {
            let route = try client.register(
                APNsCredentials(
                    key: PoolIntegrationTests.key, destination: .custom(host: "127.0.0.1", port: mock.port),
                    trustPEM: mock.certificatePEM))
            let manager = try #require(client.channelManager(for: route))
            let transport = try #require(client.transport(for: route))
            try await body(manager, transport, mock)
        } catch {
            try? await client.shutdown().get()
            try? await mock.shutdown()
            throw error
        }
        try await client.shutdown().get()
        try await mock.shutdown()
    }

    static func managementError(_ future: EventLoopFuture<some Sendable>) async -> APNsChannelManagementError? {
        do {
            _ = try await future.get()
            return nil
        } catch let error as APNsChannelManagementError {
            return error
        } catch {
            return .malformedAnswer("unexpected \(error)")
        }
    }

    static func broadcast(
        to channelID: String, policy: ChannelStoragePolicy, expiration: Int64 = 0, payloadBytes: Int? = nil
    ) -> APNsRequest {
        var text = #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":"1-0"}}}"#
        if let payloadBytes {
            let prefix = #"{"aps":{"timestamp":1700000000,"event":"end","pad":""#
            text = prefix + String(repeating: "x", count: payloadBytes - prefix.utf8.count - 3) + #""}}"#
        }
        return APNsRequest(
            deviceToken: "", headers: APNsHeaders(bundleID: bundleID, priority: 5, expiration: expiration),
            payload: APNsPayload(bytes: Array(text.utf8)), apnsID: "00000000-0000-4000-8000-000000000001", environment: .sandbox,
            broadcast: APNsBroadcast(channelID: channelID, bundleID: bundleID, storagePolicy: policy))
    }

    @Test func createListReadAndDeleteChannels() async throws {
        try await Self.withClient { manager, _, mock in
            let none = try await manager.createChannel(bundleID: Self.bundleID, environment: .sandbox, storagePolicy: .noStorage).get()
            let kept = try await manager.createChannel(
                bundleID: Self.bundleID, environment: .sandbox, storagePolicy: .mostRecentMessage
            ).get()
            #expect(BroadcastChannel.isValidID(none) && BroadcastChannel.isValidID(kept) && none != kept)
            #expect(try await manager.listChannels(bundleID: Self.bundleID, environment: .sandbox).get() == [none, kept])
            #expect(mock.channels(bundleID: Self.bundleID).map(\.storagePolicy) == [.noStorage, .mostRecentMessage])

            let concrete = try #require(manager as? APNsChannelManager)
            #expect(try await concrete.storagePolicy(ofChannel: none, bundleID: Self.bundleID, environment: .sandbox).get() == .noStorage)
            #expect(
                try await concrete.storagePolicy(ofChannel: kept, bundleID: Self.bundleID, environment: .sandbox).get()
                    == .mostRecentMessage)

            try await manager.deleteChannel(none, bundleID: Self.bundleID, environment: .sandbox).get()
            #expect(try await manager.listChannels(bundleID: Self.bundleID, environment: .sandbox).get() == [kept])

            let unknown = await Self.managementError(manager.deleteChannel(none, bundleID: Self.bundleID, environment: .sandbox))
            #expect(unknown == .rejected(status: 400, reason: "ChannelNotRegistered"))
            #expect(unknown?.isRetryable == false)

            // On the wire: methods, paths, the channel id header, apns-request-id, the provider token.
            let records = mock.received
            #expect(records.map(\.method) == ["POST", "POST", "GET", "GET", "GET", "DELETE", "GET", "DELETE"])
            #expect(records.map(\.status) == [201, 201, 200, 200, 200, 204, 200, 400])
            #expect(records.allSatisfy { $0.header("authorization")?.hasPrefix("bearer ") == true && $0.header("apns-topic") == nil })
            #expect(records[5].header("apns-channel-id") == none && records[5].body.isEmpty)
        }
    }

    @Test func aManagementAnswerOfAnotherAppIsRejected() async throws {
        try await Self.withClient { manager, _, _ in
            let error = await Self.managementError(
                manager.createChannel(bundleID: "com.example.not-mine", environment: .sandbox, storagePolicy: .noStorage))
            #expect(error == .rejected(status: 400, reason: "TopicDisallowed"))
        }
    }

    @Test func theLimitOfChannelsPerAppIsCannotCreateChannelConfig() async throws {
        try await Self.withClient(mock: { $0.maxChannelsPerApp = 1 }) { manager, _, _ in
            _ = try await manager.createChannel(bundleID: Self.bundleID, environment: .sandbox, storagePolicy: .noStorage).get()
            let error = await Self.managementError(
                manager.createChannel(bundleID: Self.bundleID, environment: .sandbox, storagePolicy: .noStorage))
            #expect(error == .rejected(status: 400, reason: "CannotCreateChannelConfig"))
        }
    }

    @Test func broadcastsGoThroughThePushTransport() async throws {
        try await Self.withClient { manager, transport, mock in
            let none = try await manager.createChannel(bundleID: Self.bundleID, environment: .sandbox, storagePolicy: .noStorage).get()
            let kept = try await manager.createChannel(
                bundleID: Self.bundleID, environment: .sandbox, storagePolicy: .mostRecentMessage
            ).get()

            // The push's expiration is replaced by 0 for a no-storage channel.
            let delivered = try await transport.send(Self.broadcast(to: none, policy: .noStorage, expiration: 1_900_000_000)).get()
            #expect(delivered.status == 200 && delivered.apnsID == "00000000-0000-4000-8000-000000000001")
            #expect(
                try await transport.send(Self.broadcast(to: kept, policy: .mostRecentMessage, expiration: 1_900_000_000)).get().status
                    == 200)

            let unknown = try await transport.send(Self.broadcast(to: "AAAAAAAAAAAAAAAAAAAAAA==", policy: .noStorage)).get()
            #expect(unknown.status == 400 && unknown.reason == "ChannelNotRegistered" && unknown.disposition == .failRequest)

            // A sender that believes a no-storage channel stores, and so sends an expiration.
            let stale = try await transport.send(Self.broadcast(to: none, policy: .mostRecentMessage, expiration: 1_900_000_000)).get()
            #expect(stale.status == 400 && stale.reason == "BadExpirationDate")

            let exact = try await transport.send(Self.broadcast(to: none, policy: .noStorage, payloadBytes: APNsBroadcast.maxPayloadBytes))
                .get()
            #expect(exact.status == 200)
            let big = try await transport.send(
                Self.broadcast(to: none, policy: .noStorage, payloadBytes: APNsBroadcast.maxPayloadBytes + 1)
            ).get()
            #expect(big.status == 413 && big.reason == "PayloadTooLarge")

            let sent = mock.received.filter { $0.path == "/4/broadcasts/apps/" + Self.bundleID }
            #expect(sent.count == 6)
            #expect(sent.allSatisfy { $0.header("apns-topic") == nil && $0.header("apns-push-type") == "liveactivity" })
            #expect(sent.first?.header("apns-expiration") == "0" && sent.first?.header("apns-channel-id") == none)
            #expect(sent.first?.header("apns-request-id") == "00000000-0000-4000-8000-000000000001")
        }
    }

    @Test func appleRoutesManageChannelsOnTheManagementHostsLazily() throws {
        let client = APNsClient(group: Self.group, logger: Logger(label: "channel-management-test"))
        let route = try client.register(APNsCredentials(key: PoolIntegrationTests.key, destination: .apple))
        let manager = try #require(client.channelManager(for: route) as? APNsChannelManager)
        let router = try #require(manager.transport as? APNsEnvironmentRouter)
        let production = try #require(router.production as? APNsConnectionPool)
        let sandbox = try #require(router.sandbox as? APNsConnectionPool)
        #expect(production.configuration.endpoint == .productionChannelManagement)
        #expect(sandbox.configuration.endpoint == .sandboxChannelManagement)
        #expect(production.configuration.maximumConnections == APNsClient.managementConnections)
        // The pushes' provider token source: one JWT per key, however many pools use it.
        let pushes = try #require(client.transport(for: route) as? APNsEnvironmentRouter)
        #expect(production.tokenSource === (pushes.production as? APNsConnectionPool)?.tokenSource)
        // Asked again: the same pools.
        let again = try #require(client.channelManager(for: route) as? APNsChannelManager)
        #expect((again.transport as? APNsEnvironmentRouter)?.production as? APNsConnectionPool === production)
        #expect(client.channelManager(for: testRoute("never-registered")) == nil)
        #expect(FakeTransports().channelManager(for: route) == nil)
        try client.shutdown().wait()
    }

    @Test func answersThatAreNotWhatTheCallExpectsAreMalformed() async throws {
        let loop = Self.group.next()
        let transport = FakeTransport(eventLoop: loop) { request, _ in
            var list = APNsResponse(status: 200)
            list.body = Array(#"{"channels":[1]}"#.utf8)
            switch request.management?.path {
            case "/1/apps/a/channels"?: return .success(APNsResponse(status: 201))
            case "/1/apps/a/all-channels"?: return .success(list)
            case "/1/apps/b/all-channels"?: return .success(APNsResponse(status: 200))
            default: return .failure(.connectionLost)
            }
        }
        let manager = APNsChannelManager(transport: transport)
        let noID = await Self.managementError(manager.createChannel(bundleID: "a", environment: .production, storagePolicy: .noStorage))
        guard case .malformedAnswer = noID else { Issue.record("expected malformedAnswer, got \(String(describing: noID))"); return }
        let badList = await Self.managementError(manager.listChannels(bundleID: "a", environment: .production))
        guard case .malformedAnswer = badList else { Issue.record("expected malformedAnswer, got \(String(describing: badList))"); return }
        #expect(try await manager.listChannels(bundleID: "b", environment: .production).get() == [])
        let lost = await Self.managementError(manager.deleteChannel("x=", bundleID: "c", environment: .production))
        #expect(lost == .transport(.connectionLost) && lost?.isRetryable == true)
        #expect(transport.requests.map(\.environment) == [.production, .production, .production, .production])
    }
}
