import LiveRelayAPNs
import LiveRelayDomain

/// How a channel maps to columns, shared by the SQLite and PostgreSQL stores
/// so that both tables say the same thing in the same numbers (those of the
/// tokens' `environment` column and of APNs's `message-storage-policy`).
package enum ChannelColumns {
    package static func environment(_ environment: APNsEnvironment) -> Int64 { environment == .sandbox ? 0 : 1 }

    /// The channel of a row, or nil when a column holds a value no build writes.
    package static func channel(
        appID: String, id: String, environment: Int64, storagePolicy: Int64, createdAt: Int64
    ) -> ChannelRecord? {
        guard (0...1).contains(environment), let policy = ChannelStoragePolicy(rawValue: Int(storagePolicy)) else { return nil }
        return ChannelRecord(
            appID: appID, id: id, environment: environment == 0 ? .sandbox : .production, storagePolicy: policy,
            createdAt: UnixTime(milliseconds: createdAt))
    }
}
