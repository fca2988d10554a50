/// The outcome of one request, carried in an ERROR frame.
///
/// These are gRPC's 17 codes with the same numbers, so that clients and
/// operators can reuse what they already know about retry semantics, and so a
/// gRPC gateway could map them one to one. OK (0) never appears on the wire:
/// a RESPONSE frame implies it, and an ERROR frame with status 0 is malformed.
/// docs/PROTOCOL.md says what each code means for LiveRelay.
public enum StatusCode: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case ok = 0
    case cancelled = 1
    case unknown = 2
    case invalidArgument = 3
    case deadlineExceeded = 4
    case notFound = 5
    case alreadyExists = 6
    case permissionDenied = 7
    case resourceExhausted = 8
    case failedPrecondition = 9
    case aborted = 10
    case outOfRange = 11
    case unimplemented = 12
    case `internal` = 13
    case unavailable = 14
    case dataLoss = 15
    case unauthenticated = 16

    public var description: String {
        switch self {
        case .ok: return "OK"
        case .cancelled: return "CANCELLED"
        case .unknown: return "UNKNOWN"
        case .invalidArgument: return "INVALID_ARGUMENT"
        case .deadlineExceeded: return "DEADLINE_EXCEEDED"
        case .notFound: return "NOT_FOUND"
        case .alreadyExists: return "ALREADY_EXISTS"
        case .permissionDenied: return "PERMISSION_DENIED"
        case .resourceExhausted: return "RESOURCE_EXHAUSTED"
        case .failedPrecondition: return "FAILED_PRECONDITION"
        case .aborted: return "ABORTED"
        case .outOfRange: return "OUT_OF_RANGE"
        case .unimplemented: return "UNIMPLEMENTED"
        case .internal: return "INTERNAL"
        case .unavailable: return "UNAVAILABLE"
        case .dataLoss: return "DATA_LOSS"
        case .unauthenticated: return "UNAUTHENTICATED"
        }
    }

    /// Whether a request that failed with this code was certainly not
    /// processed, so that any client may send it again on another connection
    /// without an idempotency key. Only UNAVAILABLE promises that here.
    public var isSafeToRetry: Bool { self == .unavailable }
}
