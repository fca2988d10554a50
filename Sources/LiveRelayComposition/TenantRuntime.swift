import Foundation
import LiveRelayAPNs
import LiveRelayAPNsClient
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayBackoff
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import LiveRelayStore
import LiveRelayWebhookDelivery
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// The tenant registry at work in a running `serve`: every snapshot of it
/// becomes the node's keys (the authenticator, and GOAWAY UNAUTHENTICATED to
/// the open connections of a key just revoked), its apps (the service's
/// directory, the dispatcher's queues and routes, the APNs client's keys)
/// and their quotas and priority-10 budgets. As a `Service` it follows the registry's changes
/// (LISTEN/NOTIFY on PostgreSQL, this process's own changes and a 1 s poll
/// everywhere) until graceful shutdown, then closes the registry.
///
/// Listed in the `ServiceGroup` before the RPC server, so that it stops
/// after the server's drain and no call finds the registry closed.
package final class TenantRuntime: Service, Sendable {
    struct Parts: Sendable {
        var authenticator: ReloadableAuthenticator
        var activities: ActivityService?
        var apns: APNsRuntime?
        var quotas: QuotaGate
        var priorityBudget: PriorityBudgetGate
        var defaultQuota: AppQuota
        var nodes: Int
        /// The key files and endpoints this node's configuration allows an app's credentials to name.
        var credentials = CredentialAllowance()
        /// Delivers the apps' feeds to their webhooks (with the activity service).
        var webhooks: WebhookDeliverer?
    }

    private struct Applied {
        var snapshot = RegistrySnapshot()
        /// The apps whose dispatch settings were last configured, to configure only what changed.
        var configured: [String: RegisteredApp] = [:]
        /// Apps with credentials this node cannot use (a key file or variable it lacks, or a key
        /// file or endpoint its configuration does not allow), as they were when refused: an app
        /// is tried again at every snapshot, and logged again only when its settings change.
        var unservable: [String: RegisteredApp] = [:]
    }

    package let registry: any TenantRegistry
    /// Noted at each successful HELLO (``ReloadableAuthenticator``'s `onUse`), written once a minute.
    package let keyUsage: KeyUsage
    private let parts: Parts
    private let logger: Logger
    private let pollEvery: Duration
    private let reloadBackoff: Backoff
    private let applied = NIOLockedValueBox(Applied())
    private let server = NIOLockedValueBox<RPCServer?>(nil)

    init(
        registry: any TenantRegistry, parts: Parts, keyUsage: KeyUsage, logger: Logger, pollEvery: Duration = .seconds(1),
        reloadBackoff: Backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(10))
    ) {
        self.registry = registry
        self.keyUsage = keyUsage
        self.parts = parts
        self.logger = logger
        self.pollEvery = pollEvery
        self.reloadBackoff = reloadBackoff
    }

    /// The server whose open connections a revocation reaches (made after this).
    package func attach(_ server: RPCServer) {
        self.server.withLockedValue { $0 = server }
    }

    /// Loads the registry's current snapshot and applies it.
    package func reload() async throws {
        apply(try await registry.snapshot())
    }

    package func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await self.followChanges() }
                    tasks.addTask { try await self.recordKeyUse() }
                    try await tasks.waitForAll()
                }
            }
        } catch is CancellationError {
            // Graceful shutdown.
        }
        try? await keyUsage.flush(to: registry)
        try? await registry.close()
    }

    private func followChanges() async throws {
        for await version in registry.changes(pollEvery: pollEvery) {
            guard version > appliedVersion else { continue }
            try await reload(upTo: version)
        }
    }

    /// The version of the snapshot applied last.
    package var appliedVersion: Int64 { applied.withLockedValue { $0.snapshot.version } }

    /// Reloads until the applied version reaches `version`, retrying a failed reload (a database
    /// blip) with back-off: a change this node heard of, a revocation say, is never left unapplied
    /// until the next change comes. Returns when applied, or throws when cancelled.
    private func reload(upTo version: Int64) async throws {
        var failures = 0
        while appliedVersion < version {
            do {
                try await reload()
                if appliedVersion >= version { return }
            } catch {
                logger.error(
                    "cannot reload the tenant registry; retrying",
                    metadata: ["error": "\(error)", "applied_version": "\(appliedVersion)", "wanted_version": "\(version)"])
            }
            failures += 1
            let delay = reloadBackoff.delay(after: failures, random: Double.random(in: 0...1))
            try await Task.sleep(for: .nanoseconds(delay.nanoseconds))
        }
    }

    /// Writes the keys' last use once a minute.
    private func recordKeyUse() async throws {
        while true {
            try await Task.sleep(for: .seconds(60))
            do {
                try await keyUsage.flush(to: registry)
            } catch {
                logger.warning("cannot record the API keys' last use", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Makes `snapshot` the node's keys, apps and quotas; an older snapshot than the one applied is ignored.
    package func apply(_ snapshot: RegistrySnapshot) {
        let previous: Applied? = applied.withLockedValue { applied in
            guard snapshot.version >= applied.snapshot.version else { return nil }
            defer { applied.snapshot = snapshot }
            return applied
        }
        guard let previous else { return }
        applyKeys(snapshot, previous: previous.snapshot)
        applyApps(snapshot, previous: previous)
        parts.webhooks?.configure(snapshot.apps)
        logger.info(
            "tenant registry applied",
            metadata: ["version": "\(snapshot.version)", "apps": "\(snapshot.apps.count)", "keys": "\(snapshot.keys.count)"])
    }

    private func applyKeys(_ snapshot: RegistrySnapshot, previous: RegistrySnapshot) {
        var keys: [(principal: Principal, secretSHA256: String)] = []
        for key in snapshot.keys.values where !key.isRevoked {
            keys.append((Self.principal(key), key.secretSHA256))
        }
        do {
            parts.authenticator.replace(with: try APIKeyAuthenticator(keys: keys))
        } catch {
            logger.error("the registry's keys were not applied; the previous ones stay", metadata: ["error": "\(error)"])
            return
        }
        let ended = Self.keysEnded(from: previous, to: snapshot)
        if !ended.isEmpty {
            logger.notice("API keys revoked or changed: closing their connections", metadata: ["key_ids": "\(ended.sorted())"])
            server.withLockedValue { $0 }?.revoke(keyIDs: ended)
        }
    }

    /// The keys whose open connections end (GOAWAY UNAUTHENTICATED): valid before, and now revoked,
    /// gone, or changed in what they are (secret, role, apps, methods). A connection keeps the rights
    /// it authenticated with, so it must not outlive them; a new label or last use changes nothing.
    static func keysEnded(from previous: RegistrySnapshot, to snapshot: RegistrySnapshot) -> Set<String> {
        var ended: Set<String> = []
        for key in previous.keys.values where !key.isRevoked {
            guard let now = snapshot.keys[key.keyID], !now.isRevoked, now.secretSHA256 == key.secretSHA256, now.role == key.role
            else {
                ended.insert(key.keyID)
                continue
            }
        }
        return ended
    }

    /// Whether this node can send `appID`'s pushes: false for an app whose credentials it
    /// cannot use (a `file:` or `env:` key only some nodes have). An app without credentials
    /// is servable: its pushes fail `AppNotConfigured` on every node alike.
    package func canServe(appID: String) -> Bool {
        applied.withLockedValue { $0.unservable[appID] == nil }
    }

    package static func principal(_ key: RegisteredAPIKey) -> Principal {
        switch key.role {
        case .admin:
            return Principal(keyID: key.keyID, apps: .only([]), allowedMethods: [], isAdmin: true)
        case let .tenant(apps, methods):
            let scope: AppScope
            switch apps {
            case .all: scope = .all
            case let .only(ids): scope = .only(ids)
            }
            return Principal(keyID: key.keyID, apps: scope, allowedMethods: Set(methods.compactMap { LiveRelayMethod(methodName: $0) }))
        }
    }

    private func applyApps(_ snapshot: RegistrySnapshot, previous: Applied) {
        let configured = previous.configured
        var quotas = parts.quotas.settings
        quotas.defaults = parts.defaultQuota
        quotas.nodes = parts.nodes
        quotas.perApp = snapshot.apps.mapValues { AppQuota($0.quotas, over: parts.defaultQuota) }
        parts.quotas.settings = quotas
        parts.quotas.track(apps: Array(snapshot.apps.keys))
        parts.priorityBudget.budgets = PriorityBudgets(
            defaultPerHour: parts.defaultQuota.priorityBudgetPerHour, perApp: quotas.perApp.mapValues(\.priorityBudgetPerHour))

        // Routes and queues before the directory: an app's first call finds its queue ready.
        var nowConfigured = configured
        var unservable: [String: RegisteredApp] = [:]
        if let apns = parts.apns {
            for app in snapshot.apps.values.sorted(by: { $0.id < $1.id }) where configured[app.id] != app {
                guard app.credentials != nil else { continue }
                do {
                    try apns.configure(try PushingApp(app, allowance: parts.credentials))
                    nowConfigured[app.id] = app
                } catch {
                    unservable[app.id] = app
                    guard previous.unservable[app.id] != app else { continue }
                    // The error says what failed (a path, a variable's name, an endpoint), never the key.
                    logger.error(
                        "app \(app.id): this node cannot use its APNs credentials; its pushes are left for a node that can",
                        metadata: ["app": "\(app.id)", "error": "\(error)"])
                }
            }
        }
        applied.withLockedValue {
            $0.configured = nowConfigured
            $0.unservable = unservable
        }
        if snapshot.apps.isEmpty {
            // No app registered: every app id is accepted and its pushes fail AppNotConfigured, visibly.
            parts.activities?.reconfigure(apps: .open)
        } else {
            parts.activities?.reconfigure(
                apps: AppDirectory(
                    apps: snapshot.apps.values.map { App(id: $0.id, bundleID: $0.bundleID) },
                    disabled: Set(snapshot.apps.values.filter { !$0.enabled }.map(\.id))))
        }
    }
}

extension AppQuota {
    /// `defaults` with an app's registered limits on top: nil keeps the default, 0 lifts the limit.
    package init(_ registered: RegisteredQuotas, over defaults: AppQuota) {
        func merge<T: Numeric & Comparable>(_ own: T?, _ fallback: T?) -> T? {
            guard let own else { return fallback }
            return own == 0 ? nil : own
        }
        self.init(
            callsPerSecond: merge(registered.callsPerSecond, defaults.callsPerSecond),
            burst: merge(registered.burst, defaults.burst),
            pushesPerHour: merge(registered.pushesPerHour, defaults.pushesPerHour),
            maxTokens: merge(registered.maxTokens, defaults.maxTokens),
            maxLiveActivities: merge(registered.maxLiveActivities, defaults.maxLiveActivities),
            priorityBudgetPerHour: merge(registered.priorityBudgetPerHour, defaults.priorityBudgetPerHour))
    }
}

extension RegisteredAPIKey {
    /// A key of an API key file (the config file's, the development setup's, a test's) as a
    /// tenant key of the registry's seed: the one conversion from the file's form.
    package init(seed record: APIKeyRecord) throws {
        let apps: RegisteredAPIKey.Apps
        do {
            switch try record.scope() {
            case .all: apps = .all
            case let .only(ids): apps = .only(ids)
            }
            _ = try record.principal()
        } catch {
            throw SetupError("\(error)")
        }
        self.init(
            keyID: record.keyID, secretSHA256: record.secretSHA256,
            role: .tenant(apps: apps, methods: record.allowedMethods), label: record.label,
            createdAt: UnixTime(milliseconds: Int64(record.createdAt.timeIntervalSince1970 * 1000)), source: .seed)
    }
}
