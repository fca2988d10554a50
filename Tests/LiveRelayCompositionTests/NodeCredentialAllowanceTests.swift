import Foundation
import LiveRelayAPNs
import LiveRelayAdmin
import LiveRelayDomain
import LiveRelayStore
import Logging
import Testing

@testable import LiveRelayComposition

/// A node reads a key file and connects to an endpoint from the registry only when its own
/// configuration allows them: the registry is shared, and another node or an older build may
/// have written what this node's admin API would refuse. Such an app is one this node cannot
/// serve, like one whose key file it lacks.
struct NodeCredentialAllowanceTests {
    static let signingKey = try! APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")

    /// `<root>/keys/good.p8`, and a readable valid key outside the directory, reached directly,
    /// through `..` and through a symbolic link in the directory.
    struct Keys {
        let root: String
        var directory: String { root + "/keys" }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-node-allowance-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: root + "/keys", withIntermediateDirectories: true)
            let pem = try NodeCredentialAllowanceTests.signingKey.pkcs8PEM
            try pem.write(toFile: root + "/keys/good.p8", atomically: true, encoding: .utf8)
            try pem.write(toFile: root + "/outside.p8", atomically: true, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: root + "/keys/escape.p8", withDestinationPath: "../outside.p8")
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    static func app(_ id: String, endpoint: String = "apple", key: RegisteredCredentials.KeySource) -> RegisteredApp {
        RegisteredApp(
            id: id, bundleID: "com.example.\(id)",
            credentials: RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY1234567", endpoint: endpoint, keySource: key))
    }

    @Test func aKeyFileOrEndpointTheNodeDoesNotAllowIsNotLoaded() throws {
        let keys = try Keys()
        defer { keys.remove() }
        let allowance = try CredentialAllowance(keyDirectories: [keys.directory], endpoints: ["mock-apns:2197"])
        let pem = RegisteredCredentials.KeySource.stored(pem: try Self.signingKey.pkcs8PEM)
        for refused in [
            Self.app("outside", key: .file(path: keys.root + "/outside.p8")),
            Self.app("dotdot", key: .file(path: keys.directory + "/../outside.p8")),
            Self.app("symlink", key: .file(path: keys.directory + "/escape.p8")),
            Self.app("endpoint", endpoint: "evil.example:443", key: pem),
            Self.app("both", endpoint: "evil.example:443", key: .file(path: keys.directory + "/good.p8")),
        ] {
            #expect {
                _ = try PushingApp(refused, allowance: allowance)
            } throws: { error in
                "\(error)".contains("app \(refused.id): not allowed on this node")
            }
        }
        for allowed in [
            Self.app("good", key: .file(path: keys.directory + "/good.p8")),
            Self.app("mock", endpoint: "mock-apns:2197", key: .file(path: keys.directory + "/good.p8")),
            Self.app("apple", key: pem),
        ] {
            #expect(throws: Never.self) { _ = try PushingApp(allowed, allowance: allowance) }
        }
    }

    /// Apps another node wrote to the shared registry: refused here, they get no route and
    /// their pushes are left for a node that may serve them; allowed ones are served.
    @Test func appsFromTheRegistryThatTheNodeDoesNotAllowAreNotServedHere() async throws {
        let keys = try Keys()
        defer { keys.remove() }
        var description = try ServerBuilderTests.description()
        description.credentialAllowance = try CredentialAllowance(keyDirectories: [keys.directory])
        let built = try await ServerBuilder.build(description)
        let dispatcher = try #require(built.dispatcher)
        let pem = RegisteredCredentials.KeySource.stored(pem: try Self.signingKey.pkcs8PEM)
        let now = UnixTime(milliseconds: 1_000)
        for app in [
            Self.app("outside", key: .file(path: keys.root + "/outside.p8")),
            Self.app("symlink", key: .file(path: keys.directory + "/escape.p8")),
            Self.app("endpoint", endpoint: "127.0.0.1:2197", key: pem),
            Self.app("good", key: .file(path: keys.directory + "/good.p8")),
        ] {
            _ = try await built.tenants.registry.apply(.createApp(app), actor: "another-node", now: now)
        }
        try await built.tenants.reload()
        for refused in ["outside", "symlink", "endpoint"] {
            #expect(!built.tenants.canServe(appID: refused), "\(refused)")
            #expect(dispatcher.route(appID: refused) == nil, "\(refused)")
        }
        #expect(built.tenants.canServe(appID: "good"))
        #expect(dispatcher.route(appID: "good") != nil)
        // The seed's own endpoint (127.0.0.1:1) is allowed: the operator named it.
        #expect(built.tenants.canServe(appID: "orders") && dispatcher.route(appID: "orders") != nil)
    }
}
