import Foundation
import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDomain
import LiveRelayStore
import LiveRelayTLS
import LiveRelayTestSupport
import LiveRelayWebhookDelivery
import LiveRelayWebhooks
import Logging
import MetricsTestKit
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

/// The deliverer against a real HTTPS receiver (Tests/Support/webhook_receiver.py,
/// Python's TLS, HTTP server and HMAC): order, signatures, retries through 500s,
/// timeouts and a receiver that is down, the failing state and its recovery,
/// kinds, and the lease between two nodes.
@Suite("WebhookDeliverer", .serialized)
struct WebhookDelivererTests {
    static let app = "com.example.app"
    /// How long a test waits for what the deliverer does: a bound for a loaded machine, not a timing.
    static let bound = TimeAmount.seconds(60)
    static let certificate = Result { try SelfSignedCertificate.generate() }

    /// A memory store and registry, an app whose webhook points at a receiver, and deliverers to run.
    final class Fixture: Sendable {
        let store = InMemoryActivityStore()
        let registry = InMemoryTenantRegistry()
        let receiver: WebhookReceiver
        let secret = WebhookSignature.mintSecret()
        let client: WebhookHTTPClient
        let metrics = TestMetrics()

        init(script: [WebhookReceiver.Action] = [], kinds: Set<FeedEvent.Kind> = []) async throws {
            let (certificatePEM, keyPEM) = try WebhookDelivererTests.certificate.get()
            receiver = try await WebhookReceiver.start(
                secret: secret, script: script, certificatePEM: certificatePEM, privateKeyPEM: keyPEM)
            client = try WebhookHTTPClient(
                group: MultiThreadedEventLoopGroup.singleton, trustRoots: .pem(.string(certificatePEM)),
                addressPolicy: WebhookAddressPolicy(allowPrivateAddresses: true))
            let now = SystemClock().now()
            try await registry.apply(.createApp(RegisteredApp(id: app, bundleID: "com.example")), actor: "test", now: now)
            try await putWebhook(url: "https://127.0.0.1:\(receiver.port)/hooks/liverelay", kinds: kinds)
        }

        /// Sets the webhook as PutWebhook does: a new one starts at the feed's last cursor; a changed one keeps its secret.
        func putWebhook(url: String, kinds: Set<FeedEvent.Kind> = []) async throws {
            let start = try await store.lastEventCursor(appID: app, on: MultiThreadedEventLoopGroup.singleton.next()).get()
            let change = RegistryChange.putWebhook(
                appID: app, url: url, eventKinds: kinds, newSecret: secret, rotate: false, startCursor: start)
            try await registry.apply(change, actor: "test", now: SystemClock().now())
        }

        /// `timeout` is a ceiling unless a test times a request out on purpose: an answer the
        /// receiver sent but the client gave up on counts as a failure and is delivered again.
        func deliverer(
            node: String = "node-a", schedule: WebhookSchedule = Fixture.fastSchedule, timeout: TimeAmount = .seconds(30)
        )
            -> WebhookDeliverer
        {
            WebhookDeliverer(
                configuration: WebhookDeliverer.Configuration(
                    schedule: schedule, requestTimeout: timeout, lease: .seconds(30), node: node),
                store: store, progress: registry, client: client, eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
                logger: Logger(label: "webhook-test"), metrics: WebhookMetrics(factory: metrics))
        }

        static let fastSchedule = WebhookSchedule(
            batchSize: 100, backoff: Backoff(initial: .milliseconds(50), maximum: .milliseconds(200)), retryFor: .seconds(60),
            probeEvery: .seconds(60))

        /// Records `count` PUSH_FAILED events (token n), now.
        func record(_ range: ClosedRange<Int>, kind: FeedEvent.Kind = .pushFailed) async throws {
            let now = SystemClock().now()
            let events = range.map { n in
                FeedEvent(
                    appID: app, kind: kind, time: now, activityID: "order-1", token: String(format: "%064x", n), reason: "Unregistered")
            }
            _ = try await store.apply(RecordEvents(events), now: now, on: MultiThreadedEventLoopGroup.singleton.next()).get()
        }

        /// Runs the deliverers, configured with the registry's apps, until `body` returns; then stops them gracefully.
        func running(_ deliverers: [WebhookDeliverer], _ body: () async throws -> Void) async throws {
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(services: deliverers, logger: Logger(label: "webhook-test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let apps = try await registry.snapshot().apps
                for deliverer in deliverers { deliverer.configure(apps) }
                do {
                    try await body()
                } catch {
                    await group.triggerGracefulShutdown()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }

        /// The events the receiver was sent, in the order of its requests, with each request's status.
        func deliveries() throws -> [(status: Int?, signatureOK: Bool, ids: [String], missed: Int?)] {
            try receiver.requests().map { request in
                let object = try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] ?? [:]
                let events = object["events"] as? [[String: Any]] ?? []
                return (
                    request.statusSent, request.signatureOK, events.compactMap { $0["id"] as? String },
                    object["missed_through_cursor"] as? Int
                )
            }
        }

        /// The ids the receiver acknowledged (a 2xx), in order.
        func acknowledgedIDs() throws -> [String] {
            try deliveries().filter { ($0.status ?? 0) / 100 == 2 }.flatMap(\.ids)
        }

        func progress() async throws -> WebhookProgress? { try await registry.webhookProgress(appID: app) }

        func ids(_ cursors: ClosedRange<Int>) -> [String] { cursors.map { "\(app):\($0)" } }
    }

    /// A port nothing listens on: bound, then closed.
    static func unusedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(channel.localAddress?.port)
        try await channel.close()
        return port
    }

    @Test func eventsArriveInOrderInSignedBatchesEachOnce() async throws {
        let fixture = try await Fixture()
        try await fixture.record(1...250)
        try await fixture.running([fixture.deliverer()]) {
            try await eventually("250 events acknowledged", timeout: Self.bound) { ((try? fixture.acknowledgedIDs())?.count ?? 0) >= 250 }
            try await fixture.record(251...260)
            try await eventually("the next 10 too", timeout: Self.bound) { ((try? fixture.acknowledgedIDs())?.count ?? 0) >= 260 }
        }
        let deliveries = try fixture.deliveries()
        #expect(deliveries.allSatisfy { $0.signatureOK }, "every delivery verifies with the app's secret")
        #expect(deliveries.map(\.ids.count).prefix(3) == [100, 100, 50], "batches of at most batch_size")
        #expect(try fixture.acknowledgedIDs() == fixture.ids(1...260), "in cursor order, each once")
        let progress = try #require(try await fixture.progress())
        #expect(progress.deliveredCursor == 260)
        #expect(progress.state == "delivering")
        let request = try #require(try fixture.receiver.requests().first)
        #expect(request.header("LiveRelay-App") == Self.app)
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.path == "/hooks/liverelay")
    }

    @Test func retriesThrough500sTimeoutsAndDroppedConnectionsLoseNothingAndKeepOrder() async throws {
        let fixture = try await Fixture(script: [.status(500), .status(503), .delayed(seconds: 20, status: 200), .close, .status(502)])
        try await fixture.record(1...30)
        try await fixture.running([fixture.deliverer(timeout: .seconds(5))]) {
            try await eventually("all 30 acknowledged", timeout: Self.bound) {
                (try? await fixture.progress())??.deliveredCursor == 30
            }
        }
        let deliveries = try fixture.deliveries()
        // The timed-out request got its 200 after the client gave up: only what the client saw acknowledged counts.
        #expect(deliveries.count >= 6)
        #expect(deliveries.allSatisfy { $0.ids == fixture.ids(1...30) }, "every attempt carries the same events with the same ids")
        let progress = try #require(try await fixture.progress())
        #expect(progress.deliveredCursor == 30)
        #expect(progress.attempts == 0 && progress.lastError == nil, "the success ended the run of failures")
        #expect(
            try fixture.metrics.expectCounter("liverelay_webhook_deliveries_total", [("app", Self.app), ("outcome", "failed")]).totalValue
                == 5)
    }

    @Test func aWebhookRetriedPastItsWindowIsFailingUntilAProbeSucceeds() async throws {
        let fixture = try await Fixture(script: Array(repeating: .status(500), count: 6))
        let schedule = WebhookSchedule(
            batchSize: 100, backoff: Backoff(initial: .milliseconds(50), maximum: .milliseconds(100)), retryFor: .milliseconds(300),
            probeEvery: .milliseconds(700))
        try await fixture.record(1...3)
        try await fixture.running([fixture.deliverer(schedule: schedule)]) {
            try await eventually("failing", timeout: Self.bound) { (try? await fixture.progress())??.failing == true }
            let failing = try #require(try await fixture.progress())
            #expect(failing.lastError == "HTTP 500")
            #expect(failing.state == "failing")
            #expect(try fixture.metrics.expectGauge("liverelay_webhook_failing", [("app", Self.app)]).lastValue == 1)
            try await eventually("recovered", timeout: Self.bound) { (try? await fixture.progress())??.deliveredCursor == 3 }
        }
        let recovered = try #require(try await fixture.progress())
        #expect(!recovered.failing && recovered.attempts == 0)
        #expect(try fixture.acknowledgedIDs() == fixture.ids(1...3))
        #expect(try fixture.metrics.expectGauge("liverelay_webhook_failing", [("app", Self.app)]).lastValue == 0)
    }

    @Test func aResetEndsAFailingWebhooksWaitAtOnce() async throws {
        let fixture = try await Fixture(script: [.status(500), .status(500)])
        // A window of 0: the first failure makes it failing; probes an hour apart.
        let schedule = WebhookSchedule(
            batchSize: 100, backoff: Backoff(initial: .hours(1), maximum: .hours(1)), retryFor: .milliseconds(0), probeEvery: .hours(1))
        try await fixture.record(1...2)
        let deliverer = fixture.deliverer(schedule: schedule)
        try await fixture.running([deliverer]) {
            try await eventually("failing", timeout: Self.bound) { (try? await fixture.progress())??.failing == true }
            try await fixture.registry.resetWebhook(appID: Self.app)
            deliverer.kick(appID: Self.app)
            // The reset's attempt gets the script's second 500: failing again, but it was tried.
            try await eventually("tried again after the reset", timeout: Self.bound) { ((try? fixture.deliveries())?.count ?? 0) >= 2 }
            try await fixture.registry.resetWebhook(appID: Self.app)
            deliverer.kick(appID: Self.app)
            try await eventually("delivered after the second reset", timeout: Self.bound) {
                (try? await fixture.progress())??.deliveredCursor == 2
            }
        }
        #expect(try fixture.acknowledgedIDs() == fixture.ids(1...2))
    }

    /// A service group cancels its services when another one fails: the loops must end then too,
    /// even while a failing webhook waits for its next probe, and count no attempt for the cut-off call.
    @Test func aCancelledDelivererEndsAndCountsNoAttempt() async throws {
        let fixture = try await Fixture(script: [.status(500), .delayed(seconds: 30, status: 200)])
        let schedule = WebhookSchedule(
            batchSize: 100, backoff: Backoff(initial: .milliseconds(50), maximum: .milliseconds(50)), retryFor: .hours(1),
            probeEvery: .hours(1))
        try await fixture.record(1...2)
        let deliverer = fixture.deliverer(schedule: schedule, timeout: .seconds(60))
        deliverer.configure(try await fixture.registry.snapshot().apps)
        let run = Task { try await deliverer.run() }
        // The second attempt hangs in the receiver: cancel while it is in flight.
        try await eventually("the second attempt in flight", timeout: Self.bound) { ((try? fixture.deliveries())?.count ?? 0) >= 2 }
        run.cancel()
        try await withTimeout(.seconds(20)) { try await run.value }
        let progress = try #require(try await fixture.progress())
        #expect(progress.attempts == 1, "the cancelled call is not a failed attempt")
        #expect(progress.lastError == "HTTP 500")
        #expect(progress.deliveredCursor == 0)
    }

    @Test func aReceiverDownForAWhileGetsEverythingOnceItIsBack() async throws {
        let fixture = try await Fixture()
        // Nothing listens on the port first (a receiver that is down): connections are refused.
        let down = try await Self.unusedPort()
        try await fixture.putWebhook(url: "https://127.0.0.1:\(down)/hooks/liverelay")
        try await fixture.record(1...20)
        let deliverer = fixture.deliverer()
        try await fixture.running([deliverer]) {
            try await eventually("refused attempts", timeout: Self.bound) { ((try? await fixture.progress())??.attempts ?? 0) >= 2 }
            let refused = try #require(try await fixture.progress())
            #expect(refused.lastError?.hasPrefix("connect:") == true, "\(refused.lastError ?? "")")
            #expect(refused.deliveredCursor == 0)
            try await fixture.record(21...25)
            // The receiver is back (at its address): the webhook moves there.
            try await fixture.putWebhook(url: "https://127.0.0.1:\(fixture.receiver.port)/hooks/liverelay")
            deliverer.configure(try await fixture.registry.snapshot().apps)
            try await eventually("all 25 acknowledged", timeout: Self.bound) {
                ((try? fixture.acknowledgedIDs())?.count ?? 0) >= 25
            }
        }
        #expect(try fixture.acknowledgedIDs() == fixture.ids(1...25))
    }

    @Test func onlyTheKindsAskedForAreDeliveredAndTheCursorPassesTheOthers() async throws {
        let fixture = try await Fixture(kinds: [.tokenPruned])
        try await fixture.record(1...5, kind: .callSettled)
        try await fixture.record(6...7, kind: .tokenPruned)
        try await fixture.record(8...9, kind: .pushFailed)
        try await fixture.running([fixture.deliverer()]) {
            try await eventually("the cursor past every event", timeout: Self.bound) {
                (try? await fixture.progress())??.deliveredCursor == 9
            }
        }
        #expect(try fixture.acknowledgedIDs() == fixture.ids(6...7))
    }

    @Test func oneNodeAtATimeDeliversAnAppAndAnotherTakesOverWhenItStops() async throws {
        let fixture = try await Fixture()
        try await fixture.record(1...40)
        let a = fixture.deliverer(node: "node-a")
        try await fixture.running([a]) {
            try await eventually("node a delivered", timeout: Self.bound) { ((try? fixture.acknowledgedIDs())?.count ?? 0) >= 40 }
            // Node b runs beside a: a's lease stands, so b delivers nothing.
            let b = fixture.deliverer(node: "node-b")
            try await fixture.running([b]) {
                try await fixture.record(41...50)
                try await eventually("a delivered the next ten", timeout: Self.bound) {
                    ((try? fixture.acknowledgedIDs())?.count ?? 0) >= 50
                }
            }
        }
        #expect(try fixture.acknowledgedIDs() == fixture.ids(1...50), "two nodes, no event twice")
        // a stopped and released its lease: c takes over at once.
        try await fixture.record(51...55)
        try await fixture.running([fixture.deliverer(node: "node-c")]) {
            try await eventually("node c delivered", timeout: Self.bound) { ((try? fixture.acknowledgedIDs())?.count ?? 0) >= 55 }
        }
        #expect(try fixture.acknowledgedIDs() == fixture.ids(1...55))
    }
}
