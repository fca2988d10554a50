import Foundation
import LiveRelayAPNs
import LiveRelayAdmin
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import LiveRelayWire
import NIOCore
import NIOPosix
import Testing

/// PutAPNsCredentials names only key files and endpoints the operator allows: a key
/// file under the configured directories once `..` and symbolic links are resolved,
/// and Apple's endpoint or one the operator lists. Anything else is INVALID_ARGUMENT
/// naming the field and the config key, before anything is read or stored.
struct CredentialAllowanceTests {
    let registry = InMemoryTenantRegistry()
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let admin = Principal(keyID: "adminkey0001", apps: .only([]), allowedMethods: [], isAdmin: true)
    var context: CallContext { CallContext(principal: admin, eventLoop: loop, deadline: nil, requestID: RequestID(1)) }

    /// A directory of keys the operator allows, and a valid key beside it that an admin must not reach:
    /// `<root>/keys/good.p8`, `<root>/outside/key.p8`, `<root>/keys/escape.p8` -> `../outside/key.p8`,
    /// and a rotated secret as Kubernetes mounts one (`<root>/keys/mounted.p8` -> `..data/mounted.p8`,
    /// `..data` -> `..2024`), which stays inside.
    struct Keys {
        let root: String
        var directory: String { root + "/keys" }
        var good: String { directory + "/good.p8" }
        var outside: String { root + "/outside/key.p8" }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-allowance-\(UUID().uuidString)").path
            let files = FileManager.default
            try files.createDirectory(atPath: root + "/keys/..2024", withIntermediateDirectories: true)
            try files.createDirectory(atPath: root + "/outside", withIntermediateDirectories: true)
            let pem = try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456").pkcs8PEM
            for path in [root + "/keys/good.p8", root + "/outside/key.p8", root + "/keys/..2024/mounted.p8"] {
                try pem.write(toFile: path, atomically: true, encoding: .utf8)
            }
            try files.createSymbolicLink(atPath: root + "/keys/escape.p8", withDestinationPath: "../outside/key.p8")
            try files.createSymbolicLink(atPath: root + "/keys/..data", withDestinationPath: "..2024")
            try files.createSymbolicLink(atPath: root + "/keys/mounted.p8", withDestinationPath: "..data/mounted.p8")
            try files.createSymbolicLink(atPath: root + "/linked-keys", withDestinationPath: "keys")
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    func service(_ allowance: CredentialAllowance) -> RegistryAdminService {
        RegistryAdminService(
            registry: registry, mintKey: { ("lrk_mintedkeyabc_secret", "mintedkeyabc", String(repeating: "a", count: 64)) },
            usage: { _ in AppUsageFigures() }, credentials: allowance,
            webhooks: WebhookAdminHooks(mintSecret: { "whsec_" + String(repeating: "0", count: 64) }))
    }

    func put(file: String? = nil, endpoint: String? = nil) throws -> Admin.PutAPNsCredentialsRequest {
        Admin.PutAPNsCredentialsRequest(
            appID: "orders", teamID: "TEAM123456", keyID: "KEY1234567",
            privateKeyPEM: file == nil ? Array(try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456").pkcs8PEM.utf8) : nil,
            privateKeyFile: file, endpoint: endpoint)
    }

    /// The refusal's status, field and message, or nil when the call succeeded.
    func refusal(_ admin: RegistryAdminService, _ request: Admin.PutAPNsCredentialsRequest) async -> RPCError? {
        do {
            _ = try await admin.putAPNsCredentials(request, context: context).get()
            return nil
        } catch let error as RPCError {
            return error
        } catch {
            return RPCError(.internal, "\(error)")
        }
    }

    func createApp(_ admin: RegistryAdminService) async throws {
        _ = try await admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders"), context: context).get()
    }

    @Test func aKeyFileOutsideTheDirectoriesIsRefusedAndNothingIsStored() async throws {
        let keys = try Keys()
        defer { keys.remove() }
        let admin = service(try CredentialAllowance(keyDirectories: [keys.directory]))
        try await createApp(admin)
        for path in [
            keys.outside, keys.directory + "/../outside/key.p8", keys.directory + "/escape.p8", keys.directory + "/missing.p8",
            "/etc/passwd", "keys/good.p8", keys.directory,
        ] {
            let error = await refusal(admin, try put(file: path))
            #expect(error?.status == .invalidArgument, "\(path): \(String(describing: error))")
            #expect(error?.details.fieldViolations.first?.field == "private_key_file", "\(path)")
        }
        // The same answer whether the file exists or not: a refusal tells nothing of files outside.
        let missing = await refusal(admin, try put(file: keys.root + "/outside/missing.p8"))
        let present = await refusal(admin, try put(file: keys.outside))
        #expect(
            missing?.message.replacingOccurrences(of: "missing.p8", with: "key.p8") == present?.message,
            "\(String(describing: missing)) \(String(describing: present))")
        #expect(try await registry.snapshot().apps["orders"]?.credentials == nil)
        #expect(try await registry.audit(after: 0, limit: 10).count == 1, "only the app's creation")
    }

    @Test func aKeyFileInTheDirectoriesIsAcceptedAsGiven() async throws {
        let keys = try Keys()
        defer { keys.remove() }
        // The directory named through a symbolic link of its own: compared resolved too.
        let admin = service(try CredentialAllowance(keyDirectories: [keys.root + "/linked-keys"]))
        try await createApp(admin)
        for path in [keys.good, keys.directory + "/mounted.p8", keys.root + "/linked-keys/good.p8"] {
            let error = await refusal(admin, try put(file: path))
            #expect(error == nil, "\(path): \(String(describing: error))")
            #expect(try await registry.snapshot().apps["orders"]?.credentials?.keySource == .file(path: path))
        }
        // A file key has no fingerprint in replies: the node answering may not be one that reads it.
        let app = try await admin.getApp(Admin.GetAppRequest(appID: "orders"), context: context).get().app
        #expect(app?.credentials?.keySource?.hasPrefix("file:") == true)
        #expect(app?.credentials?.publicKeySHA256 == nil)
    }

    @Test func withoutDirectoriesEveryKeyFileIsRefusedNamingTheConfigKey() async throws {
        let keys = try Keys()
        defer { keys.remove() }
        let admin = service(CredentialAllowance())
        try await createApp(admin)
        let error = await refusal(admin, try put(file: keys.good))
        #expect(error?.status == .invalidArgument)
        #expect(error?.details.fieldViolations.first?.field == "private_key_file")
        #expect(error?.message.contains("credential_key_directories") == true, "\(String(describing: error))")
        #expect(error?.message.contains("PRIVATE KEY") == false)
        #expect(try await registry.snapshot().apps["orders"]?.credentials == nil)
    }

    @Test func anEndpointNotAllowedIsRefusedAndAppleIsAlwaysAllowed() async throws {
        let admin = service(CredentialAllowance())
        try await createApp(admin)
        for endpoint in [
            "127.0.0.1:2197", "evil.example:443", "[::1]:8443", "api.push.apple.com.evil.example:443", "api.push.apple.com:22",
        ] {
            let error = await refusal(admin, try put(endpoint: endpoint))
            #expect(error?.status == .invalidArgument, "\(endpoint): \(String(describing: error))")
            #expect(error?.details.fieldViolations.first?.field == "endpoint", "\(endpoint)")
            #expect(error?.message.contains("credential_endpoints") == true, "\(String(describing: error))")
        }
        #expect(try await registry.snapshot().apps["orders"]?.credentials == nil)
        for endpoint in [nil, "apple", "api.push.apple.com:443", "api.sandbox.push.apple.com:443", "API.Sandbox.Push.Apple.com:2197"] {
            let error = await refusal(admin, try put(endpoint: endpoint))
            #expect(error == nil, "\(String(describing: endpoint)): \(String(describing: error))")
        }
    }

    @Test func anEndpointTheOperatorListsIsAccepted() async throws {
        let admin = service(try CredentialAllowance(keyDirectories: [], endpoints: ["mock-apns:2197", "[::1]:8443"]))
        try await createApp(admin)
        for endpoint in ["mock-apns:2197", "MOCK-APNS:2197", "[::1]:8443"] {
            let error = await refusal(admin, try put(endpoint: endpoint))
            #expect(error == nil, "\(endpoint): \(String(describing: error))")
        }
        #expect(try await registry.snapshot().apps["orders"]?.credentials?.endpoint == "[::1]:8443")
        for endpoint in ["mock-apns:2198", "mock-apns2:2197"] {
            #expect(await refusal(admin, try put(endpoint: endpoint))?.details.fieldViolations.first?.field == "endpoint", "\(endpoint)")
        }

        let any = service(try CredentialAllowance(keyDirectories: [], anyEndpoint: true))
        #expect(await refusal(any, try put(endpoint: "anywhere.example:1")) == nil)
    }

    @Test func theOperatorsListsAreChecked() {
        #expect(throws: CredentialRefusal.self) { try CredentialAllowance(keyDirectories: ["relative/keys"]) }
        #expect(throws: CredentialRefusal.self) { try CredentialAllowance(keyDirectories: [], endpoints: ["https://relay:443"]) }
    }

    @Test func theSeedsKeyFilesAndEndpointsAreAllowedAsNamed() throws {
        let keys = try Keys()
        defer { keys.remove() }
        let seed = RegisteredApp(
            id: "orders", bundleID: "com.example.orders",
            credentials: RegisteredCredentials(teamID: "T", keyID: "K", endpoint: "mock-apns:2197", keySource: .file(path: keys.outside)),
            source: .seed)
        let allowance = CredentialAllowance().allowing(seeds: [seed])
        #expect(try allowance.keyFile(keys.outside) == keys.outside)
        #expect(throws: CredentialRefusal.self) { try allowance.keyFile(keys.good) }
        #expect(throws: Never.self) { try allowance.endpoint("mock-apns:2197") }
        #expect(throws: CredentialRefusal.self) { try allowance.endpoint("mock-apns:2198") }
    }
}
