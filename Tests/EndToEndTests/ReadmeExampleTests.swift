import Foundation
import LiveRelayClient
import Testing

/// README.md's Swift example ("Calling LiveRelay", "From Swift") runs as written against a real development
/// server: its function is copied below, and the test checks the copy against the README first.
@Suite(.serialized)
struct ReadmeExampleTests {
    @Test func theSwiftExampleRunsAsWritten() async throws {
        let readme = try String(contentsOf: E2E.repositoryRoot().appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = readme.components(separatedBy: "```swift\n").dropFirst().compactMap { $0.components(separatedBy: "```").first }
        let example = try #require(blocks.first { $0.contains("func startOrderActivity") }, "README.md lost its Swift example")
        let body = example.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("import ") }.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        let copy = try String(contentsOfFile: #filePath, encoding: .utf8)
        #expect(copy.contains(body), "the README's Swift example and its copy in \(#filePath) differ")

        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-readme-swift")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let server = try ServerProcess.start(binary: binary, dataDir: dataDir)
        defer { server.stop() }
        let port = try #require(server.waitUntilListening(timeout: 60)?.port, "the server did not start:\n\(server.transcript())")
        let key = try #require(server.apiKey(), "no API key printed:\n\(server.transcript())")

        let configuration = LiveRelayClient.Configuration(
            host: "localhost", port: port, tls: .trusting(caFile: dataDir.path + "/cert.pem"), apiKey: key)
        let token = String(repeating: "5a", count: 32)
        let reply = try await startOrderActivity(on: configuration, token: token)
        #expect(reply.activityID == "order-1")
        #expect(reply.state == .starting)
        #expect(reply.summary?.targeted == 1)
        #expect(reply.summary?.delivered == 1, "the in-process mock APNs answered the push")
        // Its idempotency key makes the same call safe to resend: the stored reply comes back.
        let again = try await startOrderActivity(on: configuration, token: token)
        #expect(again.replayed)
    }
}

// The README's example, verbatim.

/// Registers a device's push-to-start token, then starts an order's Live Activity through it
/// and waits for APNs's answer.
func startOrderActivity(on configuration: LiveRelayClient.Configuration, token: String) async throws -> StartActivityReply {
    try await LiveRelayClient.withClient(configuration: configuration) { client in
        _ = try await client.registerToken(
            RegisterTokenRequest(
                appID: "dev.app", kind: .pushToStart, token: token, environment: .sandbox,
                attributesType: "DeliveryAttributes"))
        return try await client.startActivity(
            StartActivityRequest(
                appID: "dev.app", activityID: "order-1", attributesType: "DeliveryAttributes",
                attributesJSON: #"{"orderId":1}"#, contentStateJSON: #"{"status":"preparing"}"#,
                targets: Targets(pushToStartTokens: [token]), idempotencyKey: "order-1-start", waitForDelivery: true),
            timeout: .seconds(10))
    }
}
