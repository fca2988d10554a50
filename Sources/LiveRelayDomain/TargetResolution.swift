import LiveRelayAPNs
import LiveRelayMessages
import LiveRelayPushOutlet

/// Turns StartActivity's targets into push-to-start tokens.
///
/// Every target the caller named either yields tokens or appears in
/// `unresolved` with a reason: a start that silently reaches fewer devices
/// than asked is indistinguishable from a delivery failure.
public enum TargetResolution {
    public struct Result: Hashable, Sendable {
        /// Distinct tokens, in the order their targets were named.
        public var targets: [PushTarget]
        public var unresolved: [UnresolvedStartTarget]
    }

    public static func resolve(
        _ targets: Targets, appID: String, attributesType: String, state: some StateReader, now: UnixTime
    ) -> Result {
        var seen = Set<String>()
        var found: [PushTarget] = []
        var unresolved: [UnresolvedStartTarget] = []

        func take(_ token: Token) {
            if seen.insert(token.hex).inserted { found.append(PushTarget(token: token.hex, environment: token.environment)) }
        }

        var explicitSeen = Set<String>()
        for hex in targets.pushToStartTokens where explicitSeen.insert(hex).inserted {
            let reason: String
            if let token = state.token(TokenKey(appID: appID, hex: hex)) {
                if token.kind != .pushToStart {
                    reason = "registered as an update token, not a push-to-start token"
                } else if token.attributesType != attributesType {
                    reason = "registered for attributes type \(token.attributesType ?? "(none)"), not \(attributesType)"
                } else if token.isExpired(at: now) {
                    reason = "token expired"
                } else {
                    take(token)
                    continue
                }
            } else {
                reason = "no push-to-start token registered"
            }
            unresolved.append(UnresolvedStartTarget(kind: .pushToStartToken, value: hex, reason: reason))
        }

        var usersSeen = Set<String>()
        for user in targets.externalUserIDs where usersSeen.insert(user).inserted {
            let found = state.pushToStartTokens(appID: appID, externalUserID: user, attributesType: attributesType)
                .filter { !$0.isExpired(at: now) }
            if found.isEmpty {
                unresolved.append(
                    UnresolvedStartTarget(
                        kind: .externalUserID, value: user,
                        reason: "no push-to-start token registered for this user and attributes type \(attributesType)"))
            }
            found.forEach(take)
        }

        if targets.allDevices == true {
            // Read narrow (hex and environment), as an update's fan-out: every device of the type
            // may be a million tokens, read under the store's lock. The tokens named before are
            // among them; only those need the check for duplicates.
            let all = state.pushToStartTargets(appID: appID, attributesType: attributesType, at: now)
            if all.isEmpty {
                unresolved.append(
                    UnresolvedStartTarget(
                        kind: .allDevices, value: "",
                        reason: "no push-to-start token registered for attributes type \(attributesType)"))
            }
            if seen.isEmpty {
                found = all
            } else {
                found.reserveCapacity(all.count)
                for target in all where !seen.contains(target.token) { found.append(target) }
            }
        }
        return Result(targets: found, unresolved: unresolved)
    }
}
