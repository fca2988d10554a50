import NIOCore
import Testing

@testable import LiveRelayAPNs

/// Each request reaches the transport of its token's environment, in order,
/// whether a batch is one environment's (passed on whole) or both.
@Suite("APNs environment router")
struct APNsEnvironmentRouterTests {
    /// Records the batches it is given (the router calls it at once, on the test's thread).
    final class RecordingTransport: APNsTransport, @unchecked Sendable {
        private(set) var batches: [[UInt64]] = []

        func send(_ request: APNsRequest) -> EventLoopFuture<APNsResponse> {
            fatalError("the router sends batches")
        }

        func send(_ requests: [APNsTaggedRequest], to sink: any APNsAnswerSink) {
            batches.append(requests.map(\.tag))
        }

        func shutdown() -> EventLoopFuture<Void> { fatalError("not shut down here") }
    }

    final class NoSink: APNsAnswerSink {
        func received(_ answers: [APNsAnswer]) {}
    }

    static func batch(_ environments: [APNsEnvironment]) -> [APNsTaggedRequest] {
        environments.enumerated().map { index, environment in
            APNsTaggedRequest(
                tag: UInt64(index),
                request: APNsRequest(
                    deviceToken: String(repeating: "a", count: 64), headers: APNsHeaders(bundleID: "com.example", expiration: 0),
                    payload: APNsPayload(bytes: Array("{}".utf8)), environment: environment))
        }
    }

    @Test(arguments: [
        ([APNsEnvironment.production, .production, .production], [[0, 1, 2]], [[UInt64]]()),
        ([.sandbox, .sandbox], [], [[0, 1]]),
        ([.production, .sandbox, .production, .sandbox], [[0, 2]], [[1, 3]]),
        ([.sandbox, .production], [[1]], [[0]]),
        ([], [], []),
    ])
    func eachRequestGoesToItsEnvironment(
        environments: [APNsEnvironment], production expectedProduction: [[UInt64]], sandbox expectedSandbox: [[UInt64]]
    ) {
        let production = RecordingTransport()
        let sandbox = RecordingTransport()
        let router = APNsEnvironmentRouter(production: production, sandbox: sandbox)
        router.send(Self.batch(environments), to: NoSink())
        #expect(production.batches == expectedProduction)
        #expect(sandbox.batches == expectedSandbox)
    }
}
