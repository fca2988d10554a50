import LiveRelayClient
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import Testing

@testable import LiveRelayClient

/// The broadcast channel calls of the Swift client, against a real `RPCServer` over TLS.
@Suite(.timeLimit(.minutes(1))) struct ClientChannelTests {
    @Test func theChannelCallsReachTheServer() async throws {
        // The null service answers every call with an empty reply: the path, not the domain.
        let server = try await TestServer.start(service: NullLiveRelayService())
        let client = makeClient(port: server.port)

        let created = try await client.createChannel(
            CreateChannelRequest(appID: "dev.app", environment: .sandbox, storagePolicy: .mostRecentMessage))
        #expect(created == CreateChannelReply())
        let listed = try await client.listChannels(ListChannelsRequest(appID: "dev.app", environment: .production, pageSize: 10))
        #expect(listed == ListChannelsReply())
        let deleted = try await client.deleteChannel(DeleteChannelRequest(appID: "dev.app", channelID: "Y2hhbm5lbA=="))
        #expect(deleted == DeleteChannelReply())

        await client.shutdown()
        try await server.shutdown()
    }

    @Test func aServiceWithoutChannelsAnswersUnimplemented() async throws {
        let server = try await TestServer.start(service: TestService())
        let client = makeClient(port: server.port)
        do {
            _ = try await client.listChannels(ListChannelsRequest(appID: "dev.app"))
            Issue.record("expected UNIMPLEMENTED")
        } catch {
            #expect(error.status == .unimplemented)
            #expect(error.message.contains("ListChannels"))
            #expect(error.processing == .answered)
        }
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func invalidChannelRequestsFailLocally() async throws {
        // No server: validation happens before anything is sent.
        let client = makeClient(port: 1)
        do {
            _ = try await client.deleteChannel(DeleteChannelRequest(appID: "dev.app", channelID: "not base64!"))
            Issue.record("expected INVALID_ARGUMENT")
        } catch {
            #expect(error.status == .invalidArgument)
            #expect(error.details.fieldViolations.first?.field == "channel_id")
            #expect(error.processing == .notProcessed)
        }
        do {
            _ = try await client.createChannel(CreateChannelRequest(appID: "dev.app", environment: .sandbox))
            Issue.record("expected INVALID_ARGUMENT")
        } catch {
            #expect(error.details.fieldViolations.first?.field == "storage_policy")
        }
        #expect(client.pool.connectionsCreated == 0)
        await client.shutdown()
    }
}
