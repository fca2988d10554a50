import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMockAPNs
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayTLS
import LiveRelayWire
import Logging
import NIOCore
import Prometheus

/// Everything that says what a LiveRelay server is: where it listens, how it
/// is secured, where its state lives, which apps and keys seed its tenant
/// registry, its limits, admission and quotas, its APNs side and its
/// operations port. ``ServerBuilder`` turns one into the server's services.
///
/// `liverelay serve` fills it from its options and config file; the soak, the
/// null service and the tests fill it in code. All of them run the same server.
package struct ServerDescription: Sendable {
    /// What answers the calls.
    package enum Calls: Sendable {
        /// The activity service over the store, the tenant registry and the dispatcher: the product.
        case activities
        /// Empty OK replies, with no store or dispatcher behind them: the protocol's ceiling, for benchmarks.
        case null
        /// A service of the caller's behind the real server (listener, TLS, framing, keys, limits): for tests of a client.
        case custom(any LiveRelayService)
    }

    package var host = "127.0.0.1"
    /// 0: any free port (``BuiltServer/server``'s `boundAddress` tells which).
    package var port = 7443
    /// nil: plaintext (tests only).
    package var tls: TLSContext?
    package var connection = ServerConnectionStateMachine.Configuration()
    /// How long a graceful shutdown waits for calls in flight.
    package var drainTime = TimeAmount.seconds(30)
    package var maxUnsentReplyBytes = 1 << 20
    package var maxConnections = 10_000
    package var maxConnectionsPerKey = 1_000
    /// Bytes of partial request frames buffered across all connections, and across one API key's.
    package var maxBufferedRequestBytes = 64 << 20
    package var maxBufferedRequestBytesPerKey = 16 << 20
    /// The RPC side's event-loop threads; nil: NIO's shared group (one per core).
    package var rpcThreads: Int?

    package var calls = Calls.activities
    /// Where tokens, activities, intents, the tenant registry and the channels live.
    /// A description whose calls are not ``Calls/activities`` opens the memory store whatever this says.
    package var store = StoreSelection(kind: .memory)
    /// Record each accepted call's pushes in the store and resume them after a crash;
    /// nil: on for every store but memory.
    package var durableIntents: Bool?
    package var intentLease = Duration.seconds(30)
    /// Names this process as the holder of dispatch intent leases: unique per start.
    package var nodeName = ServerDescription.uniqueNodeName
    /// What each app's event feed keeps.
    package var eventRetention = EventRetention()
    /// How the apps' webhooks are delivered.
    package var webhooks = WebhookSettings()
    /// How long a push-to-start token registered without `expires_at` lives; nil: until removed.
    package var pushToStartRetention: UnixTime.Duration? = .hours(30 * 24)

    /// The APNs side's event-loop threads (the dispatcher and every APNs connection), apart from the RPC side's.
    package var apnsThreads = max(1, System.coreCount / 2)
    /// An APNs stand-in in this process that the seeded apps push to (the development setup, the soak):
    /// run as a service that stops after the APNs client, so it answers to the end.
    package var mockAPNs: MockAPNsServer?
    /// Wraps the push sink the activity service hands its pushes to (the soak shortens their lives).
    package var pushSink: (@Sendable (Dispatcher) -> any PushSink)?

    package var admission = AdmissionLimits()
    /// Every app's quotas and priority-10 budget unless the registry says otherwise,
    /// and how many nodes share the rates.
    package var quotaDefaults = AppQuota()
    package var quotaNodes = 1

    /// The config file's or the development setup's apps and keys: applied to the tenant
    /// registry at start as a seed, which never undoes what an admin changed.
    package var seedApps: [RegisteredApp] = []
    package var seedKeys: [RegisteredAPIKey] = []
    /// The key files and endpoints an app's credentials may name, through the admin API and
    /// from the registry alike (``CredentialAllowance``); the seed's own are allowed besides.
    /// By default Apple's endpoint and no key file.
    package var credentialAllowance = CredentialAllowance()

    /// The operations port (/metrics, /healthz, /readyz); nil: none.
    package var ops: Ops?
    package var clock: any WallClock = SystemClock()
    package var logger = Logger(label: "liverelay")

    package struct Ops: Sendable {
        package var host: String
        package var port: Int
        /// The registry the process's metrics factory writes to (bootstrapped by the caller, once per process).
        package var registry: PrometheusCollectorRegistry
        /// `/metrics` asks for `Authorization: Bearer <token>` when set (`LIVERELAY_METRICS_TOKEN`).
        package var metricsToken: String?

        package init(host: String, port: Int, registry: PrometheusCollectorRegistry) {
            self.host = host
            self.port = port
            self.registry = registry
        }
    }

    package init() {}

    /// Durable intents as asked, by default on every store that outlives the process.
    var intentsEnabled: Bool {
        guard case .activities = calls else { return false }
        return durableIntents ?? (store.kind != .memory)
    }

    package static let uniqueNodeName =
        "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
}
