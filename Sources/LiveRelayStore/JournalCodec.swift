import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet

/// The journal's encoding of ``StoreWrite``s: what the journaled store
/// (``JournaledActivityStore``) appends for each mutation and what its
/// snapshots are made of.
///
/// Why a binary format of its own rather than the SQL stores' columns or JSON:
/// the journal is on the path of every acknowledged write, and its whole point
/// is to cost a few hundred bytes and a few hundred instructions per
/// registration instead of the random B-tree pages a SQL store writes
/// (docs/BENCHMARKS.md, "The journaled store"). Fields are little-endian
/// fixed-width integers and length-prefixed UTF-8; an optional is a presence
/// byte. The layout of each case is fixed by ``formatVersion``: a journal of
/// another version is refused, never guessed at.
enum JournalCodec {
    /// Written in every journal and snapshot file's header.
    static let formatVersion: UInt32 = 1

    /// Tags are only ever added, at the end: a journal written before a tag
    /// existed reads the same. A build that predates a tag refuses a journal
    /// holding it (``JournalFormatError``: unknown write tag).
    enum Tag: UInt8 {
        case putToken = 0, deleteToken, putActivity, deleteActivity, putIdempotencyRecord, settleReply
        case putIntent, deleteIntent, leaseIntent, renewIntents, deleteUpdateTokens
    }

    /// One mutation's writes: a count, then each write.
    static func encode(_ writes: [StoreWrite], into out: inout JournalEncoder) {
        out.u32(UInt32(writes.count))
        for write in writes { encode(write, into: &out) }
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws(JournalFormatError) -> [StoreWrite] {
        var input = JournalDecoder(bytes)
        let count = try input.u32()
        var writes: [StoreWrite] = []
        writes.reserveCapacity(Int(min(count, 1 << 16)))
        for _ in 0..<count { writes.append(try decodeWrite(&input)) }
        guard input.isAtEnd else { throw JournalFormatError("\(input.remaining) bytes after the last write") }
        return writes
    }

    static func tag(of write: StoreWrite) -> Tag {
        switch write {
        case .putToken: .putToken
        case .deleteToken: .deleteToken
        case .deleteUpdateTokens: .deleteUpdateTokens
        case .putActivity: .putActivity
        case .deleteActivity: .deleteActivity
        case .putIdempotencyRecord: .putIdempotencyRecord
        case .settleReply: .settleReply
        case .putIntent: .putIntent
        case .deleteIntent: .deleteIntent
        case .leaseIntent: .leaseIntent
        case .renewIntents: .renewIntents
        }
    }

    /// ``decode(_:)`` of an array (tests, tools).
    static func decode(bytes: [UInt8]) -> Result<[StoreWrite], JournalFormatError> {
        bytes.withUnsafeBytes { raw in
            do throws(JournalFormatError) {
                return .success(try decode(raw))
            } catch {
                return .failure(error)
            }
        }
    }

    static func encode(_ write: StoreWrite, into out: inout JournalEncoder) {
        out.tag(tag(of: write))
        switch write {
        case let .putToken(token):
            out.u8(token.kind == .update ? 0 : 1)
            out.string(token.hex)
            out.environment(token.environment)
            out.string(token.appID)
            out.optional(token.attributesType)
            out.optional(token.activityID)
            out.optional(token.externalUserID)
            out.optional(token.deviceID)
            out.time(token.createdAt)
            out.time(token.updatedAt)
            out.optional(token.expiresAt)
        case let .deleteToken(key):
            out.string(key.appID)
            out.string(key.hex)
        case let .deleteUpdateTokens(activity):
            out.activity(activity)
        case let .putActivity(activity):
            out.string(activity.appID)
            out.string(activity.id)
            out.optional(activity.attributesType)
            out.string(activity.state.rawValue)
            out.i64(activity.lastTimestamp)
            out.optional(activity.lastContentState)
            out.time(activity.createdAt)
            out.time(activity.expiresAt)
            out.optional(activity.endedAt)
            out.optional(activity.dismissAt)
        case let .deleteActivity(key):
            out.activity(key)
        case let .putIdempotencyRecord(record):
            out.string(record.appID)
            out.string(record.activityID)
            out.string(record.key)
            out.string(record.operation.rawValue)
            out.u64(record.fingerprint)
            out.reply(record.reply)
            out.time(record.createdAt)
        case let .settleReply(activity, timestamp, account):
            out.activity(activity)
            out.i64(timestamp)
            out.account(account)
        case let .putIntent(intent):
            out.intentKey(intent.key)
            out.i64(Int64(intent.version))
            out.string(intent.event.rawValue)
            out.bytes(intent.payload.bytes)
            out.string(intent.topic)
            out.i64(Int64(intent.priority))
            out.i64(intent.expiration)
            out.optional(intent.expiresAt)
            if let targets = intent.encodedTargets {
                out.u8(1)
                out.bytes(targets)
            } else {
                out.u8(0)
            }
            out.time(intent.createdAt)
            out.optional(intent.owner)
            out.time(intent.leaseUntil)
        case let .deleteIntent(key):
            out.intentKey(key)
        case let .leaseIntent(key, owner, until):
            out.intentKey(key)
            out.string(owner)
            out.time(until)
        case let .renewIntents(owner, until):
            out.string(owner)
            out.time(until)
        }
    }

    static func decodeWrite(_ input: inout JournalDecoder) throws(JournalFormatError) -> StoreWrite {
        let raw = try input.u8()
        guard let tag = Tag(rawValue: raw) else { throw JournalFormatError("unknown write tag \(raw)") }
        switch tag {
        case .putToken:
            let kind: Token.Kind = try input.u8() == 0 ? .update : .pushToStart
            let hex = try input.string()
            let environment = try input.environment()
            let appID = try input.string()
            return .putToken(
                Token(
                    kind: kind, hex: hex, environment: environment, appID: appID,
                    attributesType: try input.optionalString(), activityID: try input.optionalString(),
                    externalUserID: try input.optionalString(), deviceID: try input.optionalString(),
                    createdAt: try input.time(), updatedAt: try input.time(), expiresAt: try input.optionalTime()))
        case .deleteToken:
            return .deleteToken(TokenKey(appID: try input.string(), hex: try input.string()))
        case .deleteUpdateTokens:
            return .deleteUpdateTokens(of: try input.activity())
        case .putActivity:
            let appID = try input.string(), id = try input.string(), type = try input.optionalString()
            let stateName = try input.string()
            guard let state = Activity.State(rawValue: stateName) else { throw JournalFormatError("unknown activity state \(stateName)") }
            var activity = Activity(appID: appID, id: id, attributesType: type, state: state, createdAt: UnixTime(milliseconds: 0))
            activity.lastTimestamp = try input.i64()
            activity.lastContentState = try input.optionalString()
            activity.createdAt = try input.time()
            activity.expiresAt = try input.time()
            activity.endedAt = try input.optionalTime()
            activity.dismissAt = try input.optionalTime()
            return .putActivity(activity)
        case .deleteActivity:
            return .deleteActivity(try input.activity())
        case .putIdempotencyRecord:
            let appID = try input.string(), activityID = try input.string(), key = try input.string()
            let operationName = try input.string()
            guard let operation = IdempotentOperation(rawValue: operationName) else {
                throw JournalFormatError("unknown operation \(operationName)")
            }
            return .putIdempotencyRecord(
                IdempotencyRecord(
                    appID: appID, activityID: activityID, key: key, operation: operation, fingerprint: try input.u64(),
                    reply: try input.reply(), createdAt: try input.time()))
        case .settleReply:
            return .settleReply(try input.activity(), timestamp: try input.i64(), account: try input.account())
        case .putIntent:
            let key = try input.intentKey()
            let version = Int(try input.i64())
            let eventName = try input.string()
            guard let event = APNsEvent(rawValue: eventName) else { throw JournalFormatError("unknown event \(eventName)") }
            let payload = APNsPayload(bytes: try input.bytes())
            let topic = try input.string()
            let priority = Int(try input.i64())
            let expiration = try input.i64()
            let expiresAt = try input.optionalTime()
            var targets: (targets: [PushTarget], withUpdateTokens: Bool)?
            if try input.u8() != 0 {
                guard let decoded = DispatchIntent.decodeTargets(try input.bytes()) else {
                    throw JournalFormatError("an intent's target list does not decode")
                }
                targets = decoded
            }
            var intent = DispatchIntent(
                key: key, event: event, payload: payload, topic: topic, priority: priority, expiration: expiration,
                expiresAt: expiresAt, targets: targets?.targets, createdAt: try input.time(), owner: try input.optionalString(),
                leaseUntil: try input.time(), version: version)
            intent.withUpdateTokens = targets?.withUpdateTokens ?? false
            return .putIntent(intent)
        case .deleteIntent:
            return .deleteIntent(try input.intentKey())
        case .leaseIntent:
            return .leaseIntent(try input.intentKey(), owner: try input.string(), until: try input.time())
        case .renewIntents:
            return .renewIntents(owner: try input.string(), until: try input.time())
        }
    }
}

/// A journal or snapshot that cannot be read as this build writes it.
struct JournalFormatError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Appends the journal's fields to a byte array.
struct JournalEncoder {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func tag(_ t: JournalCodec.Tag) { bytes.append(t.rawValue) }

    mutating func u32(_ v: UInt32) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u64(_ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    mutating func time(_ t: UnixTime) { i64(t.milliseconds) }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func bytes(_ b: [UInt8]) {
        u32(UInt32(b.count))
        bytes.append(contentsOf: b)
    }

    mutating func optional(_ s: String?) {
        if let s {
            u8(1)
            string(s)
        } else {
            u8(0)
        }
    }

    mutating func optional(_ t: UnixTime?) {
        if let t {
            u8(1)
            time(t)
        } else {
            u8(0)
        }
    }

    mutating func environment(_ e: APNsEnvironment) { u8(e == .sandbox ? 0 : 1) }

    mutating func activity(_ key: ActivityKey) {
        string(key.appID)
        string(key.activityID)
    }

    mutating func intentKey(_ key: IntentKey) {
        string(key.appID)
        string(key.activityID)
        i64(key.timestamp)
    }

    mutating func reply(_ reply: StoredReply) {
        i64(reply.timestamp)
        string(reply.state.rawValue)
        i64(Int64(reply.targeted))
        u32(UInt32(reply.unresolved.count))
        for target in reply.unresolved {
            string(target.kind.rawValue)
            string(target.value)
            string(target.reason)
        }
        if let account = reply.account {
            u8(1)
            self.account(account)
        } else {
            u8(0)
        }
    }

    mutating func account(_ a: EnqueueResult) {
        for count in [a.queued, a.delivered, a.pruned, a.superseded, a.expired] { i64(Int64(count)) }
        u32(UInt32(a.failures.count))
        for (reason, count) in a.failures.sorted(by: { $0.key < $1.key }) {
            string(reason)
            i64(Int64(count))
        }
    }
}

/// Reads the journal's fields back, refusing anything short or out of range.
struct JournalDecoder {
    private let base: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { base = bytes }

    var isAtEnd: Bool { offset == base.count }
    var remaining: Int { base.count - offset }

    private mutating func take(_ n: Int) throws(JournalFormatError) -> UnsafeRawBufferPointer {
        guard n >= 0, n <= base.count - offset else {
            throw JournalFormatError("a field of \(n) bytes at offset \(offset) runs past the record's \(base.count)")
        }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: base[offset..<offset + n])
    }

    mutating func u8() throws(JournalFormatError) -> UInt8 { try take(1)[0] }

    mutating func u32() throws(JournalFormatError) -> UInt32 {
        UInt32(littleEndian: try take(4).loadUnaligned(as: UInt32.self))
    }

    mutating func u64() throws(JournalFormatError) -> UInt64 {
        UInt64(littleEndian: try take(8).loadUnaligned(as: UInt64.self))
    }

    mutating func i64() throws(JournalFormatError) -> Int64 { Int64(bitPattern: try u64()) }
    mutating func time() throws(JournalFormatError) -> UnixTime { UnixTime(milliseconds: try i64()) }

    mutating func string() throws(JournalFormatError) -> String {
        let utf8 = try take(Int(try u32()))
        guard let s = String(validating: utf8, as: UTF8.self) else { throw JournalFormatError("a string is not UTF-8") }
        return s
    }

    mutating func bytes() throws(JournalFormatError) -> [UInt8] { Array(try take(Int(try u32()))) }

    private mutating func present() throws(JournalFormatError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let other: throw JournalFormatError("presence byte \(other)")
        }
    }

    mutating func optionalString() throws(JournalFormatError) -> String? { try present() ? try string() : nil }
    mutating func optionalTime() throws(JournalFormatError) -> UnixTime? { try present() ? try time() : nil }

    mutating func environment() throws(JournalFormatError) -> APNsEnvironment {
        switch try u8() {
        case 0: return .sandbox
        case 1: return .production
        case let other: throw JournalFormatError("environment \(other)")
        }
    }

    mutating func activity() throws(JournalFormatError) -> ActivityKey {
        ActivityKey(appID: try string(), activityID: try string())
    }

    mutating func intentKey() throws(JournalFormatError) -> IntentKey {
        IntentKey(appID: try string(), activityID: try string(), timestamp: try i64())
    }

    mutating func reply() throws(JournalFormatError) -> StoredReply {
        let timestamp = try i64()
        let stateName = try string()
        guard let state = Activity.State(rawValue: stateName) else { throw JournalFormatError("unknown reply state \(stateName)") }
        let targeted = Int(try i64())
        var unresolved: [UnresolvedStartTarget] = []
        for _ in 0..<(try u32()) {
            let kindName = try string()
            guard let kind = UnresolvedStartTarget.Kind(rawValue: kindName) else {
                throw JournalFormatError("unknown start target kind \(kindName)")
            }
            unresolved.append(UnresolvedStartTarget(kind: kind, value: try string(), reason: try string()))
        }
        let account = try present() ? try self.account() : nil
        return StoredReply(timestamp: timestamp, state: state, targeted: targeted, unresolved: unresolved, account: account)
    }

    mutating func account() throws(JournalFormatError) -> EnqueueResult {
        var counts: [Int] = []
        for _ in 0..<5 { counts.append(Int(try i64())) }
        var failures: [String: Int] = [:]
        for _ in 0..<(try u32()) { failures[try string()] = Int(try i64()) }
        return EnqueueResult(
            queued: counts[0], delivered: counts[1], pruned: counts[2], superseded: counts[3], expired: counts[4], failures: failures)
    }
}
