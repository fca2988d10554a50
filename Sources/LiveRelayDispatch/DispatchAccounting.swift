import LiveRelayAPNs
import LiveRelayPushOutlet
import NIOCore

/// How one push ended. Every push ends in exactly one of these, once.
public enum PushOutcome: Hashable, Sendable {
    case delivered
    case failed(reason: String)
    /// APNs's reason for declaring the token dead (Unregistered, ExpiredToken, BadDeviceToken...).
    case pruned(reason: String)
    case superseded
    case expired

    /// The `outcome` dimension of the push counter.
    public var label: String {
        switch self {
        case .delivered: "delivered"
        case .failed: "failed"
        case .pruned: "pruned"
        case .superseded: "superseded"
        case .expired: "expired"
        }
    }
}

/// Failure reasons the dispatcher makes up itself (APNs's own reasons pass through as APNs spells them).
public enum DispatchFailure {
    /// The app is not in the dispatcher's configuration.
    public static let appNotConfigured = "AppNotConfigured"
    /// The dispatcher stopped before the push could be sent.
    public static let shuttingDown = "ShuttingDown"
    /// Most of the app's recent answers were 400 DeviceTokenNotForTopic: its
    /// bundle id, team or key is wrong (``MassPruneGuard``); set as its credential error.
    public static let massDeviceTokenNotForTopic = "MassDeviceTokenNotForTopic"
    /// Most of the app's recent answers were 400 BadDeviceToken: its tokens go
    /// to the wrong APNs environment (``MassPruneGuard``); set as its credential error.
    public static let massBadDeviceToken = "MassBadDeviceToken"
    /// The reason for an APNs error answer that carried none.
    static func status(_ status: Int) -> String { "HTTP\(status)" }

    /// The reasons the dispatcher makes up itself, beside the transport's (``APNsTransportError/Kind``)
    /// and the status ones (``status(_:)``).
    static let own: Set<String> = [appNotConfigured, shuttingDown, massDeviceTokenNotForTopic, massBadDeviceToken]
}

/// The running account of one call's pushes, as the reply reports it.
struct CallAccount: Hashable, Sendable {
    var result = EnqueueResult()

    mutating func record(_ outcome: PushOutcome) {
        result.queued -= 1
        switch outcome {
        case .delivered: result.delivered += 1
        case let .failed(reason): result.failures[reason, default: 0] += 1
        case .pruned: result.pruned += 1
        case .superseded: result.superseded += 1
        case .expired: result.expired += 1
        }
    }
}

/// Why an app's pushes are held: APNs rejected its credentials, or most of its
/// tokens (``MassPruneGuard``). Nothing of the app is failed or dropped for it:
/// its pushes wait, each until its send-by time, while the app is tried again
/// with back-off (one push at a time) and at once when its credentials change.
public struct CredentialError: Hashable, Sendable {
    public var status: Int
    /// APNs's reason (InvalidProviderToken, BadEnvironmentKeyIdInToken...).
    public var reason: String
    /// When it was answered (the dispatcher's monotonic clock).
    public var at: NIODeadline
    /// Until when the app is not sent to; then one push goes as a probe.
    public var suspendedUntil: NIODeadline
    /// Since when the app has been held (its first rejection in a row).
    public var heldSince: NIODeadline
    /// Rejections in a row: each doubles the next hold, up to a maximum.
    public var rejections: Int
    /// The hold is over and one push at a time probes the credentials; its
    /// acceptance ends the hold, its rejection starts a longer one.
    public var probing = false
}

/// Per-app totals since the dispatcher started (the same numbers go to swift-metrics).
public struct DispatchCounters: Hashable, Sendable {
    /// Pushes taken into the queue (every target of every batch).
    public var enqueued = 0
    /// Pushes not final yet: queued, waiting to retry, or in flight.
    public var unfinished = 0
    public var inFlight = 0
    /// Requests written to the transport, retries included.
    public var attempts = 0
    public var retries = 0
    public var delivered = 0
    public var superseded = 0
    public var expired = 0
    /// Pushes pruned, by APNs's reason.
    public var prunes: [String: Int] = [:]
    /// Pushes failed, by reason.
    public var failures: [String: Int] = [:]
    public var credentialRejections = 0
    /// Calls refused with RESOURCE_EXHAUSTED.
    public var refusedCalls = 0

    public var failed: Int { failures.values.reduce(0, +) }
    public var pruned: Int { prunes.values.reduce(0, +) }

    public init() {}

    mutating func record(_ outcome: PushOutcome) {
        unfinished -= 1
        switch outcome {
        case .delivered: delivered += 1
        case let .failed(reason): failures[reason, default: 0] += 1
        case let .pruned(reason): prunes[reason, default: 0] += 1
        case .superseded: superseded += 1
        case .expired: expired += 1
        }
    }
}

/// A binary min-heap of deadlines with payloads: retries and call timers.
/// Entries are never removed early; a stale one is skipped when it comes up.
struct DeadlineHeap<Payload> {
    private var items: [(deadline: NIODeadline, seq: UInt64, payload: Payload)] = []
    private var seq: UInt64 = 0

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var earliest: NIODeadline? { items.first?.deadline }

    mutating func push(_ deadline: NIODeadline, _ payload: Payload) {
        seq &+= 1
        items.append((deadline, seq, payload))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(child, parent) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    /// The earliest entry if it is due at `now`.
    mutating func popDue(_ now: NIODeadline) -> Payload? {
        guard let first = items.first, first.deadline <= now else { return nil }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, less(left, smallest) { smallest = left }
            if right < items.count, less(right, smallest) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return first.payload
    }

    /// Equal deadlines come out in insertion order, so timers are deterministic.
    private func less(_ a: Int, _ b: Int) -> Bool {
        items[a].deadline < items[b].deadline || (items[a].deadline == items[b].deadline && items[a].seq < items[b].seq)
    }
}

/// SplitMix64: a tiny seeded generator, so jitter is reproducible in tests and
/// the scheduler stays a value with no hidden global state.
struct SplitMix64: RandomNumberGenerator, Hashable, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in 0..<1.
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
