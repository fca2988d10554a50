import LiveRelayClient
import LiveRelayMessages
import LiveRelayService
import Testing

@testable import LiveRelayClient

/// The admin API's webhook calls from the Swift client.
@Suite(.timeLimit(.minutes(1))) struct ClientWebhookTests {
    @Test func theWebhookCallsReachTheServersAdminDispatch() async throws {
        // A tenant key: the server names the admin RPC it refuses, so each call went to its own path.
        let server = try await TestServer.start(service: NullLiveRelayService())
        let client = makeClient(port: server.port)
        func expectRefused(_ name: String, _ call: () async throws(LiveRelayClientError) -> Void) async {
            do {
                try await call()
                Issue.record("\(name): expected PERMISSION_DENIED")
            } catch {
                #expect(error.status == .permissionDenied, "\(name)")
                #expect(error.message.contains("\(name) is an admin RPC"), "\(name): \(error.message)")
            }
        }
        await expectRefused("PutWebhook") { () async throws(LiveRelayClientError) in
            _ = try await client.putWebhook(Admin.PutWebhookRequest(appID: "dev.app", url: "https://h/in"))
        }
        await expectRefused("GetWebhook") { () async throws(LiveRelayClientError) in
            _ = try await client.getWebhook(Admin.GetWebhookRequest(appID: "dev.app"))
        }
        await expectRefused("DeleteWebhook") { () async throws(LiveRelayClientError) in
            _ = try await client.deleteWebhook(Admin.DeleteWebhookRequest(appID: "dev.app"))
        }
        await expectRefused("ResetWebhook") { () async throws(LiveRelayClientError) in
            _ = try await client.resetWebhook(Admin.ResetWebhookRequest(appID: "dev.app"))
        }
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func invalidPutWebhookRequestsFailLocally() async throws {
        // No server: validation happens before anything is sent.
        let client = makeClient(port: 1)
        for (request, field) in [
            (Admin.PutWebhookRequest(appID: "dev.app", url: "http://h/in"), "url"),
            (Admin.PutWebhookRequest(appID: "dev.app", url: "https://h/in", eventKinds: ["PUSH_FAILED"]), "event_kinds[0]"),
        ] {
            do {
                _ = try await client.putWebhook(request)
                Issue.record("expected INVALID_ARGUMENT for \(field)")
            } catch {
                #expect(error.status == .invalidArgument)
                #expect(error.details.fieldViolations.first?.field == field)
                #expect(error.processing == .notProcessed)
            }
        }
        #expect(client.pool.connectionsCreated == 0)
        await client.shutdown()
    }
}
