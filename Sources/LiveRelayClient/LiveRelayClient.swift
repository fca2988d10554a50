import LiveRelayMessages
import LiveRelayWire
import Logging
import NIOCore
import NIOPosix

/// A LiveRelay client: a pool of pipelined connections to one server.
///
/// Callers see one call at a time; underneath, calls from every task share a
/// few connections, each carrying up to the server's MAX_REQUESTS_IN_FLIGHT
/// at once, because a connection per call (or a call at a time per
/// connection) would cost a round trip and a TLS handshake each.
///
/// Failures that certainly did not reach the server's service (GOAWAY, a
/// connection that broke before sending) are resent on another connection
/// without the caller noticing. Failures of unknown outcome are the caller's
/// to decide unless `RetryPolicy.retryIdempotentCalls` is set, and even then
/// only idempotent calls are resent (see docs/PROTOCOL.md section 9).
///
/// A client lives for the duration of ``withClient(configuration:eventLoopGroup:logger:isolation:_:)``,
/// which closes its connections when the body returns or throws; share that
/// one client between the tasks of the body.
public final class LiveRelayClient: Sendable {
    public let configuration: Configuration
    let pool: ConnectionPool

    /// For this package's load harness and tests; callers use `withClient`, which cannot leak connections.
    /// - Parameter eventLoopGroup: where connections live; nil uses NIO's
    ///   shared singleton group, which needs no shutting down.
    package init(configuration: Configuration, eventLoopGroup: (any EventLoopGroup)? = nil, logger: Logger) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "server"] = "\(configuration.host):\(configuration.port)"
        self.pool = ConnectionPool(
            configuration: configuration,
            group: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton,
            logger: logger
        )
    }

    /// Runs `body` with a client of the server in `configuration`, then shuts
    /// the client down, whether `body` returned or threw: calls not yet sent
    /// fail, sent ones may finish (at most `configuration.shutdownGracePeriod`),
    /// and every connection is closed before this returns.
    ///
    /// Connections open on the first call, not before, so a server that is
    /// down shows up as the first call's UNAVAILABLE error.
    ///
    /// - Parameters:
    ///   - eventLoopGroup: where connections live; nil (the default) uses
    ///     SwiftNIO's shared group, which needs no shutting down.
    ///   - logger: where connection events go, most of them at debug level.
    public static func withClient<Result, Failure: Error>(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger = Logger(label: "liverelay.client"),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (LiveRelayClient) async throws(Failure) -> Result
    ) async throws(Failure) -> Result {
        let client = LiveRelayClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        let result: Swift.Result<Result, Failure>
        do {
            result = .success(try await body(client))
        } catch {
            result = .failure(error)
        }
        await client.shutdown()
        return try result.get()
    }

    /// One call as raw bytes, completing on the connection's event loop with
    /// no hop into Swift concurrency: for the load harness, which encodes
    /// messages itself.
    ///
    /// - Parameters:
    ///   - timeout: nil applies `configuration.defaultTimeout`.
    ///   - idempotent: whether resending after an unknown outcome is harmless
    ///     (a request with an idempotency key, RegisterToken, Ping); only then
    ///     may `RetryPolicy.retryIdempotentCalls` resend it.
    /// - Returns: the reply's protobuf bytes, or a failed future with a `LiveRelayClientError`.
    package func call(
        _ method: LiveRelayMethod,
        payload: ByteBuffer,
        timeout: TimeAmount? = nil,
        idempotent: Bool = false
    ) -> EventLoopFuture<ByteBuffer> {
        self.pool.startCall(
            method: method.rawValue, payload: payload, timeout: timeout ?? self.configuration.defaultTimeout.map { TimeAmount($0) },
            idempotent: idempotent
        ).promise.futureResult
    }

    /// Registers, rotates or removes an APNs token. Idempotent by nature.
    public func registerToken(
        _ request: RegisterTokenRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> RegisterTokenReply {
        try await self.unary(.registerToken, request, idempotent: true, timeout: timeout)
    }

    /// Starts an activity through push-to-start tokens. Idempotent when it carries an idempotency key.
    public func startActivity(
        _ request: StartActivityRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> StartActivityReply {
        try await self.unary(.startActivity, request, idempotent: request.idempotencyKey != nil, timeout: timeout)
    }

    /// Sends a new content state. Idempotent when it carries an idempotency key.
    public func updateActivity(
        _ request: UpdateActivityRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> UpdateActivityReply {
        try await self.unary(.updateActivity, request, idempotent: request.idempotencyKey != nil, timeout: timeout)
    }

    /// Ends an activity. Idempotent when it carries an idempotency key.
    public func endActivity(
        _ request: EndActivityRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> EndActivityReply {
        try await self.unary(.endActivity, request, idempotent: request.idempotencyKey != nil, timeout: timeout)
    }

    /// Goes through authentication and the service (unlike a PING frame), so
    /// it proves the whole path works. Read-only.
    public func ping(_ request: PingRequest = PingRequest(), timeout: Duration? = nil) async throws(LiveRelayClientError) -> PingReply {
        try await self.unary(.ping, request, idempotent: true, timeout: timeout)
    }

    /// Creates a broadcast channel. Not resent after an unknown outcome: it
    /// carries no idempotency key, and a second channel would be made (list
    /// the channels to find out).
    public func createChannel(
        _ request: CreateChannelRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> CreateChannelReply {
        try await self.unary(.createChannel, request, idempotent: false, timeout: timeout)
    }

    /// One page of the app's broadcast channels. Read-only.
    public func listChannels(
        _ request: ListChannelsRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> ListChannelsReply {
        try await self.unary(.listChannels, request, idempotent: true, timeout: timeout)
    }

    /// Deletes a broadcast channel. Not resent automatically: a repeat of a
    /// delete that took effect answers NOT_FOUND, which would hide the success.
    public func deleteChannel(
        _ request: DeleteChannelRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> DeleteChannelReply {
        try await self.unary(.deleteChannel, request, idempotent: false, timeout: timeout)
    }

    /// The app's events after `request.afterCursor`. Read-only, so resent
    /// after an unknown outcome. With a `waitMS`, the server holds the call
    /// until an event comes or the wait ends: the timeout must exceed the wait.
    public func listEvents(
        _ request: ListEventsRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> ListEventsReply {
        try await self.unary(.listEvents, request, idempotent: true, timeout: timeout)
    }

    // MARK: The admin API (liverelay.admin.v1.Admin), with an admin key

    /// Creates an app. Not resent after an unknown outcome.
    public func createApp(
        _ request: Admin.CreateAppRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.AppReply {
        try await self.admin(.createApp, request, timeout: timeout)
    }

    /// Changes an app's settings or quotas.
    public func updateApp(
        _ request: Admin.UpdateAppRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.AppReply {
        try await self.admin(.updateApp, request, timeout: timeout)
    }

    /// One app. Read-only.
    public func getApp(
        _ request: Admin.GetAppRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.AppReply {
        try await self.admin(.getApp, request, timeout: timeout)
    }

    /// One page of the apps, in id order. Read-only.
    public func listApps(
        _ request: Admin.ListAppsRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.ListAppsReply {
        try await self.admin(.listApps, request, timeout: timeout)
    }

    /// Disables an app.
    public func disableApp(
        _ request: Admin.DisableAppRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.AppReply {
        try await self.admin(.disableApp, request, timeout: timeout)
    }

    /// Sets an app's APNs signing key and endpoint.
    public func putAPNsCredentials(
        _ request: Admin.PutAPNsCredentialsRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.AppReply {
        try await self.admin(.putAPNsCredentials, request, timeout: timeout)
    }

    /// Mints an API key; the reply holds its secret, shown only this once. Never resent (it would mint twice).
    public func createAPIKey(
        _ request: Admin.CreateAPIKeyRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.CreateAPIKeyReply {
        try await self.admin(.createAPIKey, request, timeout: timeout)
    }

    /// One page of the API keys, without their secrets. Read-only.
    public func listAPIKeys(
        _ request: Admin.ListAPIKeysRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.ListAPIKeysReply {
        try await self.admin(.listAPIKeys, request, timeout: timeout)
    }

    /// Revokes an API key.
    public func revokeAPIKey(
        _ request: Admin.RevokeAPIKeyRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.APIKeyReply {
        try await self.admin(.revokeAPIKey, request, timeout: timeout)
    }

    /// What an app uses on the node that answers: queue, pushes by outcome, quota use. Read-only.
    public func getAppStats(
        _ request: Admin.GetAppStatsRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.AppStats {
        try await self.admin(.getAppStats, request, timeout: timeout)
    }

    /// Sets an app's webhook; a new one, or `rotateSecret`, mints a signing secret that
    /// the reply holds, shown only this once. Not resent after an unknown outcome.
    public func putWebhook(
        _ request: Admin.PutWebhookRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.PutWebhookReply {
        try await self.admin(.putWebhook, request, timeout: timeout)
    }

    /// An app's webhook and its delivery state. Read-only.
    public func getWebhook(
        _ request: Admin.GetWebhookRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.WebhookReply {
        try await self.admin(.getWebhook, request, timeout: timeout)
    }

    /// Stops an app's webhook deliveries; its event feed keeps its events.
    public func deleteWebhook(
        _ request: Admin.DeleteWebhookRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.WebhookReply {
        try await self.admin(.deleteWebhook, request, timeout: timeout)
    }

    /// Ends a failing or retrying webhook's wait: the next delivery is tried at once.
    public func resetWebhook(
        _ request: Admin.ResetWebhookRequest,
        timeout: Duration? = nil
    ) async throws(LiveRelayClientError) -> Admin.WebhookReply {
        try await self.admin(.resetWebhook, request, timeout: timeout)
    }

    /// Reads are resent after an unknown outcome when the retry policy allows
    /// it; changes are not (CreateAPIKey would mint twice).
    private func admin<Request: LiveRelayMessage, Reply: LiveRelayMessage>(
        _ method: AdminMethod, _ request: Request, timeout: Duration?
    ) async throws(LiveRelayClientError) -> Reply {
        let reads: Set<AdminMethod> = [.getApp, .listApps, .listAPIKeys, .getAppStats, .getWebhook]
        return try await unary(path: method.rawValue, request, idempotent: reads.contains(method), timeout: timeout)
    }

    /// Stops taking calls, fails the ones not yet sent, lets sent ones finish
    /// (at most `configuration.shutdownGracePeriod`), and closes every connection.
    package func shutdown() async {
        try? await self.pool.shutdown().get()
    }

    /// Validates before sending, so a malformed request fails at once with the
    /// same INVALID_ARGUMENT and field violation the server would return.
    private func unary<Request: LiveRelayMessage, Reply: LiveRelayMessage>(
        _ method: LiveRelayMethod,
        _ request: Request,
        idempotent: Bool,
        timeout: Duration?
    ) async throws(LiveRelayClientError) -> Reply {
        try await unary(path: method.rawValue, request, idempotent: idempotent, timeout: timeout)
    }

    private func unary<Request: LiveRelayMessage, Reply: LiveRelayMessage>(
        path: String,
        _ request: Request,
        idempotent: Bool,
        timeout: Duration?
    ) async throws(LiveRelayClientError) -> Reply {
        if Task.isCancelled {
            throw LiveRelayClientError(status: .cancelled, message: "the task was cancelled", processing: .notProcessed)
        }
        do {
            try request.validate()
        } catch {
            // What the server would answer (PROTOCOL.md, section 7): the reason too, not only the field.
            throw LiveRelayClientError(
                status: .invalidArgument, message: error.description,
                details: ErrorDetails(fieldViolations: [error.fieldViolation], reason: "InvalidField"), processing: .notProcessed
            )
        }
        var payload = ByteBuffer()
        request.serialize(into: &payload)
        let call = self.pool.startCall(
            method: path, payload: payload, timeout: (timeout ?? self.configuration.defaultTimeout).map { TimeAmount($0) },
            idempotent: idempotent
        )
        let pool = self.pool
        let result: Result<ByteBuffer, LiveRelayClientError> = await withTaskCancellationHandler {
            do {
                return .success(try await call.promise.futureResult.get())
            } catch let error as LiveRelayClientError {
                return .failure(error)
            } catch {
                return .failure(LiveRelayClientError(status: .internal, message: "\(error)", processing: .mayHaveBeenProcessed))
            }
        } onCancel: {
            pool.cancel(call)
        }
        let bytes = try result.get()
        do {
            return try Reply(serializedBytes: bytes)
        } catch {
            throw LiveRelayClientError(
                status: .internal, message: "malformed \(Reply.protoName) from the server: \(error)", processing: .answered
            )
        }
    }
}
