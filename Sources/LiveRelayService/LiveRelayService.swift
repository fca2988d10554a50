import LiveRelayMessages
import LiveRelayWire
import NIOCore

/// What the RPC server dispatches decoded, validated requests to.
///
/// The methods return `EventLoopFuture`s rather than being `async` so that a
/// request can be answered without a hop into Swift concurrency: an in-memory
/// or null implementation completes on the connection's event loop at once,
/// and a store that batches commits on its own thread completes the promise
/// from there. A failed future carries an ``RPCError`` (any other error is
/// reported to the caller as INTERNAL without its text).
///
/// Implementations must check `context.principal` may act on the request's
/// `app_id` (PERMISSION_DENIED otherwise): the server has already checked
/// that the key may call the method at all.
public protocol LiveRelayService: Sendable {
    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply>
    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply>
    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply>
    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply>
    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply>
    /// Creates a broadcast channel with APNs and keeps it in the store.
    func createChannel(_ request: CreateChannelRequest, context: CallContext) -> EventLoopFuture<CreateChannelReply>
    /// The app's broadcast channels, a page at a time.
    func listChannels(_ request: ListChannelsRequest, context: CallContext) -> EventLoopFuture<ListChannelsReply>
    /// Deletes a broadcast channel at APNs and in the store.
    func deleteChannel(_ request: DeleteChannelRequest, context: CallContext) -> EventLoopFuture<DeleteChannelReply>
    /// The app's event feed after a cursor: a long poll, answered as soon as
    /// events follow the cursor or when the request's wait ends without any.
    func listEvents(_ request: ListEventsRequest, context: CallContext) -> EventLoopFuture<ListEventsReply>
}

/// The broadcast channel RPCs answer UNIMPLEMENTED unless a service provides
/// them: they came after the service protocol, and a service that does not
/// manage channels (the null service, test doubles, a build without them)
/// must still compile and say so to the caller rather than fail INTERNAL.
extension LiveRelayService {
    public func createChannel(_ request: CreateChannelRequest, context: CallContext) -> EventLoopFuture<CreateChannelReply> {
        context.fail(.channelsUnimplemented(.createChannel))
    }

    public func listChannels(_ request: ListChannelsRequest, context: CallContext) -> EventLoopFuture<ListChannelsReply> {
        context.fail(.channelsUnimplemented(.listChannels))
    }

    public func deleteChannel(_ request: DeleteChannelRequest, context: CallContext) -> EventLoopFuture<DeleteChannelReply> {
        context.fail(.channelsUnimplemented(.deleteChannel))
    }
}

/// ListEvents answers UNIMPLEMENTED unless a service provides it, for the same
/// reason as the channel RPCs: a service without an event feed (test doubles,
/// a build without one) must still compile and tell the caller so rather than
/// fail INTERNAL.
extension LiveRelayService {
    public func listEvents(_ request: ListEventsRequest, context: CallContext) -> EventLoopFuture<ListEventsReply> {
        context.fail(RPCError(.unimplemented, "this server does not serve \(LiveRelayMethod.listEvents.methodName)"))
    }
}

extension RPCError {
    /// UNIMPLEMENTED for a channel RPC this service does not provide.
    static func channelsUnimplemented(_ method: LiveRelayMethod) -> RPCError {
        RPCError(.unimplemented, "this server does not serve \(method.methodName): broadcast channels are not enabled")
    }
}

/// Everything a service needs to know about the call besides its message.
public struct CallContext: Sendable {
    /// The authenticated caller.
    public var principal: Principal
    /// The loop of the caller's connection: complete futures here to avoid a hop.
    public var eventLoop: any EventLoop
    /// Work not started by then must not be started (the caller has been told DEADLINE_EXCEEDED).
    public var deadline: NIODeadline?
    /// The request id on its connection, for logs.
    public var requestID: RequestID
    /// Set when the caller cancelled or the deadline passed; long work checks it between steps.
    public var cancellation: CancellationFlag

    public init(
        principal: Principal,
        eventLoop: any EventLoop,
        deadline: NIODeadline?,
        requestID: RequestID,
        cancellation: CancellationFlag = CancellationFlag()
    ) {
        self.principal = principal
        self.eventLoop = eventLoop
        self.deadline = deadline
        self.requestID = requestID
        self.cancellation = cancellation
    }

    /// A failed future with `error`, on this call's loop.
    public func fail<T>(_ error: RPCError) -> EventLoopFuture<T> {
        eventLoop.makeFailedFuture(error)
    }
}

/// The identity behind an API key: which apps it may act for and which RPCs it may call.
public struct Principal: Sendable, Hashable {
    /// The key's public id (never the secret), for logs and audit.
    public var keyID: String
    /// The apps this key may act for.
    public var apps: AppScope
    /// RPCs this key may call.
    public var allowedMethods: Set<LiveRelayMethod>
    /// An admin key: it manages the tenant registry (liverelay.admin.v1) and
    /// calls no activity RPC (its `apps` and `allowedMethods` are empty).
    public var isAdmin: Bool

    public init(keyID: String, apps: AppScope, allowedMethods: Set<LiveRelayMethod>, isAdmin: Bool = false) {
        self.keyID = keyID
        self.apps = apps
        self.allowedMethods = allowedMethods
        self.isAdmin = isAdmin
    }

    /// Whether this key may act for `appID`.
    public func mayActFor(appID: String) -> Bool {
        switch apps {
        case .all: true
        case let .only(ids): ids.contains(appID)
        }
    }

    /// PERMISSION_DENIED naming the app, or nil when allowed: the one wording every service uses.
    public func checkApp(_ appID: String) -> RPCError? {
        mayActFor(appID: appID)
            ? nil
            : RPCError(.permissionDenied, "API key \(keyID) may not act for app \"\(appID)\"")
    }
}

/// The apps a key may act for.
///
/// An operator key that may act for every app is said so by name: an empty
/// list meaning "everything" turned a forgotten field into the widest grant.
public enum AppScope: Sendable, Hashable {
    /// Every app, present and future (an operator key).
    case all
    /// These apps only; an empty set allows none.
    case only(Set<String>)
}

/// A cancellation signal shared between the connection and the work it dispatched.
///
/// A class with an atomic-free flag is enough: it is set and read on the
/// connection's event loop, and work on other threads only reads it as a hint.
public final class CancellationFlag: @unchecked Sendable {
    private var _isCancelled = false
    public init() {}
    public var isCancelled: Bool { _isCancelled }
    public func cancel() { _isCancelled = true }
}
