import LiveRelayAPNs
import LiveRelayAdmin
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import LiveRelayTLS
import LiveRelayWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// The admin service over a memory registry, called as the server calls it: no sockets.
struct RegistryAdminServiceTests {
    let registry = InMemoryTenantRegistry()
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let admin = Principal(keyID: "adminkey0001", apps: .only([]), allowedMethods: [], isAdmin: true)

    func service(
        usage: @escaping @Sendable (RegisteredApp) -> AppUsageFigures = { _ in AppUsageFigures() },
        credentials: CredentialAllowance = CredentialAllowance(),
        webhooks: WebhookAdminHooks = RegistryAdminServiceTests.webhookHooks()
    ) -> RegistryAdminService {
        RegistryAdminService(
            registry: registry, mintKey: { ("lrk_mintedkeyabc_secret", "mintedkeyabc", String(repeating: "a", count: 64)) },
            usage: usage, credentials: credentials, webhooks: webhooks)
    }

    /// Secrets numbered from 1 (`whsec_` and the number in 64 hex digits), so a test can tell them apart.
    static func webhookHooks(
        lastCursor: @escaping @Sendable (String) async throws -> UInt64 = { _ in 0 },
        backlog: @escaping @Sendable (String, UInt64) async -> UInt64? = { _, _ in nil },
        wasReset: @escaping @Sendable (String) -> Void = { _ in }
    ) -> WebhookAdminHooks {
        let minted = NIOLockedValueBox(0)
        return WebhookAdminHooks(
            mintSecret: {
                let n = minted.withLockedValue {
                    $0 += 1; return $0
                }
                return "whsec_" + String(repeating: "0", count: 63) + String(n, radix: 16)
            }, lastCursor: lastCursor, backlog: backlog, wasReset: wasReset)
    }

    var context: CallContext { CallContext(principal: admin, eventLoop: loop, deadline: nil, requestID: RequestID(1)) }

    func wait<T>(_ future: EventLoopFuture<T>) async throws -> T {
        try await future.get()
    }

    func status<T>(_ future: EventLoopFuture<T>) async -> StatusCode? {
        do {
            _ = try await future.get()
            return nil
        } catch let error as RPCError {
            return error.status
        } catch {
            return .internal
        }
    }

    @Test func anAppCreatedIsTheAdminsAndReadBackAsCreated() async throws {
        let admin = service()
        let created = try await wait(
            admin.createApp(
                Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders", queueCapacity: 9, quotas: Admin.Quotas(burst: 3)),
                context: context))
        #expect(created.app?.owner == "admin")
        #expect(created.app?.queueCapacity == 9)
        #expect(created.app?.quotas?.burst == 3)
        let got = try await wait(admin.getApp(Admin.GetAppRequest(appID: "orders"), context: context))
        #expect(got == created)
        #expect(await status(admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "x.y"), context: context)) == .alreadyExists)
        #expect(await status(admin.getApp(Admin.GetAppRequest(appID: "nope"), context: context)) == .notFound)
        // Every change names its actor: the admin key's id.
        let audit = try await registry.audit(after: 0, limit: 10)
        #expect(audit.map(\.actor) == ["adminkey0001"])
    }

    @Test func updatingASeededAppMakesItTheAdmins() async throws {
        _ = try await registry.apply(
            .seed(apps: [RegisteredApp(id: "rides", bundleID: "com.example.rides", source: .seed)], keys: []), actor: "config",
            now: UnixTime(milliseconds: 1_000))
        let admin = service()
        #expect(try await wait(admin.getApp(Admin.GetAppRequest(appID: "rides"), context: context)).app?.owner == "seed")
        let updated = try await wait(
            admin.updateApp(Admin.UpdateAppRequest(appID: "rides", quotas: Admin.Quotas(callsPerSecond: 1)), context: context))
        #expect(updated.app?.owner == "admin")
        #expect(updated.app?.quotas?.callsPerSecond == 1)
    }

    @Test func aKeysSecretIsInTheCreateReplyOnlyAndARevocationIsFinal() async throws {
        let admin = service()
        let created = try await wait(
            admin.createAPIKey(Admin.CreateAPIKeyRequest(allApps: true, allowedMethods: ["Ping"], label: "ops"), context: context))
        #expect(created.secret == "lrk_mintedkeyabc_secret")
        #expect(created.key?.keyID == "mintedkeyabc")
        #expect(created.key?.owner == "admin")
        let listed = try await wait(admin.listAPIKeys(Admin.ListAPIKeysRequest(), context: context))
        #expect(listed.keys.map(\.keyID) == ["mintedkeyabc"])
        let revoked = try await wait(admin.revokeAPIKey(Admin.RevokeAPIKeyRequest(keyID: "mintedkeyabc"), context: context))
        #expect(revoked.key?.revokedAtMS != nil)
        #expect(try await wait(admin.listAPIKeys(Admin.ListAPIKeysRequest(), context: context)).keys.isEmpty)
        #expect(try await wait(admin.listAPIKeys(Admin.ListAPIKeysRequest(includeRevoked: true), context: context)).keys.count == 1)
    }

    @Test func aKeyForAppsThatDoNotExistIsNotFoundAndNotMade() async throws {
        let admin = service()
        _ = try await wait(admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders"), context: context))
        let request = Admin.CreateAPIKeyRequest(appIDs: ["orders", "ordres"], allowedMethods: ["Ping"])
        do {
            _ = try await admin.createAPIKey(request, context: context).get()
            Issue.record("a key for an app that does not exist was made")
        } catch let error as RPCError {
            #expect(error.status == .notFound)
            #expect(error.message.contains("no app ordres"), "\(error)")
        }
        #expect(try await registry.snapshot().keys.isEmpty)
    }

    @Test func statsComeFromTheNodesFigures() async throws {
        let admin = service { app in
            var figures = AppUsageFigures()
            figures.queueDepth = app.id == "orders" ? 7 : 0
            figures.nodes = 2
            return figures
        }
        _ = try await wait(admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders"), context: context))
        let stats = try await wait(admin.getAppStats(Admin.GetAppStatsRequest(appID: "orders"), context: context))
        #expect(stats.queueDepth == 7)
        #expect(stats.nodes == 2)
    }

    /// The field an INVALID_ARGUMENT names, or nil when the call did not fail so.
    func violatedField<T: Sendable>(_ future: EventLoopFuture<T>) async -> String? {
        do {
            _ = try await future.get()
            return nil
        } catch let error as RPCError {
            return error.status == .invalidArgument ? error.details.fieldViolations.first?.field : nil
        } catch {
            return nil
        }
    }

    /// A trust certificate that does not parse would fail every connection to the
    /// endpoint: it is refused by the node that answers, before anything is stored.
    @Test func aTrustCertificateThatDoesNotParseIsRefusedBeforeAnythingIsStored() async throws {
        let admin = service(credentials: try CredentialAllowance(keyDirectories: [], endpoints: ["127.0.0.1:2197"]))
        _ = try await wait(admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders"), context: context))
        let key = Array(try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456").pkcs8PEM.utf8)
        func put(trust: String) -> Admin.PutAPNsCredentialsRequest {
            Admin.PutAPNsCredentialsRequest(
                appID: "orders", teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: key, endpoint: "127.0.0.1:2197",
                trustCertificatePEM: Array(trust.utf8))
        }
        let garbled = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
        for trust in ["", "not a PEM at all", garbled, String(decoding: key, as: UTF8.self)] {
            #expect(
                await violatedField(admin.putAPNsCredentials(put(trust: trust), context: context)) == "trust_certificate_pem",
                "\(trust.debugDescription)")
        }
        #expect(try await registry.snapshot().apps["orders"]?.credentials == nil)
        #expect(try await registry.audit(after: 0, limit: 10).count == 1)

        let certificate = try SelfSignedCertificate.generate().certificatePEM
        let stored = try await wait(admin.putAPNsCredentials(put(trust: certificate), context: context))
        #expect(stored.app?.credentials?.endpoint == "127.0.0.1:2197")
        let fingerprint = try APNsSigningKey(pkcs8PEM: String(decoding: key, as: UTF8.self), keyID: "K", teamID: "T").publicKeySHA256
        #expect(stored.app?.credentials?.publicKeySHA256 == fingerprint, "a key the registry holds has its fingerprint")
        #expect(try await registry.snapshot().apps["orders"]?.credentials?.trustPEM == certificate)
    }

    @Test func aClosedRegistryIsUnavailableNotInternal() async throws {
        try await registry.close()
        #expect(await status(service().listApps(Admin.ListAppsRequest(), context: context)) == .unavailable)
    }
}
