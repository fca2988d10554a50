import Foundation
import LiveRelayAPNs
import LiveRelayMockAPNs
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayAPNsClient

/// A benchmark, not a test: pushes/s from the pool to the mock over 1 and 4
/// connections. Runs only when asked:
/// `LIVERELAY_APNS_THROUGHPUT=50000 swift test -c release --filter ThroughputBenchmark`.
@Suite("APNs pool throughput (benchmark)")
struct ThroughputBenchmark {
    static let count = Int(getenvString("LIVERELAY_APNS_THROUGHPUT") ?? "") ?? 0

    @Test(.enabled(if: count > 0), arguments: [1, 4])
    func pushesPerSecond(connections: Int) async throws {
        let total = Self.count
        let window = 2_000
        let requests = (0..<1000).map(PoolIntegrationTests.request)
        try await PoolIntegrationTests.withPool(
            mock: { $0.recordingCapacity = 1_000 },
            pool: {
                $0.maximumConnections = connections; $0.maximumQueuedRequests = window * 2
            }
        ) { pool, mock in
            // Warm up: connections open and the stream limit is raised.
            for n in 0..<connections * 50 { _ = try await pool.send(requests[n % requests.count]).get() }
            let start = ContinuousClock.now
            let delivered = try await withThrowingTaskGroup(of: Int.self) { group in
                let perTask = total / 8
                for task in 0..<8 {
                    group.addTask {
                        var ok = 0
                        var inFlight: [EventLoopFuture<APNsResponse>] = []
                        inFlight.reserveCapacity(window / 8)
                        for n in 0..<perTask {
                            inFlight.append(pool.send(requests[(task * perTask + n) % requests.count]))
                            if inFlight.count == window / 8 {
                                for future in inFlight where try await future.get().status == 200 { ok += 1 }
                                inFlight.removeAll(keepingCapacity: true)
                            }
                        }
                        for future in inFlight where try await future.get().status == 200 { ok += 1 }
                        return ok
                    }
                }
                return try await group.reduce(0, +)
            }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print(
                "APNS_THROUGHPUT connections=\(connections) pushes=\(delivered) seconds=\(seconds) rate=\(Int(Double(delivered) / seconds))/s peakStreams=\(mock.counters.peakConcurrentStreams)"
            )
            #expect(delivered == (total / 8) * 8)
        }
    }
}

func getenvString(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
