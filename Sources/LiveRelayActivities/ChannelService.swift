import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import Logging
import NIOCore

/// An app's broadcast channels: CreateChannel, ListChannels and
/// DeleteChannel, and the lookup that turns a `channel_id` in a Start, Update
/// or End into a target.
///
/// Two records must agree: APNs's (which alone can make or remove a channel)
/// and LiveRelay's ``ChannelStore`` (which knows each channel's app,
/// environment and storage policy, so a send never names another app's
/// channel and never carries the wrong `apns-expiration`). A create asks APNs
/// first and records after; if the record cannot be written the channel is
/// removed from APNs again, so APNs never keeps a channel nobody can name. A
/// delete asks APNs first and forgets after; a channel APNs no longer knows
/// (`ChannelNotRegistered`) is forgotten all the same.
///
/// The app's limit (``APNsBroadcast/maxChannelsPerApp`` per environment) is
/// checked against the record before APNs is asked, and again in the
/// record's transaction.
public struct ChannelService: Sendable {
    private let store: any ChannelStore
    private let managers: @Sendable (App) -> (any APNsChannelManaging)?
    private let clock: any WallClock
    private let logger: Logger
    private let limit: Int

    /// - Parameters:
    ///   - managers: the APNs channel management of an app's route; nil when the app has no credentials.
    ///   - limit: channels per app and environment (APNs's own limit unless a test lowers it).
    public init(
        store: any ChannelStore, managers: @escaping @Sendable (App) -> (any APNsChannelManaging)?,
        clock: any WallClock = SystemClock(), logger: Logger, limit: Int = APNsBroadcast.maxChannelsPerApp
    ) {
        self.store = store
        self.managers = managers
        self.clock = clock
        self.logger = logger
        self.limit = limit
    }

    /// The largest page ListChannels returns, and the one it returns when none is asked for.
    public static let maxPageSize = 1000
    public static let defaultPageSize = 100

    public func create(_ request: CreateChannelRequest, app: App, context: CallContext) -> EventLoopFuture<CreateChannelReply> {
        guard let environment = request.environment.apns, let policy = request.storagePolicy.apns else {
            return context.fail(RPCError(.invalidArgument, "environment and storage_policy are required"))
        }
        guard let manager = managers(app) else { return context.fail(Self.notConfigured(app)) }
        let limit = self.limit
        return context.eventLoop.makeFutureWithTask { [store] () throws -> Int in
            try await store.count(appID: app.id, environment: environment)
        }
        .flatMapErrorThrowing { throw Self.storeError($0, logger: logger) }
        .flatMap { count -> EventLoopFuture<String> in
            guard count < limit else { return context.fail(Self.limitReached(app, environment, count: count, limit: limit)) }
            return manager.createChannel(bundleID: app.bundleID, environment: environment, storagePolicy: policy)
                .hop(to: context.eventLoop)
                .flatMapErrorThrowing { throw Self.apnsError($0, call: "CreateChannel") }
        }
        .flatMap { id in
            let channel = ChannelRecord(
                appID: app.id, id: id, environment: environment, storagePolicy: policy, createdAt: clock.now())
            return context.eventLoop.makeFutureWithTask { [store] in
                guard BroadcastChannel.isValidID(id) else {
                    throw APNsChannelManagementError.malformedAnswer("a channel id that no call could name (\(id.utf8.count) bytes)")
                }
                try await store.create(channel, limit: limit)
                return channel
            }
            .flatMapError { error in
                // APNs made a channel LiveRelay could not record (or whose id no call could name):
                // remove it, so nobody is left holding it, and the app's APNs limit is not eaten up.
                self.logger.warning(
                    "channel not recorded; deleting it from APNs",
                    metadata: ["app": "\(app.id)", "channel": "\(id)", "error": "\(error)"])
                return manager.deleteChannel(id, bundleID: app.bundleID, environment: environment)
                    .hop(to: context.eventLoop)
                    .flatMapErrorThrowing { deleteError in
                        self.logger.error(
                            "channel left at APNs", metadata: ["app": "\(app.id)", "channel": "\(id)", "error": "\(deleteError)"])
                    }
                    .flatMapThrowing {
                        if let answer = error as? APNsChannelManagementError { throw Self.apnsError(answer, call: "CreateChannel") }
                        throw Self.storeError(error, logger: self.logger, app: app, environment: environment)
                    }
            }
        }
        .map { channel in
            self.logger.info(
                "channel created",
                metadata: [
                    "app": "\(app.id)", "channel": "\(channel.id)", "environment": "\(environment.rawValue)",
                    "storage_policy": "\(policy)",
                ])
            return CreateChannelReply(channel: BroadcastChannel(channel))
        }
    }

    public func list(_ request: ListChannelsRequest, app: App, context: CallContext) -> EventLoopFuture<ListChannelsReply> {
        let size = request.pageSize == 0 ? Self.defaultPageSize : min(Int(request.pageSize), Self.maxPageSize)
        let after = request.pageToken.isEmpty ? nil : request.pageToken
        let environment = request.environment.apns
        return context.eventLoop.makeFutureWithTask { [store] in
            try await store.list(appID: app.id, environment: environment, after: after, limit: size + 1)
        }
        .map { found in
            let page = found.prefix(size)
            return ListChannelsReply(
                channels: page.map(BroadcastChannel.init), nextPageToken: found.count > size ? page.last?.id ?? "" : "")
        }
        .flatMapErrorThrowing { throw Self.storeError($0, logger: logger) }
    }

    public func delete(_ request: DeleteChannelRequest, app: App, context: CallContext) -> EventLoopFuture<DeleteChannelReply> {
        let channelID = request.channelID
        return resolve(appID: app.id, channelID: channelID, context: context).flatMap { channel in
            guard let manager = managers(app) else { return context.fail(Self.notConfigured(app)) }
            return manager.deleteChannel(channel.id, bundleID: app.bundleID, environment: channel.environment)
                .hop(to: context.eventLoop)
                .flatMapError { error in
                    // Gone at APNs already (deleted elsewhere, or expired): forget it here too.
                    if case .rejected(_, "ChannelNotRegistered") = error as? APNsChannelManagementError {
                        return context.eventLoop.makeSucceededVoidFuture()
                    }
                    return context.eventLoop.makeFailedFuture(Self.apnsError(error, call: "DeleteChannel"))
                }
                .flatMap {
                    context.eventLoop.makeFutureWithTask { [store] in
                        try await store.delete(appID: app.id, channelID: channel.id)
                    }
                    .flatMapErrorThrowing { throw Self.storeError($0, logger: logger) }
                }
                .map { _ in
                    self.logger.info("channel deleted", metadata: ["app": "\(app.id)", "channel": "\(channel.id)"])
                    return DeleteChannelReply()
                }
        }
    }

    /// The app's channel of that id, or NOT_FOUND (`ChannelNotFound`): another
    /// app's channel is not found either, so a caller learns nothing of it and nothing is sent.
    public func resolve(appID: String, channelID: String, context: CallContext) -> EventLoopFuture<ChannelRecord> {
        context.eventLoop.makeFutureWithTask { [store] in
            try await store.channel(appID: appID, channelID: channelID)
        }
        .flatMapErrorThrowing { throw Self.storeError($0, logger: logger) }
        .flatMapThrowing { found in
            guard let found else {
                throw RPCError(
                    .notFound, "app \"\(appID)\" has no channel \"\(channelID)\"", details: ErrorDetails(reason: "ChannelNotFound"))
            }
            return found
        }
    }

    // MARK: Errors

    static func notConfigured(_ app: App) -> RPCError {
        RPCError(
            .failedPrecondition, "app \"\(app.id)\" has no APNs credentials to manage channels with",
            details: ErrorDetails(reason: "AppNotConfigured"))
    }

    static func limitReached(_ app: App, _ environment: APNsEnvironment, count: Int, limit: Int) -> RPCError {
        RPCError(
            .resourceExhausted,
            "app \"\(app.id)\" has \(count) \(environment.rawValue) channels, the most APNs keeps is \(limit); delete one first",
            details: ErrorDetails(reason: "ChannelLimitReached"))
    }

    /// APNs's answer to a management call as a status a caller can act on.
    static func apnsError(_ error: any Error, call: String) -> RPCError {
        guard let error = error as? APNsChannelManagementError else {
            return RPCError(.unavailable, "\(call): APNs could not be reached", details: ErrorDetails(reason: "APNsUnreachable"))
        }
        switch error {
        case let .rejected(status, reason):
            let message = "\(call): APNs answered \(status) \(reason)"
            if error.isRetryable {
                return RPCError(.unavailable, message, details: ErrorDetails(retryAfterMS: 1000, reason: reason))
            }
            switch (status, reason) {
            case (_, "CannotCreateChannelConfig"):
                return RPCError(.resourceExhausted, message + " (the app's channel limit at APNs)", details: ErrorDetails(reason: reason))
            case (_, "ChannelNotRegistered"):
                return RPCError(.notFound, message, details: ErrorDetails(reason: reason))
            case (403, _):
                return RPCError(
                    .failedPrecondition, message + " (the app's APNs credentials)", details: ErrorDetails(reason: reason))
            default:
                // FeatureNotEnabled (no broadcast capability), BadChannelId...: nothing a retry changes.
                return RPCError(.failedPrecondition, message, details: ErrorDetails(reason: reason))
            }
        case let .transport(transport):
            return RPCError(
                .unavailable, "\(call): APNs could not be reached (\(transport.reason))",
                details: ErrorDetails(retryAfterMS: 1000, reason: transport.reason))
        case let .malformedAnswer(text):
            return RPCError(
                .unavailable, "\(call): APNs's answer could not be read (\(text)); list the channels before retrying",
                details: ErrorDetails(reason: ErrorDetails.outcomeUnknownReason))
        }
    }

    static func storeError(
        _ error: any Error, logger: Logger, app: App? = nil, environment: APNsEnvironment? = nil
    ) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case let ChannelStoreError.limitReached(count, limit):
            if let app, let environment { return limitReached(app, environment, count: count, limit: limit) }
            return RPCError(.resourceExhausted, "channel limit reached", details: ErrorDetails(reason: "ChannelLimitReached"))
        case ChannelStoreError.alreadyExists:
            return RPCError(.alreadyExists, "the channel is already recorded", details: ErrorDetails(reason: "ChannelExists"))
        case let ChannelStoreError.unavailable(what):
            return RPCError(.unavailable, "the channel store is unavailable (\(what))")
        case let ChannelStoreError.outcomeUnknown(what):
            return RPCError(
                .unavailable, "the channel change may or may not have been made (\(what)); list the channels to learn",
                details: ErrorDetails(reason: ErrorDetails.outcomeUnknownReason))
        default:
            logger.error("channel store failure", metadata: ["error": "\(error)"])
            return RPCError(.internal, "internal error in the channel store")
        }
    }
}

extension BroadcastChannel {
    init(_ channel: ChannelRecord) {
        self.init(
            appID: channel.appID, channelID: channel.id, environment: channel.environment == .sandbox ? .sandbox : .production,
            storagePolicy: channel.storagePolicy == .noStorage ? .noStorage : .mostRecentMessage,
            createdAt: channel.createdAt.seconds)
    }
}

extension ChannelRecord {
    /// The channel as one target of a batch.
    public var target: PushTarget { .channel(id, environment: environment, storagePolicy: storagePolicy) }
}

extension BroadcastStoragePolicy {
    /// APNs's storage policy named; nil for unspecified or unknown values.
    var apns: ChannelStoragePolicy? {
        switch self {
        case .noStorage: .noStorage
        case .mostRecentMessage: .mostRecentMessage
        case .unspecified, .unrecognized: nil
        }
    }
}
