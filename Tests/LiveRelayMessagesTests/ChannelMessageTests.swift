import CLiveRelayProto
import NIOCore
import Testing

@testable import LiveRelayMessages

/// Valid channel requests to mutate one field at a time.
enum ChannelFixtures {
    static let app = "com.example.app"
    static let channel = Fixtures.channel

    static var full: BroadcastChannel {
        BroadcastChannel(
            appID: app, channelID: channel, environment: .production, storagePolicy: .mostRecentMessage,
            createdAt: 1_900_000_000)
    }

    static var create: CreateChannelRequest {
        CreateChannelRequest(appID: app, environment: .sandbox, storagePolicy: .noStorage)
    }

    static var list: ListChannelsRequest {
        ListChannelsRequest(appID: app, environment: .production, pageSize: 50, pageToken: "c2")
    }

    static var delete: DeleteChannelRequest { DeleteChannelRequest(appID: app, channelID: channel) }
}

@Suite struct ChannelMessageTests {
    typealias F = ChannelFixtures

    /// Encodes, checks the C struct protobuf-c unpacks, decodes (validating requests),
    /// compares, and checks that re-encoding is byte-identical.
    func roundTrip<M: LiveRelayMessage & CMessageConvertible>(_ value: M) throws {
        let bytes = value.serializedBytes()
        #expect(TestWire.check(bytes, M.cDescriptor), "protobuf_c_message_check failed for \(M.protoName)")
        let decoded = try M(serializedBytes: bytes)
        #expect(decoded == value)
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        value.serialize(into: &buffer)
        #expect(Array(buffer.readableBytesView) == bytes)
        #expect(decoded.serializedBytes() == bytes)
    }

    // MARK: round trips

    @Test func channelMessagesRoundTrip() throws {
        try roundTrip(F.full)
        try roundTrip(BroadcastChannel(storagePolicy: .unrecognized(9), createdAt: -1))
        try roundTrip(F.create)
        try roundTrip(CreateChannelReply(channel: F.full))
        try roundTrip(CreateChannelReply(channel: BroadcastChannel()))
        try roundTrip(CreateChannelReply())
        try roundTrip(F.list)
        try roundTrip(ListChannelsRequest(appID: F.app))
        try roundTrip(
            ListChannelsReply(
                channels: (0..<300).map { BroadcastChannel(appID: F.app, channelID: "Y2hhbm5lbC0\($0)", createdAt: Int64($0)) },
                nextPageToken: "next-✓"))
        try roundTrip(ListChannelsReply())
        try roundTrip(F.delete)
        try roundTrip(DeleteChannelReply())
    }

    @Test func newActivityFieldsRoundTrip() throws {
        // The fixtures set every field, the new ones included.
        try roundTrip(Fixtures.start)
        try roundTrip(Fixtures.update)
        try roundTrip(Fixtures.end)
        try roundTrip(Fixtures.summary)
        #expect(Fixtures.start.channelID != nil && Fixtures.update.channelOnly != nil && Fixtures.end.staleDate != nil)
    }

    // MARK: the encoding, computed by hand from the protobuf encoding spec

    @Test func channelBytes() {
        let channel = BroadcastChannel(appID: "a", channelID: "Yw==", environment: .sandbox, storagePolicy: .noStorage, createdAt: 300)
        // 0a 01 'a' | 12 04 'Y' 'w' '=' '=' | 18 01 | 20 01 | 28 ac 02
        #expect(
            channel.serializedBytes() == [
                0x0A, 0x01, 0x61, 0x12, 0x04, 0x59, 0x77, 0x3D, 0x3D, 0x18, 0x01, 0x20, 0x01, 0x28, 0xAC, 0x02,
            ])
        // proto3: zero values are left out, an empty message is nothing, a present empty channel is 0a 00.
        #expect(BroadcastChannel().serializedBytes() == [])
        #expect(DeleteChannelReply().serializedBytes() == [])
        #expect(CreateChannelReply(channel: BroadcastChannel()).serializedBytes() == [0x0A, 0x00])
        #expect(ListChannelsRequest(appID: "a", pageSize: 1000).serializedBytes() == [0x0A, 0x01, 0x61, 0x18, 0xE8, 0x07])
    }

    @Test func newFieldNumbers() {
        // StartActivityRequest 14 (string), 15 and 16 (varint): tags 0x72, 0x78, 0x80 0x01.
        let start = StartActivityRequest(channelID: "Yw==", inputPushToken: false, strictPriorityBudget: true)
        #expect(start.serializedBytes() == [0x72, 0x04, 0x59, 0x77, 0x3D, 0x3D, 0x78, 0x00, 0x80, 0x01, 0x01])
        // UpdateActivityRequest 12, 13, 14.
        let update = UpdateActivityRequest(channelID: "Yw==", channelOnly: true, strictPriorityBudget: false)
        #expect(update.serializedBytes() == [0x62, 0x04, 0x59, 0x77, 0x3D, 0x3D, 0x68, 0x01, 0x70, 0x00])
        // EndActivityRequest 9 (int64), 10 (double), 11, 12, 13.
        let end = EndActivityRequest(staleDate: 1, relevanceScore: 1, channelID: "Yw==", channelOnly: false, strictPriorityBudget: true)
        #expect(
            end.serializedBytes() == [
                0x48, 0x01, 0x51, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x5A, 0x04, 0x59, 0x77, 0x3D, 0x3D, 0x60, 0x00, 0x68, 0x01,
            ])
        // DeliverySummary 11.
        #expect(DeliverySummary(downgraded: 3).serializedBytes() == [0x58, 0x03])
    }

    @Test func absentNewFieldsStayAbsent() throws {
        // An older client's request decodes with every new field nil, and re-encodes to the same bytes.
        let old = StartActivityRequest(
            appID: F.app, activityID: "a", attributesType: "T", attributesJSON: "{}", contentStateJSON: "{}",
            targets: Targets(allDevices: true))
        let decoded = try StartActivityRequest(serializedBytes: old.serializedBytes())
        #expect(decoded.channelID == nil && decoded.inputPushToken == nil && decoded.strictPriorityBudget == nil)
        let end = try EndActivityRequest(serializedBytes: EndActivityRequest(appID: F.app, activityID: "a").serializedBytes())
        #expect(end.staleDate == nil && end.relevanceScore == nil && end.channelID == nil && end.channelOnly == nil)
        #expect(DeliverySummary(complete: true).serializedBytes() == [0x50, 0x01])
    }

    // MARK: methods and keys

    @Test func channelMethods() {
        #expect(LiveRelayMethod.createChannel.rawValue == "/liverelay.v1.LiveRelay/CreateChannel")
        #expect(LiveRelayMethod.listChannels.requestProtoName == "liverelay.v1.ListChannelsRequest")
        #expect(LiveRelayMethod.deleteChannel.replyProtoName == "liverelay.v1.DeleteChannelReply")
        #expect(LiveRelayMethod(methodName: "CreateChannel") == .createChannel)
        #expect(LiveRelayMethod(methodName: "ListChannels") == .listChannels)
        #expect(LiveRelayMethod(methodName: "DeleteChannel") == .deleteChannel)
    }

    @Test func apiKeysMayBeGrantedTheChannelMethods() {
        let key = Admin.CreateAPIKeyRequest(appIDs: [F.app], allowedMethods: ["CreateChannel", "ListChannels", "DeleteChannel"])
        #expect(validationError(key) == nil)
        let unknown = Admin.CreateAPIKeyRequest(appIDs: [F.app], allowedMethods: ["CreateChannels"])
        #expect(validationError(unknown)?.field == "allowed_methods[0]")
    }
}

/// One test per channel rule: each breaks exactly one rule of a valid fixture.
@Suite struct ChannelValidationTests {
    typealias F = ChannelFixtures

    @Test func fixturesAreValid() {
        #expect(validationError(F.create) == nil)
        #expect(validationError(F.list) == nil)
        #expect(validationError(F.delete) == nil)
        #expect(validationError(Fixtures.start) == nil)
        #expect(validationError(Fixtures.update) == nil)
        #expect(validationError(Fixtures.end) == nil)
    }

    // MARK: app_id

    @Test func appIDRequired() {
        var create = F.create; create.appID = ""
        var list = F.list; list.appID = ""
        var delete = F.delete; delete.appID = ""
        for request in [create, list, delete] as [any LiveRelayMessage] {
            #expect(validationError(request) == MessageError(.missing, field: "app_id"), "\(type(of: request).protoName)")
        }
        create.appID = "com/example"
        #expect(validationError(create)?.kind == .invalidValue)
    }

    // MARK: CreateChannel

    @Test func createNeedsAKnownEnvironment() {
        var create = F.create; create.environment = .unspecified
        #expect(validationError(create) == MessageError(.missing, field: "environment"))
        create.environment = .unrecognized(3)
        #expect(validationError(create) == MessageError(.enumOutOfRange(3), field: "environment"))
        create.environment = .production
        #expect(validationError(create) == nil)
    }

    @Test func createNeedsAKnownStoragePolicy() {
        var create = F.create; create.storagePolicy = .unspecified
        #expect(validationError(create) == MessageError(.missing, field: "storage_policy"))
        create.storagePolicy = BroadcastStoragePolicy(rawValue: 3)
        #expect(validationError(create) == MessageError(.enumOutOfRange(3), field: "storage_policy"))
        create.storagePolicy = .mostRecentMessage
        #expect(validationError(create) == nil)
    }

    // MARK: ListChannels

    @Test func listEnvironmentMayBeUnspecifiedButNotUnknown() {
        var list = F.list; list.environment = .unspecified
        #expect(validationError(list) == nil)
        list.environment = .unrecognized(7)
        #expect(validationError(list) == MessageError(.enumOutOfRange(7), field: "environment"))
    }

    @Test func listPageSizeAtMost1000() {
        var list = F.list; list.pageSize = 1001
        #expect(validationError(list) == MessageError(.outOfRange, field: "page_size", detail: "1001 is outside 0...1000"))
        list.pageSize = 1000
        #expect(validationError(list) == nil)
        list.pageSize = 0
        #expect(validationError(list) == nil)
        #expect(list.effectivePageSize == 100)
    }

    @Test func listPageTokenAtMost256Bytes() {
        var list = F.list; list.pageToken = String(repeating: "t", count: 257)
        #expect(validationError(list) == MessageError(.tooLong(length: 257, max: 256), field: "page_token"))
        list.pageToken = String(repeating: "t", count: 256)
        #expect(validationError(list) == nil)
        list.pageToken = "p\u{0}"
        #expect(validationError(list) == MessageError(.embeddedNUL, field: "page_token"))
    }

    // MARK: DeleteChannel and every channel_id

    @Test func deleteNeedsAChannelID() {
        var delete = F.delete; delete.channelID = ""
        #expect(validationError(delete) == MessageError(.missing, field: "channel_id"))
    }

    @Test func channelIDIsBase64OfAtMost128Characters() {
        var delete = F.delete
        for good in ["A", "abcXYZ019+/=", "url-safe_id", String(repeating: "Q", count: 128)] {
            delete.channelID = good
            #expect(validationError(delete) == nil, "\(good)")
        }
        for bad in ["has space", "dot.", "é", "a\u{0}", "a:b", "a\nb", "%2F"] {
            delete.channelID = bad
            #expect(validationError(delete)?.field == "channel_id", "\(bad.debugDescription)")
            #expect(validationError(delete)?.kind == .invalidValue, "\(bad.debugDescription)")
        }
        delete.channelID = String(repeating: "Q", count: 129)
        #expect(validationError(delete) == MessageError(.tooLong(length: 129, max: 128), field: "channel_id"))
    }

    @Test func activityRequestsCheckTheirChannelID() {
        var start = Fixtures.start; start.channelID = "not base64!"
        var update = Fixtures.update; update.channelID = String(repeating: "Q", count: 129)
        var end = Fixtures.end; end.channelID = "a b"
        #expect(validationError(start)?.field == "channel_id")
        #expect(validationError(update)?.kind == .tooLong(length: 129, max: 128))
        #expect(validationError(end)?.field == "channel_id")
    }

    @Test func presentButEmptyChannelIDIsRefused() {
        var start = Fixtures.start; start.channelID = ""
        #expect(
            validationError(start) == MessageError(.invalidValue, field: "channel_id", detail: "empty: leave it out to name no channel"))
        var update = Fixtures.update; update.channelID = ""; update.channelOnly = nil
        #expect(validationError(update)?.field == "channel_id")
    }

    // MARK: input_push_token, channel_only

    @Test func noInputPushTokenNeedsAChannel() {
        var start = Fixtures.start; start.channelID = nil
        #expect(validationError(start)?.field == "input_push_token")
        #expect(validationError(start)?.kind == .invalidValue)
        start.inputPushToken = true
        #expect(validationError(start) == nil)
        start.inputPushToken = nil  // absent means true
        #expect(validationError(start) == nil)
    }

    @Test func channelOnlyNeedsAChannel() {
        var update = Fixtures.update; update.channelID = nil
        #expect(validationError(update)?.field == "channel_only")
        update.channelOnly = false
        #expect(validationError(update) == nil)
        var end = Fixtures.end; end.channelOnly = true; end.channelID = nil
        #expect(validationError(end)?.field == "channel_only")
        end.channelID = Fixtures.channel
        #expect(validationError(end) == nil)
    }

    // MARK: EndActivity's stale_date and relevance_score, as on an update

    @Test func endStaleDateAndRelevanceScore() {
        var end = Fixtures.end; end.staleDate = -1
        #expect(validationError(end) == MessageError(.outOfRange, field: "stale_date", detail: "must not be negative"))
        end.staleDate = 0
        #expect(validationError(end) == nil)
        end.relevanceScore = .nan
        #expect(validationError(end) == MessageError(.outOfRange, field: "relevance_score", detail: "must be finite"))
        end.relevanceScore = -.infinity
        #expect(validationError(end)?.field == "relevance_score")
    }

    // MARK: decoding runs the rules

    @Test func decodingValidates() {
        let bad = DeleteChannelRequest(appID: F.app, channelID: "no/good?").serializedBytes()
        #expect(expectError(DeleteChannelRequest.self, bad)?.field == "channel_id")
        let noChannel = UpdateActivityRequest(appID: F.app, activityID: "a", contentStateJSON: "{}", channelOnly: true)
        #expect(expectError(UpdateActivityRequest.self, noChannel.serializedBytes())?.field == "channel_only")
        #expect(expectError(CreateChannelRequest.self, CreateChannelRequest(appID: F.app).serializedBytes())?.field == "environment")
    }

    @Test func repliesRefuseOnlyNUL() {
        let nul = ListChannelsReply(channels: [BroadcastChannel(), BroadcastChannel(channelID: "x\u{0}")])
        #expect(validationError(nul)?.field == "channels[1].channel_id")
        #expect(validationError(CreateChannelReply(channel: BroadcastChannel(appID: "\u{0}")))?.field == "channel.app_id")
        #expect(validationError(ListChannelsReply(nextPageToken: "\u{0}"))?.field == "next_page_token")
        // Replies do not run the request rules: any channel id a server sends is read as is.
        #expect(validationError(CreateChannelReply(channel: BroadcastChannel(channelID: "not base64!"))) == nil)
    }
}
