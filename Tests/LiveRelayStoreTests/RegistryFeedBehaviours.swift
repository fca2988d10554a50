import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

/// Last use, change streams, closing and concurrency.
extension RegistryBehaviourSuite {
    static let feedBehaviours: [RegistryBehaviour] = [
        RegistryBehaviour(description: "touch records last use without a version bump or audit row", run: touchIsBookkeeping),
        RegistryBehaviour(description: "changes() starts at the current version and reports applies", run: changesReportApplies),
        RegistryBehaviour(description: "a closed registry refuses calls and ends its streams", run: closedRegistryRefuses),
        RegistryBehaviour(description: "concurrent applies all land, each with its own version", run: concurrentApplies),
    ]

    static func touchIsBookkeeping(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createKey(tenantKey(1, apps: .all)))
        try await apply(registry, .createKey(tenantKey(2, apps: .all)))
        try await registry.touch([registryKeyID(1): t0 + .seconds(60), registryKeyID(9): t0 + .seconds(60)])
        try await registry.touch([:])
        var snapshot = try await registry.snapshot()
        #expect(snapshot.version == 2)
        #expect(snapshot.keys[registryKeyID(1)]?.lastUsedAt == t0 + .seconds(60))
        #expect(snapshot.keys[registryKeyID(2)]?.lastUsedAt == nil)
        #expect(snapshot.keys[registryKeyID(9)] == nil, "an unknown id is ignored")
        #expect(try await registry.audit(after: 0, limit: 10).count == 2)

        // Never backwards (batches from several nodes arrive in any order); forwards.
        try await registry.touch([registryKeyID(1): t0 + .seconds(30), registryKeyID(2): t0 + .seconds(120)])
        snapshot = try await registry.snapshot()
        #expect(snapshot.keys[registryKeyID(1)]?.lastUsedAt == t0 + .seconds(60))
        #expect(snapshot.keys[registryKeyID(2)]?.lastUsedAt == t0 + .seconds(120))
        // A later change to the key keeps its last use.
        try await apply(registry, .revokeKey(keyID: registryKeyID(1)), at: t0 + .seconds(200))
        #expect(try await registry.snapshot().keys[registryKeyID(1)]?.lastUsedAt == t0 + .seconds(60))
        #expect(try await registry.version() == 3)
        try await registry.close()
    }

    static func changesReportApplies(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        // A poll far beyond the test's bounds: what arrives comes from the applies.
        let recorder = VersionRecorder(registry.changes(pollEvery: .seconds(3600)))
        try await recorder.wait(for: 1)
        #expect(await recorder.versions == [1], "the first element is the version at subscription")
        try await apply(registry, .createApp(registeredApp("rides")))
        try await recorder.wait(for: 2)
        // A no-op yields nothing; the next change does.
        try await apply(registry, .createApp(registeredApp("maps")))
        try await apply(registry, .disableApp(id: "maps"))
        try await apply(registry, .disableApp(id: "maps"))
        try await recorder.wait(for: 4)
        let versions = await recorder.versions
        #expect(versions == versions.sorted() && Set(versions).count == versions.count, "strictly increasing: \(versions)")
        #expect(versions.allSatisfy { $0 <= 4 })
        try await registry.close()
        try await recorder.waitForEnd()
    }

    static func closedRegistryRefuses(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        let recorder = VersionRecorder(registry.changes(pollEvery: .milliseconds(50)))
        try await recorder.wait(for: 1)
        try await registry.close()
        try await recorder.waitForEnd()
        try await registry.close()  // idempotent
        await #expect(throws: ActivityStoreError.closed) { try await registry.snapshot() }
        await #expect(throws: ActivityStoreError.closed) { try await registry.version() }
        await #expect(throws: ActivityStoreError.closed) {
            try await registry.apply(.createApp(registeredApp("rides")), actor: actor, now: t0)
        }
        await #expect(throws: ActivityStoreError.closed) { try await registry.touch([registryKeyID(1): t0]) }
        await #expect(throws: ActivityStoreError.closed) { try await registry.audit(after: 0, limit: 1) }
        // A stream asked for after closing ends at once.
        try await VersionRecorder(registry.changes(pollEvery: .milliseconds(50))).waitForEnd()
    }

    static func concurrentApplies(_ make: RegistryFactory) async throws {
        let registry = try await make()
        let applied = try await withThrowingTaskGroup(of: RegistryApplied.self) { group in
            for n in 0..<20 {
                group.addTask { try await apply(registry, .createKey(tenantKey(n, apps: .all)), at: t0 + .milliseconds(Int64(n))) }
            }
            // One id twice: exactly one of the two wins.
            for _ in 0..<2 {
                group.addTask {
                    do {
                        return try await apply(registry, .createApp(registeredApp("contested")))
                    } catch RegistryError.appExists {
                        return RegistryApplied(version: -1, entry: nil)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let versions = applied.map(\.version).filter { $0 > 0 }.sorted()
        #expect(versions == Array(1...21))
        #expect(applied.filter { $0.version == -1 }.count == 1)
        let snapshot = try await registry.snapshot()
        #expect(snapshot.keys.count == 20)
        #expect(snapshot.version == 21)
        #expect(try await registry.audit(after: 0, limit: 100).map(\.sequence) == Array(1...21))
        try await registry.close()
    }
}
