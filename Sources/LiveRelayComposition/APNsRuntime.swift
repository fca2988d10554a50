import Foundation
import LiveRelayAPNs
import LiveRelayAPNsClient
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMockAPNs
import LiveRelayPushOutlet
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// A registered app as the dispatcher and the APNs client take it: its signing
/// key read, its endpoint parsed, its queue settings with their defaults. The
/// one conversion from the tenant registry's ``RegisteredApp``: the config
/// file and the development setup only seed the registry, so every app, however
/// it was named, reaches the dispatcher through here.
package struct PushingApp: Sendable {
    package var app: App
    package var credentials: APNsCredentials
    package var queueCapacity: Int
    package var weight: Int
    package var maxPushLifetime: TimeAmount?

    package static let defaultQueueCapacity = 100_000

    /// A registered app's signing key read from where the registry says (the
    /// PEM it keeps, a file, an environment variable), its endpoint and trust.
    /// A key file or an endpoint that `allowance` (this node's configuration)
    /// does not allow is refused before anything is read or connected to: the
    /// registry may have been written by another node or an older build.
    package init(_ app: RegisteredApp, allowance: CredentialAllowance) throws {
        guard let credentials = app.credentials else { throw SetupError("app \(app.id) has no APNs credentials") }
        let keyFile: String?
        do {
            keyFile = try allowance.check(credentials)
        } catch {
            throw SetupError("app \(app.id): not allowed on this node: \(error)")
        }
        let key: APNsSigningKey
        do {
            switch credentials.keySource {
            case let .stored(pem):
                key = try APNsSigningKey(pkcs8PEM: pem, keyID: credentials.keyID, teamID: credentials.teamID)
            case let .file(path):
                key = try APNsSigningKey(contentsOfFile: keyFile ?? path, keyID: credentials.keyID, teamID: credentials.teamID)
            case let .environment(name):
                guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                    throw SetupError("app \(app.id): the environment variable \(name) holding its APNs key is not set")
                }
                key = try APNsSigningKey(pkcs8PEM: value, keyID: credentials.keyID, teamID: credentials.teamID)
            }
        } catch let error as SetupError {
            throw error
        } catch {
            throw SetupError("app \(app.id): \(error)")
        }
        let destination: APNsDestination
        do {
            destination = try APNsDestination(parsing: credentials.endpoint)
        } catch {
            throw SetupError("app \(app.id): endpoint: \(error)")
        }
        self.app = App(id: app.id, bundleID: app.bundleID)
        self.credentials = APNsCredentials(key: key, destination: destination, trustPEM: credentials.trustPEM)
        self.queueCapacity = app.queueCapacity ?? Self.defaultQueueCapacity
        self.weight = app.weight ?? 1
        self.maxPushLifetime = app.maxPushLifetimeSeconds.flatMap { $0 > 0 ? .seconds(Int64($0)) : nil }
    }
}

/// The event loops of the APNs side (the dispatcher and every APNs connection),
/// apart from the RPC server's.
///
/// A fan-out's answers free send slots by the hundred, and each APNs connection
/// opens the streams it is handed in one task on its loop: 250–500 streams, 2–15 ms
/// on 2 cores. NIO runs every task that is ready before it polls for I/O again, so
/// on a loop shared with RPC connections every call of every app on that loop waited
/// for those tasks back to back. On loops of their own, the kernel's scheduler
/// shares the cores between the two sides instead.
///
/// The default is half the cores: with one loop per core on each side (4 threads on
/// 2 cores) the realistic mix cost more CPU per call than with the loops shared, as
/// the dispatcher's hand-offs to the connections crossed threads that had to be woken;
/// with one APNs loop on 2 cores it cost less (docs/BENCHMARKS.md, "Dispatcher and
/// APNs client"). `--apns-threads` sets it.
package enum APNsEventLoops {
    /// The group of `threads` loops. Threads show as `APNs-ELT-…` (`top -H`). Made once
    /// per process and size, and kept as long as the process, as NIO's own shared group
    /// is: a process that builds several servers (the tests) shares them.
    package static func group(threads: Int) -> MultiThreadedEventLoopGroup {
        groups.withLockedValue { groups in
            if let group = groups[threads] { return group }
            let group = MultiThreadedEventLoopGroup._makePerpetualGroup(threadNamePrefix: "APNs-ELT-", numberOfThreads: threads)
            groups[threads] = group
            return group
        }
    }

    private static let groups = NIOLockedValueBox<[Int: MultiThreadedEventLoopGroup]>([:])
}

/// The APNs side of a running server, as services: the APNs client (every
/// connection pool, by route), the dispatcher that feeds it, and an in-process
/// mock APNs they may talk to (the development setup, the soak). It starts with
/// no app: the tenant runtime gives the dispatcher each registered app's queue
/// and route (``configure(_:)``) before the first call, and again on every change.
package struct APNsRuntime: Sendable {
    package let client: APNsClient
    package let dispatcher: Dispatcher
    let mock: MockAPNsServer?

    init(
        mock: MockAPNsServer?, store: any ActivityStore, clock: any WallClock, ledger: (any DispatchLedger)?,
        group: any EventLoopGroup, logger: Logger
    ) {
        let client = APNsClient(group: group, clock: clock, logger: logger)
        self.client = client
        self.dispatcher = Dispatcher(
            configuration: DispatcherConfiguration(apps: []), transports: client, eventLoop: group.next(), clock: clock,
            pruner: StoreTokenPruner(store: store, clock: clock), ledger: ledger, logger: logger)
        self.mock = mock
    }

    /// Adds an app, or changes its key, endpoint, queue or weight, while serving:
    /// its pushes go by the new route from now on. Apps that share a destination
    /// and a key share a connection pool and a provider token.
    func configure(_ pushing: PushingApp) throws {
        dispatcher.configure(
            DispatchApp(
                appID: pushing.app.id, queueCapacity: pushing.queueCapacity, route: try client.register(pushing.credentials),
                weight: pushing.weight, maxPushLifetime: pushing.maxPushLifetime))
    }

    /// In `ServiceGroup` order: the mock (stops last, so it answers to the
    /// end), the APNs client (closes the connections once the dispatcher has
    /// drained), the dispatcher.
    var services: [any Service] {
        (mock.map { [$0] } ?? []) + [client, dispatcher]
    }
}
