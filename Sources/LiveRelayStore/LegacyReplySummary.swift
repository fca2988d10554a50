import LiveRelayDomain
import LiveRelayMessages

extension StoredReply {
    /// An idempotency record written before the stores kept the domain's own
    /// record (schema version 1 of both stores): its `reply_summary` column is
    /// an encoded `liverelay.v1.DeliverySummary`. Records live only as long as
    /// their activity, so this path ends once every version-1 row is purged.
    package init?(timestamp: Int64, state: Activity.State, legacySummary bytes: [UInt8]) {
        guard !bytes.isEmpty, let summary = try? DeliverySummary(serializedBytes: bytes) else { return nil }
        var unresolved: [UnresolvedStartTarget] = []
        for target in summary.unresolved {
            let kind: UnresolvedStartTarget.Kind
            switch target.kind {
            case .pushToStartToken: kind = .pushToStartToken
            case .externalUserID: kind = .externalUserID
            case .allDevices: kind = .allDevices
            case .unspecified, .unrecognized: return nil
            }
            unresolved.append(UnresolvedStartTarget(kind: kind, value: target.value, reason: target.reason))
        }
        self.init(timestamp: timestamp, state: state, targeted: Int(summary.targeted), unresolved: unresolved)
    }
}
