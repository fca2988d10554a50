import LiveRelayAPNs
import LiveRelayAdmin
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// The admin API's webhook calls over a memory registry: the secret shown once
/// and rotated on request, the URL and kinds checked, the progress reported
/// and reset, and no secret in the audit log.
extension RegistryAdminServiceTests {
    func makeOrders(_ admin: RegistryAdminService) async throws {
        _ = try await wait(admin.createApp(Admin.CreateAppRequest(appID: "orders", bundleID: "com.example.orders"), context: context))
    }

    @Test func aNewWebhookShowsItsSecretOnceAndAChangeKeepsIt() async throws {
        let admin = service()
        try await makeOrders(admin)
        let put = try await wait(
            admin.putWebhook(
                Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/in?x=1", eventKinds: ["EVENT_KIND_PUSH_FAILED"]),
                context: context))
        let secret = try #require(put.signingSecret)
        #expect(secret.hasPrefix("whsec_") && secret.utf8.count == 70)
        #expect(put.webhook?.url == "https://hooks.example.com/in?x=1")
        #expect(put.webhook?.eventKinds == ["EVENT_KIND_PUSH_FAILED"])
        #expect(put.webhook?.state == "delivering")
        #expect(put.webhook?.deliveredCursor == 0)

        // Changing the URL or kinds keeps the secret, and shows none.
        let changed = try await wait(
            admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/v2"), context: context))
        #expect(changed.signingSecret == nil)
        #expect(changed.webhook?.eventKinds == [], "empty: every kind")
        #expect(try await registry.snapshot().apps["orders"]?.webhook?.secret == secret)
        #expect(changed.webhook?.createdAtMS == put.webhook?.createdAtMS)

        // Rotation mints a new one, in force at once.
        let rotated = try await wait(
            admin.putWebhook(
                Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/v2", rotateSecret: true), context: context))
        let newSecret = try #require(rotated.signingSecret)
        #expect(newSecret != secret)
        #expect(try await registry.snapshot().apps["orders"]?.webhook?.secret == newSecret)

        // The reads never show it, nor does the audit log.
        let got = try await wait(admin.getWebhook(Admin.GetWebhookRequest(appID: "orders"), context: context))
        #expect(got.webhook?.url == "https://hooks.example.com/v2")
        let audit = try await registry.audit(after: 0, limit: 10)
        #expect(audit.map(\.action) == [.createApp, .putWebhook, .putWebhook, .putWebhook])
        #expect(!audit.contains { $0.details.contains("whsec_") })
        #expect(audit.last?.details.contains(#""secret_minted":true"#) == true)
    }

    /// A new webhook starts at the feed's last cursor, read before the change; a change keeps
    /// where it started; deleted and set again, it starts at the feed's last cursor then.
    @Test func aNewWebhookStartsAtTheFeedsLastCursor() async throws {
        let feed = NIOLockedValueBox<UInt64>(57)
        let admin = service(webhooks: Self.webhookHooks(lastCursor: { _ in feed.withLockedValue { $0 } }))
        try await makeOrders(admin)
        let put = try await wait(
            admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/"), context: context))
        #expect(put.webhook?.deliveredCursor == 57, "nothing before it is its to deliver")
        #expect(try await registry.snapshot().apps["orders"]?.webhook?.startCursor == 57)
        let claimed = try await registry.claimWebhook(appID: "orders", node: "n1", now: UnixTime(milliseconds: 0), lease: .seconds(30))
        #expect(claimed?.deliveredCursor == 57)

        feed.withLockedValue { $0 = 90 }
        for request in [
            Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/v2", eventKinds: ["EVENT_KIND_PUSH_FAILED"]),
            Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/v2", rotateSecret: true),
        ] {
            let changed = try await wait(admin.putWebhook(request, context: context))
            #expect(changed.webhook?.deliveredCursor == 57)
            #expect(try await registry.snapshot().apps["orders"]?.webhook?.startCursor == 57, "a change keeps where it started")
        }

        _ = try await wait(admin.deleteWebhook(Admin.DeleteWebhookRequest(appID: "orders"), context: context))
        feed.withLockedValue { $0 = 120 }
        let again = try await wait(
            admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/"), context: context))
        #expect(try await registry.snapshot().apps["orders"]?.webhook?.startCursor == 120)
        #expect(again.signingSecret != nil)
    }

    /// A feed that cannot be read: no webhook is set (it would not know where to start).
    @Test func aFeedThatCannotBeReadSetsNoWebhook() async throws {
        let admin = service(webhooks: Self.webhookHooks(lastCursor: { _ in throw ActivityStoreError.unavailable("down") }))
        try await makeOrders(admin)
        let put = admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/"), context: context)
        #expect(await status(put) == .unavailable)
        #expect(try await registry.snapshot().apps["orders"]?.webhook == nil)
    }

    /// Two first PutWebhook calls at once: the secret shown is the one in force. The first call,
    /// held before its change while the second sets the webhook, then finds it set: it changes
    /// nothing of its secret, and shows none.
    @Test func ofTwoFirstPutsOnlyTheSecretInForceIsShown() async throws {
        let calls = NIOLockedValueBox(0)
        let released = NIOLockedValueBox(false)
        let admin = service(
            webhooks: Self.webhookHooks(lastCursor: { _ in
                let call = calls.withLockedValue {
                    $0 += 1
                    return $0
                }
                if call == 1 {
                    while !released.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
                }
                return 0
            }))
        try await makeOrders(admin)
        let request = Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/")
        let held = admin.putWebhook(request, context: context)
        // Until the first call is held (its change not made yet).
        while calls.withLockedValue({ $0 }) < 1 { try await Task.sleep(for: .milliseconds(5)) }
        let second = try await wait(admin.putWebhook(request, context: context))
        released.withLockedValue { $0 = true }
        let first = try await wait(held)
        let stored = try #require(try await registry.snapshot().apps["orders"]?.webhook?.secret)
        #expect(second.signingSecret == stored)
        #expect(first.signingSecret == nil, "the webhook the first call found keeps its secret")
        // A request whose rotation is asked shows the secret it put in force.
        let rotated = try await wait(
            admin.putWebhook(
                Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/", rotateSecret: true), context: context))
        #expect(rotated.signingSecret != nil)
        #expect(try await registry.snapshot().apps["orders"]?.webhook?.secret == rotated.signingSecret)
    }

    @Test func aBadURLOrAnUnknownAppIsRefusedAndNothingIsStored() async throws {
        let admin = service()
        try await makeOrders(admin)
        for url in ["http://hooks.example.com/in", "https://user@hooks.example.com/", "https:///in", "https://hooks.example.com/#frag"] {
            let put = admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: url), context: context)
            #expect(await status(put) == .invalidArgument, "\(url)")
        }
        #expect(try await registry.snapshot().apps["orders"]?.webhook == nil)
        let unknown = admin.putWebhook(Admin.PutWebhookRequest(appID: "nope", url: "https://hooks.example.com/"), context: context)
        #expect(await status(unknown) == .notFound)
        #expect(await status(admin.getWebhook(Admin.GetWebhookRequest(appID: "orders"), context: context)) == .notFound)
        #expect(await status(admin.deleteWebhook(Admin.DeleteWebhookRequest(appID: "orders"), context: context)) == .notFound)
        #expect(await status(admin.resetWebhook(Admin.ResetWebhookRequest(appID: "orders"), context: context)) == .notFound)
    }

    @Test func progressIsReportedResetAndForgottenWithItsWebhook() async throws {
        let resets = NIOLockedValueBox<[String]>([])
        let admin = service(
            usage: { _ in AppUsageFigures() },
            webhooks: Self.webhookHooks(
                backlog: { _, cursor in 42 - cursor }, wasReset: { app in resets.withLockedValue { $0.append(app) } }))
        try await makeOrders(admin)
        _ = try await wait(admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/"), context: context))
        let createdAt = try #require(try await registry.snapshot().apps["orders"]?.webhook?.createdAt)

        // A deliverer's progress: 3 failed attempts past the window.
        var progress = try #require(try await registry.claimWebhook(appID: "orders", node: "n1", now: createdAt, lease: .seconds(30)))
        progress.deliveredCursor = 40
        progress.attempts = 3
        progress.failing = true
        progress.failingSince = createdAt
        progress.lastError = "HTTP 503"
        #expect(try await registry.saveWebhook(progress, node: "n1", now: createdAt, lease: .seconds(30)))

        let got = try #require(try await wait(admin.getWebhook(Admin.GetWebhookRequest(appID: "orders"), context: context)).webhook)
        #expect(got.state == "failing" && got.attempts == 3 && got.lastError == "HTTP 503" && got.deliveredCursor == 40)
        #expect(got.failingSinceMS == createdAt.milliseconds)
        let stats = try await wait(admin.getAppStats(Admin.GetAppStatsRequest(appID: "orders"), context: context))
        #expect(stats.webhookState == "failing")
        #expect(stats.webhookBacklog == 2)

        let reset = try #require(try await wait(admin.resetWebhook(Admin.ResetWebhookRequest(appID: "orders"), context: context)).webhook)
        #expect(reset.state == "delivering" && reset.attempts == 0 && reset.deliveredCursor == 40)
        #expect(resets.withLockedValue { $0 } == ["orders"], "this node's deliverer is told")

        // Deleted and set again: a new webhook, whose progress starts afresh.
        let deleted = try await wait(admin.deleteWebhook(Admin.DeleteWebhookRequest(appID: "orders"), context: context))
        #expect(deleted.webhook?.deliveredCursor == 40)
        #expect(try await wait(admin.getAppStats(Admin.GetAppStatsRequest(appID: "orders"), context: context)).webhookState == nil)
        let again = try await wait(
            admin.putWebhook(Admin.PutWebhookRequest(appID: "orders", url: "https://hooks.example.com/"), context: context))
        #expect(again.signingSecret != nil, "a new webhook, a new secret")
        #expect(again.webhook?.deliveredCursor == 0 && again.webhook?.state == "delivering")
    }
}
