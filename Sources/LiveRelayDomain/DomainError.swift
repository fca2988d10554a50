import LiveRelayAPNs
import LiveRelayMessages

/// Why a rule refused a request.
///
/// Typed so the service maps each case to one status code and callers can
/// test for the case rather than parse text; ``message`` is the wording a
/// person sees and ``reason`` the stable word a program matches on
/// (ErrorDetails.reason).
public enum DomainError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A field broke a rule (also the message layer's rules, re-checked here so
    /// that callers that bypass decoding cannot reach the rules with bad input).
    case invalidField(field: String, detail: String)
    case unknownApp(appID: String)
    case activityNotFound(ActivityKey)
    /// StartActivity with an id already used, under another (or no) idempotency key.
    case activityAlreadyExists(ActivityKey)
    /// Update or end of an activity that has ended, expired or been dismissed.
    case activityFinished(ActivityKey, state: Activity.State)
    /// An idempotency key reused with a different request.
    case idempotencyKeyReused(key: String, ActivityKey, firstUsedFor: IdempotentOperation)
    /// The `aps` payload is above APNs's limit; nothing was stored or queued.
    case payloadTooLarge(size: Int, limit: Int)
    /// The call would add a token or a live activity to an app that has its quota's worth.
    case quotaExceeded(appID: String, CountQuota)

    /// The status family, without depending on the wire module.
    public enum Code: Hashable, Sendable {
        case invalidArgument, notFound, alreadyExists, failedPrecondition, resourceExhausted
    }

    public var code: Code {
        switch self {
        case .invalidField, .payloadTooLarge: .invalidArgument
        case .unknownApp, .activityNotFound: .notFound
        case .activityAlreadyExists: .alreadyExists
        case .activityFinished, .idempotencyKeyReused: .failedPrecondition
        case .quotaExceeded: .resourceExhausted
        }
    }

    public var reason: String {
        switch self {
        case .invalidField: "InvalidField"
        case .unknownApp: "UnknownApp"
        case .activityNotFound: "ActivityNotFound"
        case .activityAlreadyExists: "ActivityAlreadyExists"
        case .activityFinished(_, .expired): "ActivityExpired"
        case .activityFinished(_, .dismissed): "ActivityDismissed"
        case .activityFinished: "ActivityEnded"
        case .idempotencyKeyReused: "IdempotencyKeyReused"
        case .payloadTooLarge: "PayloadTooLarge"
        case let .quotaExceeded(_, quota): quota.kind.reason
        }
    }

    /// The field to name in a FieldViolation, when one field is at fault.
    public var field: String? {
        switch self {
        case let .invalidField(field, _): field
        default: nil
        }
    }

    public var message: String {
        switch self {
        case let .invalidField(field, detail):
            return field.isEmpty ? detail : "\(field): \(detail)"
        case let .unknownApp(appID):
            return "unknown app \"\(appID)\""
        case let .activityNotFound(key):
            return "no activity \"\(key.activityID)\" in app \"\(key.appID)\""
        case let .activityAlreadyExists(key):
            return "activity \"\(key.activityID)\" already exists in app \"\(key.appID)\"; "
                + "repeat the first StartActivity's idempotency key to get its reply"
        case let .activityFinished(key, state):
            let what: String
            switch state {
            case .expired: what = "expired (8 hours after its start)"
            case .dismissed: what = "ended and been dismissed"
            default: what = "ended"
            }
            return "activity \"\(key.activityID)\" has \(what); it cannot be updated or ended again"
        case let .idempotencyKeyReused(key, activity, operation):
            return "idempotency key \"\(key)\" was first used for a different \(operation.rawValue) request "
                + "of activity \"\(activity.activityID)\""
        case let .payloadTooLarge(size, limit):
            return "payload is \(groupedThousands(size)) bytes; APNs allows \(groupedThousands(limit))"
        case let .quotaExceeded(appID, quota):
            return
                "app \"\(appID)\" has \(groupedThousands(quota.used)) \(quota.kind.noun), its quota is \(groupedThousands(quota.limit)); "
                + "\(quota.kind.remedy)"
        }
    }

    public var description: String { message }
}

/// 4213 -> "4,213": sizes people compare against APNs's documented "4,096".
func groupedThousands(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return value < 0 ? "-" + out : out
}
