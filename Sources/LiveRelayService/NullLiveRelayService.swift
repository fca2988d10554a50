import LiveRelayMessages
import NIOCore

/// Answers every call at once with an empty OK reply, on the caller's loop
/// (the channel RPCs and ListEvents too, where LiveRelayService's defaults answer UNIMPLEMENTED).
///
/// It measures the protocol's ceiling (framing, TLS, decoding, validation,
/// dispatch) with no domain work behind it: `liverelay serve --null-service`.
public struct NullLiveRelayService: LiveRelayService {
    public init() {}

    public func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        context.eventLoop.makeSucceededFuture(RegisterTokenReply())
    }

    public func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        context.eventLoop.makeSucceededFuture(StartActivityReply())
    }

    public func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        context.eventLoop.makeSucceededFuture(UpdateActivityReply())
    }

    public func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.eventLoop.makeSucceededFuture(EndActivityReply())
    }

    public func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        context.eventLoop.makeSucceededFuture(PingReply(payload: request.payload))
    }

    public func createChannel(_ request: CreateChannelRequest, context: CallContext) -> EventLoopFuture<CreateChannelReply> {
        context.eventLoop.makeSucceededFuture(CreateChannelReply())
    }

    public func listChannels(_ request: ListChannelsRequest, context: CallContext) -> EventLoopFuture<ListChannelsReply> {
        context.eventLoop.makeSucceededFuture(ListChannelsReply())
    }

    public func deleteChannel(_ request: DeleteChannelRequest, context: CallContext) -> EventLoopFuture<DeleteChannelReply> {
        context.eventLoop.makeSucceededFuture(DeleteChannelReply())
    }

    /// No events, ever: the cursor stays where the caller left it.
    public func listEvents(_ request: ListEventsRequest, context: CallContext) -> EventLoopFuture<ListEventsReply> {
        context.eventLoop.makeSucceededFuture(ListEventsReply(nextCursor: request.afterCursor))
    }
}
