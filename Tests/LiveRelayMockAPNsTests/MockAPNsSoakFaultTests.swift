import LiveRelayAPNs
import NIOPosix
import Testing

@testable import LiveRelayMockAPNs

/// The faults the fault soak needs beyond the basic ones: 429 with a retry-after,
/// 410 with its timestamp at a rate, periodic outages, a slow tail, GOAWAY and drops
/// on alternate connections, and the count of pushes that arrived after their expiry.
@Suite("Mock APNs: the fault soak's faults")
struct MockAPNsSoakFaultTests {
    let ok = MockAPNsVerdict(status: 200, apnsID: "id", providerTokenAccepted: true)

    @Test("an injected error carries its retry-after; an injected 410 says when, by the mock's clock")
    func retryAfterAndTimestamps() {
        var withHeader = MockAPNsFaultPlan(
            injectedErrors: [MockAPNsInjectedError(reason: "TooManyRequests", rate: 1, retryAfterSeconds: 3)], latency: .none, seed: 1)
        let throttled = withHeader.apply(to: ok, nowMilliseconds: 5_000)
        #expect(throttled.status == 429 && throttled.response.retryAfterSeconds == 3 && throttled.timestampMilliseconds == nil)
        var without = MockAPNsFaultPlan(
            injectedErrors: [MockAPNsInjectedError(reason: "TooManyRequests", rate: 1)], latency: .none, seed: 1)
        #expect(without.apply(to: ok).response.retryAfterSeconds == nil)
        var gone = MockAPNsFaultPlan(injectedErrors: [MockAPNsInjectedError(reason: "Unregistered", rate: 1)], latency: .none, seed: 1)
        let unregistered = gone.apply(to: ok, nowMilliseconds: 1_700_000_000_123)
        #expect(unregistered.status == 410 && unregistered.timestampMilliseconds == 1_700_000_000_123)
        #expect(unregistered.responseBody == Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(MockAPNsInjectedError(reason: "TooManyRequests", rate: 1, retryAfterSeconds: -5).retryAfterSeconds == 0)
    }

    @Test("outages come every period for their duration, starting after the first delay")
    func outageWindows() {
        let outages = MockAPNsOutages(period: .seconds(10), duration: .seconds(2), firstAfter: .seconds(3))
        let down = stride(from: 0, to: 30_000, by: 500).filter { outages.isOutage(sinceStart: .milliseconds($0)) }
        #expect(down == [3_000, 3_500, 4_000, 4_500, 13_000, 13_500, 14_000, 14_500, 23_000, 23_500, 24_000, 24_500])
        #expect(outages.status == 503 && outages.reason == "ServiceUnavailable")
        #expect(MockAPNsOutages(period: .seconds(10), duration: .seconds(2)).firstAfter == .seconds(10))
        #expect(!MockAPNsOutages(period: .seconds(1), duration: .zero).isOutage(sinceStart: .seconds(5)))
    }

    @Test("an outage answers every 200 with its error and draws nothing, so the faults after it are the same")
    func outageReplacesEvery200() {
        let errors = [MockAPNsInjectedError(reason: "InternalServerError", rate: 0.3)]
        let outages = MockAPNsOutages(period: .seconds(10), duration: .seconds(5), firstAfter: .zero)
        var withOutages = MockAPNsFaultPlan(injectedErrors: errors, latency: .none, outages: outages, seed: 5)
        var without = MockAPNsFaultPlan(injectedErrors: errors, latency: .none, seed: 5)
        let during = (0..<50).map { _ in withOutages.apply(to: ok, sinceStart: .seconds(2)) }
        #expect(during.allSatisfy { $0.status == 503 && $0.reason == "ServiceUnavailable" })
        let after = (0..<200).map { _ in withOutages.apply(to: ok, sinceStart: .seconds(7)).status }
        let reference = (0..<200).map { _ in without.apply(to: ok).status }
        #expect(after == reference)
        #expect(Set(after) == [200, 500])
        let refused = MockAPNsVerdict(status: 400, reason: "BadTopic", apnsID: "id")
        #expect(withOutages.apply(to: refused, sinceStart: .seconds(1)) == refused)
        #expect(withOutages.injects && !without.hasLatency)
    }

    @Test("the slow tail delays about its share of the answers, within its range on top of the rest")
    func slowTail() {
        var plan = MockAPNsFaultPlan(
            injectedErrors: [],
            latency: MockAPNsLatency(
                fixed: .milliseconds(1), random: .zero ... .milliseconds(2),
                slow: MockAPNsSlowAnswers(rate: 0.1, range: .milliseconds(100) ... .milliseconds(200))),
            seed: 11)
        let answers = (0..<10_000).map { _ in plan.nextAnswerDelay() }
        let slow = answers.filter(\.slow)
        #expect((850...1_150).contains(slow.count))
        #expect(slow.allSatisfy { $0.delay >= .milliseconds(101) && $0.delay <= .milliseconds(203) })
        #expect(answers.filter { !$0.slow }.allSatisfy { $0.delay >= .milliseconds(1) && $0.delay <= .milliseconds(3) })
        let onlySlow = MockAPNsFaultPlan(
            injectedErrors: [], latency: MockAPNsLatency(slow: MockAPNsSlowAnswers(rate: 0.5, range: .zero ... .milliseconds(5))),
            seed: 1)
        #expect(onlySlow.hasLatency)
        #expect(MockAPNsSlowAnswers(rate: 3, range: .zero ... .zero).rate == 1)
    }

    @Test("with alternate connection faults, odd connections get the GOAWAY and even ones the drop")
    func alternateConnectionFaults() {
        let policy = MockAPNsConnectionPolicy(goAwayAfterStreams: 3, dropConnectionAfterStreams: 2, alternate: true)
        #expect((1...4).map { policy.action(forStreamNumber: $0, onConnection: 1) } == [.serve, .serve, .serveThenGoAway, .serve])
        #expect((1...4).map { policy.action(forStreamNumber: $0, onConnection: 2) } == [.serve, .serve, .drop, .drop])
        #expect(policy.action(forStreamNumber: 3, onConnection: 5) == .serveThenGoAway)
        // Without it the smaller limit wins on every connection, as before.
        let plain = MockAPNsConnectionPolicy(goAwayAfterStreams: 3, dropConnectionAfterStreams: 2)
        #expect(plain.action(forStreamNumber: 3, onConnection: 1) == .drop)
        // With only one fault set there is nothing to alternate.
        let goAwayOnly = MockAPNsConnectionPolicy(goAwayAfterStreams: 2, dropConnectionAfterStreams: nil, alternate: true)
        #expect(goAwayOnly.action(forStreamNumber: 2, onConnection: 2) == .serveThenGoAway)
    }

    @Test("the recorder counts pushes that arrived after their apns-expiration, and how late the latest was")
    func lateArrivals() throws {
        func record(expiration: String?, at received: Int64) -> MockAPNsRecord {
            MockAPNsRecord(
                path: "/3/device/ab", method: "POST", headers: expiration.map { [("apns-expiration", $0)] } ?? [], body: [],
                status: 200, reason: nil, apnsID: nil, connection: 1, streamID: 1, receivedAtMilliseconds: received)
        }
        #expect(record(expiration: "100", at: 100_250).millisecondsPastExpiration == 250)
        #expect(record(expiration: "100", at: 99_000).millisecondsPastExpiration == -1_000)
        #expect(record(expiration: "0", at: 5).millisecondsPastExpiration == nil, "0 means send once, never late")
        #expect(record(expiration: nil, at: 5).millisecondsPastExpiration == nil)
        #expect(record(expiration: "soon", at: 5).millisecondsPastExpiration == nil)

        let recorder = try MockAPNsRecorder(capacity: 0, recordFile: nil)
        for (expiration, at) in [("100", Int64(100_000)), ("100", 100_040), ("100", 100_900), ("0", 999_999), ("200", 150_000)] {
            recorder.record(record(expiration: expiration, at: at))
        }
        #expect(recorder.counters.receivedAfterExpiration == 2)
        #expect(recorder.counters.mostMillisecondsPastExpiration == 900)
        #expect(recorder.counters.streamsReceived == 5 && recorder.records.isEmpty)
    }

    @Test("over the wire: a retry-after header on the 429, a slow answer counted, a late push counted")
    func overTheWire() async throws {
        var configuration = MockAPNsConfiguration(apps: [Fixture.app])
        configuration.clock = MockAPNsClock { Fixture.nowMilliseconds }
        configuration.injectedErrors = [MockAPNsInjectedError(reason: "TooManyRequests", rate: 1, retryAfterSeconds: 2)]
        configuration.latency = MockAPNsLatency(slow: MockAPNsSlowAnswers(rate: 1, range: .milliseconds(1) ... .milliseconds(2)))
        let server = try await MockAPNsServer.start(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton)
        do {
            let c = try await TestAPNsConnection.connect(
                port: server.port, certificatePEM: server.certificatePEM, group: MultiThreadedEventLoopGroup.singleton)
            let late = Fixture.headers().map { $0.name == "apns-expiration" ? ($0.name, String(Fixture.nowSeconds - 2)) : $0 }
            let response = try await c.send(path: "/3/device/" + Fixture.token, headers: late, body: Array(Fixture.updateBody.utf8))
            #expect(response.status == 429)
            #expect(response.header("retry-after") == "2")
            #expect(response.bodyText == #"{"reason":"TooManyRequests"}"#)
            let counters = server.counters
            #expect(counters.responsesWithRetryAfter == 1 && counters.slowAnswers == 1)
            #expect(counters.receivedAfterExpiration == 1 && counters.mostMillisecondsPastExpiration == 2_000)
            await c.close()
            try await server.shutdown()
        } catch {
            try? await server.shutdown()
            throw error
        }
    }
}
