import LiveRelayAPNs
import LiveRelayMessages

/// A RegisterToken as the rules use it: the fields of a request that the
/// message layer has already validated (sizes, hex, UTF-8, enums), so the
/// rules check only what needs the state or the time and never validate again.
public struct RegistrationCommand: Hashable, Sendable {
    public var appID: String
    /// Lowercase hex.
    public var hex: String
    /// nil when the request named no kind (refused, except for a removal, which defaults to push-to-start).
    public var kind: Token.Kind?
    /// nil when the request named no environment (refused unless removing).
    public var environment: APNsEnvironment?
    public var attributesType: String?
    public var activityID: String?
    public var externalUserID: String?
    public var deviceID: String?
    /// UNIX seconds; nil for none.
    public var expiresAt: Int64?
    public var remove: Bool
    /// How long a push-to-start token registered without `expires_at` is kept
    /// after its last registration (nil: until removed, rotated or pruned).
    /// Devices report their push-to-start token at every launch, so a token
    /// not reported for that long belongs to a device that left; without a
    /// limit they would pile up and every all-devices start would fan out to them.
    public var pushToStartRetention: UnixTime.Duration?

    /// The fields of a request that passed `RegisterTokenRequest.validate()`
    /// (every decoded request has); empty strings mean absent.
    public init(validated request: RegisterTokenRequest) {
        appID = request.appID
        hex = request.token
        kind =
            switch request.kind {
            case .pushToStart: .pushToStart
            case .update: .update
            default: nil
            }
        environment = request.environment.apns
        attributesType = request.attributesType.nonEmpty
        activityID = request.activityID.nonEmpty
        externalUserID = request.externalUserID.nonEmpty
        deviceID = request.deviceID.nonEmpty
        expiresAt = request.expiresAt > 0 ? request.expiresAt : nil
        remove = request.remove
    }

    public init(validated request: RegisterTokenRequest, pushToStartRetention: UnixTime.Duration?) {
        self.init(validated: request)
        self.pushToStartRetention = pushToStartRetention
    }
}

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

        /// What the caller is told; the service puts it on the wire.
        public var result: Result {
            switch decision {
            case .create: .created
            case let .rotate(_, replaced): .rotated(replacedToken: replaced.hex)
            // To the caller a rewritten token is registered as asked: nothing changed for it.
            case .unchanged, .update: .unchanged
            case .remove: .removed
            case .notFound: .notFound
            }
        }
    }

    /// A registration's outcome as the caller sees it.
    public enum Result: Hashable, Sendable {
        case created
        case rotated(replacedToken: String)
        case unchanged
        case removed
        case notFound
    }

    /// The token a command describes, or the field that is wrong.
    public static func token(from command: RegistrationCommand, now: UnixTime) throws(DomainError) -> Token {
        guard let kind = command.kind else { throw .invalidField(field: "kind", detail: "required") }
        guard let environment = command.environment else { throw .invalidField(field: "environment", detail: "required") }
        var expiresAt: UnixTime?
        if let seconds = command.expiresAt {
            guard seconds > now.seconds else {
                throw .invalidField(field: "expires_at", detail: "\(seconds) is in the past")
            }
            expiresAt = UnixTime(seconds: seconds)
        } else if kind == .pushToStart, let retention = command.pushToStartRetention {
            expiresAt = now + retention
        }
        return Token(
            kind: kind, hex: command.hex, environment: environment, appID: command.appID,
            attributesType: command.attributesType,
            activityID: kind == .update ? command.activityID : nil,
            externalUserID: command.externalUserID, deviceID: command.deviceID,
            createdAt: now, updatedAt: now, expiresAt: expiresAt)
    }

    /// Decides a RegisterToken against the current state.
    /// - Parameters:
    ///   - existing: the token registered under the request's hex in its app, if any.
    ///   - slotOccupant: the token currently in the slot the new token would take, if any
    ///     (look it up with the slot of ``token(from:now:)``).
    ///   - activity: for update tokens, the activity it belongs to, if known.
    public static func decide(
        _ command: RegistrationCommand, existing: Token?, slotOccupant: Token?, activity: Activity?, now: UnixTime
    ) throws(DomainError) -> Plan {
        if command.remove {
            let kind: Token.Kind = command.kind == .update ? .update : .pushToStart
            guard let existing, existing.kind == kind else { return Plan(decision: .notFound) }
            return Plan(decision: .remove(existing))
        }
        return try decide(
            command, candidate: token(from: command, now: now), existing: existing, slotOccupant: slotOccupant,
            activity: activity, now: now)
    }

    /// ``decide(_:existing:slotOccupant:activity:now:)`` for a registration (not a
    /// removal) whose token the caller has made already, with ``token(from:now:)``
    /// to find its slot: made once, not twice, per RegisterToken.
    static func decide(
        _ command: RegistrationCommand, candidate: Token, existing: Token?, slotOccupant: Token?, activity: Activity?,
        now: UnixTime
    ) throws(DomainError) -> Plan {
        var token = candidate
        let activityWrite =
            token.kind == .update
            ? try activityAfterRegistration(of: token, activity: activity, now: now) : nil

        if let existing {
            token.createdAt = existing.createdAt
            // A retention expiry is refreshed once half of it has passed, not at
            // every registration: a device reporting its token at each launch
            // costs a write a few times per retention, not once per launch.
            if command.expiresAt == nil, let retention = command.pushToStartRetention, token.kind == .pushToStart,
                let kept = existing.expiresAt, kept.milliseconds - now.milliseconds >= retention.milliseconds / 2
            {
                token.expiresAt = kept
            }
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
            return Activity(
                appID: token.appID, id: activityID, attributesType: token.attributesType,
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

extension Environment {
    /// The APNs environment the wire value names; nil for unspecified or unknown values.
    package var apns: APNsEnvironment? {
        switch self {
        case .sandbox: .sandbox
        case .production: .production
        case .unspecified, .unrecognized: nil
        }
    }
}
