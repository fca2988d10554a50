import LiveRelayAPNs
import LiveRelayStore
import NIOConcurrencyHelpers

/// When each API key was last used on this node, written to the tenant
/// registry (its `last_used_at`) at most once a minute: a HELLO only notes the
/// key id under a lock, and ``flush(to:)`` writes what changed since the last
/// flush in one `touch`, which bumps no version (nodes do not reload for it).
/// Times are rounded down to the minute, as admin.proto says.
package final class KeyUsage: Sendable {
    private let used = NIOLockedValueBox<[String: UnixTime]>([:])
    private let clock: any WallClock

    package init(clock: any WallClock = SystemClock()) {
        self.clock = clock
    }

    package func note(_ keyID: String) {
        let now = clock.now()
        let minute = UnixTime(milliseconds: now.milliseconds - now.milliseconds % 60_000)
        used.withLockedValue { $0[keyID] = minute }
    }

    package func flush(to registry: any TenantRegistry) async throws {
        let batch = used.withLockedValue { used in
            defer { used = [:] }
            return used
        }
        guard !batch.isEmpty else { return }
        try await registry.touch(batch)
    }
}
