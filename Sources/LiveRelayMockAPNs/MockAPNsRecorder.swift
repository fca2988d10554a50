import LiveRelayAPNs
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One stream as the mock saw and answered it, so tests can assert on exact
/// payloads, headers and order.
public struct MockAPNsRecord: Sendable {
    /// `:path`, e.g. `/3/device/<token>`.
    public var path: String
    /// `:method`.
    public var method: String
    /// Regular headers in arrival order, duplicates kept (pseudo-headers are in `path`/`method`).
    /// `authorization` is kept verbatim in memory; the JSON-lines file redacts its signature.
    public var headers: [(name: String, value: String)]
    /// The body as received (at most ``MockAPNsRecorder/maxRecordedBodyBytes``).
    public var body: [UInt8]
    /// The status answered; 0 when the stream was never answered (its connection was dropped).
    public var status: Int
    public var reason: String?
    /// The `apns-id` answered.
    public var apnsID: String?
    /// 1 for the server's first accepted connection.
    public var connection: Int
    public var streamID: Int
    /// When the request was complete, by the configured clock.
    public var receivedAtMilliseconds: Int64
    /// The channel a management call or broadcast was about: the one created (the
    /// `apns-channel-id` answered with a 201) or the one named in the request.
    public var channelID: String?
    /// An accepted broadcast: the device tokens (lowercase) subscribed to its channel
    /// at that moment, each of which the broadcast reached.
    public var fannedOutTo: [String]
    /// An accepted push-to-start that subscribed its device token to this channel.
    public var subscribedTo: String?

    public init(
        path: String, method: String, headers: [(name: String, value: String)], body: [UInt8], status: Int,
        reason: String?, apnsID: String?, connection: Int, streamID: Int, receivedAtMilliseconds: Int64,
        channelID: String? = nil, fannedOutTo: [String] = [], subscribedTo: String? = nil
    ) {
        self.path = path
        self.method = method
        self.headers = headers
        self.body = body
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.connection = connection
        self.streamID = streamID
        self.receivedAtMilliseconds = receivedAtMilliseconds
        self.channelID = channelID
        self.fannedOutTo = fannedOutTo
        self.subscribedTo = subscribedTo
    }

    /// The first value of `name`.
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The token from `/3/device/<token>`, nil for other paths.
    public var deviceToken: String? {
        path.hasPrefix(MockAPNsValidator.devicePathPrefix) ? String(path.dropFirst(MockAPNsValidator.devicePathPrefix.count)) : nil
    }

    /// How long after its `apns-expiration` (UNIX seconds; 0 means "try once" and
    /// never expires) the push arrived: negative when in time, nil without a valid one.
    public var millisecondsPastExpiration: Int64? {
        Self.millisecondsPastExpiration(header("apns-expiration"), receivedAtMilliseconds: receivedAtMilliseconds)
    }

    /// ``millisecondsPastExpiration`` from the header's text, for a stream that is counted but not recorded.
    static func millisecondsPastExpiration(_ expirationHeader: String?, receivedAtMilliseconds: Int64) -> Int64? {
        guard let text = expirationHeader, let expiration = Int64(text), expiration > 0, expiration < Int64.max / 1000
        else { return nil }
        return receivedAtMilliseconds - expiration * 1000
    }

    /// The body as text, for test messages.
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// One JSON line. The JWT's signature is replaced, so the file never holds a usable token:
    /// header and claims (key id, team, issued-at) stay, for debugging.
    public var jsonLine: String {
        var w = ""
        w += "{\"connection\":\(connection),\"stream\":\(streamID),\"received_ms\":\(receivedAtMilliseconds)"
        w += ",\"method\":" + jsonQuoted(method) + ",\"path\":" + jsonQuoted(path)
        w += ",\"status\":\(status)"
        if let reason { w += ",\"reason\":" + jsonQuoted(reason) }
        if let apnsID { w += ",\"apns_id\":" + jsonQuoted(apnsID) }
        if let channelID { w += ",\"channel_id\":" + jsonQuoted(channelID) }
        if let subscribedTo { w += ",\"subscribed_to\":" + jsonQuoted(subscribedTo) }
        if !fannedOutTo.isEmpty { w += ",\"fanned_out_to\":[" + fannedOutTo.map(jsonQuoted).joined(separator: ",") + "]" }
        w += ",\"headers\":["
        for (i, header) in headers.enumerated() {
            let value = header.name == "authorization" ? Self.redactedAuthorization(header.value) : header.value
            w += (i > 0 ? "," : "") + "[" + jsonQuoted(header.name) + "," + jsonQuoted(value) + "]"
        }
        w += "],\"body\":" + jsonQuoted(bodyText) + "}"
        return w
    }

    static func redactedAuthorization(_ value: String) -> String {
        guard let lastDot = value.lastIndex(of: ".") else { return "<redacted>" }
        return value[..<lastDot] + ".<redacted>"
    }

}

/// One notification that reached a device token: a push to it, or a broadcast
/// to a channel it was subscribed to.
public struct MockAPNsDelivery: Sendable {
    /// Lowercase.
    public var deviceToken: String
    /// The channel for a broadcast; nil for a push to the token.
    public var channelID: String?
    /// The stream that carried it (for a broadcast, shared by every subscriber it reached).
    public var record: MockAPNsRecord

    public init(deviceToken: String, channelID: String?, record: MockAPNsRecord) {
        self.deviceToken = deviceToken
        self.channelID = channelID
        self.record = record
    }

    public var body: [UInt8] { record.body }
    public var bodyText: String { record.bodyText }
}

/// What the mock has done since it started (or since ``MockAPNsServer/reset()``).
public struct MockAPNsCounters: Sendable, Hashable {
    public var connectionsAccepted = 0
    public var streamsReceived = 0
    /// Answers by HTTP status.
    public var responsesByStatus: [Int: Int] = [:]
    /// The most streams one connection had open at once (checks SETTINGS_MAX_CONCURRENT_STREAMS was honoured).
    public var peakConcurrentStreams = 0
    public var goAwaysSent = 0
    public var connectionsDropped = 0
    /// Records pushed out of memory by ``MockAPNsConfiguration/recordingCapacity``.
    public var recordsDiscarded = 0
    /// Pushes that arrived after their own `apns-expiration` (a nonzero one): the
    /// sender kept a push past the time it said it stopped being worth sending.
    /// Counted for every push, not only the recorded ones, so a long soak can check
    /// it without keeping a million records.
    public var receivedAfterExpiration = 0
    /// How late the latest of those was, in milliseconds past its `apns-expiration` second.
    public var mostMillisecondsPastExpiration: Int64 = 0
    /// Answers that carried a `retry-after` header (``MockAPNsInjectedError/retryAfterSeconds``).
    public var responsesWithRetryAfter = 0
    /// Answers delayed by the slow tail (``MockAPNsLatency/slow``).
    public var slowAnswers = 0

    public init() {}

    public var responses: Int { responsesByStatus.values.reduce(0, +) }
}

/// The bounded in-memory log plus the optional JSON-lines file. Shared by
/// every connection's event loop, hence the lock; the file is written under
/// the same lock so its lines are in the same order as ``records``.
final class MockAPNsRecorder: Sendable {
    static let maxRecordedBodyBytes = 8192

    /// `@unchecked`: the FILE pointer is only touched under the box's lock.
    private struct State: @unchecked Sendable {
        var records: CircularBuffer<MockAPNsRecord>
        var counters = MockAPNsCounters()
        var file: UnsafeMutablePointer<FILE>?
    }

    private let capacity: Int
    private let state: NIOLockedValueBox<State>
    /// False with a capacity of 0 and no record file: nothing would be kept, so a stream is
    /// only counted (``countUnrecorded(status:millisecondsPastExpiration:)``) and nobody
    /// builds or copies a record for it. A benchmark mock runs so, to measure its client
    /// rather than its own bookkeeping.
    let keepsRecords: Bool

    init(capacity: Int, recordFile: String?) throws(MockAPNsError) {
        self.capacity = max(0, capacity)
        self.keepsRecords = capacity > 0 || recordFile != nil
        var file: UnsafeMutablePointer<FILE>?
        if let recordFile {
            // The record holds device tokens: owner-only from creation, never 0644 first.
            let fd = open(recordFile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0, let handle = fdopen(fd, "a") else {
                if fd >= 0 { Glibc.close(fd) }
                throw MockAPNsError("cannot open the record file '\(recordFile)' (errno \(errno))")
            }
            file = handle
        }
        self.state = NIOLockedValueBox(State(records: Self.emptyBuffer(capacity), file: file))
    }

    private static func emptyBuffer(_ capacity: Int) -> CircularBuffer<MockAPNsRecord> {
        CircularBuffer(initialCapacity: min(max(capacity, 1), 4096))
    }

    func record(_ record: MockAPNsRecord) {
        state.withLockedValue { state in
            Self.tally(&state.counters, status: record.status, millisecondsPastExpiration: record.millisecondsPastExpiration)
            if let handle = state.file {
                _ = (record.jsonLine + "\n").withCString { fputs($0, handle) }
                fflush(handle)
            }
            guard capacity > 0 else {
                state.counters.recordsDiscarded += 1
                return
            }
            if state.records.count == capacity {
                state.records.removeFirst()
                state.counters.recordsDiscarded += 1
            }
            state.records.append(record)
        }
    }

    /// What ``record(_:)`` counts for a stream, when ``keepsRecords`` is false: the counters
    /// match those of a recording mock whose capacity is 0 (every stream a discarded record).
    func countUnrecorded(status: Int, millisecondsPastExpiration: Int64?) {
        state.withLockedValue { state in
            Self.tally(&state.counters, status: status, millisecondsPastExpiration: millisecondsPastExpiration)
            state.counters.recordsDiscarded += 1
        }
    }

    private static func tally(_ counters: inout MockAPNsCounters, status: Int, millisecondsPastExpiration: Int64?) {
        counters.streamsReceived += 1
        if let late = millisecondsPastExpiration, late > 0 {
            counters.receivedAfterExpiration += 1
            counters.mostMillisecondsPastExpiration = max(counters.mostMillisecondsPastExpiration, late)
        }
        if status != 0 { counters.responsesByStatus[status, default: 0] += 1 }
    }

    func count(_ update: (inout MockAPNsCounters) -> Void) {
        state.withLockedValue { update(&$0.counters) }
    }

    var records: [MockAPNsRecord] { state.withLockedValue { Array($0.records) } }

    /// What reached `deviceToken` (any case), oldest first: its accepted pushes and the
    /// accepted broadcasts that fanned out to it, among the records still kept.
    func deliveries(to deviceToken: String) -> [MockAPNsDelivery] {
        let token = deviceToken.lowercased()
        return state.withLockedValue { state in
            state.records.compactMap { record -> MockAPNsDelivery? in
                guard record.status == 200 else { return nil }
                if let pushed = record.deviceToken, pushed.lowercased() == token {
                    return MockAPNsDelivery(deviceToken: token, channelID: nil, record: record)
                }
                guard record.fannedOutTo.contains(token) else { return nil }
                return MockAPNsDelivery(deviceToken: token, channelID: record.channelID, record: record)
            }
        }
    }
    var counters: MockAPNsCounters { state.withLockedValue { $0.counters } }

    /// Forgets records and counters; the file keeps its lines.
    func reset() {
        state.withLockedValue { state in
            state.records = Self.emptyBuffer(capacity)
            state.counters = MockAPNsCounters()
        }
    }

    func close() {
        state.withLockedValue { state in
            if let handle = state.file { fclose(handle) }
            state.file = nil
        }
    }
}

/// A mock APNs setup problem (bad PEM, unreadable file, bind failure), with a message that never contains key bytes.
public struct MockAPNsError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
