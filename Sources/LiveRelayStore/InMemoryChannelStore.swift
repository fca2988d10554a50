import LiveRelayAPNs
import LiveRelayDomain
import NIOConcurrencyHelpers

/// The channel store of `--store memory` and of tests: every app's channels
/// under one lock, so that a create's count and insert are one step.
/// Forgotten on exit, like the memory activity store.
public final class InMemoryChannelStore: ChannelStore {
    private struct State {
        /// App id, then channel id.
        var channels: [String: [String: ChannelRecord]] = [:]
        var closed = false
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    private func withState<T>(_ body: (inout State) throws -> T) throws -> T {
        try state.withLockedValue { state in
            guard !state.closed else { throw ChannelStoreError.unavailable("the channel store is closed") }
            return try body(&state)
        }
    }

    public func create(_ channel: ChannelRecord, limit: Int) async throws {
        try withState { state in
            let app = state.channels[channel.appID, default: [:]]
            guard app[channel.id] == nil else { throw ChannelStoreError.alreadyExists }
            let count = app.values.lazy.filter { $0.environment == channel.environment }.count
            guard count < limit else { throw ChannelStoreError.limitReached(count: count, limit: limit) }
            state.channels[channel.appID, default: [:]][channel.id] = channel
        }
    }

    @discardableResult
    public func delete(appID: String, channelID: String) async throws -> Bool {
        try withState { state in
            guard state.channels[appID]?.removeValue(forKey: channelID) != nil else { return false }
            if state.channels[appID]?.isEmpty == true { state.channels[appID] = nil }
            return true
        }
    }

    public func channel(appID: String, channelID: String) async throws -> ChannelRecord? {
        try withState { $0.channels[appID]?[channelID] }
    }

    public func list(appID: String, environment: APNsEnvironment?, after: String?, limit: Int) async throws -> [ChannelRecord] {
        try withState { state in
            let matching = (state.channels[appID] ?? [:]).values.filter { channel in
                (environment.map { channel.environment == $0 } ?? true) && (after.map { $0.precedesAsBytes(channel.id) } ?? true)
            }
            return Array(matching.sorted { $0.id.precedesAsBytes($1.id) }.prefix(max(0, limit)))
        }
    }

    public func count(appID: String, environment: APNsEnvironment?) async throws -> Int {
        try withState { state in
            (state.channels[appID] ?? [:]).values.lazy.filter { channel in environment.map { channel.environment == $0 } ?? true }.count
        }
    }

    public func close() async throws {
        state.withLockedValue { $0.closed = true }
    }
}
