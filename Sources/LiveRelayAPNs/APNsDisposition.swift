/// What to do about one APNs answer: the response table of
/// APNs's documented answers as a value, so the dispatcher, the tests and the
/// mock agree on it in one place.
public enum APNsDisposition: Hashable, Sendable {
    /// 200: APNs has the push.
    case delivered
    /// 410 Unregistered/ExpiredToken, 400 BadDeviceToken or DeviceTokenNotForTopic: the token is dead; remove it.
    case pruneToken
    /// 403 ExpiredProviderToken: make a new JWT (once per signing key, however many streams saw it) and retry.
    case refreshProviderTokenAndRetry
    /// 403 InvalidProviderToken and the other credential reasons: the app's key, team or environment is
    /// wrong. Fail its pushes and surface it loudly; retrying cannot help until an operator acts.
    case credentialsRejected
    /// 429 TooManyRequests, 500, 503 (InternalServerError, ServiceUnavailable, Shutdown): retry with back-off.
    case retryWithBackoff
    /// 429 TooManyProviderTokenUpdates: the JWT changed too often; keep the current one and retry after a delay.
    case retryWithoutNewProviderToken
    /// A bug in the request (400 bad header, 404, 405, 413): fail it; sending it again as is would fail again.
    case failRequest

    public init(status: Int, reason: String?) {
        switch status {
        case 200..<300:
            // 201 and 204 answer channel management calls (created, deleted).
            self = .delivered
        case 410:
            self = .pruneToken
        case 400:
            switch reason {
            case "BadDeviceToken", "DeviceTokenNotForTopic": self = .pruneToken
            default: self = .failRequest
            }
        case 403:
            switch reason {
            case "ExpiredProviderToken": self = .refreshProviderTokenAndRetry
            default: self = .credentialsRejected
            }
        case 429:
            self = reason == "TooManyProviderTokenUpdates" ? .retryWithoutNewProviderToken : .retryWithBackoff
        case 500..<600:
            self = .retryWithBackoff
        default:
            // 404 BadPath, 405 MethodNotAllowed, 413 PayloadTooLarge and anything APNs may add.
            self = .failRequest
        }
    }

    /// True for the answers that end a push for good.
    public var isFinal: Bool {
        switch self {
        case .delivered, .pruneToken, .credentialsRejected, .failRequest: true
        case .refreshProviderTokenAndRetry, .retryWithBackoff, .retryWithoutNewProviderToken: false
        }
    }
}

/// The reasons APNs documents for its error answers: device pushes, broadcasts and
/// channel management. A closed set at Apple; an endpoint that is not Apple's (any
/// HOST:PORT can be one) may answer others, which is why a label that must stay
/// bounded (the metrics' `reason`) keeps these and folds the rest.
public enum APNsReasons {
    public static let documented: Set<String> = [
        // 400
        "BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
        "DeviceTokenNotForTopic", "DuplicateHeaders", "IdleTimeout", "InvalidPushType", "MissingDeviceToken", "MissingTopic",
        "PayloadEmpty", "TopicDisallowed", "MissingPushType",
        // 400, broadcast channels
        "BadChannelId", "ChannelNotRegistered", "CannotCreateChannelConfig", "FeatureNotEnabled", "MissingChannelId",
        "BadMessageStoragePolicy",
        // 403
        "BadCertificate", "BadCertificateEnvironment", "ExpiredProviderToken", "Forbidden", "InvalidProviderToken",
        "MissingProviderToken", "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken",
        // 404, 405, 410, 413
        "BadPath", "MethodNotAllowed", "ExpiredToken", "Unregistered", "PayloadTooLarge",
        // 429, 500, 503
        "TooManyProviderTokenUpdates", "TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown",
    ]
}
