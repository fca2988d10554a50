import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

/// A webhook signing key: its hex is what the secrecy checks look for.
let webhookSecretHex = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e7abcd"
let webhookSecret = "whsec_" + webhookSecretHex
let otherWebhookSecret = "whsec_" + String(repeating: "0f", count: 32)

func webhookURL(_ appID: String) -> String { "https://hooks.example.com/liverelay/\(appID)" }

/// Webhooks on apps, and their delivery progress with its lease (``WebhookProgressStore``).
extension RegistryBehaviourSuite {
    static let webhookBehaviours: [RegistryBehaviour] = [
        RegistryBehaviour(description: "a webhook round-trips through the snapshot and delete clears it", run: webhookRoundTrip),
        RegistryBehaviour(description: "a webhook's secret is in no description and no audit row", run: webhookSecretStaysHidden),
        RegistryBehaviour(
            description: "a new webhook takes the start cursor and the secret given; a changed one keeps its own",
            run: webhookStartCursorAndSecret),
        RegistryBehaviour(description: "a claim takes the lease; another node's waits until it runs out", run: claimTakesTheLease),
        RegistryBehaviour(description: "the holder's saves persist and renew; other nodes' are refused", run: savesNeedTheLease),
        RegistryBehaviour(description: "a reset refuses the holder's next save and keeps the cursor", run: resetRefusesStaleSaves),
        RegistryBehaviour(description: "a release lets another node claim at once", run: releaseHandsOver),
        RegistryBehaviour(description: "one app's progress never touches another's", run: progressIsPerApp),
        RegistryBehaviour(description: "a closed registry refuses webhook progress calls", run: closedRegistryRefusesProgress),
    ]

    static let lease = UnixTime.Duration.seconds(30)

    /// PutWebhook with `secret` rotated in (nil: the webhook's own kept; a new one gets ``webhookSecret``).
    @discardableResult
    static func putWebhook(
        _ registry: any TenantRegistry, _ appID: String, url: String? = nil, kinds: Set<FeedEvent.Kind> = [],
        secret: String? = webhookSecret, startCursor: UInt64 = 0, at time: UnixTime = t0
    ) async throws -> RegistryApplied {
        let change = RegistryChange.putWebhook(
            appID: appID, url: url ?? webhookURL(appID), eventKinds: kinds, newSecret: secret ?? webhookSecret, rotate: secret != nil,
            startCursor: startCursor)
        return try await apply(registry, change, at: time)
    }

    /// An app with a webhook set at `t0`.
    static func appWithWebhook(_ registry: any TenantRegistry, _ appID: String = "orders") async throws {
        try await apply(registry, .createApp(registeredApp(appID)))
        try await putWebhook(registry, appID, kinds: [.callSettled, .pushFailed])
    }

    static func webhookRoundTrip(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        try await apply(registry, .createApp(registeredApp("rides")))
        try await putWebhook(registry, "orders", kinds: [.pushFailed, .callSettled, .channelDeleted], at: t0 + .seconds(1))
        try await putWebhook(registry, "rides", secret: otherWebhookSecret, at: t0 + .seconds(2))
        var snapshot = try await registry.snapshot()
        #expect(
            snapshot.apps["orders"]?.webhook
                == RegisteredWebhook(
                    url: webhookURL("orders"), eventKinds: [.callSettled, .pushFailed, .channelDeleted], secret: webhookSecret,
                    createdAt: t0 + .seconds(1), updatedAt: t0 + .seconds(1)))
        #expect(
            snapshot.apps["rides"]?.webhook
                == RegisteredWebhook(
                    url: webhookURL("rides"), eventKinds: [], secret: otherWebhookSecret, createdAt: t0 + .seconds(2),
                    updatedAt: t0 + .seconds(2)), "no kinds: every kind")

        // A new URL with the secret kept: the webhook keeps its creation time.
        try await putWebhook(
            registry, "orders", url: "https://other.example.com:8443/hook?x=1", kinds: [.tokenPruned], secret: nil, at: t0 + .seconds(3))
        snapshot = try await registry.snapshot()
        let changed = try #require(snapshot.apps["orders"]?.webhook)
        #expect(changed.url == "https://other.example.com:8443/hook?x=1")
        #expect(changed.eventKinds == [.tokenPruned])
        #expect(changed.secret == webhookSecret)
        #expect(changed.createdAt == t0 + .seconds(1))
        #expect(changed.updatedAt == t0 + .seconds(3))

        // Every kind this build knows survives.
        try await putWebhook(registry, "rides", kinds: Set(FeedEvent.Kind.allCases), secret: nil, at: t0 + .seconds(4))
        #expect(try await registry.snapshot().apps["rides"]?.webhook?.eventKinds == Set(FeedEvent.Kind.allCases))

        // Other changes to the app keep its webhook.
        try await apply(registry, .updateApp(id: "orders", RegisteredAppPatch(weight: 4)), at: t0 + .seconds(5))
        try await apply(registry, .putCredentials(appID: "orders", storedCredentials()), at: t0 + .seconds(6))
        try await apply(registry, .disableApp(id: "orders"), at: t0 + .seconds(7))
        #expect(try await registry.snapshot().apps["orders"]?.webhook == changed)

        let version = try await registry.version()
        let deleted = try await apply(registry, .deleteWebhook(appID: "orders"), at: t0 + .seconds(8))
        #expect(deleted.version == version + 1)
        #expect(deleted.entry?.action == .deleteWebhook)
        snapshot = try await registry.snapshot()
        #expect(snapshot.apps["orders"]?.webhook == nil)
        #expect(snapshot.apps["orders"]?.credentials != nil)
        #expect(snapshot.apps["rides"]?.webhook?.secret == otherWebhookSecret, "the other app's webhook stays")
        #expect(await refusal(registry, .deleteWebhook(appID: "orders")) == .webhookNotFound("orders"))
        #expect(try await registry.version() == version + 1)
        try await registry.close()
    }

    static func webhookSecretStaysHidden(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry)
        try await putWebhook(registry, "orders", url: "https://hooks.example.com/v2", at: t0 + .seconds(1))
        let snapshot = try await registry.snapshot()
        let app = try #require(snapshot.apps["orders"])
        #expect(app.webhook?.secret == webhookSecret, "kept, for signing")
        for text in [
            String(describing: snapshot), String(reflecting: snapshot), String(describing: app), String(reflecting: app),
            String(describing: app.webhook), "\(snapshot.apps)",
        ] {
            #expect(!text.contains(webhookSecretHex), "a description shows the secret: \(text)")
            #expect(text.contains("hooks.example.com"), "the description still shows the webhook")
        }
        for entry in try await registry.audit(after: 0, limit: 10) {
            #expect(!entry.details.contains(webhookSecretHex), "audit row \(entry.sequence) holds the secret")
        }
        try await registry.close()
    }

    static func webhookStartCursorAndSecret(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        func put(
            secret: String, rotate: Bool, startCursor: UInt64, kinds: Set<FeedEvent.Kind> = [], at time: UnixTime
        )
            async throws -> RegistryApplied
        {
            try await apply(
                registry,
                .putWebhook(
                    appID: "orders", url: webhookURL("orders"), eventKinds: kinds, newSecret: secret, rotate: rotate,
                    startCursor: startCursor), at: time)
        }
        // A new webhook: the secret given (no rotation asked: there is none to keep), from the cursor given.
        let created = try await put(secret: webhookSecret, rotate: false, startCursor: 41, at: t0 + .seconds(1))
        #expect(created.entry?.details.contains(#""secret_minted":true"#) == true)
        var webhook = try #require(try await registry.snapshot().apps["orders"]?.webhook)
        #expect(webhook.startCursor == 41 && webhook.secret == webhookSecret && webhook.createdAt == t0 + .seconds(1))
        // Its first claim starts there.
        let claimed = try await registry.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(2), lease: lease)
        #expect(claimed == WebhookProgress(appID: "orders", webhookCreatedAt: t0 + .seconds(1), deliveredCursor: 41))
        #expect(claimed == .fresh(for: webhook, appID: "orders"))

        // Changed: the secret and the start cursor are its own, whatever the change carries.
        let changed = try await put(secret: otherWebhookSecret, rotate: false, startCursor: 99, kinds: [.pushFailed], at: t0 + .seconds(3))
        #expect(changed.entry?.details.contains(#""secret_minted":false"#) == true)
        webhook = try #require(try await registry.snapshot().apps["orders"]?.webhook)
        #expect(webhook.startCursor == 41 && webhook.secret == webhookSecret && webhook.eventKinds == [.pushFailed])
        // The same again with nothing new: no change at all.
        #expect(
            try await put(secret: otherWebhookSecret, rotate: false, startCursor: 100, kinds: [.pushFailed], at: t0 + .seconds(4)).entry
                == nil)
        // Rotated: the new secret, the start cursor still its own.
        let rotated = try await put(secret: otherWebhookSecret, rotate: true, startCursor: 101, kinds: [.pushFailed], at: t0 + .seconds(5))
        #expect(rotated.entry?.details.contains(#""secret_minted":true"#) == true)
        webhook = try #require(try await registry.snapshot().apps["orders"]?.webhook)
        #expect(webhook.startCursor == 41 && webhook.secret == otherWebhookSecret && webhook.createdAt == t0 + .seconds(1))

        // Deleted and set again: a new webhook, from the cursor given then (the largest a column holds).
        try await apply(registry, .deleteWebhook(appID: "orders"), at: t0 + .seconds(6))
        _ = try await put(secret: webhookSecret, rotate: false, startCursor: UInt64(Int64.max), at: t0 + .seconds(7))
        webhook = try #require(try await registry.snapshot().apps["orders"]?.webhook)
        #expect(webhook.startCursor == UInt64(Int64.max) && webhook.secret == webhookSecret && webhook.createdAt == t0 + .seconds(7))
        // Other changes to the app keep it.
        try await apply(registry, .updateApp(id: "orders", RegisteredAppPatch(weight: 4)), at: t0 + .seconds(8))
        #expect(try await registry.snapshot().apps["orders"]?.webhook == webhook)
        // An app without saved progress claims from there.
        try await apply(registry, .createApp(registeredApp("rides")))
        try await putWebhook(registry, "rides", startCursor: 7, at: t0 + .seconds(9))
        let rides = try await registry.claimWebhook(appID: "rides", node: "a", now: t0 + .seconds(10), lease: lease)
        #expect(rides?.deliveredCursor == 7 && rides?.webhookCreatedAt == t0 + .seconds(9))
        try await registry.close()
    }

    static func claimTakesTheLease(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry)
        #expect(try await registry.webhookProgress(appID: "orders") == nil, "nothing saved before the first claim")
        let claimed = try await registry.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(10), lease: lease)
        #expect(claimed == WebhookProgress(appID: "orders", webhookCreatedAt: t0), "fresh, for the app's current webhook")
        #expect(try await registry.webhookProgress(appID: "orders") == claimed)

        // A's lease runs until t0 + 40 s: B is refused until then, A renews.
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(20), lease: lease) == nil)
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(39), lease: lease) == nil)
        #expect(try await registry.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(25), lease: lease) == claimed)
        // Renewed to t0 + 55 s.
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(45), lease: lease) == nil)
        let taken = try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(56), lease: lease)
        #expect(taken == claimed, "after the lease ran out, from the saved progress")
        #expect(try await registry.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(57), lease: lease) == nil)

        // An app without a webhook (or no app at all): a fresh progress for no webhook.
        try await apply(registry, .createApp(registeredApp("rides")))
        let bare = try await registry.claimWebhook(appID: "rides", node: "a", now: t0, lease: lease)
        #expect(bare == WebhookProgress(appID: "rides", webhookCreatedAt: UnixTime(milliseconds: 0)))
        // Bookkeeping: no version bump, no audit row.
        #expect(try await registry.version() == 3)
        #expect(try await registry.audit(after: 0, limit: 10).count == 3)
        try await registry.close()
    }

    static func savesNeedTheLease(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry)
        let version = try await registry.version()
        var progress = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0, lease: lease))
        progress.deliveredCursor = 42
        progress.lastSuccessAt = t0 + .seconds(1)
        progress.lastError = "HTTP 503"
        progress.failingSince = t0 + .seconds(4)
        progress.attempts = 2
        #expect(try await registry.saveWebhook(progress, node: "a", now: t0 + .seconds(5), lease: lease))
        #expect(try await registry.webhookProgress(appID: "orders") == progress)

        // The save renewed A's lease to t0 + 35 s.
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(31), lease: lease) == nil)
        // A node without the lease saves nothing.
        var stale = progress
        stale.deliveredCursor = 7
        stale.failing = true
        #expect(try await registry.saveWebhook(stale, node: "b", now: t0 + .seconds(32), lease: lease) == false)
        #expect(try await registry.webhookProgress(appID: "orders") == progress)

        // B takes over once the lease ran out, from A's last save; A's saves are refused from then on.
        let taken = try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(36), lease: lease)
        #expect(taken == progress)
        #expect(try await registry.saveWebhook(stale, node: "a", now: t0 + .seconds(37), lease: lease) == false)
        #expect(try await registry.webhookProgress(appID: "orders") == progress)

        // A success clears the run of failures.
        progress.deliveredCursor = 50
        progress.lastSuccessAt = t0 + .seconds(38)
        progress.lastError = nil
        progress.failingSince = nil
        progress.attempts = 0
        #expect(try await registry.saveWebhook(progress, node: "b", now: t0 + .seconds(38), lease: lease))
        #expect(try await registry.webhookProgress(appID: "orders") == progress)
        // A save for an app never claimed writes nothing.
        #expect(
            try await registry.saveWebhook(WebhookProgress(appID: "ghost", webhookCreatedAt: t0), node: "a", now: t0, lease: lease)
                == false)
        #expect(try await registry.webhookProgress(appID: "ghost") == nil)
        #expect(try await registry.version() == version)
        #expect(try await registry.audit(after: 0, limit: 10).count == Int(version))
        try await registry.close()
    }

    static func resetRefusesStaleSaves(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry)
        #expect(try await registry.resetWebhook(appID: "orders") == nil, "nothing saved: nothing to reset")
        var progress = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0, lease: lease))
        progress.deliveredCursor = 7
        progress.lastError = "connection refused"
        progress.failingSince = t0 + .seconds(1)
        progress.attempts = 12
        progress.failing = true
        #expect(try await registry.saveWebhook(progress, node: "a", now: t0 + .seconds(2), lease: lease))

        // ResetWebhook, while A holds the lease.
        let reset = try await registry.resetWebhook(appID: "orders")
        #expect(reset == progress.reset())
        #expect(reset?.deliveredCursor == 7, "the cursor is kept")
        #expect(reset?.attempts == 0 && reset?.failing == false && reset?.failingSince == nil)
        #expect(reset?.resets == 1)
        #expect(try await registry.webhookProgress(appID: "orders") == reset)

        // A's next save, from progress read before the reset, is refused: the reset stands.
        var stale = progress
        stale.attempts = 13
        #expect(try await registry.saveWebhook(stale, node: "a", now: t0 + .seconds(3), lease: lease) == false)
        #expect(try await registry.webhookProgress(appID: "orders") == reset)
        // The lease is still A's: A claims the reset progress and goes on from it.
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(4), lease: lease) == nil)
        var again = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(4), lease: lease))
        #expect(again == reset)
        again.deliveredCursor = 8
        #expect(try await registry.saveWebhook(again, node: "a", now: t0 + .seconds(5), lease: lease))
        again.deliveredCursor = 9
        #expect(try await registry.saveWebhook(again, node: "a", now: t0 + .seconds(6), lease: lease))
        #expect(try await registry.webhookProgress(appID: "orders") == again)
        let twice = try await registry.resetWebhook(appID: "orders")
        #expect(twice?.resets == 2)
        #expect(twice?.deliveredCursor == 9)
        try await registry.close()
    }

    static func releaseHandsOver(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry)
        var progress = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0, lease: lease))
        progress.deliveredCursor = 3
        #expect(try await registry.saveWebhook(progress, node: "a", now: t0, lease: lease))
        // Another node's release does nothing.
        try await registry.releaseWebhook(appID: "orders", node: "b")
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(1), lease: lease) == nil)
        try await registry.releaseWebhook(appID: "orders", node: "a")
        #expect(try await registry.webhookProgress(appID: "orders") == progress, "a release keeps the progress")
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(1), lease: lease) == progress)
        #expect(try await registry.saveWebhook(progress, node: "a", now: t0 + .seconds(2), lease: lease) == false)
        try await registry.releaseWebhook(appID: "ghost", node: "a")
        #expect(try await registry.webhookProgress(appID: "ghost") == nil)
        try await registry.close()
    }

    static func progressIsPerApp(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry, "orders")
        try await apply(registry, .createApp(registeredApp("rides")))
        try await putWebhook(registry, "rides", at: t0 + .seconds(5))
        var orders = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(10), lease: lease))
        let rides = try #require(try await registry.claimWebhook(appID: "rides", node: "b", now: t0 + .seconds(10), lease: lease))
        #expect(rides.webhookCreatedAt == t0 + .seconds(5))
        orders.deliveredCursor = 99
        orders.attempts = 3
        orders.failing = true
        #expect(try await registry.saveWebhook(orders, node: "a", now: t0 + .seconds(11), lease: lease))
        try await registry.resetWebhook(appID: "orders")
        try await registry.releaseWebhook(appID: "orders", node: "a")
        #expect(try await registry.webhookProgress(appID: "rides") == rides)
        // B's lease on rides is untouched by A's release of orders.
        #expect(try await registry.claimWebhook(appID: "rides", node: "a", now: t0 + .seconds(12), lease: lease) == nil)
        #expect(try await registry.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(12), lease: lease)?.resets == 1)
        try await registry.close()
    }

    static func closedRegistryRefusesProgress(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await appWithWebhook(registry)
        let progress = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0, lease: lease))
        try await registry.close()
        await #expect(throws: ActivityStoreError.closed) {
            try await registry.claimWebhook(appID: "orders", node: "a", now: t0, lease: lease)
        }
        await #expect(throws: ActivityStoreError.closed) { try await registry.saveWebhook(progress, node: "a", now: t0, lease: lease) }
        await #expect(throws: ActivityStoreError.closed) { try await registry.resetWebhook(appID: "orders") }
        await #expect(throws: ActivityStoreError.closed) { try await registry.webhookProgress(appID: "orders") }
        await #expect(throws: ActivityStoreError.closed) { try await registry.releaseWebhook(appID: "orders", node: "a") }
    }
}
