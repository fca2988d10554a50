import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayOps
import LiveRelayPushOutlet
import LiveRelayServer
import LiveRelayService
import LiveRelayStore
import LiveRelayWebhookDelivery
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import UnixSignals

/// A server built from a ``ServerDescription``: its services in start order,
/// and the parts a caller reads while it runs (the bound ports, the dispatcher's
/// account, readiness).
package struct BuiltServer: Sendable {
    /// In start order; graceful shutdown runs them down in reverse (``ServerBuilder/build(_:)`` says why this order).
    package let services: [any Service]
    package let server: RPCServer
    package let ops: OpsServer?
    package let readiness: ServingReadiness
    /// What answers the calls (the activity service, the null service, or the description's own).
    package let service: any LiveRelayService
    /// nil when the calls are not the activity service's.
    package let dispatcher: Dispatcher?
    package let activities: ActivityService?
    package let tenants: TenantRuntime
    /// "SQLite store /path", "PostgreSQL store postgres://…", … for the start-up log.
    package let storeDescription: String

    /// The services as one group, shut down gracefully on `signals`, and when the store fails
    /// for good (``ActivityStoreService``): a short drain, then `run()` throws, so the process
    /// exits non-zero and its supervisor restarts it.
    package func serviceGroup(
        gracefulShutdownSignals signals: [UnixSignal] = [.sigterm, .sigint], logger: Logger
    )
        -> ServiceGroup
    {
        let configurations = services.map { service in
            ServiceGroupConfiguration.ServiceConfiguration(
                service: service, failureTerminationBehavior: service is ActivityStoreService ? .gracefullyShutdownGroup : .cancelGroup)
        }
        return ServiceGroup(
            configuration: ServiceGroupConfiguration(services: configurations, gracefulShutdownSignals: signals, logger: logger))
    }
}

/// The one place a LiveRelay server is assembled.
package enum ServerBuilder {
    /// Opens the stores, seeds and loads the tenant registry, and makes every
    /// service of the server described, ready to run in one `ServiceGroup`.
    ///
    /// Start order, so that graceful shutdown (the reverse) runs down cleanly:
    /// the operations port first (it stops last: /readyz answers 503 through the
    /// whole drain, and a final scrape sees the final counts); the store; the
    /// tenant runtime (it closes the registry after everything that reads it);
    /// the channel store; the webhook deliverer (it stops before the registry and the store
    /// it reads close); the dispatch intents (they write their settlements
    /// after the dispatcher's drain); the mock APNs, the APNs client and the
    /// dispatcher; the sweepers; the RPC server (it drains first); and the drain
    /// signal, which hears of the shutdown first and marks the node draining.
    package static func build(_ description: ServerDescription) async throws -> BuiltServer {
        let logger = description.logger
        var selection = description.store
        if case .activities = description.calls {} else { selection.kind = .memory }
        let (store, storeDescription) = try await selection.open(logger: logger, clock: description.clock)
        let registry = try await selection.openRegistry(logger: logger)
        let channelStore = try await selection.openChannels(logger: logger)

        let probeLoop = MultiThreadedEventLoopGroup.singleton.next()
        let readiness = ServingReadiness(
            storeProbe: {
                // One keyed read through the store's normal read path: a closed store,
                // a SQLite store poisoned by a failed fsync, or an unreachable PostgreSQL fails it.
                _ = try await store.activity(ActivityKey(appID: "liverelay.readyz", activityID: "probe"), on: probeLoop).get()
            }, storeFailure: { store.permanentFailure })
        let queueGauges = QueueGauges()
        let ops = description.ops.map { ops in
            OpsServer(
                configuration: OpsServer.Configuration(host: ops.host, port: ops.port, metricsToken: ops.metricsToken),
                registry: ops.registry,
                readiness: readiness, beforeScrape: { queueGauges.update() }, logger: logger)
        }

        let keyUsage = KeyUsage(clock: description.clock)
        let authenticator = ReloadableAuthenticator(try APIKeyAuthenticator(keys: []), onUse: { keyUsage.note($0) })
        let quotas = QuotaGate(settings: QuotaSettings(defaults: description.quotaDefaults, nodes: description.quotaNodes))
        let priorityBudget = PriorityBudgetGate()
        // What the operator allows, and what the seed names (the operator wrote it too).
        let allowance = description.credentialAllowance.allowing(seeds: description.seedApps)
        var parts = TenantRuntime.Parts(
            authenticator: authenticator, activities: nil, apns: nil, quotas: quotas, priorityBudget: priorityBudget,
            defaultQuota: description.quotaDefaults, nodes: description.quotaNodes, credentials: allowance)
        // Between the store and the RPC server: see the start order above.
        var middle: [any Service] = [ChannelStoreService(channelStore)]
        let service: any LiveRelayService
        var intents: DispatchIntents?
        switch description.calls {
        case .null:
            service = NullLiveRelayService()
        case let .custom(custom):
            service = custom
        case .activities:
            let (activities, apns, madeIntents, services) = try makeActivities(
                description, store: store, channelStore: channelStore, quotas: quotas, priorityBudget: priorityBudget)
            intents = madeIntents
            middle += services
            queueGauges.attach(apns.dispatcher)
            parts.activities = activities
            parts.apns = apns
            service = activities
            let webhooks = try WebhookWiring.deliverer(description, store: store, registry: registry)
            parts.webhooks = webhooks
            middle.insert(webhooks, at: 1)
        }

        // The seed (the config file's or the development setup's apps and keys), then the
        // registry's whole content applied before the first connection.
        let tenants = TenantRuntime(registry: registry, parts: parts, keyUsage: keyUsage, logger: logger)
        intents?.serveOnly { [tenants] in tenants.canServe(appID: $0) }
        do {
            try await registry.apply(
                .seed(apps: description.seedApps, keys: description.seedKeys), actor: "config", now: description.clock.now())
            try await tenants.reload()
        } catch {
            throw SetupError("cannot load the tenant registry: \(error)")
        }

        let server = RPCServer(
            configuration: RPCServer.Configuration(
                host: description.host, port: description.port, tls: description.tls, connection: description.connection,
                eventLoopGroup: description.rpcThreads.map { .createNew(numberOfThreads: $0) }
                    ?? .shared(MultiThreadedEventLoopGroup.singleton),
                maxDrainTime: description.drainTime, maxUnsentReplyBytes: description.maxUnsentReplyBytes,
                maxConnections: description.maxConnections, maxConnectionsPerKey: description.maxConnectionsPerKey,
                maxBufferedRequestBytes: description.maxBufferedRequestBytes,
                maxBufferedRequestBytesPerKey: description.maxBufferedRequestBytesPerKey),
            service: service, authenticator: authenticator,
            admin: RegistryAdminService(
                registry: registry, mintKey: AdminWiring.mintKey,
                usage: { [dispatcher = parts.apns?.dispatcher] app in
                    AdminWiring.usage(of: app, dispatcher: dispatcher, quotas: quotas)
                }, credentials: allowance, webhooks: WebhookWiring.adminHooks(store: store, deliverer: parts.webhooks)),
            logger: logger)
        tenants.attach(server)

        var services: [any Service] = ops.map { [$0] } ?? []
        services.append(ActivityStoreService(store, logger: logger))
        services.append(tenants)
        services += middle
        services.append(server)
        services.append(readiness.drainSignal)
        return BuiltServer(
            services: services, server: server, ops: ops, readiness: readiness, service: service, dispatcher: parts.apns?.dispatcher,
            activities: parts.activities, tenants: tenants, storeDescription: storeDescription)
    }

    /// The activity service and what serves it: the dispatch intents, the APNs side, the sweepers, in start order.
    private static func makeActivities(
        _ description: ServerDescription, store: any ActivityStore, channelStore: any ChannelStore, quotas: QuotaGate,
        priorityBudget: PriorityBudgetGate
    ) throws -> (ActivityService, APNsRuntime, DispatchIntents?, [any Service]) {
        let logger = description.logger
        let clock = description.clock
        let kind = description.store.kind
        let lease = IntentLease(owner: description.nodeName, duration: description.intentLease)
        let intents =
            description.intentsEnabled
            ? DispatchIntents(
                configuration: DispatchIntents.Configuration(
                    lease: lease, takeOverAtStart: kind != .postgres, releaseAtShutdown: kind == .postgres),
                store: store, clock: clock, logger: logger, on: MultiThreadedEventLoopGroup.singleton.next())
            : nil
        guard (1...256).contains(description.apnsThreads) else { throw SetupError("--apns-threads must be 1...256") }
        // Without durable intents nothing settles through a ledger, but the app's holds still reach its feed.
        let ledger: any DispatchLedger =
            intents ?? DispatchHoldRecorder(store: store, clock: clock, logger: logger, on: MultiThreadedEventLoopGroup.singleton.next())
        let apns = APNsRuntime(
            mock: description.mockAPNs, store: store, clock: clock, ledger: ledger,
            group: APNsEventLoops.group(threads: description.apnsThreads), logger: logger)
        // With durable intents every batch passes through them, so they know what the dispatcher holds.
        let outlet = description.pushSink?(apns.dispatcher) ?? apns.dispatcher
        intents?.attach(outlet)
        let activities = ActivityService(
            store: store, clock: clock, logger: logger, sink: intents ?? outlet,
            intents: intents == nil ? IntentLease?.none : lease, pushToStartRetention: description.pushToStartRetention,
            admission: AdmissionGate(limits: description.admission), quotas: quotas,
            channels: ChannelService(
                store: channelStore,
                managers: { [dispatcher = apns.dispatcher, client = apns.client] app in
                    dispatcher.route(appID: app.id).flatMap { client.channelManager(for: $0) }
                },
                clock: clock, logger: logger),
            priorityBudget: priorityBudget)
        var services: [any Service] = intents.map { [$0] } ?? []
        services += apns.services
        services.append(
            ActivitySweeper(
                service: activities, eventRetention: description.eventRetention, on: MultiThreadedEventLoopGroup.singleton.next()))
        services.append(PriorityBudgetSweeper(gate: priorityBudget))
        services.append(
            QuotaUsageRefresher(gate: quotas, store: store, clock: clock, logger: logger, on: MultiThreadedEventLoopGroup.singleton.next()))
        return (activities, apns, intents, services)
    }
}
