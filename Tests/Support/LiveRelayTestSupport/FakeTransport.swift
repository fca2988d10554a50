import LiveRelayAPNs
import NIOConcurrencyHelpers
import NIOCore

/// An APNsTransport the test controls: every request waits on a promise the
/// test completes, or is answered at once by `script`.
public final class FakeTransport: APNsTransport, @unchecked Sendable {
    private let lock = NIOLock()
    private let eventLoop: any EventLoop
    private var waiting: [(APNsRequest, EventLoopPromise<APNsResponse>)] = []
    private var _requests: [APNsRequest] = []
    private var _shutdownCalls = 0
    private var attempts: [String: Int] = [:]
    /// Answers a request at once when it returns a result; nil leaves it waiting.
    public let script: (@Sendable (APNsRequest, Int) -> Result<APNsResponse, APNsTransportError>?)?

    /// How long a scripted answer takes (on the loop's clock).
    public let delay: TimeAmount

    public init(
        eventLoop: any EventLoop, delay: TimeAmount = .zero,
        script: (@Sendable (APNsRequest, Int) -> Result<APNsResponse, APNsTransportError>?)? = nil
    ) {
        self.eventLoop = eventLoop
        self.delay = delay
        self.script = script
    }

    public var requests: [APNsRequest] { lock.withLock { _requests } }
    public var waitingCount: Int { lock.withLock { waiting.count } }
    public var shutdownCalls: Int { lock.withLock { _shutdownCalls } }

    public func send(_ request: APNsRequest) -> EventLoopFuture<APNsResponse> {
        let promise = eventLoop.makePromise(of: APNsResponse.self)
        let attempt: Int = lock.withLock {
            _requests.append(request)
            attempts[request.deviceToken, default: 0] += 1
            return attempts[request.deviceToken]!
        }
        if let result = script?(request, attempt) {
            if delay == .zero {
                promise.completeWith(result.mapError { $0 as any Error })
            } else {
                eventLoop.scheduleTask(in: delay) { promise.completeWith(result.mapError { $0 as any Error }) }
            }
        } else {
            lock.withLock { waiting.append((request, promise)) }
        }
        return promise.futureResult
    }

    /// Completes the oldest waiting request.
    public func answerNext(_ result: Result<APNsResponse, APNsTransportError>) {
        let next = lock.withLock { waiting.isEmpty ? nil : waiting.removeFirst() }
        next?.1.completeWith(result.mapError { $0 as any Error })
    }

    /// Completes every waiting request.
    public func answerAll(_ result: Result<APNsResponse, APNsTransportError>) {
        let all = lock.withLock {
            defer { waiting.removeAll() }
            return waiting
        }
        for (_, promise) in all { promise.completeWith(result.mapError { $0 as any Error }) }
    }

    public func shutdown() -> EventLoopFuture<Void> {
        lock.withLock { _shutdownCalls += 1 }
        return eventLoop.makeSucceededVoidFuture()
    }
}

/// Routes to fake transports: the dispatcher's ``APNsTransportProvider`` in tests.
public final class FakeTransports: APNsTransportProvider, @unchecked Sendable {
    private let lock = NIOLock()
    private var table: [APNsRoute: any APNsTransport]

    public init(_ table: [APNsRoute: any APNsTransport] = [:]) { self.table = table }

    public func set(_ transport: any APNsTransport, for route: APNsRoute) { lock.withLock { table[route] = transport } }

    public func transport(for route: APNsRoute) -> (any APNsTransport)? { lock.withLock { table[route] } }
}

/// A route named `name`: a custom destination and key of that name.
public func testRoute(_ name: String) -> APNsRoute {
    APNsRoute(destination: .custom(host: name, port: 443), teamID: "TEAM", keyID: name)
}
