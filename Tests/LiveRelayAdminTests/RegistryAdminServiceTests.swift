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

/// The admin service over a memory registry, called as the server calls it: no sockets.
struct RegistryAdminServiceTests {
    let registry = InMemoryTenantRegistry()
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let admin = Principal(keyID: "adminkey0001", apps: .only([]), allowedMethods: [], isAdmin: true)

    func service(usage: @escaping @Sendable (String) -> AppUsageFigures = { _ in AppUsageFigures() }) -> RegistryAdminService {
        RegistryAdminService(
            registry: registry, mintKey: { ("lrk_mintedkeyabc_secret", "mintedkeyabc", String(repeating: "a", count: 64)) },
            usage: usage)
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

    @Test func statsComeFromTheNodesFigures() async throws {
        let admin = service { appID in
            var figures = AppUsageFigures()
            figures.queueDepth = appID == "orders" ? 7 : 0
            figures.nodes = 2
            return figures
        }
        _ = try await wait(admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders"), context: context))
        let stats = try await wait(admin.getAppStats(Admin.GetAppStatsRequest(appID: "orders"), context: context))
        #expect(stats.queueDepth == 7)
        #expect(stats.nodes == 2)
    }

    @Test func aClosedRegistryIsUnavailableNotInternal() async throws {
        try await registry.close()
        #expect(await status(service().listApps(Admin.ListAppsRequest(), context: context)) == .unavailable)
    }
}
