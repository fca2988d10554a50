import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import LiveRelayWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// APNs's channel management as a script: each call is recorded, and
/// answered by the closure the test set (an id or an error).
final class FakeChannelManager: APNsChannelManaging {
    enum Call: Hashable, Sendable {
        case create(bundleID: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy)
        case delete(String, bundleID: String, environment: APNsEnvironment)
        case list(bundleID: String, environment: APNsEnvironment)
    }

    private struct Script {
        var calls: [Call] = []
        var create: @Sendable () -> Result<String, APNsChannelManagementError> = { .success("Y2hhbm5lbC0x") }
        var delete: @Sendable () -> Result<Void, APNsChannelManagementError> = { .success(()) }
    }

    private let script = NIOLockedValueBox(Script())
    /// Not the calls' loop: the service has to hop back to its own.
    private let loop = MultiThreadedEventLoopGroup.singleton.next()

    var calls: [Call] { script.withLockedValue { $0.calls } }

    func answerCreate(_ answer: @escaping @Sendable () -> Result<String, APNsChannelManagementError>) {
        script.withLockedValue { $0.create = answer }
    }

    func answerDelete(_ answer: @escaping @Sendable () -> Result<Void, APNsChannelManagementError>) {
        script.withLockedValue { $0.delete = answer }
    }

    func createChannel(bundleID: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy) -> EventLoopFuture<String> {
        let answer = script.withLockedValue {
            $0.calls.append(.create(bundleID: bundleID, environment: environment, storagePolicy: storagePolicy))
            return $0.create
        }
        return loop.makeCompletedFuture(answer().mapError { $0 as any Error })
    }

    func deleteChannel(_ channelID: String, bundleID: String, environment: APNsEnvironment) -> EventLoopFuture<Void> {
        let answer = script.withLockedValue {
            $0.calls.append(.delete(channelID, bundleID: bundleID, environment: environment))
            return $0.delete
        }
        return loop.makeCompletedFuture(answer().mapError { $0 as any Error })
    }

    func listChannels(bundleID: String, environment: APNsEnvironment) -> EventLoopFuture<[String]> {
        script.withLockedValue { $0.calls.append(.list(bundleID: bundleID, environment: environment)) }
        return loop.makeSucceededFuture([])
    }
}

/// An in-memory channel store whose creates fail with `failCreate` when set.
final class FailingChannelStore: ChannelStore {
    let inner = InMemoryChannelStore()
    private let failure = NIOLockedValueBox<(any Error & Sendable)?>(nil)

    func failCreates(with error: (any Error & Sendable)?) { failure.withLockedValue { $0 = error } }

    func create(_ channel: ChannelRecord, limit: Int) async throws {
        if let error = failure.withLockedValue({ $0 }) { throw error }
        try await inner.create(channel, limit: limit)
    }

    func delete(appID: String, channelID: String) async throws -> Bool {
        try await inner.delete(appID: appID, channelID: channelID)
    }

    func channel(appID: String, channelID: String) async throws -> ChannelRecord? {
        try await inner.channel(appID: appID, channelID: channelID)
    }

    func list(appID: String, environment: APNsEnvironment?, after: String?, limit: Int) async throws -> [ChannelRecord] {
        try await inner.list(appID: appID, environment: environment, after: after, limit: limit)
    }

    func count(appID: String, environment: APNsEnvironment?) async throws -> Int {
        try await inner.count(appID: appID, environment: environment)
    }

    func close() async throws { try await inner.close() }
}

/// CreateChannel, ListChannels and DeleteChannel against a scripted APNs and a real (in-memory) record.
@Suite struct ChannelServiceTests {
    /// A bundle id unlike the app id: APNs is asked with the bundle id.
    static let app = App(id: appID, bundleID: "com.example.bundle")
    let clock = ManualClock(t0)
    let store = FailingChannelStore()
    let apns = FakeChannelManager()
    let loop = MultiThreadedEventLoopGroup.singleton.any()

    func service(limit: Int = APNsBroadcast.maxChannelsPerApp, credentials: Bool = true) -> ChannelService {
        let apns = self.apns
        return ChannelService(
            store: store, managers: { _ in credentials ? apns : nil }, clock: clock, logger: Logger(label: "channels-test"),
            limit: limit)
    }

    func context() -> CallContext {
        CallContext(
            principal: Principal(keyID: "key-1", apps: .only([appID]), allowedMethods: Set(LiveRelayMethod.allCases)),
            eventLoop: loop, deadline: nil, requestID: 1)
    }

    func create(
        _ service: ChannelService, _ environment: Environment = .sandbox, policy: BroadcastStoragePolicy = .mostRecentMessage
    ) -> EventLoopFuture<CreateChannelReply> {
        service.create(
            CreateChannelRequest(appID: appID, environment: environment, storagePolicy: policy), app: Self.app, context: context())
    }

    func record(_ id: String, app: String = appID, _ environment: APNsEnvironment = .sandbox) async throws {
        try await store.inner.create(
            ChannelRecord(appID: app, id: id, environment: environment, storagePolicy: .noStorage, createdAt: t0), limit: 100)
    }

    @Test func aCreateRecordsTheChannelAPNsMadeAndRepliesWithIt() async throws {
        clock.advance(by: .seconds(5))
        apns.answerCreate { .success("bmV3LWNoYW5uZWw=") }
        let reply = try await create(service(), .production, policy: .noStorage).get()
        #expect(
            reply.channel
                == BroadcastChannel(
                    appID: appID, channelID: "bmV3LWNoYW5uZWw=", environment: .production, storagePolicy: .noStorage,
                    createdAt: t0.seconds + 5))
        #expect(apns.calls == [.create(bundleID: "com.example.bundle", environment: .production, storagePolicy: .noStorage)])
        let recorded = try await store.channel(appID: appID, channelID: "bmV3LWNoYW5uZWw=")
        #expect(
            recorded
                == ChannelRecord(
                    appID: appID, id: "bmV3LWNoYW5uZWw=", environment: .production, storagePolicy: .noStorage,
                    createdAt: t0 + .seconds(5)))
        // The record is what a send resolves to: the channel as one target with its policy and environment.
        let resolved = try await service().resolve(appID: appID, channelID: "bmV3LWNoYW5uZWw=", context: context()).get()
        #expect(resolved.target == .channel("bmV3LWNoYW5uZWw=", environment: .production, storagePolicy: .noStorage))
    }

    @Test func aCreateWithoutEnvironmentOrPolicyIsRefusedBeforeAPNsIsAsked() async throws {
        let noEnvironment = await rpcError(create(service(), .unspecified))
        #expect(noEnvironment?.status == .invalidArgument)
        let noPolicy = await rpcError(create(service(), .sandbox, policy: .unspecified))
        #expect(noPolicy?.status == .invalidArgument)
        #expect(apns.calls.isEmpty)
    }

    @Test func theLimitIsCheckedAgainstTheRecordBeforeAPNsIsAsked() async throws {
        try await record("YQ==")
        try await record("Yg==")
        try await record("Yw==", .production)
        let error = await rpcError(create(service(limit: 2), .sandbox))
        #expect(error?.status == .resourceExhausted)
        #expect(error?.details.reason == "ChannelLimitReached")
        #expect(apns.calls.isEmpty, "APNs was asked for a channel the record has no room for")
        #expect(try await store.count(appID: appID, environment: .sandbox) == 2)
        // The limit is per environment: production has room for one more.
        _ = try await create(service(limit: 2), .production).get()
        #expect(apns.calls.count == 1)
        #expect(try await store.count(appID: appID, environment: .production) == 2)
    }

    @Test func apnsRefusalsMapToStatusesAndRecordNothing() async throws {
        let cases: [(APNsChannelManagementError, StatusCode, String, retries: Bool)] = [
            (.rejected(status: 400, reason: "CannotCreateChannelConfig"), .resourceExhausted, "CannotCreateChannelConfig", false),
            (.rejected(status: 403, reason: "InvalidProviderToken"), .failedPrecondition, "InvalidProviderToken", false),
            (.rejected(status: 400, reason: "FeatureNotEnabled"), .failedPrecondition, "FeatureNotEnabled", false),
            (.rejected(status: 503, reason: "ServiceUnavailable"), .unavailable, "ServiceUnavailable", true),
            (.rejected(status: 429, reason: "TooManyRequests"), .unavailable, "TooManyRequests", true),
            (.transport(.connectFailed("connection refused")), .unavailable, "ConnectFailed", true),
            (.transport(.timedOut), .unavailable, "TimedOut", true),
            (.malformedAnswer("201 without apns-channel-id"), .unavailable, ErrorDetails.outcomeUnknownReason, false),
        ]
        for (answer, status, reason, retries) in cases {
            apns.answerCreate { .failure(answer) }
            let error = await rpcError(create(service()))
            #expect(error?.status == status, "\(answer)")
            #expect(error?.details.reason == reason, "\(answer)")
            #expect((error?.details.retryAfterMS ?? 0 > 0) == retries, "\(answer): retry_after_ms \(error?.details.retryAfterMS ?? 0)")
        }
        #expect(apns.calls.count == cases.count)
        #expect(!apns.calls.contains { if case .delete = $0 { true } else { false } }, "nothing was made, nothing to delete")
        #expect(try await store.count(appID: appID, environment: nil) == 0)
    }

    @Test func aChannelThatCannotBeRecordedIsDeletedAtAPNsAgain() async throws {
        apns.answerCreate { .success("b3JwaGFu") }
        store.failCreates(with: ChannelStoreError.unavailable("disk full"))
        let error = await rpcError(create(service(), .production))
        #expect(error?.status == .unavailable)
        #expect(
            apns.calls == [
                .create(bundleID: "com.example.bundle", environment: .production, storagePolicy: .mostRecentMessage),
                .delete("b3JwaGFu", bundleID: "com.example.bundle", environment: .production),
            ])
        #expect(try await store.channel(appID: appID, channelID: "b3JwaGFu") == nil)

        // A create that lost the race for the last slot: APNs's channel goes too, and the call says why.
        store.failCreates(with: ChannelStoreError.limitReached(count: 3, limit: 3))
        let raced = await rpcError(create(service(), .sandbox))
        #expect(raced?.status == .resourceExhausted)
        #expect(raced?.details.reason == "ChannelLimitReached")
        #expect(apns.calls.last == .delete("b3JwaGFu", bundleID: "com.example.bundle", environment: .sandbox))

        // APNs refusing the delete as well: the call still fails with the record's error.
        apns.answerDelete { .failure(.transport(.connectionLost)) }
        store.failCreates(with: ChannelStoreError.unavailable("disk full"))
        let both = await rpcError(create(service()))
        #expect(both?.status == .unavailable)
        #expect(apns.calls.count == 6)
        #expect(try await store.count(appID: appID, environment: nil) == 0)
    }

    @Test func aChannelIDNoCallCouldNameIsNotRecordedAndIsDeletedAtAPNs() async throws {
        let unnameable = "not a channel id!"
        apns.answerCreate { .success(unnameable) }
        let error = await rpcError(create(service(), .sandbox))
        #expect(error?.status == .unavailable)
        #expect(error?.details.reason == ErrorDetails.outcomeUnknownReason)
        #expect(
            apns.calls == [
                .create(bundleID: "com.example.bundle", environment: .sandbox, storagePolicy: .mostRecentMessage),
                .delete(unnameable, bundleID: "com.example.bundle", environment: .sandbox),
            ])
        #expect(try await store.count(appID: appID, environment: nil) == 0)
    }

    @Test func deletingAnUnknownChannelIsNotFoundWithoutAskingAPNs() async throws {
        let error = await rpcError(
            service().delete(DeleteChannelRequest(appID: appID, channelID: "bm9uZQ=="), app: Self.app, context: context()))
        #expect(error?.status == .notFound)
        #expect(error?.details.reason == "ChannelNotFound")
        #expect(apns.calls.isEmpty)
    }

    @Test func aDeleteAsksAPNsInTheChannelsEnvironmentThenForgetsIt() async throws {
        try await record("Z29uZQ==", .production)
        _ = try await service().delete(DeleteChannelRequest(appID: appID, channelID: "Z29uZQ=="), app: Self.app, context: context())
            .get()
        #expect(apns.calls == [.delete("Z29uZQ==", bundleID: "com.example.bundle", environment: .production)])
        #expect(try await store.channel(appID: appID, channelID: "Z29uZQ==") == nil)
    }

    @Test func aChannelAPNsNoLongerKnowsIsForgottenAllTheSame() async throws {
        try await record("ZXhwaXJlZA==")
        apns.answerDelete { .failure(.rejected(status: 404, reason: "ChannelNotRegistered")) }
        _ = try await service().delete(DeleteChannelRequest(appID: appID, channelID: "ZXhwaXJlZA=="), app: Self.app, context: context())
            .get()
        #expect(apns.calls.count == 1)
        #expect(try await store.channel(appID: appID, channelID: "ZXhwaXJlZA==") == nil)
    }

    @Test func aDeleteAPNsCouldNotMakeKeepsTheRecord() async throws {
        try await record("a2VwdA==")
        for answer: APNsChannelManagementError in [
            .rejected(status: 503, reason: "ServiceUnavailable"), .transport(.connectionLost),
        ] {
            apns.answerDelete { .failure(answer) }
            let error = await rpcError(
                service().delete(DeleteChannelRequest(appID: appID, channelID: "a2VwdA=="), app: Self.app, context: context()))
            #expect(error?.status == .unavailable, "\(answer)")
            #expect((error?.details.retryAfterMS ?? 0) > 0, "\(answer)")
            #expect(try await store.channel(appID: appID, channelID: "a2VwdA==") != nil, "\(answer)")
        }
        // A final refusal other than ChannelNotRegistered keeps it too.
        apns.answerDelete { .failure(.rejected(status: 403, reason: "InvalidProviderToken")) }
        let error = await rpcError(
            service().delete(DeleteChannelRequest(appID: appID, channelID: "a2VwdA=="), app: Self.app, context: context()))
        #expect(error?.status == .failedPrecondition)
        #expect(try await store.channel(appID: appID, channelID: "a2VwdA==") != nil)
    }

    @Test func listPagesTheAppsChannelsInIdOrder() async throws {
        for (id, environment) in [
            ("c1", APNsEnvironment.sandbox), ("c2", .production), ("c3", .sandbox), ("c4", .sandbox), ("c5", .production),
        ] {
            try await record(id, environment)
        }
        try await record("c0", app: "other.app")
        func list(_ size: UInt32, after token: String = "", _ environment: Environment = .unspecified) async throws -> ListChannelsReply {
            try await service().list(
                ListChannelsRequest(appID: appID, environment: environment, pageSize: size, pageToken: token), app: Self.app,
                context: context()
            ).get()
        }
        let first = try await list(2)
        #expect(first.channels.map(\.channelID) == ["c1", "c2"])
        #expect(first.nextPageToken == "c2")
        let second = try await list(2, after: first.nextPageToken)
        #expect(second.channels.map(\.channelID) == ["c3", "c4"])
        let last = try await list(2, after: second.nextPageToken)
        #expect(last.channels.map(\.channelID) == ["c5"])
        #expect(last.nextPageToken == "", "the last page has no next page")
        // A page that ends exactly at the last channel has no next page either.
        #expect(try await list(5).nextPageToken == "")
        #expect(try await list(0).channels.map(\.channelID) == ["c1", "c2", "c3", "c4", "c5"], "page_size 0 is the default page")

        let sandbox = try await list(2, .sandbox)
        #expect(sandbox.channels.map(\.channelID) == ["c1", "c3"])
        #expect(sandbox.channels.allSatisfy { $0.environment == .sandbox && $0.appID == appID })
        let rest = try await list(2, after: sandbox.nextPageToken, .sandbox)
        #expect(rest.channels.map(\.channelID) == ["c4"])
        #expect(rest.nextPageToken == "")
        #expect(try await list(10, .production).channels.map(\.channelID) == ["c2", "c5"])
        #expect(apns.calls.isEmpty, "a list reads the record, not APNs")
    }

    @Test func anotherAppsChannelIsNotFoundForResolveAndDelete() async throws {
        try await record("dGhlaXJz", app: "other.app")
        let resolved = await rpcError(service().resolve(appID: appID, channelID: "dGhlaXJz", context: context()))
        #expect(resolved?.status == .notFound)
        #expect(resolved?.details.reason == "ChannelNotFound")
        let deleted = await rpcError(
            service().delete(DeleteChannelRequest(appID: appID, channelID: "dGhlaXJz"), app: Self.app, context: context()))
        #expect(deleted?.status == .notFound)
        #expect(deleted?.details.reason == "ChannelNotFound")
        #expect(apns.calls.isEmpty)
        #expect(try await store.channel(appID: "other.app", channelID: "dGhlaXJz") != nil)
    }

    @Test func anAppWithoutCredentialsCannotCreateOrDeleteChannels() async throws {
        let created = await rpcError(create(service(credentials: false)))
        #expect(created?.status == .failedPrecondition)
        #expect(created?.details.reason == "AppNotConfigured")
        try await record("bWluZQ==")
        let deleted = await rpcError(
            service(credentials: false).delete(
                DeleteChannelRequest(appID: appID, channelID: "bWluZQ=="), app: Self.app, context: context()))
        #expect(deleted?.status == .failedPrecondition)
        #expect(deleted?.details.reason == "AppNotConfigured")
        #expect(apns.calls.isEmpty)
        #expect(try await store.channel(appID: appID, channelID: "bWluZQ==") != nil)
    }

    @Test func aClosedStoreIsUnavailable() async throws {
        try await store.close()
        let error = await rpcError(create(service()))
        #expect(error?.status == .unavailable)
        #expect(apns.calls.isEmpty)
    }
}
