import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// A push's send-by time travels with its request, so the transport can keep an
/// expired push off the wire; a retry-after, which APNs never sends but a proxy
/// in front of it may, is the least wait before a retry.
@Suite struct SchedulerSendByTests {
    @Test func everySendCarriesItsCallsSendByTime() throws {
        var d = SchedulerDriver()
        d.enqueue(try batch(tokens: [token(1), token(2)]), sendBy: start + .seconds(5))
        d.enqueue(try batch(activity: "other", tokens: [token(3)]), wait: false)
        #expect(d.outstanding.map(\.request.sendBy) == [start + .seconds(5), start + .seconds(5), nil])
    }

    @Test func aPushTheTransportKeptFromTheWireExpiresWithoutARetry() throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]), sendBy: start + .seconds(1))
        d.advance(by: .seconds(1))
        d.answer(.transportError(.expiredBeforeSending))
        #expect(d.replies[call] == EnqueueResult(expired: 1))
        #expect(d.outstanding.isEmpty && d.scheduler.unfinishedCount == 0)
        let counters = try #require(d.scheduler.counters(appID: "app-a"))
        #expect(counters.retries == 0 && counters.expired == 1 && counters.failed == 0)
        // It says nothing about the route: the breaker has not counted a failure.
        #expect(d.scheduler.circuitBreaker(for: testRoute("key-app-a"))?.consecutiveFailures == 0)
    }

    @Test func aRetryAfterLongerThanTheBackOffIsTheWait() throws {
        var d = SchedulerDriver()  // 100 ms back-off first
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        d.answer(.response(APNsResponse(status: 429, reason: "TooManyRequests", retryAfterSeconds: 2)))
        let wake = try #require(d.scheduler.nextWakeup)
        #expect(wake - d.now == .seconds(2))
        d.advance(by: .seconds(2) - .nanoseconds(1))
        #expect(d.outstanding.isEmpty, "not before the retry-after")
        d.advance(by: .nanoseconds(1))
        #expect(d.outstanding.count == 1)
        d.respond(200)
        #expect(d.replies[call] == EnqueueResult(delivered: 1))
    }

    @Test func aRetryAfterShorterThanTheBackOffDoesNotShortenIt() throws {
        var d = SchedulerDriver()
        d.enqueue(try batch(tokens: [token(1)]))
        d.answer(.response(APNsResponse(status: 503, reason: "ServiceUnavailable", retryAfterSeconds: 0)))
        #expect(try #require(d.scheduler.nextWakeup) - d.now == .milliseconds(100))
    }

    @Test func aRetryAfterPastTheSendByTimeExpiresThePushAtOnce() throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]), sendBy: start + .seconds(3))
        d.answer(.response(APNsResponse(status: 429, reason: "TooManyRequests", retryAfterSeconds: 5)))
        #expect(d.replies[call] == EnqueueResult(expired: 1))
        #expect(d.outstanding.isEmpty)
    }

    @Test func retryAfterValuesAreDelaySecondsOnly() {
        #expect(APNsResponse.retryAfterSeconds(parsing: "2") == 2)
        #expect(APNsResponse.retryAfterSeconds(parsing: " 120 ") == 120)
        #expect(APNsResponse.retryAfterSeconds(parsing: "0") == 0)
        #expect(APNsResponse.retryAfterSeconds(parsing: "100000") == APNsResponse.maximumRetryAfterSeconds)
        #expect(APNsResponse.retryAfterSeconds(parsing: "99999999999999999999999") == APNsResponse.maximumRetryAfterSeconds)
        for ignored in ["", " ", "-1", "1.5", "2 s", "Wed, 21 Oct 2015 07:28:00 GMT"] {
            #expect(APNsResponse.retryAfterSeconds(parsing: ignored) == nil, "\(ignored)")
        }
    }
}
