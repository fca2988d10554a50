import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import Testing

@testable import LiveRelayActivities

/// The `app` label of `liverelay_app_calls_total` and `liverelay_app_call_duration`
/// is bounded; only calls a key may make for an app the server has take one, so
/// a caller naming made-up apps cannot use up the labels of the real ones.
@Suite struct AppCallMetricsTests {
    @Test func appsAKeyMayNotActForTakeNoLabel() async throws {
        let h = Harness()  // every app id exists
        let scoped = h.context(apps: .only([appID]))
        for n in 0..<MetricHandlers.maxApps {
            let error = await rpcError(h.service.registerToken(pushToStart(hex(1), app: "made-up-\(n)"), context: scoped))
            #expect(error?.status == .permissionDenied)
        }
        var update = updateRequest()
        update.appID = "made-up-update"
        update.channelID = "channel-1"
        let refused = [
            await rpcError(h.service.startActivity(startRequest(app: "made-up-start"), context: scoped)),
            await rpcError(h.service.updateActivity(update, context: scoped)),
            await rpcError(
                h.service.createChannel(
                    CreateChannelRequest(appID: "made-up-channel", environment: .sandbox, storagePolicy: .noStorage),
                    context: scoped)),
        ]
        #expect(refused.map { $0?.status } == [.permissionDenied, .permissionDenied, .permissionDenied])
        for made in ["made-up-0", "made-up-999", "made-up-start", "made-up-update", "made-up-channel"] {
            #expect(!h.service.metrics.isNamed(made), "\(made)")
        }
        // The key's own app is counted by name, refused calls as well as accepted ones.
        try await h.register(pushToStart(hex(1)))
        #expect(h.service.metrics.isNamed(appID))
        let other = h.context(apps: .only(["com.example.other"]))
        var ended = endRequest()
        ended.appID = "com.example.other"
        #expect(await rpcError(h.service.endActivity(ended, context: other))?.status == .notFound)
        #expect(h.service.metrics.isNamed("com.example.other"))
    }

    @Test func appsTheServerDoesNotHaveTakeNoLabel() async throws {
        let h = Harness(apps: AppDirectory(apps: [App(id: appID, bundleID: appID)]))
        let operatorKey = h.context(apps: .all)
        for n in 0..<MetricHandlers.maxApps {
            let error = await rpcError(
                h.service.registerToken(pushToStart(hex(1), app: "made-up-\(n)"), context: operatorKey))
            #expect(error?.status == .notFound)
        }
        #expect(!h.service.metrics.isNamed("made-up-0"))
        try await h.register(pushToStart(hex(1)))
        #expect(h.service.metrics.isNamed(appID))
    }
}
