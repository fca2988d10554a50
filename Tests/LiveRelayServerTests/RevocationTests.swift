import LiveRelayMessages
import LiveRelayService
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import Testing

@testable import LiveRelayServer

/// A key revoked while the server runs, over real TLS connections: the next
/// HELLO with it is refused, connections already open with it get GOAWAY
/// UNAUTHENTICATED and close, and every other key's connection carries on.
@Suite("Revoking keys while serving", .timeLimit(.minutes(1)))
struct RevocationTests {
    @Test func aRevokedKeyLosesItsOpenConnectionsAndIsRefusedOnTheNextHello() async throws {
        let kept = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping])
        let revoked = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping])
        let authenticator = ReloadableAuthenticator(try APIKeyAuthenticator(records: [kept.record, revoked.record]))
        try await withServer(authenticator: authenticator) { server in
            let victim = try await server.connectAndHello(apiKey: revoked.plaintext)
            let bystander = try await server.connectAndHello(apiKey: kept.plaintext)
            try await victim.send([ping(1)])
            _ = expectResponse(try await victim.nextFrame(), id: 1)

            // What the registry's reload does: the new key set first, then the open connections.
            authenticator.replace(with: try APIKeyAuthenticator(records: [kept.record]))
            server.server.revoke(keyIDs: [revoked.record.keyID])

            let closing = try await victim.waitForClose()
            #expect(
                closing == [
                    .goAway(Frame.GoAway(lastRequestID: 1, code: .unauthenticated, reason: "API key \(revoked.record.keyID) was revoked"))
                ])
            try await bystander.send([ping(2)])
            _ = expectResponse(try await bystander.nextFrame(), id: 2)

            let again = try await server.connect()
            let answer = try await again.hello(apiKey: revoked.plaintext)
            #expect(answer == .goAway(Frame.GoAway(lastRequestID: 0, code: .unauthenticated, reason: "invalid API key")))
            await again.close()
            await bystander.close()
        }
    }
}
