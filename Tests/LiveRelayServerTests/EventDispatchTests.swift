import LiveRelayMessages
import LiveRelayService
import LiveRelayWire
import NIOCore
import NIOEmbedded
import Testing

@testable import LiveRelayServer

/// Answers ListEvents at once with one event and records the requests; the
/// other RPCs are not its business here.
final class EventFeedService: LiveRelayService, @unchecked Sendable {
    private(set) var listed: [ListEventsRequest] = []

    static let event = Event(
        cursor: 8, kind: .callSettled, timeMS: 1_900_000_000_000, activityID: "match-1",
        account: DeliverySummary(targeted: 1, delivered: 1, complete: true))

    func listEvents(_ request: ListEventsRequest, context: CallContext) -> EventLoopFuture<ListEventsReply> {
        listed.append(request)
        return context.eventLoop.makeSucceededFuture(ListEventsReply(events: [Self.event], nextCursor: Self.event.cursor))
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

/// ListEvents through the connection handler: routed to the service, refused
/// like any RPC (permissions, validation), UNIMPLEMENTED from a service that
/// has no event feed, and answered empty by the null service.
@Suite("ListEvents in an EmbeddedChannel")
struct EventDispatchTests {
    static let list = ListEventsRequest(appID: "com.example.app", afterCursor: 7, maxEvents: 10)

    @Test func listEventsReachesTheServiceAndItsReplyIsWritten() throws {
        let service = EventFeedService()
        let connection = try EmbeddedConnection(service: service)
        defer { _ = try? connection.channel.finish(acceptAlreadyClosed: true) }
        _ = try connection.hello()

        try connection.send([request(1, .listEvents, Self.list)])
        let frames = try connection.writtenFrames()
        #expect(frames.count == 1)
        let listed = try #require(frames.first.flatMap { expectResponse($0, id: 1) })
        #expect(try ListEventsReply(serializedBytes: listed) == ListEventsReply(events: [EventFeedService.event], nextCursor: 8))
        #expect(service.listed == [Self.list])
    }

    @Test func aServiceWithoutAnEventFeedAnswersUnimplemented() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()

        try connection.send([request(1, .listEvents, Self.list)])
        let frames = try connection.writtenFrames()
        #expect(frames.count == 1)
        let error = frames.first.flatMap { expectError($0, id: 1, status: .unimplemented) }
        #expect(error?.message == "this server does not serve ListEvents")
        #expect(connection.channel.isActive)
    }

    @Test func theNullServiceAnswersNoEventsAndKeepsTheCursor() throws {
        let connection = try EmbeddedConnection(service: NullLiveRelayService())
        defer { _ = try? connection.channel.finish(acceptAlreadyClosed: true) }
        _ = try connection.hello()

        try connection.send([request(1, .listEvents, Self.list)])
        let frames = try connection.writtenFrames()
        let listed = try #require(frames.first.flatMap { expectResponse($0, id: 1) })
        #expect(try ListEventsReply(serializedBytes: listed) == ListEventsReply(nextCursor: 7))
    }

    @Test func listEventsIsValidatedAndPermissionChecked() throws {
        let service = EventFeedService()
        let connection = try EmbeddedConnection(service: service)
        defer { _ = try? connection.channel.finish(acceptAlreadyClosed: true) }
        _ = try connection.hello(apiKey: TestKeys.pingOnly.plaintext)

        try connection.send([request(1, .listEvents, Self.list)])
        let denied = try connection.writtenFrames()
        #expect(denied.count == 1)
        let error = denied.first.flatMap { expectError($0, id: 1, status: .permissionDenied) }
        #expect(error?.message.contains("ListEvents") == true, "message: \(error?.message ?? "")")

        let second = try EmbeddedConnection(service: service)
        defer { _ = try? second.channel.finish(acceptAlreadyClosed: true) }
        _ = try second.hello()
        try second.send([
            request(1, .listEvents, ListEventsRequest(appID: "com.example.app", waitMS: 60_001)),
            request(2, .listEvents, ListEventsRequest(appID: "com.example.app", maxEvents: 1001)),
        ])
        let invalid = try second.writtenFrames()
        #expect(invalid.count == 2)
        guard invalid.count == 2 else { return }
        for (frame, (id, field)) in zip(invalid, [(1, "wait_ms"), (2, "max_events")]) {
            let violation = try expectError(frame, id: RequestID(UInt32(id)), status: .invalidArgument)
                .map { try ErrorDetails(serializedBytes: $0.details) }
            #expect(violation?.fieldViolations.first?.field == field)
        }
        #expect(service.listed.isEmpty)
    }

    @Test func keysAreGrantedListEventsByName() throws {
        let record = APIKeyAuthenticator.generateKey(apps: .only(["com.example.app"]), allowedMethods: [.listEvents]).record
        #expect(record.allowedMethods == ["ListEvents"])
        #expect(try record.principal().allowedMethods == [.listEvents])
    }
}
