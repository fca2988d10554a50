import LiveRelayAPNs
import LiveRelayMessages

/// RegisterToken's rules: idempotent registration, rotation per device slot, removal.
public enum TokenRegistration {
    /// What the registration does to the token table.
    public enum Decision: Hashable, Sendable {
        /// A token not seen before.
        case create(Token)
        /// A new token for a slot (same device and activity, or same device and
        /// attributes type) that held another one: the old one is deleted, so
        /// pushes stop going to a token the device no longer listens on.
        case rotate(Token, replacing: Token)
        /// The same registration again: nothing is written, so retries cost no fsync.
        case unchanged(Token)
        /// The same token with new details (user, expiry, environment...): rewritten in place.
        case update(Token)
        case remove(Token)
        /// A removal of a token that is not registered (or is registered as the other kind).
        case notFound
    }

    /// The decision plus what it does to the token's activity.
    public struct Plan: Hashable, Sendable {
        public var decision: Decision
        /// For update tokens: the activity to write (created when the app started
        /// it locally, or moved from starting to active); nil when untouched.
        public var activity: Activity?

        public var reply: RegisterTokenReply {
            switch decision {
            case .create: RegisterTokenReply(result: .created)
            case let .rotate(_, replaced): RegisterTokenReply(result: .rotated, replacedToken: replaced.hex)
            // The proto has no "updated": to the caller the token is registered as asked.
            case .unchanged, .update: RegisterTokenReply(result: .unchanged)
            case .remove: RegisterTokenReply(result: .removed)
            case .notFound: RegisterTokenReply(result: .notFound)
            }
        }
    }

    /// The token a request describes, or the field that is wrong.
    public static func token(from request: RegisterTokenRequest, now: UnixTime) throws(DomainError) -> Token {
        let kind: Token.Kind
        switch request.kind {
        case .pushToStart: kind = .pushToStart
        case .update: kind = .update
        default: throw .invalidField(field: "kind", detail: "required")
        }
        let environment: APNsEnvironment
        switch request.environment {
        case .sandbox: environment = .sandbox
        case .production: environment = .production
        default: throw .invalidField(field: "environment", detail: "required")
        }
        var expiresAt: UnixTime?
        if request.expiresAt > 0 {
            guard request.expiresAt > now.seconds else {
                throw .invalidField(field: "expires_at", detail: "\(request.expiresAt) is in the past")
            }
            expiresAt = UnixTime(seconds: request.expiresAt)
        }
        return Token(
            kind: kind, hex: request.token, environment: environment, appID: request.appID,
            attributesType: request.attributesType.nonEmpty,
            activityID: kind == .update ? request.activityID.nonEmpty : nil,
            externalUserID: request.externalUserID.nonEmpty, deviceID: request.deviceID.nonEmpty,
            createdAt: now, updatedAt: now, expiresAt: expiresAt)
    }

    /// Decides a RegisterToken against the current state.
    /// - Parameters:
    ///   - existing: the token registered under the request's hex in its app, if any.
    ///   - slotOccupant: the token currently in the slot the new token would take, if any
    ///     (look it up with the slot of ``token(from:now:)``).
    ///   - activity: for update tokens, the activity it belongs to, if known.
    public static func decide(
        _ request: RegisterTokenRequest, existing: Token?, slotOccupant: Token?, activity: Activity?, now: UnixTime
    ) throws(DomainError) -> Plan {
        do { try request.validate() } catch { throw DomainError(error) }

        if request.remove {
            let kind: Token.Kind = request.kind == .update ? .update : .pushToStart
            guard let existing, existing.kind == kind else { return Plan(decision: .notFound) }
            return Plan(decision: .remove(existing))
        }

        var token = try token(from: request, now: now)
        let activityWrite = token.kind == .update
            ? try activityAfterRegistration(of: token, activity: activity, now: now) : nil

        if let existing {
            token.createdAt = existing.createdAt
            if existing.sameRegistration(as: token), slotOccupant == nil || slotOccupant?.hex == token.hex {
                return Plan(decision: .unchanged(existing), activity: activityWrite)
            }
        }
        if let occupant = slotOccupant, occupant.hex != token.hex {
            return Plan(decision: .rotate(token, replacing: occupant), activity: activityWrite)
        }
        return Plan(decision: existing == nil ? .create(token) : .update(token), activity: activityWrite)
    }

    /// An update token proves the activity runs on a device: a started one
    /// becomes active, and one the app started locally becomes known (so it
    /// can be updated). A token for a finished activity is refused: it could
    /// never receive a push.
    static func activityAfterRegistration(of token: Token, activity: Activity?, now: UnixTime) throws(DomainError) -> Activity? {
        guard let activityID = token.activityID else { return nil }
        guard var activity else {
            return Activity(appID: token.appID, id: activityID, attributesType: token.attributesType,
                            state: .active, createdAt: now)
        }
        if activity.isFinished(at: now) {
            let state: Activity.State = activity.state.isFinished ? activity.state : .expired
            throw .activityFinished(activity.key, state: state)
        }
        guard activity.state == .starting else { return nil }
        activity.state = .active
        return activity
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
