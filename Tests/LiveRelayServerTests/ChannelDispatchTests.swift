import LiveRelayMessages
import LiveRelayService
import LiveRelayWire
import NIOCore
import NIOEmbedded
import Testing

@testable import LiveRelayServer

/// Answers the broadcast channel RPCs at once and records what it was given;
/// the activity RPCs are not its business here.
final class ChannelService: LiveRelayService, @unchecked Sendable {
    private(set) var created: [CreateChannelRequest] = []
    private(set) var listed: [ListChannelsRequest] = []
    private(set) var deleted: [DeleteChannelRequest] = []

    static let channel = BroadcastChannel(
        appID: "com.example.app", channelID: "Y2hhbm5lbA==", environment: .sandbox, storagePolicy: .noStorage, createdAt: 7)

    func createChannel(_ request: CreateChannelRequest, context: CallContext) -> EventLoopFuture<CreateChannelReply> {
        created.append(request)
        return context.eventLoop.makeSucceededFuture(CreateChannelReply(channel: Self.channel))
    }

    func listChannels(_ request: ListChannelsRequest, context: CallContext) -> EventLoopFuture<ListChannelsReply> {
        listed.append(request)
        return context.eventLoop.makeSucceededFuture(ListChannelsReply(channels: [Self.channel], nextPageToken: "next"))
    }

    func deleteChannel(_ request: DeleteChannelRequest, context: CallContext) -> EventLoopFuture<DeleteChannelReply> {
        deleted.append(request)
        return context.eventLoop.makeSucceededFuture(DeleteChannelReply())
    }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        context.fail(RPCError(.unimplemented, "not in this test"))
    }

    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        context.fail(RPCError(.unimplemented, "not in this test"))
    }

    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        context.fail(RPCError(.unimplemented, "not in this test"))
    }

    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.fail(RPCError(.unimplemented, "not in this test"))
    }

    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        context.eventLoop.makeSucceededFuture(PingReply(payload: request.payload))
    }
}

/// The broadcast channel RPCs through the connection handler: routed to the
/// service's channel methods, refused like any RPC (permissions, validation),
/// and UNIMPLEMENTED from a service that does not provide them.
@Suite("Channel RPCs in an EmbeddedChannel")
struct ChannelDispatchTests {
    static let create = CreateChannelRequest(appID: "com.example.app", environment: .sandbox, storagePolicy: .noStorage)
    static let list = ListChannelsRequest(appID: "com.example.app", pageSize: 10)
    static let delete = DeleteChannelRequest(appID: "com.example.app", channelID: "Y2hhbm5lbA==")

    @Test func theChannelRPCsReachTheServiceAndItsRepliesAreWritten() throws {
        let service = ChannelService()
        let connection = try EmbeddedConnection(service: service)
        defer { _ = try? connection.channel.finish(acceptAlreadyClosed: true) }
        _ = try connection.hello()

        try connection.send([
            request(1, .createChannel, Self.create), request(2, .listChannels, Self.list), request(3, .deleteChannel, Self.delete),
        ])
        let frames = try connection.writtenFrames()
        #expect(frames.count == 3)
        guard frames.count == 3 else { return }
        let created = try #require(expectResponse(frames[0], id: 1))
        #expect(try CreateChannelReply(serializedBytes: created).channel == ChannelService.channel)
        let listed = try #require(expectResponse(frames[1], id: 2))
        let expected = ListChannelsReply(channels: [ChannelService.channel], nextPageToken: "next")
        #expect(try ListChannelsReply(serializedBytes: listed) == expected)
        let deleted = try #require(expectResponse(frames[2], id: 3))
        #expect(try DeleteChannelReply(serializedBytes: deleted) == DeleteChannelReply())
        #expect(service.created == [Self.create] && service.listed == [Self.list] && service.deleted == [Self.delete])
    }

    @Test func aServiceWithoutChannelsAnswersUnimplemented() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()

        try connection.send([
            request(1, .createChannel, Self.create), request(2, .listChannels, Self.list), request(3, .deleteChannel, Self.delete),
        ])
        let frames = try connection.writtenFrames()
        #expect(frames.count == 3)
        guard frames.count == 3 else { return }
        for (frame, (id, name)) in zip(frames, [(1, "CreateChannel"), (2, "ListChannels"), (3, "DeleteChannel")]) {
            let error = expectError(frame, id: RequestID(UInt32(id)), status: .unimplemented)
            #expect(error?.message.contains(name) == true, "message: \(error?.message ?? "")")
        }
        #expect(connection.channel.isActive)
    }

    @Test func channelRequestsAreValidatedAndPermissionsChecked() throws {
        let service = ChannelService()
        let connection = try EmbeddedConnection(service: service)
        defer { _ = try? connection.channel.finish(acceptAlreadyClosed: true) }
        _ = try connection.hello(apiKey: TestKeys.pingOnly.plaintext)

        try connection.send([request(1, .createChannel, Self.create)])
        let denied = try connection.writtenFrames()
        #expect(denied.count == 1)
        let error = denied.first.flatMap { expectError($0, id: 1, status: .permissionDenied) }
        #expect(error?.message.contains("CreateChannel") == true, "message: \(error?.message ?? "")")
        #expect(service.created.isEmpty)

        let other = ChannelService()
        let second = try EmbeddedConnection(service: other)
        defer { _ = try? second.channel.finish(acceptAlreadyClosed: true) }
        _ = try second.hello()
        try second.send([request(1, .deleteChannel, DeleteChannelRequest(appID: "com.example.app", channelID: "not base64!"))])
        let invalid = try second.writtenFrames()
        #expect(invalid.count == 1)
        let violation = try invalid.first.flatMap { expectError($0, id: 1, status: .invalidArgument) }
            .map { try ErrorDetails(serializedBytes: $0.details) }
        #expect(violation?.fieldViolations.first?.field == "channel_id")
        #expect(other.deleted.isEmpty)
    }

    @Test func keysAreGrantedTheChannelMethodsByName() throws {
        let record = APIKeyAuthenticator.generateKey(
            apps: .only(["com.example.app"]), allowedMethods: [.createChannel, .listChannels, .deleteChannel]
        ).record
        #expect(record.allowedMethods == ["CreateChannel", "DeleteChannel", "ListChannels"])
        let principal = try record.principal()
        #expect(principal.allowedMethods == [.createChannel, .listChannels, .deleteChannel])
    }
}
