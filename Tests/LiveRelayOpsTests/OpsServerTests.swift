import Foundation
import LiveRelayTestSupport
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle
import Testing

@testable import LiveRelayOps

/// A readiness the test sets by hand.
final class FakeReadiness: ReadinessSource {
    private let answer = NIOLockedValueBox(Readiness.ready)
    func set(_ readiness: Readiness) { answer.withLockedValue { $0 = readiness } }
    func readiness() async -> Readiness { answer.withLockedValue { $0 } }
}

struct OpsServerTests {
    /// The real listener on port 0, queried with plain HTTP/1.1 over a socket,
    /// as a scraper and a load balancer would.
    @Test func servesHealthReadinessAndMetrics() async throws {
        let registry = PrometheusCollectorRegistry()
        // Through swift-metrics, as the server's counters are, without bootstrapping the process-wide system.
        let factory = PrometheusMetricsFactory(registry: registry)
        let counter = Counter(label: "liverelay_test_calls_total", dimensions: [("app", "dev.app"), ("status", "OK")], factory: factory)
        counter.increment(by: 3)
        let readiness = FakeReadiness()
        // A gauge that is read, not counted, set by the hook each scrape runs first.
        let scrapes = NIOLockedValueBox(0)
        let depth = Gauge(label: "liverelay_test_depth", dimensions: [("app", "dev.app")], factory: factory)
        let server = OpsServer(
            configuration: OpsServer.Configuration(host: "127.0.0.1", port: 0), registry: registry, readiness: readiness,
            beforeScrape: {
                depth.record(
                    scrapes.withLockedValue {
                        $0 += 1; return $0 * 10
                    })
            },
            logger: Logger(label: "ops-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await server.run() }
            let port = try #require(try await server.boundAddress.port)

            let health = try await httpGet(port: port, path: "/healthz")
            #expect(health.status == 200)
            #expect(health.body == "ok\n")

            let ready = try await httpGet(port: port, path: "/readyz")
            #expect(ready.status == 200)

            readiness.set(.notReady("draining"))
            let draining = try await httpGet(port: port, path: "/readyz")
            #expect(draining.status == 503)
            #expect(draining.body == "not ready: draining\n")

            readiness.set(.notReady("store: closed"))
            #expect(try await httpGet(port: port, path: "/readyz").status == 503)

            let metrics = try await httpGet(port: port, path: "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.headers.contains("text/plain; version=0.0.4"))
            #expect(metrics.body.contains("# TYPE liverelay_test_calls_total counter"))
            #expect(metrics.body.contains(#"liverelay_test_calls_total{app="dev.app",status="OK"} 3"#))
            #expect(metrics.body.contains(#"liverelay_test_depth{app="dev.app"} 10"#), "set by the hook before this scrape")
            #expect(try await httpGet(port: port, path: "/metrics").body.contains(#"liverelay_test_depth{app="dev.app"} 20"#))
            #expect(scrapes.withLockedValue { $0 } == 2, "probes do not run the hook")
            #expect(metrics.body.contains("liverelay_ready 0"), "not ready (the store) when scraped")
            readiness.set(.ready)
            let after = try await httpGet(port: port, path: "/metrics").body
            #expect(after.contains("liverelay_ready 1"))
            // The process's own figures, standard names, with values a live process has.
            func value(_ name: String) -> Double? {
                after.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
            }
            #expect((value("process_resident_memory_bytes") ?? 0) > 1_000_000)
            #expect((value("process_cpu_seconds_total") ?? 0) > 0)
            #expect((value("process_open_fds") ?? 0) >= 3)
            #expect((value("process_max_fds") ?? 0) >= (value("process_open_fds") ?? .infinity))
            let started = value("process_start_time_seconds") ?? 0
            #expect(abs(started - Date().timeIntervalSince1970) < 24 * 3600, "\(started)")

            #expect(try await httpGet(port: port, path: "/nothing").status == 404)
            tasks.cancelAll()
        }
    }

    @Test func servingReadinessReportsEachPart() async throws {
        let storeDown = NIOLockedValueBox(false)
        let readiness = ServingReadiness(
            storeProbe: {
                if storeDown.withLockedValue({ $0 }) { throw ProbeFailure() }
            }, probeEvery: .zero)
        #expect(await readiness.readiness() == .notReady("RPC listener not bound yet"))
        readiness.listenerBound()
        #expect(await readiness.readiness() == .ready)
        storeDown.withLockedValue { $0 = true }
        #expect(await readiness.readiness() == .notReady("store: poisoned"))
        storeDown.withLockedValue { $0 = false }
        readiness.beginDraining()
        #expect(await readiness.readiness() == .notReady("draining"))
    }

    /// A store that failed for good (a SQLite fsync) makes `/healthz` fail, and `/readyz` with it,
    /// until the process restarts: a supervisor or kubelet then restarts it.
    @Test func aStoreThatFailedForGoodFailsTheLivenessProbe() async throws {
        let failure = NIOLockedValueBox<String?>(nil)
        let readiness = ServingReadiness(storeProbe: nil, storeFailure: { failure.withLockedValue { $0 } })
        readiness.listenerBound()
        #expect(readiness.liveness() == .ready)
        #expect(await readiness.readiness() == .ready)
        failure.withLockedValue { $0 = "fsync of the WAL failed" }
        #expect(readiness.liveness() == .notReady("store: fsync of the WAL failed"))
        #expect(await readiness.readiness() == .notReady("store: fsync of the WAL failed"))
        let server = OpsServer(
            configuration: OpsServer.Configuration(host: "127.0.0.1", port: 0), registry: PrometheusCollectorRegistry(),
            readiness: readiness, logger: Logger(label: "ops-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await server.run() }
            let port = try #require(try await server.boundAddress.port)
            let health = try await httpGet(port: port, path: "/healthz")
            #expect(health.status == 503)
            #expect(health.body == "unhealthy: store: fsync of the WAL failed\n")
            tasks.cancelAll()
        }
    }

    /// `/readyz` asked again and again runs the store probe at most once per interval: the
    /// answer is kept, and a client hammering the port does not become store load.
    @Test func theStoreIsProbedAtMostOncePerInterval() async throws {
        let probes = NIOLockedValueBox(0)
        let clock = NIOLockedValueBox(Duration.seconds(100))
        let readiness = ServingReadiness(
            storeProbe: { probes.withLockedValue { $0 += 1 } }, probeEvery: .seconds(1), uptime: { clock.withLockedValue { $0 } })
        readiness.listenerBound()
        for _ in 0..<20 { #expect(await readiness.readiness() == .ready) }
        #expect(probes.withLockedValue { $0 } == 1)
        clock.withLockedValue { $0 += .milliseconds(999) }
        _ = await readiness.readiness()
        #expect(probes.withLockedValue { $0 } == 1)
        clock.withLockedValue { $0 += .milliseconds(2) }
        _ = await readiness.readiness()
        #expect(probes.withLockedValue { $0 } == 2)
    }

    /// A client that sends its request head a little at a time and never finishes it is
    /// closed at the header timeout (bytes keep arriving, so an idle timeout alone would not).
    @Test(.timeLimit(.minutes(1)))
    func anUnfinishedRequestHeadIsClosedAtTheHeaderTimeout() async throws {
        let server = OpsServer(
            configuration: OpsServer.Configuration(host: "127.0.0.1", port: 0, headerTimeout: .milliseconds(300)),
            registry: PrometheusCollectorRegistry(), readiness: FakeReadiness(), logger: Logger(label: "ops-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await server.run() }
            let port = try #require(try await server.boundAddress.port)
            let closed = try await NIOThreadPool.singleton.runIfActive { () throws -> Bool in
                let connection = try RawConnection(port: port)
                for piece in ["GET /healthz HTTP/1.1\r\n", "Host: 127.0.0.1\r\n", "X-Slow: 1\r\n"] {
                    connection.send(piece)
                    usleep(100_000)
                }
                return connection.waitForClose(seconds: 20)
            }
            #expect(closed, "the connection was still open 20 s after its unfinished head")
            // A complete request is served as before. A loaded machine may read even a whole head
            // after the 300 ms and close that connection (the timeout doing its job): try again.
            var answered: [String] = []
            for _ in 0..<5 where answered.last != "200" {
                do {
                    answered.append("\(try await httpGet(port: port, path: "/healthz").status)")
                } catch {
                    answered.append("\(error)")
                }
            }
            #expect(answered.last == "200", "answers: \(answered)")
            tasks.cancelAll()
        }
    }

    /// At most `maxConnections` connections are served at once: the next one is answered once one closes.
    @Test(.timeLimit(.minutes(1)))
    func connectionsBeyondTheCapWaitForOneToClose() async throws {
        let server = OpsServer(
            configuration: OpsServer.Configuration(host: "127.0.0.1", port: 0, maxConnections: 1),
            registry: PrometheusCollectorRegistry(), readiness: FakeReadiness(), logger: Logger(label: "ops-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await server.run() }
            let port = try #require(try await server.boundAddress.port)
            let holder = try await NIOThreadPool.singleton.runIfActive { try RawConnection(port: port) }
            // Served: the holder's connection is accepted before the next one.
            holder.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await NIOThreadPool.singleton.runIfActive { holder.readSome(seconds: 10) }?.contains("200") == true)
            let answered = NIOLockedValueBox(false)
            let waiting = Task {
                let answer = try await httpGet(port: port, path: "/healthz")
                answered.withLockedValue { $0 = true }
                return answer
            }
            try await Task.sleep(for: .milliseconds(500))
            #expect(!answered.withLockedValue { $0 }, "a second connection was served beside the first")
            #expect(try await NIOThreadPool.singleton.runIfActive { holder.isOpen }, "the holder is still connected")
            holder.close()
            #expect(try await waiting.value.status == 200, "answered once the holder closed")
            tasks.cancelAll()
        }
    }

    /// With a token, `/metrics` answers 401 without it or with another, 200 with it; the probes stay open.
    @Test func metricsAskForTheBearerTokenWhenOneIsSet() async throws {
        let server = OpsServer(
            configuration: OpsServer.Configuration(host: "127.0.0.1", port: 0, metricsToken: "s3cret-token"),
            registry: PrometheusCollectorRegistry(), readiness: FakeReadiness(), logger: Logger(label: "ops-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await server.run() }
            let port = try #require(try await server.boundAddress.port)
            #expect(try await httpGet(port: port, path: "/metrics").status == 401)
            #expect(try await httpGet(port: port, path: "/metrics", headers: ["Authorization: Bearer wrong"]).status == 401)
            #expect(try await httpGet(port: port, path: "/metrics", headers: ["Authorization: Bearer s3cret-token"]).status == 200)
            #expect(try await httpGet(port: port, path: "/healthz").status == 200)
            #expect(try await httpGet(port: port, path: "/readyz").status == 200)
            tasks.cancelAll()
        }
        #expect(OpsServer.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!OpsServer.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        #expect(!OpsServer.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
    }

    /// A probe that would answer in an hour: readiness answers at its own timeout instead
    /// (were it to wait for the probe, the time limit would fail the test).
    @Test(.timeLimit(.minutes(1)))
    func aStoreThatDoesNotAnswerIsNotReady() async throws {
        let readiness = ServingReadiness(
            storeProbe: { try await Task.sleep(for: .seconds(3600)) }, probeTimeout: .milliseconds(50))
        readiness.listenerBound()
        guard case .notReady(let reason) = await readiness.readiness() else {
            Issue.record("a hung store probe was reported ready")
            return
        }
        #expect(reason.hasPrefix("store: no answer within"))
    }

    /// Graceful shutdown reaches the drain signal (listed last) before the
    /// services before it, and the ops server (listed first) still answers then.
    @Test func drainSignalFlipsReadinessAtTheStartOfGracefulShutdown() async throws {
        let readiness = ServingReadiness(storeProbe: nil)
        readiness.listenerBound()
        let server = OpsServer(
            configuration: OpsServer.Configuration(host: "127.0.0.1", port: 0), registry: PrometheusCollectorRegistry(),
            readiness: readiness, logger: Logger(label: "ops-test"))
        let observed = NIOLockedValueBox<Int?>(nil)
        let probe = ReadyzDuringShutdown(server: server, observed: observed)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [server, probe, readiness.drainSignal], logger: Logger(label: "ops-test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let port = try #require(try await server.boundAddress.port)
            #expect(try await httpGet(port: port, path: "/readyz").status == 200)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(observed.withLockedValue { $0 } == 503)
    }
}

struct ProbeFailure: Error, CustomStringConvertible {
    var description: String { "poisoned" }
}

/// Stands for the RPC server: on graceful shutdown it asks /readyz, as a load balancer would during the drain.
struct ReadyzDuringShutdown: Service {
    let server: OpsServer
    let observed: NIOLockedValueBox<Int?>

    func run() async throws {
        try? await gracefulShutdown()
        let port = try await server.boundAddress.port ?? 0
        let status = try await httpGet(port: port, path: "/readyz").status
        observed.withLockedValue { $0 = status }
    }
}

struct HTTPAnswer {
    var status: Int
    var headers: String
    var body: String
}

/// One HTTP/1.1 GET over a plain socket, read until the server closes (Connection: close).
/// The blocking socket calls run on NIO's thread pool: on the cooperative pool
/// (two threads on a two-core machine) they would starve the server under test.
func httpGet(port: Int, path: String, headers: [String] = []) async throws -> HTTPAnswer {
    try await NIOThreadPool.singleton.runIfActive {
        let text = try plainHTTPGet(port: port, path: path, headers: headers)
        guard let split = text.range(of: "\r\n\r\n") else { throw HTTPTestError("no header end in \(text)") }
        let head = String(text[..<split.lowerBound])
        let statusLine = head.split(separator: "\r\n").first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw HTTPTestError("bad status line \(statusLine)") }
        return HTTPAnswer(status: status, headers: head, body: String(text[split.upperBound...]))
    }
}

struct HTTPTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `/proc/self/stat`'s fields, counted from the command name's last parenthesis (a name may hold both).
struct ProcessStatTests {
    @Test func fieldsAreCountedFromTheLastParenthesis() throws {
        let line =
            "4242 (lr (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 25 0 0 20 0 7 0 987654 123456789 3000 "
            + "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        let stat = try #require(ProcessMetrics.Stat(parsing: line))
        #expect(stat == ProcessMetrics.Stat(cpuTicks: 175, startTicks: 987654, residentPages: 3000))
        #expect(ProcessMetrics.Stat(parsing: "4242 (truncated) S 1 2") == nil)
        #expect(ProcessMetrics.Stat(parsing: "no parenthesis") == nil)
    }
}
