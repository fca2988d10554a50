import LiveRelayAPNs

/// What one effective change writes and how its audit row reads; the store
/// adds the sequence (the new version), the actor and the time.
public struct RegistryPlan: Hashable, Sendable {
    public var writes: [RegistryWrite]
    public var action: AuditAction
    public var target: String
    /// The audit row's details: a JSON object without secrets.
    public var details: String

    public init(writes: [RegistryWrite], action: AuditAction, target: String, details: String) {
        self.writes = writes
        self.action = action
        self.target = target
        self.details = details
    }

    /// The audit row of this plan once it committed as `version`.
    public func entry(version: Int64, actor: String, at: UnixTime) -> AuditEntry {
        AuditEntry(sequence: version, at: at, actor: actor, action: action, target: target, details: details)
    }
}

/// The registry's rules as one pure function, so that the memory, SQLite and
/// PostgreSQL registries decide exactly alike: a store reads the snapshot
/// inside its transaction, asks ``plan(_:on:now:)``, and writes the plan,
/// its audit row and version + 1, or nothing at all when the plan is nil.
///
/// - `createApp` / `createKey`: refused when the id is taken (`.appExists`,
///   `.keyExists`; disabled apps and revoked keys included, so an id is never
///   reused for something else). The rules set the times and mark the entry
///   `.admin`, whatever the caller passed: only a seed makes `.seed` entries.
///   A tenant key that lists apps may list only apps the registry has
///   (disabled ones included): `.keyAppsNotFound` names the others, so a typo
///   is refused when the key is made instead of answering PERMISSION_DENIED
///   or NOT_FOUND to every call its holder makes.
/// - `updateApp`, `disableApp`, `putCredentials` on an unknown id: `.appNotFound`.
///   Each changes only what differs; a change to the same values is a no-op.
///   A change marks the app `.admin`: once an admin has changed an app that a
///   seed also names, the seed no longer owns it and never changes it again
///   (an admin's quota or a rotated key survives the next start or rolling update).
/// - `revokeKey`: `.keyNotFound` for an unknown id; revoking a revoked key is
///   a no-op that keeps the first `revokedAt`.
/// - `seed`: the config file's view, declarative for what it says and for
///   nothing else. Missing apps and keys are inserted (`.seed`); `.seed`
///   apps get the file's fields back (an app the file disables is disabled,
///   but a disabled app is never enabled again by a seed); `.seed` keys get
///   the file's hash, role, label and creation time. A seed never revokes:
///   several nodes may seed from different files (a rolling update, each
///   development node's own key file), and a revocation is final, so a key
///   the file no longer lists stays valid until the admin API revokes it.
///   A seed's key may name apps the registry does not have: a config file
///   may list keys for apps it does not configure (with no app at all, their
///   pushes fail `AppNotConfigured`), and another node's seed or the admin
///   API may create the app later. `.admin` entries are never touched, and a
///   revoked key stays revoked whatever the file says. A seed that changes
///   nothing is nil.
///
/// Every value is checked first (`.invalid`): ids, hashes, capacities and
/// endpoints every node must be able to serve. What only a request has (a
/// PEM that must parse, method names, label lengths) is the admin API's to check.
public enum RegistryRules {
    /// What `change` does to `snapshot` at `now`; nil when it changes nothing.
    public static func plan(_ change: RegistryChange, on snapshot: RegistrySnapshot, now: UnixTime) throws(RegistryError) -> RegistryPlan? {
        switch change {
        case let .createApp(app): return try createApp(app, on: snapshot, now: now)
        case let .updateApp(id, patch): return try updateApp(id, patch, on: snapshot, now: now)
        case let .disableApp(id):
            guard var app = snapshot.apps[id] else { throw .appNotFound(id) }
            guard app.enabled else { return nil }
            app.enabled = false
            app.updatedAt = now
            app.source = .admin
            return RegistryPlan(writes: [.putApp(app)], action: .disableApp, target: id, details: #"{"enabled":false}"#)
        case let .putCredentials(appID, credentials): return try putCredentials(credentials, appID: appID, on: snapshot, now: now)
        case let .createKey(key): return try createKey(key, on: snapshot, now: now)
        case let .revokeKey(keyID):
            guard var key = snapshot.keys[keyID] else { throw .keyNotFound(keyID) }
            guard key.revokedAt == nil else { return nil }
            key.revokedAt = now
            return RegistryPlan(writes: [.putKey(key)], action: .revokeKey, target: keyID, details: "{}")
        case let .seed(apps, keys): return try RegistrySeed.plan(apps: apps, keys: keys, on: snapshot, now: now)
        case let .putWebhook(appID, url, kinds, secret, rotate, startCursor):
            return try putWebhook(
                url: url, eventKinds: kinds, newSecret: secret, rotate: rotate, startCursor: startCursor, appID: appID, on: snapshot,
                now: now)
        case let .deleteWebhook(appID):
            guard var app = snapshot.apps[appID] else { throw .appNotFound(appID) }
            guard app.webhook != nil else { throw .webhookNotFound(appID) }
            // After the deleted webhook was set, even within its millisecond or on a node whose clock
            // is behind: a webhook set later is created no earlier than this (``putWebhook``).
            app.updatedAt = max(now, (app.webhook?.createdAt ?? now) + .milliseconds(1))
            app.webhook = nil
            return RegistryPlan(writes: [.putApp(app)], action: .deleteWebhook, target: appID, details: "{}")
        }
    }

    /// The snapshot after `change` and its audit row (nil, and the same
    /// snapshot, when nothing changed): the memory registry's whole apply.
    public static func apply(
        _ change: RegistryChange, to snapshot: RegistrySnapshot, actor: String, now: UnixTime
    ) throws(RegistryError) -> (snapshot: RegistrySnapshot, entry: AuditEntry?) {
        guard let plan = try plan(change, on: snapshot, now: now) else { return (snapshot, nil) }
        var next = snapshot.applying(plan.writes)
        next.version = snapshot.version + 1
        return (next, plan.entry(version: next.version, actor: actor, at: now))
    }

    private static func createApp(_ app: RegisteredApp, on snapshot: RegistrySnapshot, now: UnixTime) throws(RegistryError) -> RegistryPlan
    {
        try RegistryValidation.check(app)
        guard snapshot.apps[app.id] == nil else { throw .appExists(app.id) }
        var app = app
        app.createdAt = now
        app.updatedAt = now
        app.source = .admin
        app.credentials?.updatedAt = now
        return RegistryPlan(writes: [.putApp(app)], action: .createApp, target: app.id, details: AuditDetails.app(app))
    }

    private static func updateApp(
        _ id: String, _ patch: RegisteredAppPatch, on snapshot: RegistrySnapshot, now: UnixTime
    ) throws(RegistryError) -> RegistryPlan? {
        guard let current = snapshot.apps[id] else { throw .appNotFound(id) }
        var app = current
        if let bundleID = patch.bundleID { app.bundleID = bundleID }
        if let capacity = patch.queueCapacity { app.queueCapacity = capacity }
        if let weight = patch.weight { app.weight = weight }
        if let lifetime = patch.maxPushLifetimeSeconds { app.maxPushLifetimeSeconds = lifetime }
        if let quotas = patch.quotas { app.quotas = quotas }
        if let enabled = patch.enabled { app.enabled = enabled }
        try RegistryValidation.check(app)
        guard app != current else { return nil }
        app.updatedAt = now
        app.source = .admin
        return RegistryPlan(writes: [.putApp(app)], action: .updateApp, target: id, details: AuditDetails.changes(from: current, to: app))
    }

    private static func putCredentials(
        _ credentials: RegisteredCredentials, appID: String, on snapshot: RegistrySnapshot, now: UnixTime
    ) throws(RegistryError) -> RegistryPlan? {
        guard var app = snapshot.apps[appID] else { throw .appNotFound(appID) }
        try RegistryValidation.check(credentials)
        if let current = app.credentials, current.hasSameSettings(as: credentials) { return nil }
        var credentials = credentials
        credentials.updatedAt = now
        app.credentials = credentials
        app.updatedAt = now
        app.source = .admin
        return RegistryPlan(
            writes: [.putApp(app)], action: .putCredentials, target: appID, details: AuditDetails.object { $0.credentials(credentials) })
    }

    /// A webhook is the app's own, like its credentials; a seed never sets
    /// nor clears one, so setting it does not take the app from its seed.
    /// The audit row's `secret_minted` says whether `newSecret` is the one in
    /// force now (what the caller shows, once).
    private static func putWebhook(
        url: String, eventKinds: Set<FeedEvent.Kind>, newSecret: String, rotate: Bool, startCursor: UInt64, appID: String,
        on snapshot: RegistrySnapshot, now: UnixTime
    ) throws(RegistryError) -> RegistryPlan? {
        guard var app = snapshot.apps[appID] else { throw .appNotFound(appID) }
        let kept = rotate ? nil : app.webhook?.secret
        let minted = kept == nil
        // A new webhook's creation time is what tells its progress from a deleted one's
        // (``WebhookProgress/webhookCreatedAt``): not before the app's last change, the deletion
        // included, so a webhook deleted and set again within a millisecond does not take over the
        // old progress.
        let createdAt = app.webhook?.createdAt ?? max(now, app.updatedAt)
        var webhook = RegisteredWebhook(
            url: url, eventKinds: eventKinds, secret: kept ?? newSecret, createdAt: createdAt, updatedAt: max(now, createdAt),
            startCursor: app.webhook?.startCursor ?? startCursor)
        try RegistryValidation.check(webhook)
        if let current = app.webhook {
            webhook.updatedAt = current.updatedAt
            guard webhook != current else { return nil }
            webhook.updatedAt = max(now, createdAt)
        }
        app.webhook = webhook
        app.updatedAt = max(now, createdAt)
        let details = AuditDetails.object { object in
            object.field("url", webhook.url)
            object.field("event_kinds", strings: webhook.sortedKinds.map(\.protoName))
            object.field("secret_minted", minted)
        }
        return RegistryPlan(writes: [.putApp(app)], action: .putWebhook, target: appID, details: details)
    }

    private static func createKey(
        _ key: RegisteredAPIKey, on snapshot: RegistrySnapshot, now: UnixTime
    ) throws(RegistryError) -> RegistryPlan {
        try RegistryValidation.check(key)
        guard snapshot.keys[key.keyID] == nil else { throw .keyExists(key.keyID) }
        if case let .tenant(.only(ids), _) = key.role {
            let unknown = ids.filter { snapshot.apps[$0] == nil }.sorted()
            guard unknown.isEmpty else { throw .keyAppsNotFound(unknown) }
        }
        var key = key
        key.createdAt = now
        key.lastUsedAt = nil
        key.revokedAt = nil
        key.source = .admin
        return RegistryPlan(writes: [.putKey(key)], action: .createKey, target: key.keyID, details: AuditDetails.key(key))
    }
}

/// The seed: the config file's apps and keys, applied declaratively (see ``RegistryRules``).
enum RegistrySeed {
    static func plan(
        apps: [RegisteredApp], keys: [RegisteredAPIKey], on snapshot: RegistrySnapshot, now: UnixTime
    ) throws(RegistryError) -> RegistryPlan? {
        var writes: [RegistryWrite] = []
        var appsCreated: [String] = []
        var appsUpdated: [String] = []
        var seenApps = Set<String>()
        for app in apps {
            try RegistryValidation.check(app)
            guard seenApps.insert(app.id).inserted else { throw .invalid(field: "apps", detail: "app \(app.id) appears twice") }
            guard let existing = snapshot.apps[app.id] else {
                var inserted = app
                inserted.createdAt = now
                inserted.updatedAt = now
                inserted.source = .seed
                inserted.credentials?.updatedAt = now
                writes.append(.putApp(inserted))
                appsCreated.append(app.id)
                continue
            }
            guard existing.source == .seed else { continue }
            var updated = existing
            updated.bundleID = app.bundleID
            updated.enabled = existing.enabled && app.enabled
            updated.queueCapacity = app.queueCapacity
            updated.weight = app.weight
            updated.maxPushLifetimeSeconds = app.maxPushLifetimeSeconds
            updated.quotas = app.quotas
            switch (existing.credentials, app.credentials) {
            case let (current?, wanted?) where current.hasSameSettings(as: wanted): break
            case (_, var wanted):
                wanted?.updatedAt = now
                updated.credentials = wanted
            }
            guard updated != existing else { continue }
            updated.updatedAt = now
            writes.append(.putApp(updated))
            appsUpdated.append(app.id)
        }

        var keysCreated: [String] = []
        var keysUpdated: [String] = []
        var listed = Set<String>()
        for key in keys {
            try RegistryValidation.check(key)
            guard listed.insert(key.keyID).inserted else { throw .invalid(field: "keys", detail: "key id \(key.keyID) appears twice") }
            guard let existing = snapshot.keys[key.keyID] else {
                var inserted = key
                inserted.lastUsedAt = nil
                inserted.revokedAt = nil
                inserted.source = .seed
                writes.append(.putKey(inserted))
                keysCreated.append(key.keyID)
                continue
            }
            // An admin key is the admin API's; a revoked key id is spent.
            guard existing.source == .seed, existing.revokedAt == nil else { continue }
            var updated = existing
            updated.secretSHA256 = key.secretSHA256
            updated.role = key.role
            updated.label = key.label
            updated.createdAt = key.createdAt
            guard updated != existing else { continue }
            writes.append(.putKey(updated))
            keysUpdated.append(key.keyID)
        }
        guard !writes.isEmpty else { return nil }
        let details = AuditDetails.object { object in
            for (name, ids) in [
                ("apps_created", appsCreated), ("apps_updated", appsUpdated), ("keys_created", keysCreated),
                ("keys_updated", keysUpdated),
            ] where !ids.isEmpty {
                object.field(name, strings: ids)
            }
        }
        return RegistryPlan(writes: writes, action: .seed, target: "*", details: details)
    }
}
