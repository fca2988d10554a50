import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import Testing

@testable import LiveRelayStore

@Suite struct JournalCodecTests {
    /// Every case of ``StoreWrite``, with each optional field both set and unset.
    static var everyWrite: [StoreWrite] {
        var bare = Activity(appID: appID, id: "order-2", attributesType: nil, state: .starting, createdAt: t0)
        bare.expiresAt = t0 + .seconds(60)
        var full = Activity(appID: appID, id: "order-1", attributesType: "DeliveryAttributes", state: .ended, createdAt: t0)
        full.lastTimestamp = 1_700_000_123
        full.lastContentState = #"{"status":"délivré ✓"}"#
        full.endedAt = t0 + .seconds(5)
        full.dismissAt = t0 + .seconds(50)
        let reply = StoredReply(
            timestamp: 1_700_000_001, state: .active, targeted: 3,
            unresolved: [UnresolvedStartTarget(kind: .externalUserID, value: "user-9", reason: "NoToken")],
            account: EnqueueResult(
                queued: 1, delivered: 2, pruned: 3, superseded: 4, expired: 5, failures: ["QueueFull": 6, "BadTopic": 7]))
        let withList = DispatchIntent(
            key: IntentKey(appID: appID, activityID: "order-1", timestamp: 1_700_000_002), event: .start,
            payload: APNsPayload(bytes: Array(#"{"aps":{"event":"start"}}"#.utf8)), topic: appID + ".push-type.liveactivity",
            priority: 10, expiration: 1_700_003_600, expiresAt: t0 + .seconds(3600),
            targets: [
                PushTarget(token: hex(1), environment: .production), PushTarget(token: hex(2), environment: .sandbox),
                .channel("channel-1", environment: .production, storagePolicy: .noStorage),
            ],
            createdAt: t0, owner: "node-a", leaseUntil: t0 + .seconds(30))
        var withTokens = DispatchIntent(
            key: IntentKey(appID: appID, activityID: "order-1", timestamp: 1_700_000_003), event: .update,
            payload: APNsPayload(bytes: []), topic: "t", priority: 5, expiration: 0, expiresAt: nil, targets: nil,
            createdAt: t0, owner: nil, leaseUntil: t0)
        withTokens.version = 7
        var channelAndTokens = withList
        channelAndTokens.event = .update
        channelAndTokens.targets = [.channel("channel-2", environment: .sandbox, storagePolicy: .mostRecentMessage)]
        channelAndTokens.withUpdateTokens = true
        return [
            .putToken(
                Token(
                    kind: .pushToStart, hex: hex(1), environment: .production, appID: appID, attributesType: "DeliveryAttributes",
                    externalUserID: "user-1", deviceID: "device-1", createdAt: t0, updatedAt: t0 + .seconds(1),
                    expiresAt: t0 + .seconds(86_400))),
            .putToken(
                Token(
                    kind: .update, hex: hex(2), environment: .sandbox, appID: appID, activityID: "order-1", createdAt: t0,
                    updatedAt: t0)),
            .deleteToken(TokenKey(appID: appID, hex: hex(3))),
            .deleteUpdateTokens(of: order1),
            .putActivity(full),
            .putActivity(bare),
            .deleteActivity(order1),
            .putIdempotencyRecord(
                IdempotencyRecord(
                    appID: appID, activityID: "order-1", key: "k1", operation: .start, fingerprint: .max, reply: reply, createdAt: t0)),
            .putIdempotencyRecord(
                IdempotencyRecord(
                    appID: appID, activityID: "order-1", key: "", operation: .end, fingerprint: 0,
                    reply: StoredReply(timestamp: -1, state: .dismissed, targeted: 0), createdAt: UnixTime(milliseconds: -5))),
            .settleReply(order1, timestamp: 1_700_000_001, account: EnqueueResult(delivered: 9)),
            .putIntent(withList),
            .putIntent(withTokens),
            .putIntent(channelAndTokens),
            .deleteIntent(withList.key),
            .leaseIntent(withTokens.key, owner: "node-b", until: t0 + .seconds(90)),
            .renewIntents(owner: "node-b", until: t0 + .seconds(120)),
        ]
    }

    static func roundTrip(_ writes: [StoreWrite]) throws -> [StoreWrite] {
        var out = JournalEncoder()
        JournalCodec.encode(writes, into: &out)
        return try JournalCodec.decode(bytes: out.bytes).get()
    }

    @Test func everyWriteComesBackEqual() throws {
        let writes = Self.everyWrite
        // Every case is covered: a new case must be added here (and to the codec) to pass.
        #expect(Set(writes.map { JournalCodec.tag(of: $0) }).count == 11)
        #expect(try Self.roundTrip(writes) == writes)
        #expect(try Self.roundTrip([]) == [])
    }

    @Test func aCutOrPaddedRecordIsRefusedNotGuessed() throws {
        var out = JournalEncoder()
        JournalCodec.encode(Self.everyWrite, into: &out)
        let bytes = out.bytes
        // Every proper prefix fails (a field runs past the end); so does a trailing byte.
        for length in stride(from: 0, to: bytes.count, by: 7) {
            let prefix = Array(bytes[..<length])
            #expect(throws: JournalFormatError.self) { try JournalCodec.decode(bytes: prefix).get() }
        }
        let padded = bytes + [0]
        #expect(throws: JournalFormatError.self) { try JournalCodec.decode(bytes: padded).get() }
        // An unknown write tag.
        var unknown = JournalEncoder()
        unknown.u32(1)
        unknown.u8(200)
        #expect(throws: JournalFormatError.self) { try JournalCodec.decode(bytes: unknown.bytes).get() }
    }

    @Test func crc32MatchesTheStandardCheckValue() {
        #expect(Array("123456789".utf8).withUnsafeBytes { crc32($0) } == 0xCBF4_3926)
        #expect([UInt8]().withUnsafeBytes { crc32($0) } == 0)
    }
}
