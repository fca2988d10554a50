import LiveRelayAPNs
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore

/// What an app needs to reach APNs: its signing key and where its pushes go.
public struct APNsCredentials: Sendable {
    public var key: APNsSigningKey
    public var destination: APNsDestination
    /// The PEM certificate (or CA) a non-Apple destination must present; nil trusts the system store.
    public var trustPEM: String?

    public init(key: APNsSigningKey, destination: APNsDestination, trustPEM: String? = nil) {
        self.key = key
        self.destination = destination
        self.trustPEM = trustPEM
    }

    /// The route the dispatcher sends these credentials' pushes by.
    public var route: APNsRoute { APNsRoute(destination: destination, teamID: key.teamID, keyID: key.keyID) }
}

/// Every APNs connection of one server: one ``APNsConnectionPool`` per
/// (endpoint, signing key), one ``ProviderTokenSource`` per key shared by its
/// pools, and the routing of an `apple` destination's tokens to production or
/// the sandbox by the environment they were registered for.
///
/// The owner of the transports: apps are only mapped to routes
/// (``register(_:)``), so several apps with one key share one pool and one
/// provider token (APNs refuses a key's token refreshed too often), and an
/// app's credentials can be added or replaced while the server runs: the
/// dispatcher looks the transport up per send.
public final class APNsClient: APNsTransportProvider, @unchecked Sendable {
    private struct Route {
        var transport: any APNsTransport
        var pools: [APNsConnectionPool]
        /// What the route was built from: registering the same again changes nothing.
        var identity: String
        /// What the management pools are made from, when first asked for.
        var source: ProviderTokenSource
        var trustPEM: String?
        /// Made on the first ``APNsClient/channelManager(for:)``: most routes never manage channels.
        var management: (manager: APNsChannelManager, pools: [APNsConnectionPool])?

        var allPools: [APNsConnectionPool] { pools + (management?.pools ?? []) }
    }

    private let group: any EventLoopGroup
    private let clock: any WallClock
    let logger: Logger
    private let configure: @Sendable (APNsEndpoint, String?) -> APNsClientConfiguration
    private let lock = NIOLock()
    // Guarded by `lock`.
    private var routes: [APNsRoute: Route] = [:]
    private var sources: [String: ProviderTokenSource] = [:]
    /// Replaced pools until their streams are answered and they close.
    private var retired: [ObjectIdentifier: APNsConnectionPool] = [:]
    private var isShutDown = false

    /// - Parameter configure: the pool configuration for an endpoint and a
    ///   trust PEM; by default ``APNsClientConfiguration``'s defaults, trusting
    ///   only the PEM when one is given.
    public init(
        group: any EventLoopGroup, clock: any WallClock = SystemClock(), logger: Logger,
        configure: @escaping @Sendable (APNsEndpoint, String?) -> APNsClientConfiguration = APNsClient.defaultConfiguration
    ) {
        self.group = group
        self.clock = clock
        self.logger = logger
        self.configure = configure
    }

    public static func defaultConfiguration(_ endpoint: APNsEndpoint, trustPEM: String?) -> APNsClientConfiguration {
        trustPEM.map { .trusting(certificatePEM: $0, endpoint: endpoint) } ?? APNsClientConfiguration(endpoint: endpoint)
    }

    /// Makes (or keeps) the transport of `credentials`' route and returns the
    /// route. New key material or a new trust PEM for a known route replaces
    /// its pools; the old ones finish the streams they carry, then close.
    @discardableResult
    public func register(_ credentials: APNsCredentials) throws -> APNsRoute {
        let route = credentials.route
        let publicKey = try credentials.key.publicKeyPEM
        let identity = publicKey + "\n" + (credentials.trustPEM ?? "")
        let replaced: [APNsConnectionPool] = try lock.withLock {
            if routes[route]?.identity == identity { return [] }
            precondition(!isShutDown, "APNsClient.register after shutdown")
            let sourceKey = "\(route.teamID)/\(route.keyID)/\(publicKey)"
            let source = sources[sourceKey] ?? Self.tokenSource(for: credentials.key, clock: clock)
            sources[sourceKey] = source
            func pool(_ endpoint: APNsEndpoint) throws -> APNsConnectionPool {
                try APNsConnectionPool(
                    configuration: configure(endpoint, credentials.trustPEM), tokenSource: source,
                    group: group, logger: logger)
            }
            let made: Route
            switch credentials.destination {
            case .apple:
                let production = try pool(.production), sandbox = try pool(.sandbox)
                made = Route(
                    transport: APNsEnvironmentRouter(production: production, sandbox: sandbox),
                    pools: [production, sandbox], identity: identity, source: source, trustPEM: credentials.trustPEM)
            case let .custom(host, port):
                let only = try pool(.custom(host: host, port: port))
                made = Route(transport: only, pools: [only], identity: identity, source: source, trustPEM: credentials.trustPEM)
            }
            let replaced = routes.updateValue(made, forKey: route)?.allPools ?? []
            for pool in replaced { retired[ObjectIdentifier(pool)] = pool }
            return replaced
        }
        for pool in replaced {
            pool.shutdown().whenComplete { _ in
                self.lock.withLock { _ = self.retired.removeValue(forKey: ObjectIdentifier(pool)) }
            }
        }
        logger.info("APNs credentials registered", metadata: ["apns.route": "\(route)"])
        return route
    }

    public func transport(for route: APNsRoute) -> (any APNsTransport)? {
        lock.withLock { routes[route]?.transport }
    }

    /// The route's channel management, over pools of its own to the management
    /// endpoints (Apple's two hosts, or the custom destination's host and port),
    /// made on the first call and signing with the route's provider token source:
    /// management calls are rare and must not queue behind a burst of pushes. nil
    /// when the route has no credentials (or the pools cannot be made; logged).
    public func channelManager(for route: APNsRoute) -> (any APNsChannelManaging)? {
        lock.withLock { () -> APNsChannelManager? in
            guard !isShutDown, var entry = routes[route] else { return nil }
            if let management = entry.management { return management.manager }
            func pool(_ endpoint: APNsEndpoint) throws -> APNsConnectionPool {
                var configuration = configure(endpoint, entry.trustPEM)
                configuration.maximumConnections = min(configuration.maximumConnections, Self.managementConnections)
                return try APNsConnectionPool(configuration: configuration, tokenSource: entry.source, group: group, logger: logger)
            }
            do {
                let made: (manager: APNsChannelManager, pools: [APNsConnectionPool])
                switch route.destination {
                case .apple:
                    let production = try pool(.productionChannelManagement), sandbox = try pool(.sandboxChannelManagement)
                    made = (
                        APNsChannelManager(transport: APNsEnvironmentRouter(production: production, sandbox: sandbox)),
                        [production, sandbox]
                    )
                case .custom:
                    let only = try pool(route.destination.managementEndpoint(for: .production))
                    made = (APNsChannelManager(transport: only), [only])
                }
                entry.management = made
                routes[route] = entry
                return made.manager
            } catch {
                logger.error("APNs channel management pools not made", metadata: ["apns.route": "\(route)", "error": "\(error)"])
                return nil
            }
        }
    }

    /// Connections per management endpoint: calls are few and small, one or two suffice.
    static let managementConnections = 2

    /// Finishes the streams in flight on every connection, then closes them.
    public func shutdown() -> EventLoopFuture<Void> {
        let pools: [APNsConnectionPool] = lock.withLock {
            isShutDown = true
            return routes.values.flatMap(\.allPools) + retired.values
        }
        return EventLoopFuture.andAllComplete(pools.map { $0.shutdown() }, on: group.any())
    }
}

extension APNsClient {
    /// The key's provider-token source, counting each token it signs in
    /// `liverelay_apns_provider_tokens_signed_total{team_id, key_id}`: APNs
    /// refuses a key refreshed more often than every 20 minutes, so a rising
    /// count is the first sign of a refresh loop.
    static func tokenSource(for key: APNsSigningKey, clock: any WallClock) -> ProviderTokenSource {
        let signed = Counter(
            label: "liverelay_apns_provider_tokens_signed_total", dimensions: [("team_id", key.teamID), ("key_id", key.keyID)])
        return ProviderTokenSource(keyID: key.keyID, clock: clock) { issuedAt in
            let token = try key.makeProviderToken(issuedAt: issuedAt)
            signed.increment()
            return token
        }
    }
}
