import LiveRelayEndpoint
import NIOCore

/// Where an app's pushes go. Apple's two environments, or any host and port:
/// `liverelay mock-apns`, a staging relay, a test.
public enum APNsEndpoint: Hashable, Sendable, CustomStringConvertible {
    case production
    case sandbox
    case custom(host: String, port: Int)

    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        case let .custom(host, _): host
        }
    }

    public var port: Int {
        switch self {
        case .production, .sandbox: 443
        case let .custom(_, port): port
        }
    }

    /// The requests' `:authority`: the host (an IPv6 one in brackets) and the port, unless it is 443.
    public var authority: String {
        guard port == 443 else { return description }
        return host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }

    public var description: String { EndpointSyntax.authority(host: host, port: port) }
}

/// One push as it goes on the wire: `POST /3/device/<token>` with these
/// headers and body, or for a broadcast `POST /4/broadcasts/apps/<bundle id>`
/// with `apns-channel-id` and no `apns-topic`. The `authorization` header is not here: the transport
/// adds the provider token current when the stream opens, so a retried
/// request never carries a stale one.
public struct APNsRequest: Sendable {
    /// Lowercase hex; for a broadcast, the channel id (the send's one target).
    public var deviceToken: String
    /// Set for a broadcast to a channel: the path, `apns-topic` and `apns-expiration` follow it.
    public var broadcast: APNsBroadcast?
    /// Set for a channel management call (create, read, delete, list): its method, path,
    /// `apns-channel-id` and body replace the push's, and ``headers`` is unused.
    public var management: APNsChannelManagementRequest?
    public var headers: APNsHeaders
    /// Shared by every token of a fan-out (copy-on-write).
    public var payload: APNsPayload
    /// Lowercase UUID sent as `apns-id`, so logs on both sides can be joined; APNs echoes it.
    public var apnsID: String?
    /// The environment the token was registered for: a sandbox token sent to
    /// production answers BadDeviceToken (and would be pruned), so a transport
    /// that serves both (``APNsEnvironmentRouter``) picks its endpoint by it.
    public var environment: APNsEnvironment
    /// The push's send-by time (its expiry, or a waiting caller's deadline less a
    /// margin), on the monotonic clock: a transport that cannot write the request by
    /// then (it waited for a free stream, a connection or a busy event loop) fails it
    /// with ``APNsTransportError/expiredBeforeSending`` instead of putting an expired
    /// push on the wire. nil: no limit.
    public var sendBy: NIODeadline?

    public init(
        deviceToken: String, headers: APNsHeaders, payload: APNsPayload, apnsID: String? = nil,
        environment: APNsEnvironment = .production, sendBy: NIODeadline? = nil, broadcast: APNsBroadcast? = nil
    ) {
        self.deviceToken = broadcast?.channelID ?? deviceToken
        self.broadcast = broadcast
        self.headers = headers
        self.payload = payload
        self.apnsID = apnsID
        self.environment = environment
        self.sendBy = sendBy
    }

    /// A channel management call, sent like a push (same connections, same provider token).
    /// Its ``apnsID``, when set, goes out as `apns-request-id`, the name the channel
    /// endpoints use.
    public init(
        management: APNsChannelManagementRequest, environment: APNsEnvironment, requestID: String? = nil,
        sendBy: NIODeadline? = nil
    ) {
        self.deviceToken = management.channelID ?? ""
        self.management = management
        // Unused for a management call: its headers are ``APNsChannelManagementRequest/headerFields``.
        self.headers = APNsHeaders(bundleID: "", expiration: 0)
        self.payload = APNsPayload(bytes: management.body)
        self.apnsID = requestID
        self.environment = environment
        self.sendBy = sendBy
    }

    /// `/3/device/<token>`, `/4/broadcasts/apps/<bundle id>`, or a management call's path.
    public var path: String { management?.path ?? broadcast?.path ?? ("/3/device/" + deviceToken) }

    /// `POST`, except for the management calls that read or delete.
    public var method: String { management?.method.rawValue ?? "POST" }

    /// True for a per-device push, the hot path: its id header is `apns-id`; broadcasts and
    /// management calls name theirs `apns-request-id` and may be answered with a channel id.
    public var isDevicePush: Bool { broadcast == nil && management == nil }

    /// The APNs headers, besides `authorization`, `apns-id` and `content-length`, in wire order.
    public var headerFields: [(name: String, value: String)] {
        if let management { return management.headerFields }
        return broadcast?.fields(from: headers) ?? headers.fields
    }
}

/// What APNs answered for one stream.
public struct APNsResponse: Hashable, Sendable {
    /// The HTTP status (200, 400, 403, 410, 413, 429, 500, 503...).
    public var status: Int
    /// The `reason` of the JSON error body; nil on 200.
    public var reason: String?
    /// For 410: when APNs learnt the token was invalid, in milliseconds since 1970.
    public var timestampMilliseconds: Int64?
    /// The `apns-id` response header.
    public var apnsID: String?
    /// A `retry-after` header in seconds. APNs never sends one (its answers carry
    /// only `apns-id` and the JSON reason), but a proxy or another push service in
    /// front of it may; the dispatcher then waits at least this long before a retry.
    public var retryAfterSeconds: Int?
    /// The `apns-channel-id` response header: the new channel's id on a 201 to a create.
    /// Always nil for a per-device push (the client does not look for it there).
    public var channelID: String? = nil
    /// A management call's success body (JSON: a channel's configuration, the list of
    /// channels). Empty for pushes, whose error bodies are parsed into ``reason``.
    /// Not in the initializer: `init(status:apnsID:body:)` reads a push's raw body.
    public var body: [UInt8] = []

    public init(
        status: Int, reason: String? = nil, timestampMilliseconds: Int64? = nil, apnsID: String? = nil,
        retryAfterSeconds: Int? = nil
    ) {
        self.status = status
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
        self.apnsID = apnsID
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// 2xx: 200 for pushes, broadcasts, reads and lists; 201 for a created channel; 204 for a deleted one.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// The most a `retry-after` is believed: a day. A longer one is a broken
    /// header, not a plan, and would overflow the dispatcher's arithmetic.
    public static let maximumRetryAfterSeconds = 86_400

    /// A `retry-after` value in delay-seconds (RFC 9110 §10.2.3), clamped to
    /// ``maximumRetryAfterSeconds``; nil for anything else, an HTTP-date
    /// included, which the caller then ignores rather than failing the answer.
    public static func retryAfterSeconds(parsing value: String) -> Int? {
        var text = Substring(value)
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        // More digits than an Int holds is still "a very long time".
        return min(Int(text) ?? maximumRetryAfterSeconds, maximumRetryAfterSeconds)
    }

    /// What the dispatcher should do about it (``APNsDisposition``).
    public var disposition: APNsDisposition { APNsDisposition(status: status, reason: reason) }
}

/// Why a request got no APNs answer. Each case says whether APNs can have
/// seen the push, because that decides whether a retry could duplicate it.
public enum APNsTransportError: Error, Hashable, Sendable {
    /// No connection could be made (DNS, TCP, TLS, ALPN not `h2`). Not sent.
    case connectFailed(String)
    /// The server's GOAWAY named a last stream id below this stream: not processed, safe to retry elsewhere.
    case refusedByGoAway
    /// The connection dropped after the request was written; APNs may or may not have it.
    case connectionLost
    /// No answer within the transport's response timeout.
    case timedOut
    /// The transport is shutting down.
    case shutDown
    /// The answer was not a valid APNs response (a protocol error on the server's side).
    case malformedResponse(String)
    /// The request's ``APNsRequest/sendBy`` passed before its stream could open. Not sent.
    case expiredBeforeSending

    /// The cases without their details, named as failure reasons.
    public enum Kind: String, CaseIterable, Sendable {
        case connectFailed = "ConnectFailed", refusedByGoAway = "RefusedByGoAway", connectionLost = "ConnectionLost"
        case timedOut = "TimedOut", shutDown = "TransportShutDown", malformedResponse = "MalformedResponse"
        case expiredBeforeSending = "ExpiredBeforeSending"
    }

    public var kind: Kind {
        switch self {
        case .connectFailed: .connectFailed
        case .refusedByGoAway: .refusedByGoAway
        case .connectionLost: .connectionLost
        case .timedOut: .timedOut
        case .shutDown: .shutDown
        case .malformedResponse: .malformedResponse
        case .expiredBeforeSending: .expiredBeforeSending
        }
    }

    /// The stable name of the failure: the failure reason in a call's
    /// account and the `reason` label of the metrics, beside APNs's own
    /// reasons (which are never spelt like these).
    public var reason: String { kind.rawValue }

    /// True when the request may be sent again; pushes carry an increasing
    /// aps timestamp, so a duplicate delivery is harmless to the device.
    public var isRetryable: Bool {
        switch self {
        case .connectFailed, .refusedByGoAway, .connectionLost, .timedOut: true
        // Sending it later would only be later still: the push has expired.
        case .shutDown, .malformedResponse, .expiredBeforeSending: false
        }
    }
}

/// Sends requests to one APNs endpoint with one signing key: a pool of HTTP/2
/// connections in production, a fake in dispatcher tests.
public protocol APNsTransport: Sendable {
    /// Sends one push. The future fails only with ``APNsTransportError``;
    /// every APNs answer, errors included, is a successful ``APNsResponse``.
    func send(_ request: APNsRequest) -> EventLoopFuture<APNsResponse>

    /// Sends many pushes, each answered (exactly once) to `sink` under its tag.
    /// A transport that can delivers together the answers that arrived together
    /// (one read of a connection), so its user takes one lock and makes one
    /// decision step per read rather than per push; the default sends each
    /// request by ``send(_:)`` and answers each on its own.
    func send(_ requests: [APNsTaggedRequest], to sink: any APNsAnswerSink)

    /// Finishes the streams in flight, then closes every connection.
    func shutdown() -> EventLoopFuture<Void>
}

/// A request and the number its answer comes back under.
public struct APNsTaggedRequest: Sendable {
    public var tag: UInt64
    public var request: APNsRequest

    public init(tag: UInt64, request: APNsRequest) {
        self.tag = tag
        self.request = request
    }
}

/// The answer to one tagged request: APNs's response, or why there is none.
public struct APNsAnswer: Sendable {
    public var tag: UInt64
    public var result: Result<APNsResponse, APNsTransportError>

    public init(tag: UInt64, result: Result<APNsResponse, APNsTransportError>) {
        self.tag = tag
        self.result = result
    }
}

/// Where a transport delivers the answers of ``APNsTransport/send(_:to:)``.
public protocol APNsAnswerSink: AnyObject, Sendable {
    /// Answers that arrived together, in arrival order; called on a transport's event loop.
    func received(_ answers: [APNsAnswer])
}

extension APNsTransport {
    public func send(_ requests: [APNsTaggedRequest], to sink: any APNsAnswerSink) {
        for tagged in requests {
            let tag = tagged.tag
            send(tagged.request).whenComplete { result in
                let answer: Result<APNsResponse, APNsTransportError> =
                    switch result {
                    case let .success(response): .success(response)
                    case let .failure(error as APNsTransportError): .failure(error)
                    case let .failure(error): .failure(.malformedResponse("\(error)"))
                    }
                sink.received([APNsAnswer(tag: tag, result: answer)])
            }
        }
    }
}

/// One app's transport when its production and sandbox tokens go to
/// different endpoints (Apple's two): each request goes to the transport of
/// its token's environment.
public struct APNsEnvironmentRouter: APNsTransport {
    public let production: any APNsTransport
    public let sandbox: any APNsTransport

    public init(production: any APNsTransport, sandbox: any APNsTransport) {
        self.production = production
        self.sandbox = sandbox
    }

    public func send(_ request: APNsRequest) -> EventLoopFuture<APNsResponse> {
        request.environment == .sandbox ? sandbox.send(request) : production.send(request)
    }

    public func send(_ requests: [APNsTaggedRequest], to sink: any APNsAnswerSink) {
        guard let environment = requests.first?.request.environment else { return }
        // A step's sends are nearly always one environment's: passed on whole, uncopied.
        if requests.allSatisfy({ $0.request.environment == environment }) {
            (environment == .sandbox ? sandbox : production).send(requests, to: sink)
            return
        }
        var toSandbox: [APNsTaggedRequest] = []
        var toProduction: [APNsTaggedRequest] = []
        for tagged in requests {
            if tagged.request.environment == .sandbox { toSandbox.append(tagged) } else { toProduction.append(tagged) }
        }
        if !toProduction.isEmpty { production.send(toProduction, to: sink) }
        if !toSandbox.isEmpty { sandbox.send(toSandbox, to: sink) }
    }

    public func shutdown() -> EventLoopFuture<Void> {
        let first = production.shutdown()
        let second = sandbox.shutdown()
        return first.and(second).map { _ in }
    }
}
