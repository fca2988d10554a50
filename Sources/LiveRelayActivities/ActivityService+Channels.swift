import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import NIOCore

// The broadcast channels' part of the service: the three channel RPCs, and
// the lookup of the channel a Start, Update or End names.
extension ActivityService {
    /// Runs `call` with the app's channel named `channelID` (nil when the
    /// request names none). The caller's permission for the app is checked
    /// first, so a key learns nothing about the channels of apps it may not
    /// act for; an unknown channel, or another app's, is NOT_FOUND before
    /// anything is stored or sent.
    /// The call is counted and timed in the app's call metrics as `method`, a refusal here included.
    func withChannel<Reply: Sendable>(
        _ channelID: String?, appID: String?, method: String, context: CallContext,
        _ call: @escaping @Sendable (ChannelRecord?) -> EventLoopFuture<Reply>
    ) -> EventLoopFuture<Reply> {
        measured(method, appID: appID ?? "", context: context) {
            guard let channelID, !channelID.isEmpty else { return call(nil) }
            if let error = context.principal.checkApp(appID ?? "") { return context.fail(error) }
            guard let channels else { return context.fail(Self.noChannels) }
            return channels.resolve(appID: appID ?? "", channelID: channelID, context: context).flatMap(call)
        }
    }

    // MARK: Channels

    static let noChannels = RPCError(
        .failedPrecondition, "this server keeps no broadcast channels", details: ErrorDetails(reason: "ChannelsNotConfigured"))

    public func createChannel(_ request: CreateChannelRequest, context: CallContext) -> EventLoopFuture<CreateChannelReply> {
        channelCall("CreateChannel", appID: request.appID, context: context) { $0.create(request, app: $1, context: context) }
    }

    public func listChannels(_ request: ListChannelsRequest, context: CallContext) -> EventLoopFuture<ListChannelsReply> {
        channelCall("ListChannels", appID: request.appID, context: context) { $0.list(request, app: $1, context: context) }
    }

    /// The app's event feed reports the deletion once the channel store has it: the two are separate
    /// stores, so the event has a transaction of its own, after; a failure to record it is logged,
    /// and the caller still told the channel is gone (it is).
    public func deleteChannel(_ request: DeleteChannelRequest, context: CallContext) -> EventLoopFuture<DeleteChannelReply> {
        channelCall("DeleteChannel", appID: request.appID, context: context) { channels, app in
            channels.delete(request, app: app, context: context).flatMap { reply in
                let event = FeedEvent(appID: app.id, kind: .channelDeleted, time: self.clock.now(), channelID: request.channelID)
                return self.store.apply(RecordEvents([event]), now: self.clock.now(), on: context.eventLoop)
                    .map { reply }
                    .recover { error in
                        self.logger.warning(
                            "could not record a channel's deletion in the app's event feed",
                            metadata: ["app": "\(app.id)", "error": "\(error)"])
                        return reply
                    }
            }
        }
    }

    /// A channel RPC is a call of its app like the others: it counts against the app's
    /// `calls_per_second` and goes through admission (its share of the calls in progress), so a
    /// tenant cannot flood APNs's channel management or the channel store around its limits.
    private func channelCall<Reply>(
        _ method: String, appID: String, context: CallContext,
        _ call: (ChannelService, App) -> EventLoopFuture<Reply>
    ) -> EventLoopFuture<Reply> {
        measured(method, appID: appID, context: context) {
            switch admit(appID: appID, context: context) {
            case let .failure(error):
                return context.fail(error)
            case let .success(app):
                guard let channels else {
                    return context.fail(Self.noChannels)
                }
                if case let .refused(refusal) = quotas.admitCall(appID: appID, pushes: false, adding: nil) {
                    return context.fail(refusal)
                }
                let ticket: AdmissionTicket
                switch admission.admit(appID: appID, deadline: context.deadline) {
                case let .failure(error): return context.fail(error)
                case let .success(admitted): ticket = admitted
                }
                return call(channels, app).always { [admission] _ in admission.finish(ticket) }
            }
        }
    }
}
