import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayMockAPNs
import LiveRelayTLS
import LiveRelayTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayAPNsClient

/// The pool against `LiveRelayMockAPNs` over real TLS and HTTP/2 on loopback.
@Suite("APNs pool against the mock APNs")
struct PoolIntegrationTests {
    static let key = try! APNsSigningKey.generate(keyID: "MOCKKEY001", teamID: "MOCKTEAM01")
    static let bundleID = "com.example.liverelay"

    static func mockConfiguration() -> MockAPNsConfiguration {
        MockAPNsConfiguration(apps: [
            MockAPNsApp(
                bundleID: bundleID, teamID: key.teamID, keyID: key.keyID,
                publicKeyPEM: try! key.publicKeyPEM)
        ])
    }

    static func request(_ n: Int) -> APNsRequest {
        let digits = String(n, radix: 16)
        let token = String(repeating: "a", count: 64 - digits.count) + digits
        let payload = APNsPayload(
            bytes: Array(
                #"{"aps":{"timestamp":\#(1_700_000_000 + n),"event":"update","content-state":{"n":\#(n)}}}"#.utf8))
        return APNsRequest(
            deviceToken: token, headers: APNsHeaders(bundleID: bundleID, expiration: 0),
            payload: payload, apnsID: "00000000-0000-0000-0000-\(String(repeating: "0", count: 12 - digits.count))\(digits)")
    }

    /// Starts a mock, makes a pool that trusts its certificate, runs `body`, shuts both down.
    static func withPool(
        mock configure: (inout MockAPNsConfiguration) -> Void = { _ in },
        pool adjust: (inout APNsClientConfiguration) -> Void = { _ in },
        tokenSource: ProviderTokenSource = ProviderTokenSource(key: key),
        _ body: (APNsConnectionPool, MockAPNsServer) async throws -> Void
    ) async throws {
        var mockConfiguration = mockConfiguration()
        configure(&mockConfiguration)
        let group = MultiThreadedEventLoopGroup.singleton
        let mock = try await MockAPNsServer.start(configuration: mockConfiguration, group: group)
        var configuration = APNsClientConfiguration.trusting(
            certificatePEM: mock.certificatePEM,
            endpoint: .custom(host: "127.0.0.1", port: mock.port))
        configuration.backoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))
        configuration.tickInterval = .milliseconds(50)
        adjust(&configuration)
        let pool = try APNsConnectionPool(configuration: configuration, tokenSource: tokenSource, group: group)
        do {
            try await body(pool, mock)
        } catch {
            try? await pool.shutdown().get()
            try? await mock.shutdown()
            throw error
        }
        try await pool.shutdown().get()
        try await mock.shutdown()
    }

    static func outcome(_ future: EventLoopFuture<APNsResponse>) async -> Result<APNsResponse, APNsTransportError> {
        do { return .success(try await future.get()) } catch let error as APNsTransportError { return .failure(error) } catch {
            return .failure(.malformedResponse("unexpected \(error)"))
        }
    }

    @Test func deliversWithExactHeadersAndBody() async throws {
        try await Self.withPool { pool, mock in
            let request = Self.request(1)
            let response = try await pool.send(request).get()
            #expect(response == APNsResponse(status: 200, apnsID: request.apnsID))
            let record = try #require(mock.received.first)
            #expect(record.method == "POST")
            #expect(record.path == "/3/device/" + request.deviceToken)
            #expect(record.body == request.payload.bytes)
            #expect(record.header("apns-topic") == "com.example.liverelay.push-type.liveactivity")
            #expect(record.header("apns-push-type") == "liveactivity")
            #expect(record.header("apns-priority") == "10")
            #expect(record.header("apns-expiration") == "0")
            #expect(record.header("apns-id") == request.apnsID)
            #expect(record.header("content-length") == String(request.payload.count))
        }
    }

    @Test func honoursTheStreamLimitAsAPNsRaisesIt() async throws {
        try await Self.withPool(
            mock: {
                $0.limitStreamsUntilAuthenticated = true; $0.maxConcurrentStreams = 8
                $0.latency = MockAPNsLatency(fixed: .milliseconds(5))
            },
            pool: { $0.maximumConnections = 1 }
        ) { pool, mock in
            let futures = (0..<200).map { pool.send(Self.request($0)) }
            var delivered = 0
            for future in futures where (try? await future.get())?.status == 200 { delivered += 1 }
            #expect(delivered == 200)
            #expect(mock.counters.connectionsAccepted == 1)
            #expect(mock.counters.peakConcurrentStreams > 1)  // the raised limit was used
            #expect(mock.counters.peakConcurrentStreams <= 8)  // and never exceeded
        }
    }

    @Test func goAwayRefusesUnprocessedStreamsWhichSucceedOnANewConnection() async throws {
        try await Self.withPool(
            mock: {
                $0.goAwayAfterStreams = 5; $0.latency = MockAPNsLatency(fixed: .milliseconds(20))
            },
            pool: { $0.timeouts.responseTimeout = .seconds(5) }
        ) { pool, mock in
            var pending = Array(0..<20)
            var delivered: Set<Int> = []
            var refused = 0
            var timedOut = 0
            // As the dispatcher would: retry what is retryable until everything is delivered.
            for _ in 0..<60 where !pending.isEmpty {
                let results = await withTaskGroup(of: (Int, Result<APNsResponse, APNsTransportError>).self) { group in
                    for n in pending { group.addTask { (n, await Self.outcome(pool.send(Self.request(n)))) } }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                pending = []
                for (n, result) in results {
                    switch result {
                    case .success(let response) where response.status == 200: delivered.insert(n)
                    case .failure(let error) where error.isRetryable:
                        if error == .refusedByGoAway { refused += 1 }
                        if error == .timedOut { timedOut += 1 }
                        pending.append(n)
                    default: Issue.record("\(n): \(result)")
                    }
                }
            }
            #expect(delivered == Set(0..<20))
            #expect(refused > 0)
            // Streams the GOAWAY kept are answered: none waits for its timeout (each
            // stream's HEADERS and DATA leave together, see APNsConnectionHandler.send).
            #expect(timedOut == 0)
            #expect(mock.counters.goAwaysSent > 0 && mock.counters.connectionsAccepted > 1)
        }
    }

    @Test func connectionDropFailsInFlightAndTheNextRequestReconnects() async throws {
        try await Self.withPool(
            mock: {
                $0.dropConnectionAfterStreams = 3; $0.latency = MockAPNsLatency(fixed: .milliseconds(50))
            },
            pool: { $0.maximumConnections = 1 }
        ) { pool, mock in
            let results = await withTaskGroup(of: Result<APNsResponse, APNsTransportError>.self) { group in
                for n in 0..<6 { group.addTask { await Self.outcome(pool.send(Self.request(n))) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let lost = results.filter { $0 == .failure(.connectionLost) || $0 == .failure(.refusedByGoAway) }.count
            let ok = results.filter { (try? $0.get())?.status == 200 }.count
            #expect(lost > 0 && lost + ok == 6, "\(results)")
            let after = try await pool.send(Self.request(99)).get()
            #expect(after.status == 200)
            #expect(mock.counters.connectionsAccepted >= 2)
        }
    }

    @Test func expiredProviderTokenIsReportedSoTheRetryCarriesANewOne() async throws {
        // Our clock is 3700 s behind the mock's: the first token is already expired for it.
        let clock = ManualClock(SystemClock().now() - .seconds(3700))
        let source = ProviderTokenSource(key: Self.key, clock: clock)
        try await Self.withPool(tokenSource: source) { pool, mock in
            let first = try await pool.send(Self.request(1)).get()
            #expect(first.status == 403 && first.reason == "ExpiredProviderToken")
            #expect(first.disposition == .refreshProviderTokenAndRetry)
            // 20 minutes later by our clock the token is 2500 s old for the mock; without the
            // report it would be reused (refresh is due at 50 min) and fail again.
            clock.advance(by: .seconds(20 * 60))
            let retry = try await pool.send(Self.request(1)).get()
            #expect(retry.status == 200)
            #expect(try source.current().generation == 2)
        }
    }

    @Test func credentialErrorsComeBackAsResponses() async throws {
        let stranger = try APNsSigningKey.generate(keyID: Self.key.keyID, teamID: Self.key.teamID)
        try await Self.withPool(tokenSource: ProviderTokenSource(key: stranger)) { pool, _ in
            let response = try await pool.send(Self.request(1)).get()
            #expect(response.status == 403 && response.reason == "InvalidProviderToken")
            #expect(response.disposition == .credentialsRejected)
        }
    }

    @Test func responseTimeoutFailsTheRequest() async throws {
        try await Self.withPool(
            mock: { $0.latency = MockAPNsLatency(fixed: .seconds(3)) },
            pool: { $0.timeouts.responseTimeout = .milliseconds(200) }
        ) { pool, _ in
            let result = await Self.outcome(pool.send(Self.request(1)))
            #expect(result == .failure(.timedOut))
        }
    }

    /// APNs sends each error reason as a DATA frame, which spends the connection's
    /// 65,535-byte receive window. The client runs nio-http2 in frame mode, where
    /// nothing gives that window back unless the connection handler does: without it
    /// about 2,400 `BadDeviceToken` answers on one connection would stall every later
    /// answer with a body until its timeout.
    @Test func errorAnswersBeyondTheConnectionWindowAllArrive() async throws {
        try await Self.withPool(
            mock: { $0.injectedErrors = [MockAPNsInjectedError(reason: "BadDeviceToken", rate: 1)] },
            pool: {
                $0.maximumConnections = 1; $0.timeouts.responseTimeout = .seconds(10)
            }
        ) { pool, mock in
            let count = 4_000  // 4,000 × 27 bytes of body: 108 KB, well past one window
            var answered = 0
            var failures: [APNsTransportError] = []
            for batch in stride(from: 0, to: count, by: 500) {
                let futures = (batch..<batch + 500).map { pool.send(Self.request($0)) }
                for future in futures {
                    switch await Self.outcome(future) {
                    case .success(let response): if response.reason == "BadDeviceToken" { answered += 1 }
                    case .failure(let error): failures.append(error)
                    }
                }
            }
            #expect(answered == count)
            #expect(failures.count == 0, "first failures: \(failures.prefix(3))")
            #expect(mock.counters.connectionsAccepted == 1)
        }
    }

    @Test func untrustedCertificateAndClosedPortFailToConnect() async throws {
        try await Self.withPool(pool: { $0.tls.trustRoots = .systemDefault }) { pool, _ in
            let result = await Self.outcome(pool.send(Self.request(1)))
            guard case .failure(.connectFailed) = result else { Issue.record("\(result)"); return }
        }
        // A port nobody listens on (bind one, close it, use it).
        let group = MultiThreadedEventLoopGroup.singleton
        let probe = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = probe.localAddress!.port!
        try await probe.close()
        let pool = try APNsConnectionPool(
            configuration: .init(endpoint: .custom(host: "127.0.0.1", port: port)),
            tokenSource: ProviderTokenSource(key: Self.key), group: group)
        let result = await Self.outcome(pool.send(Self.request(1)))
        guard case .failure(.connectFailed) = result else { Issue.record("\(result)"); return }
        // Backing off with nothing alive: the next request fails fast, without queueing.
        let fast = await Self.outcome(pool.send(Self.request(2)))
        guard case .failure(.connectFailed) = fast else { Issue.record("\(fast)"); return }
        try await pool.shutdown().get()
    }

    @Test func shutdownFailsNewRequests() async throws {
        try await Self.withPool { pool, _ in
            #expect(try await pool.send(Self.request(1)).get().status == 200)
            try await pool.shutdown().get()
            #expect(await Self.outcome(pool.send(Self.request(2))) == .failure(.shutDown))
        }
    }
}
