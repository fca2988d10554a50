import LiveRelayClient
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import Testing

@testable import LiveRelayClient

/// ListEvents from the Swift client, against a real `RPCServer` over TLS.
@Suite(.timeLimit(.minutes(1))) struct ClientEventTests {
    @Test func listEventsReachesTheServer() async throws {
        // The null service answers no events and hands the cursor back.
        let server = try await TestServer.start(service: NullLiveRelayService())
        let client = makeClient(port: server.port)

        let listed = try await client.listEvents(ListEventsRequest(appID: "dev.app", afterCursor: 12, maxEvents: 10))
        #expect(listed == ListEventsReply(nextCursor: 12))

        await client.shutdown()
        try await server.shutdown()
    }

    @Test func aServiceWithoutAnEventFeedAnswersUnimplemented() async throws {
        let server = try await TestServer.start(service: TestService())
        let client = makeClient(port: server.port)
        do {
            _ = try await client.listEvents(ListEventsRequest(appID: "dev.app"))
            Issue.record("expected UNIMPLEMENTED")
        } catch {
            #expect(error.status == .unimplemented)
            #expect(error.message.contains("ListEvents"))
            #expect(error.processing == .answered)
        }
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func invalidListEventsRequestsFailLocally() async throws {
        // No server: validation happens before anything is sent.
        let client = makeClient(port: 1)
        do {
            _ = try await client.listEvents(ListEventsRequest(appID: "dev.app", maxEvents: 1001))
            Issue.record("expected INVALID_ARGUMENT")
        } catch {
            #expect(error.status == .invalidArgument)
            #expect(error.details.fieldViolations.first?.field == "max_events")
            #expect(error.processing == .notProcessed)
        }
        do {
            _ = try await client.listEvents(ListEventsRequest(appID: "dev.app", waitMS: 60_001))
            Issue.record("expected INVALID_ARGUMENT")
        } catch {
            #expect(error.details.fieldViolations.first?.field == "wait_ms")
        }
        #expect(client.pool.connectionsCreated == 0)
        await client.shutdown()
    }
}
