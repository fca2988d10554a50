import LiveRelayAPNs
import LiveRelayDomain
import Testing

/// The pure side of the registry: what the values print, and rules the
/// stores' behavioural suite (LiveRelayStoreTests) does not reach.
@Suite struct RegistryRulesTests {
    static let pemBody = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgTOPSECRET"
    static let pem = "-----BEGIN PRIVATE KEY-----\n\(pemBody)\n-----END PRIVATE KEY-----\n"
    static let hash = "5ec7e7" + String(repeating: "9", count: 58)

    static var credentials: RegisteredCredentials {
        RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY1234567", keySource: .stored(pem: pem), updatedAt: t0)
    }

    static var key: RegisteredAPIKey {
        RegisteredAPIKey(keyID: "keyidaaaaaab", secretSHA256: hash, role: .admin, label: "operator", createdAt: t0)
    }

    /// Everything a log line, an error message or a debugger could print of a value.
    static func renderings(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), "\(value)", dumped]
    }

    @Test func printingCredentialsNeverShowsThePEM() {
        var app = RegisteredApp(id: "orders", bundleID: "com.example.orders")
        app.credentials = Self.credentials
        let values: [Any] = [
            Self.credentials, Self.credentials.keySource, app, RegistryChange.putCredentials(appID: "orders", Self.credentials),
            RegistryChange.createApp(app), RegistrySnapshot(version: 1, apps: ["orders": app]), RegistryWrite.putApp(app),
        ]
        for value in values {
            for text in Self.renderings(value) {
                #expect(!text.contains(Self.pemBody), "printed the PEM: \(text)")
                #expect(!text.contains("PRIVATE KEY"), "printed the PEM: \(text)")
            }
        }
        #expect(String(describing: Self.credentials).contains("keySource: registry"))
        #expect(String(describing: RegisteredCredentials.KeySource.file(path: "/k.p8")) == "file:/k.p8")
        #expect(String(describing: RegisteredCredentials.KeySource.environment(name: "KEY")) == "env:KEY")
    }

    @Test func printingAKeyNeverShowsItsHash() {
        let values: [Any] = [
            Self.key, RegistryChange.createKey(Self.key), RegistrySnapshot(version: 1, keys: [Self.key.keyID: Self.key]),
            RegistryChange.seed(apps: [], keys: [Self.key]),
        ]
        for value in values {
            for text in Self.renderings(value) {
                #expect(!text.contains(Self.hash), "printed the hash: \(text)")
            }
        }
        #expect(String(describing: Self.key).contains("keyidaaaaaab"))
    }

    @Test func aMalformedHashIsRefusedWithoutEchoingIt() throws {
        var key = Self.key
        key.secretSHA256 = "NOT-A-HASH-" + Self.hash
        #expect(throws: RegistryError.self) { try RegistryRules.plan(.createKey(key), on: RegistrySnapshot(), now: t0) }
        do {
            _ = try RegistryRules.plan(.createKey(key), on: RegistrySnapshot(), now: t0)
        } catch {
            #expect(!error.description.contains(Self.hash))
            #expect(error.code == .invalidArgument)
        }
    }

    @Test func theRulesSetTimesAndSourceWhateverTheCallerSays() throws {
        var app = RegisteredApp(id: "orders", bundleID: "com.example.orders", createdAt: UnixTime(milliseconds: 5), source: .seed)
        app.credentials = Self.credentials
        var key = Self.key
        key.source = .seed
        key.revokedAt = t0
        key.lastUsedAt = t0
        let later = t0 + .seconds(9)
        let (snapshot, entry) = try RegistryRules.apply(.createApp(app), to: RegistrySnapshot(), actor: "bootstrap", now: later)
        #expect(snapshot.apps["orders"]?.source == .admin)
        #expect(snapshot.apps["orders"]?.createdAt == later)
        #expect(snapshot.apps["orders"]?.credentials?.updatedAt == later)
        #expect(
            entry
                == AuditEntry(
                    sequence: 1, at: later, actor: "bootstrap", action: .createApp, target: "orders", details: entry?.details ?? ""))
        let (withKey, _) = try RegistryRules.apply(.createKey(key), to: snapshot, actor: "bootstrap", now: later)
        let created = try #require(withKey.keys[key.keyID])
        #expect(created.source == .admin && created.revokedAt == nil && created.lastUsedAt == nil && created.createdAt == later)
        #expect(withKey.version == 2)
    }

    @Test func validationCoversIdsNumbersAndEndpoints() {
        func refused(_ change: RegistryChange) -> Bool {
            guard
                case .invalid? = Result(catching: { () throws(RegistryError) in
                    try RegistryRules.plan(change, on: RegistrySnapshot(), now: t0)
                })
                .failure
            else { return false }
            return true
        }
        let ok = RegisteredApp(id: "orders.v2_x-1", bundleID: "com.example.orders")
        #expect(!refused(.createApp(ok)))
        for id in ["", "with space", "ü", String(repeating: "a", count: 256)] {
            #expect(refused(.createApp(RegisteredApp(id: id, bundleID: "b"))), "app id \"\(id)\"")
        }
        var app = ok
        app.weight = 0
        #expect(refused(.createApp(app)))
        app = ok
        app.maxPushLifetimeSeconds = 31_536_001
        #expect(refused(.createApp(app)))
        app = ok
        app.quotas.callsPerSecond = .infinity
        #expect(refused(.createApp(app)))
        app = ok
        app.quotas.maxTokens = -1
        #expect(refused(.createApp(app)))
        app = ok
        app.bundleID = ""
        #expect(refused(.createApp(app)))
        app = ok
        app.credentials = RegisteredCredentials(teamID: "T", keyID: "K", endpoint: "mock.local:0", keySource: .file(path: "/k"))
        #expect(refused(.createApp(app)))
        app.credentials = RegisteredCredentials(teamID: "T", keyID: "K", endpoint: "mock.local:443", keySource: .stored(pem: ""))
        #expect(refused(.createApp(app)))
        var key = Self.key
        key.keyID = "KEYIDAAAAAAB"
        #expect(refused(.createKey(key)))
        key = Self.key
        key.role = .tenant(apps: .only(["bad id"]), methods: [])
        #expect(refused(.createKey(key)))
    }

    static func putWebhook(url: String = "https://hooks.example.com/") -> RegistryChange {
        .putWebhook(
            appID: "orders", url: url, eventKinds: [], newSecret: "whsec_" + String(repeating: "a", count: 64), rotate: false,
            startCursor: 0)
    }

    /// A webhook deleted and set again within one millisecond, even by a node whose clock is
    /// behind, is a new webhook: its creation time, which tells its progress from the old one's,
    /// comes after the old one's, so the old progress is not taken over.
    @Test func aWebhookSetAgainInTheSameMillisecondIsANewOne() throws {
        var snapshot = RegistrySnapshot()
        let steps: [(RegistryChange, UnixTime)] = [
            (.createApp(RegisteredApp(id: "orders", bundleID: "com.example.orders")), t0), (Self.putWebhook(), t0),
        ]
        for (change, now) in steps { snapshot = try RegistryRules.apply(change, to: snapshot, actor: "test", now: now).snapshot }
        let first = try #require(snapshot.apps["orders"]?.webhook)
        // A change keeps it: same webhook, same creation time.
        snapshot = try RegistryRules.apply(Self.putWebhook(url: "https://hooks.example.com/v2"), to: snapshot, actor: "test", now: t0)
            .snapshot
        #expect(snapshot.apps["orders"]?.webhook?.createdAt == first.createdAt)
        for change in [RegistryChange.deleteWebhook(appID: "orders"), Self.putWebhook()] {
            snapshot = try RegistryRules.apply(change, to: snapshot, actor: "test", now: t0).snapshot
        }
        let second = try #require(snapshot.apps["orders"]?.webhook)
        #expect(second.createdAt > first.createdAt)
        #expect(WebhookProgress.fresh(for: second, appID: "orders").webhookCreatedAt != first.createdAt)
        // Deleted and set again by a node a second behind: still after.
        for change in [RegistryChange.deleteWebhook(appID: "orders"), Self.putWebhook()] {
            snapshot = try RegistryRules.apply(change, to: snapshot, actor: "test", now: t0 - .seconds(1)).snapshot
        }
        #expect(try #require(snapshot.apps["orders"]?.webhook).createdAt > second.createdAt)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case let .failure(error) = self { error } else { nil }
    }
}
