import LiveRelayAPNs
import LiveRelayAdmin
import LiveRelayStore
import LiveRelayTLS
import LiveRelayWebhookDelivery
import LiveRelayWebhooks
import Logging
import NIOCore
import NIOPosix

/// How the apps' webhooks are delivered on this node (the config file's "webhooks" section).
package struct WebhookSettings: Sendable {
    package var schedule = WebhookSchedule()
    package var requestTimeout = TimeAmount.seconds(10)
    /// Endpoints may resolve to loopback, link-local and private addresses (a tenant could then
    /// reach the operator's internal network: off by default).
    package var allowPrivateAddresses = false
    /// What an endpoint's certificate must chain to.
    package var trustRoots = TrustRoots.systemDefault

    package init() {}
}

/// The webhook deliverer of `serve`, and what the admin API needs of it.
package enum WebhookWiring {
    /// The lease holder's name on SQLite and memory, where one process alone serves the store:
    /// the same at every start, so a node restarted after a crash goes on at once instead of
    /// waiting out the lease its previous life held.
    static let singleNode = "local"

    /// Where the webhooks' host names are resolved (getaddrinfo blocks a thread until it answers or
    /// gives up): threads of their own, so that a tenant whose DNS does not answer holds a few of
    /// them, not the threads the rest of the process resolves and does blocking work on.
    static let resolverThreads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 16)
        pool.start()
        return pool
    }()

    /// Bounds GetAppStats' backlog count: one page of the feed, not a scan of it.
    static let backlogCountLimit = 10_000

    /// The deliverer: on the shared event loops, apart from the APNs side's.
    static func deliverer(
        _ description: ServerDescription, store: any ActivityStore, registry: any TenantRegistry
    ) throws -> WebhookDeliverer {
        let settings = description.webhooks
        let client: WebhookHTTPClient
        do {
            client = try WebhookHTTPClient(
                group: MultiThreadedEventLoopGroup.singleton, trustRoots: settings.trustRoots,
                addressPolicy: WebhookAddressPolicy(allowPrivateAddresses: settings.allowPrivateAddresses),
                threadPool: resolverThreads)
        } catch {
            throw SetupError("cannot set up the webhooks' TLS: \(error)")
        }
        // As long as the intents' lease (the deliverer makes it longer for a long request timeout).
        let lease = UnixTime.Duration(milliseconds: Int64(description.intentLease.components.seconds) * 1000)
        return WebhookDeliverer(
            configuration: WebhookDeliverer.Configuration(
                schedule: settings.schedule, requestTimeout: settings.requestTimeout, lease: lease,
                node: description.store.kind == .postgres ? description.nodeName : singleNode),
            store: store, progress: registry, client: client, eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
            clock: description.clock, logger: description.logger)
    }

    /// The admin API's webhook hooks; without a deliverer (no activity service), no backlog and no one to tell.
    static func adminHooks(store: any ActivityStore, deliverer: WebhookDeliverer?) -> WebhookAdminHooks {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        return WebhookAdminHooks(
            mintSecret: { WebhookSignature.mintSecret() },
            lastCursor: { appID in try await store.lastEventCursor(appID: appID, on: loop).get() },
            backlog: { appID, cursor in
                guard let page = try? await store.events(appID: appID, after: cursor, limit: backlogCountLimit, on: loop).get()
                else { return nil }
                return UInt64(page.entries.count)
            },
            wasReset: { appID in deliverer?.kick(appID: appID) })
    }
}
