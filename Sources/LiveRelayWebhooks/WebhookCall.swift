import LiveRelayEndpoint
import LiveRelayTLS
import NIOCore
import NIOHTTP1

/// One POST of a `WebhookHTTPClient`, from resolving to its result.
///
/// Its state lives on one event loop: every step after `start` runs there
/// (futures of that loop complete on it), so `finish` needs no lock and the
/// first outcome (the response, a failure, the deadline, the caller's
/// cancellation) is the one reported; later ones find `finished` set.
final class WebhookCall: @unchecked Sendable {
    private let client: WebhookHTTPClient
    private let url: WebhookURL
    private let head: HTTPRequestHead
    private let body: ByteBuffer
    private let timeout: TimeAmount
    private let deadline: NIODeadline
    private let eventLoop: any EventLoop
    private let promise: EventLoopPromise<WebhookHTTPResult>

    // On `eventLoop` only.
    private var finished = false
    private var timer: Scheduled<Void>?
    private var channel: (any Channel)?

    init(client: WebhookHTTPClient, url: WebhookURL, head: HTTPRequestHead, body: ByteBuffer, timeout: TimeAmount, eventLoop: any EventLoop)
    {
        self.client = client
        self.url = url
        self.head = head
        self.body = body
        self.timeout = timeout
        self.deadline = .now() + timeout
        self.eventLoop = eventLoop
        self.promise = eventLoop.makePromise()
    }

    func start() async -> WebhookHTTPResult {
        eventLoop.execute { self.begin() }
        // The promise is only ever succeeded.
        return (try? await promise.futureResult.get()) ?? .failure(.cancelled)
    }

    func cancel() {
        eventLoop.execute { self.finish(.failure(.cancelled)) }
    }

    private func begin() {
        guard !finished else { return }
        timer = eventLoop.scheduleTask(deadline: deadline) { self.timedOut() }
        guard !url.hostIsIPLiteral else {
            // The URL's syntax admits only addresses this parses.
            guard let address = try? SocketAddress(ipAddress: url.host, port: url.port) else {
                return finish(.failure(.connect("\(url.host) is not a usable IP address")))
            }
            return vet([address])
        }
        client.resolve(url.host, port: url.port, on: eventLoop).whenSuccess { resolved in
            switch resolved {
            case .success(let addresses): self.vet(addresses)
            case .failure(let failure): self.finish(.failure(failure))
            }
        }
    }

    /// Dials only what the policy allows; fails with the first refusal when that is nothing.
    private func vet(_ addresses: [SocketAddress]) {
        guard !finished else { return }
        var allowed: [SocketAddress] = []
        var firstRefusal: String?
        for address in addresses {
            if let refusal = client.addressPolicy.refusal(for: address) {
                if firstRefusal == nil { firstRefusal = refusal }
            } else {
                allowed.append(address)
            }
        }
        guard !allowed.isEmpty else { return finish(.failure(.addressRefused(firstRefusal ?? "\(url.host) has no address"))) }
        dial(allowed[...], lastError: nil)
    }

    /// Tries each address in turn until one accepts a TCP connection; TLS and HTTP then run on that one only.
    private func dial(_ addresses: ArraySlice<SocketAddress>, lastError: String?) {
        guard !finished else { return }
        guard let address = addresses.first else {
            return finish(.failure(.connect(lastError ?? "no address to dial")))
        }
        let (head, body) = (self.head, self.body)
        let remaining = max(deadline - .now(), .milliseconds(1))
        client.connect(
            to: address, url: url,
            handler: { WebhookRequestHandler(head: head, body: body, report: { self.finish($0) }) },
            connectTimeout: remaining, on: eventLoop
        ).whenComplete { result in
            switch result {
            case .success(let channel):
                if self.finished {
                    channel.close(promise: nil)
                } else {
                    self.channel = channel
                    channel.closeFuture.whenComplete { _ in self.channelClosed() }
                }
            case .failure(let error):
                if NIODeadline.now() >= self.deadline { return self.timedOut() }
                switch error {
                case let error as IOError:
                    self.dial(addresses.dropFirst(), lastError: WebhookHTTPClient.describe(errno: error.errnoCode))
                case ChannelError.connectTimeout:
                    self.dial(addresses.dropFirst(), lastError: "timed out")
                case let error as TLSContextError:
                    self.finish(.failure(.tls("\(error)")))
                default:
                    self.dial(addresses.dropFirst(), lastError: "\(error)")
                }
            }
        }
    }

    /// The first outcome wins. After a failure the connection is closed; after a
    /// response the handler closes it once the body is drained, and the timer
    /// stays to close it at the deadline if the body does not end.
    private func finish(_ result: WebhookHTTPResult) {
        guard !finished else { return }
        finished = true
        promise.succeed(result)
        if case .failure = result {
            timer?.cancel()
            timer = nil
            channel?.close(promise: nil)
        }
    }

    private func timedOut() {
        timer?.cancel()
        timer = nil
        finish(.failure(.timeout(timeout)))
        channel?.close(promise: nil)
    }

    private func channelClosed() {
        channel = nil
        guard finished else { return }
        timer?.cancel()
        timer = nil
    }
}
