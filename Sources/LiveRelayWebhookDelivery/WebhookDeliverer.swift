import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayEndpoint
import LiveRelayStore
import LiveRelayWebhooks
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// Delivers each app's event feed to its webhook (docs/PROTOCOL.md, "Webhooks"):
/// one loop per app with a webhook, in cursor order, at least once.
///
/// Apart from the dispatch path on purpose: its own event loop, its own
/// HTTP client, and reads of the feed and the progress store only. A slow or
/// dead endpoint holds its own app's loop and nothing else.
///
/// On PostgreSQL several nodes run a deliverer; the progress store's lease
/// lets one node at a time deliver an app's events, the others standing by
/// until its lease runs out (a dead node) or it hands over (a graceful stop).
///
/// The tenant runtime calls ``configure(_:)`` with every registry snapshot;
/// loops start, follow a changed webhook, and stop when it is deleted. At
/// graceful shutdown each loop finishes the delivery in flight (bounded by
/// the request timeout), releases its lease, and ends.
public final class WebhookDeliverer: Service, Sendable {
    public struct Configuration: Sendable {
        public var schedule: WebhookSchedule
        /// One delivery's bound: resolve, connect, TLS, the answer's head.
        public var requestTimeout: TimeAmount
        /// How long an app's lease lasts without renewal; the holder renews a third of the way in.
        /// At least three request timeouts and a second, so that a delivery begun within the
        /// first third ends before the lease can pass to another node.
        public var lease: UnixTime.Duration
        /// This node's name in the leases.
        public var node: String

        public init(
            schedule: WebhookSchedule = WebhookSchedule(), requestTimeout: TimeAmount = .seconds(10),
            lease: UnixTime.Duration = .seconds(30), node: String
        ) {
            self.schedule = schedule
            self.requestTimeout = requestTimeout
            self.lease = UnixTime.Duration(milliseconds: max(lease.milliseconds, 3 * requestTimeout.nanoseconds / 1_000_000 + 1_000))
            self.node = node
        }
    }

    private struct State {
        var webhooks: [String: RegisteredWebhook] = [:]
        /// Apps whose loop runs (or was asked to start).
        var running: Set<String> = []
        var starts: AsyncStream<String>.Continuation?
        var stopping = false
        /// Bumped per app by ``kick(appID:)``: a loop that sees it change stops waiting.
        var kicks: [String: Int] = [:]
    }

    private let configuration: Configuration
    private let store: any ActivityStore
    private let progress: any WebhookProgressStore
    private let client: WebhookHTTPClient
    private let eventLoop: any EventLoop
    private let clock: any WallClock
    private let logger: Logger
    private let metrics: WebhookMetrics
    private let state = NIOLockedValueBox(State())
    private let starts: AsyncStream<String>

    public init(
        configuration: Configuration, store: any ActivityStore, progress: any WebhookProgressStore, client: WebhookHTTPClient,
        eventLoop: any EventLoop, clock: any WallClock = SystemClock(), logger: Logger, metrics: WebhookMetrics = WebhookMetrics()
    ) {
        self.configuration = configuration
        self.store = store
        self.progress = progress
        self.client = client
        self.eventLoop = eventLoop
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        let (starts, continuation) = AsyncStream<String>.makeStream()
        self.starts = starts
        state.withLockedValue { $0.starts = continuation }
    }

    /// The registry's apps now: a loop for each webhook, none for the others.
    public func configure(_ apps: [String: RegisteredApp]) {
        state.withLockedValue { state in
            state.webhooks = apps.compactMapValues(\.webhook)
            // A loop that waits looks at its (maybe changed, maybe deleted) webhook again.
            for appID in state.running.union(state.webhooks.keys) { state.kicks[appID, default: 0] += 1 }
        }
        startLoops()
    }

    /// Starts a loop for each webhook without one.
    private func startLoops() {
        let (toStart, continuation): ([String], AsyncStream<String>.Continuation?) = state.withLockedValue { state in
            guard !state.stopping else { return ([], nil) }
            let new = state.webhooks.keys.filter { !state.running.contains($0) }.sorted()
            state.running.formUnion(new)
            return (new, state.starts)
        }
        for appID in toStart { continuation?.yield(appID) }
    }

    /// Ends the app's waits at once (ResetWebhook on this node): its loop reads its progress again.
    public func kick(appID: String) {
        state.withLockedValue { $0.kicks[appID, default: 0] += 1 }
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await appID in self.starts {
                    group.addTask { await self.deliver(appID: appID) }
                }
            }
        } onGracefulShutdown: {
            let continuation: AsyncStream<String>.Continuation? = self.state.withLockedValue { state in
                state.stopping = true
                defer { state.starts = nil }
                return state.starts
            }
            continuation?.finish()
        }
    }

    /// A graceful shutdown began, or the service group cancelled the deliverer (another service failed).
    private var stopping: Bool { Task.isCancelled || state.withLockedValue(\.stopping) }

    private func webhook(of appID: String) -> RegisteredWebhook? {
        guard !Task.isCancelled else { return nil }
        return state.withLockedValue { $0.stopping ? nil : $0.webhooks[appID] }
    }

    private func kicks(of appID: String) -> Int { state.withLockedValue { $0.kicks[appID] ?? 0 } }

    /// The loop of one app, until its webhook goes or the node stops.
    private func deliver(appID: String) async {
        var loop = AppLoop(appID: appID)
        while let webhook = webhook(of: appID) {
            await loop.step(webhook, deliverer: self)
        }
        metrics.failing(appID: appID, false)
        // Releases only a lease this node holds; before the app leaves `running`, so that a loop
        // started for a webhook set again meanwhile claims after this release, not before it.
        try? await progress.releaseWebhook(appID: appID, node: configuration.node)
        state.withLockedValue { _ = $0.running.remove(appID) }
        // A webhook set again while this loop was ending needs a loop of its own.
        startLoops()
    }

    /// One app's loop state between steps: the progress it holds the lease of, and its waits.
    private struct AppLoop {
        let appID: String
        var held: WebhookProgress?
        /// When the lease last taken or renewed runs out, counted from before the store's call.
        var leaseUntil = UnixTime(milliseconds: 0)
        var retryAt: UnixTime?
        var kicksSeen = -1
        /// The progress's reset count when last claimed: one that moved since is a reset to act on.
        var resetsSeen: Int64?

        init(appID: String) { self.appID = appID }

        /// A third of the way into the lease: when the holder renews it.
        private func renewAt(_ d: WebhookDeliverer) -> UnixTime {
            leaseUntil - .milliseconds(d.configuration.lease.milliseconds * 2 / 3)
        }

        mutating func step(_ webhook: RegisteredWebhook, deliverer d: WebhookDeliverer) async {
            let now = d.clock.now()
            let kicks = d.kicks(of: appID)
            if held == nil || now >= renewAt(d) || kicks != kicksSeen {
                kicksSeen = kicks
                guard await claim(webhook, now: now, deliverer: d) else { return }
            }
            guard var progress = held else { return }
            if let retryAt, now < retryAt {
                await d.pause(appID: appID, until: min(retryAt, renewAt(d)), kicks: kicks)
                return
            }
            let generation = d.store.eventCommits.generation(of: appID)
            let page: EventPage
            do {
                page = try await d.store.events(
                    appID: appID, after: progress.deliveredCursor, limit: d.configuration.schedule.batchSize, on: d.eventLoop
                ).get()
            } catch {
                d.logger.warning("webhook: cannot read the event feed", metadata: ["app": "\(appID)", "error": "\(error)"])
                await d.pause(appID: appID, until: now + .seconds(1), kicks: kicks)
                return
            }
            switch d.configuration.schedule.next(after: progress, page: page, webhook: webhook) {
            case .wait:
                await d.waitForEvents(appID: appID, generation: generation, until: renewAt(d), kicks: kicks)
            case let .skip(through):
                progress.deliveredCursor = through
                await save(progress, now: now, acknowledged: through, deliverer: d)
            case let .send(batch):
                // The whole delivery must end within the lease, or another node could send the next
                // batch meanwhile: renew first when it might not.
                let margin = d.configuration.requestTimeout + .seconds(1)
                guard d.clock.now().milliseconds + margin.nanoseconds / 1_000_000 < leaseUntil.milliseconds else {
                    held = nil
                    return
                }
                guard let (next, retry) = await d.send(batch, progress: progress, webhook: webhook, now: now) else { return }
                retryAt = retry
                await save(next, now: d.clock.now(), acknowledged: retry == nil ? batch.through : nil, deliverer: d)
            }
        }

        /// Takes or renews the app's lease; false while another node holds it (then waits).
        private mutating func claim(_ webhook: RegisteredWebhook, now: UnixTime, deliverer d: WebhookDeliverer) async -> Bool {
            let claimed: WebhookProgress?
            do {
                claimed = try await d.progress.claimWebhook(
                    appID: appID, node: d.configuration.node, now: now, lease: d.configuration.lease)
            } catch {
                d.logger.warning("webhook: cannot claim the app's deliveries", metadata: ["app": "\(appID)", "error": "\(error)"])
                held = nil
                await d.pause(appID: appID, until: now + .seconds(2), kicks: kicksSeen)
                return false
            }
            guard var progress = claimed else {
                // Another node delivers the app's events: it reports the webhook's state, not this one.
                held = nil
                d.metrics.failing(appID: appID, false)
                await d.pause(appID: appID, until: now + .milliseconds(d.configuration.lease.milliseconds / 3), kicks: kicksSeen)
                return false
            }
            if progress.webhookCreatedAt != webhook.createdAt {
                // A webhook set anew: its deliveries start at its start cursor (the feed's last when it
                // was set), without the old one's wait.
                progress = WebhookProgress.fresh(for: webhook, appID: appID, resets: progress.resets)
                retryAt = nil
            }
            // A reset (here or on another node) ends the wait for the next attempt.
            if let seen = resetsSeen, seen != progress.resets { retryAt = nil }
            resetsSeen = progress.resets
            d.metrics.failing(appID: appID, progress.failing)
            held = progress
            leaseUntil = now + d.configuration.lease
            return true
        }

        /// Saves `progress`. `acknowledged`: the cursor the endpoint acknowledged (or a skip passed)
        /// in this step, which a reset that came meanwhile must not undo: the progress after the reset
        /// is claimed and moved past it, so the batch is not delivered again.
        private mutating func save(
            _ progress: WebhookProgress, now: UnixTime, acknowledged: UInt64? = nil, deliverer d: WebhookDeliverer
        ) async {
            do {
                if try await d.progress.saveWebhook(progress, node: d.configuration.node, now: now, lease: d.configuration.lease) {
                    held = progress
                    leaseUntil = now + d.configuration.lease
                    return
                }
                // A reset came, or the lease went to another node: read the progress again.
                held = nil
                guard let acknowledged, let webhook = d.webhook(of: appID), await claim(webhook, now: now, deliverer: d),
                    let reset = held, reset.deliveredCursor < acknowledged
                else { return }
                var moved = reset
                moved.deliveredCursor = acknowledged
                if progress.lastSuccessAt != nil, progress.attempts == 0 { moved.lastSuccessAt = progress.lastSuccessAt }
                await save(moved, now: d.clock.now(), deliverer: d)
            } catch {
                d.logger.warning("webhook: cannot save the delivery progress", metadata: ["app": "\(appID)", "error": "\(error)"])
                held = nil
                await d.pause(appID: appID, until: now + .seconds(1), kicks: kicksSeen)
            }
        }
    }

    /// Posts one batch; answers the progress after it and when to try again after a failure, or nil
    /// when the node stopped the call (cancelled): no attempt to count.
    private func send(
        _ batch: WebhookSchedule.Batch, progress: WebhookProgress, webhook: RegisteredWebhook, now: UnixTime
    ) async -> (WebhookProgress, UnixTime?)? {
        let appID = progress.appID
        if let missed = batch.missedThrough {
            logger.warning(
                "webhook: the feed's retention deleted events before they were delivered",
                metadata: ["app": "\(appID)", "after_cursor": "\(progress.deliveredCursor)", "through_cursor": "\(missed)"])
        }
        let body = WebhookPayload.body(appID: appID, batch: batch)
        let outcome: String?
        switch WebhookURL.parse(webhook.url) {
        case let .failure(error):
            outcome = "url: \(error.message)"
        case let .success(url):
            let headers = [
                (WebhookSignature.headerName, WebhookSignature.header(secret: webhook.secret, timestamp: now.seconds, body: body)),
                ("LiveRelay-App", appID),
            ]
            switch await client.post(url, headers: headers, body: body, timeout: configuration.requestTimeout) {
            case let .response(status) where (200..<300).contains(status): outcome = nil
            case let .response(status): outcome = "HTTP \(status)"
            case .failure(.cancelled): return nil
            case let .failure(failure): outcome = failure.description
            }
        }
        let finished = clock.now()
        guard let error = outcome else {
            metrics.delivered(appID: appID, events: batch.entries.count)
            if progress.failing {
                logger.notice("webhook recovered", metadata: ["app": "\(appID)", "failed_attempts": "\(progress.attempts)"])
            }
            metrics.failing(appID: appID, false)
            return (configuration.schedule.succeeded(progress, through: batch.through, at: finished), nil)
        }
        metrics.failed(appID: appID)
        let (next, retryAt, becameFailing) = configuration.schedule.failed(
            progress, error: error, at: finished, random: Double.random(in: 0...1))
        if becameFailing {
            logger.error(
                "webhook failing: its deliveries are held and probed until one succeeds or an admin resets it",
                metadata: [
                    "app": "\(appID)", "error": "\(error)", "attempts": "\(next.attempts)",
                    "failing_since_ms": "\(next.failingSince?.milliseconds ?? 0)",
                ])
            metrics.failing(appID: appID, true)
        } else if !next.failing {
            logger.info(
                "webhook delivery failed; retrying", metadata: ["app": "\(appID)", "error": "\(error)", "attempts": "\(next.attempts)"])
        }
        return (next, retryAt)
    }

    /// How long one wait lasts before it looks again whether the node stops or the app was kicked.
    static let slice: TimeAmount = .seconds(1)

    /// Waits until `deadline`, a kick or the node's stop, whichever comes first.
    private func pause(appID: String, until deadline: UnixTime, kicks seen: Int) async {
        while !stopping, kicks(of: appID) == seen {
            let left = deadline.milliseconds - clock.now().milliseconds
            guard left > 0 else { return }
            do {
                try await Task.sleep(for: .milliseconds(min(left, Self.slice.nanoseconds / 1_000_000)))
            } catch {
                return  // cancelled
            }
        }
    }

    /// Waits for the app's next commit of events (or the store's poll interval), `deadline`, a kick or the stop.
    private func waitForEvents(appID: String, generation: UInt64, until deadline: UnixTime, kicks seen: Int) async {
        while !stopping, kicks(of: appID) == seen {
            let left = deadline.milliseconds - clock.now().milliseconds
            guard left > 0 else { return }
            var wait = min(TimeAmount.milliseconds(left), Self.slice)
            if let interval = store.eventPollInterval { wait = min(wait, interval) }
            let committed = try? await store.eventCommits.wait(
                appID: appID, after: generation, until: .now() + wait, on: eventLoop
            ).get()
            if committed == true || store.eventPollInterval != nil { return }
        }
    }
}
