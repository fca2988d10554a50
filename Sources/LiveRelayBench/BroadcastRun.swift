import LiveRelayClient
import LiveRelayMessages
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Runs ``BroadcastScenario`` against one server. The calls that are timed go one at a
/// time over one connection through the typed client API: a single call's latency is the
/// figure, and the async hop it adds (microseconds) is far below what it measures (a round
/// trip to APNs). Client retries are off, as in ``BenchRunner``: what happened is reported,
/// not resent behind the numbers.
public struct BroadcastRun: Sendable {
    public let scenario: BroadcastScenario
    let client: LiveRelayClient.Configuration
    let group: any EventLoopGroup
    let logger: Logger
    let serverPID: Int32?
    let progress: (@Sendable (String) -> Void)?

    public init(
        scenario: BroadcastScenario, client: LiveRelayClient.Configuration, eventLoopGroup: any EventLoopGroup, logger: Logger,
        serverPID: Int32? = nil, progress: (@Sendable (String) -> Void)? = nil
    ) {
        self.scenario = scenario
        self.client = client
        self.group = eventLoopGroup
        self.logger = logger
        self.serverPID = serverPID
        self.progress = progress
    }

    private var timeout: Duration { .nanoseconds(Int64(scenario.timeoutSeconds * 1e9)) }

    private func makeClient(depth: Int) -> LiveRelayClient {
        var configuration = client
        configuration.connections = 1
        configuration.retryPolicy = LiveRelayClient.RetryPolicy(maxAttempts: 1, retryIdempotentCalls: false)
        configuration.defaultTimeout = timeout
        configuration.maxPendingCalls = 2 * depth + 16
        configuration.shutdownGracePeriod = .seconds(2)
        return LiveRelayClient(configuration: configuration, eventLoopGroup: group, logger: logger)
    }

    /// Setup, both legs, and the channel's deletion (also when a step failed after the
    /// channel was made). Shuts its clients down.
    public func run() async throws -> BroadcastReport {
        let s = scenario
        let control = makeClient(depth: 1)
        let runTag = Workload.makeRunTag()
        do {
            _ = try await control.ping(timeout: .seconds(10))
        } catch {
            await control.shutdown()
            throw BenchError("cannot reach the server at \(client.host):\(client.port): \(error)")
        }
        let channelID: String
        do {
            let reply = try await control.createChannel(
                CreateChannelRequest(appID: s.appID, environment: s.environment, storagePolicy: .noStorage), timeout: timeout)
            guard let id = reply.channel?.channelID, !id.isEmpty else { throw BenchError("CreateChannel answered without a channel id") }
            channelID = id
        } catch {
            await control.shutdown()
            throw BenchError("CreateChannel for \(s.appID) failed: \(error)")
        }
        progress?("created channel \(channelID)")
        let result: Result<BroadcastReport, any Error>
        do {
            result = .success(try await legs(control: control, channelID: channelID, runTag: runTag))
        } catch {
            result = .failure(error)
        }
        var deleted = true
        do {
            _ = try await control.deleteChannel(DeleteChannelRequest(appID: s.appID, channelID: channelID), timeout: .seconds(30))
            progress?("deleted channel \(channelID)")
        } catch {
            deleted = false
            progress?("DeleteChannel \(channelID) failed: \(error)")
        }
        await control.shutdown()
        var report = try result.get()
        report.channelDeleted = deleted
        return report
    }

    private func legs(control: LiveRelayClient, channelID: String, runTag: String) async throws -> BroadcastReport {
        let s = scenario
        // Activity A, subscribed to the channel by its start (as a device would be).
        let startToken = BroadcastScenario.token(runTag: runTag, kind: 1, index: 0)
        let attributesType = "BenchBroadcastAttributes"
        do {
            _ = try await control.registerToken(
                RegisterTokenRequest(
                    appID: s.appID, kind: .pushToStart, token: startToken, environment: s.environment, attributesType: attributesType,
                    deviceID: "b\(runTag)-broadcast-device"), timeout: timeout)
        } catch {
            throw BenchError("registering the push-to-start token failed: \(error)")
        }
        let activityA = "b\(runTag)-channel", activityB = "b\(runTag)-fanout"
        do {
            let reply = try await control.startActivity(
                StartActivityRequest(
                    appID: s.appID, activityID: activityA, attributesType: attributesType, attributesJSON: #"{"bench":"\#(runTag)"}"#,
                    contentStateJSON: ContentState.json(bytes: s.contentStateBytes, sequence: 0),
                    targets: Targets(pushToStartTokens: [startToken]), waitForDelivery: true, channelID: channelID, inputPushToken: false),
                timeout: timeout)
            guard let summary = reply.summary, summary.delivered == 1 else {
                throw BenchError("the start subscribing the device to the channel was not delivered: \(String(describing: reply.summary))")
            }
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("StartActivity with the channel failed: \(error)")
        }
        var sequence = 1
        let channelUpdate = { @Sendable (n: Int) in
            UpdateActivityRequest(
                appID: s.appID, activityID: activityA, contentStateJSON: ContentState.json(bytes: s.contentStateBytes, sequence: n),
                waitForDelivery: true, channelID: channelID, channelOnly: true)
        }
        for _ in 0..<s.warmupCalls {
            do {
                _ = try await control.updateActivity(channelUpdate(sequence), timeout: timeout)
            } catch {
                throw BenchError("a warm-up UpdateActivity to the channel failed: \(error)")
            }
            sequence += 1
        }
        progress?("broadcast: \(s.broadcastCalls) UpdateActivity calls to the channel, one at a time")
        let broadcast = await measure(calls: s.broadcastCalls, on: control) { n in channelUpdate(sequence + n) }
        sequence += s.broadcastCalls
        progress?(
            "broadcast: p50 \(fmt(broadcast.latencyUs.p50 / 1000, 3)) ms, max \(fmt(broadcast.latencyUs.max / 1000, 3)) ms, "
                + "\(broadcast.errors) errors")

        progress?("registering \(formatCount(Double(s.fanoutTokens))) update tokens of \(activityB)")
        let registration = try await register(activityID: activityB, runTag: runTag)
        progress?("registered in \(fmt(registration.seconds, 2)) s (\(formatCount(registration.perSecond))/s)")

        progress?("fan-out: \(s.fanoutCalls) UpdateActivity calls to \(formatCount(Double(s.fanoutTokens))) tokens, one at a time")
        let fanout = await measure(calls: s.fanoutCalls, on: control) { n in
            UpdateActivityRequest(
                appID: s.appID, activityID: activityB,
                contentStateJSON: ContentState.json(bytes: s.contentStateBytes, sequence: sequence + n), waitForDelivery: true)
        }
        progress?(
            "fan-out: p50 \(fmt(fanout.latencyUs.p50 / 1000, 1)) ms, max \(fmt(fanout.latencyUs.max / 1000, 1)) ms, "
                + "\(formatCount(fanout.pushes.deliveredPerSecond)) pushes/s, \(fanout.errors) errors")
        let memory = serverPID.flatMap { processMemory(pid: $0) }
        return BroadcastReport(
            description: s.description, appID: s.appID, channelID: channelID, channelDeleted: false, broadcast: broadcast,
            registration: registration, fanout: fanout, fanoutTokens: s.fanoutTokens, serverRSSBytes: memory?.rss,
            serverPeakRSSBytes: memory?.peak)
    }

    /// `calls` UpdateActivity calls, each sent after the previous one's reply.
    private func measure(
        calls: Int, on client: LiveRelayClient, request: (Int) -> UpdateActivityRequest
    ) async -> BroadcastReport.Leg {
        var latencies: [UInt64] = []
        var summaries: [DeliverySummary?] = []
        var errors: [String] = []
        latencies.reserveCapacity(calls)
        let windowStart = nowNanos()
        for n in 0..<calls {
            let message = request(n)
            let sent = nowNanos()
            do {
                let reply = try await client.updateActivity(message, timeout: timeout)
                latencies.append(nowNanos() - sent)
                summaries.append(reply.summary)
            } catch {
                errors.append("\(error)")
            }
        }
        return BroadcastReport.Leg(
            latenciesNanos: latencies, summaries: summaries, errors: errors, windowNanos: nowNanos() - windowStart)
    }

    /// Activity B's update tokens through pipelined RegisterToken calls: `registerDepth`
    /// callers per connection, each taking the next index until all are done. The first
    /// failure stops the callers and fails the run (the fan-out would not be the size asked).
    private func register(activityID: String, runTag: String) async throws -> BroadcastReport.Registration {
        let s = scenario
        let clients = (0..<s.registerConnections).map { _ in makeClient(depth: s.registerDepth) }
        let next = NIOLockedValueBox(0)
        let failure = NIOLockedValueBox<String?>(nil)
        let started = nowNanos()
        await withTaskGroup(of: Void.self) { tasks in
            for client in clients {
                for _ in 0..<s.registerDepth {
                    tasks.addTask { [timeout] in
                        while true {
                            let i = next.withLockedValue { v -> Int in
                                defer { v += 1 }
                                return v
                            }
                            guard i < s.fanoutTokens, failure.withLockedValue({ $0 == nil }) else { return }
                            var payload = ByteBuffer()
                            RegisterTokenRequest(
                                appID: s.appID, kind: .update, token: BroadcastScenario.token(runTag: runTag, kind: 2, index: i),
                                environment: s.environment, activityID: activityID,
                                deviceID: "b\(runTag)-d\(hex(scatter(UInt64(i)), digits: 16))"
                            ).serialize(into: &payload)
                            do {
                                _ = try await client.call(.registerToken, payload: payload, timeout: TimeAmount(timeout), idempotent: true)
                                    .get()
                            } catch {
                                failure.withLockedValue { if $0 == nil { $0 = "\(error)" } }
                            }
                        }
                    }
                }
            }
        }
        let seconds = Double(nowNanos() - started) / 1e9
        for client in clients { await client.shutdown() }
        if let first = failure.withLockedValue({ $0 }) {
            throw BenchError("registering \(formatCount(Double(s.fanoutTokens))) update tokens failed: \(first)")
        }
        return BroadcastReport.Registration(
            tokens: s.fanoutTokens, seconds: seconds, connections: s.registerConnections, depth: s.registerDepth)
    }
}
