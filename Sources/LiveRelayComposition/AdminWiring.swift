import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayServer
import NIOCore

/// What the admin API needs from the rest of `serve`: how keys are minted
/// (the authenticator's format), and what an app uses on this node.
package enum AdminWiring {
    package static let mintKey: RegistryAdminService.KeyMinter = {
        let minted = APIKeyAuthenticator.generateKey(apps: .only([]), allowedMethods: [])
        return (minted.plaintext, minted.record.keyID, minted.record.secretSHA256)
    }

    /// GetAppStats' figures: the dispatcher's account and queue, the quota gate's view, the limits on this node.
    /// Pushes come by outcome, failed and pruned ones by reason (admin.proto's OutcomeCount), those an app
    /// without a route yet failed (`AppNotConfigured`) included. An app the dispatcher has no queue for
    /// yet (no credentials, or a registry change still being applied) shows the capacity its queue will
    /// have, not 0.
    package static func usage(of app: RegisteredApp, dispatcher: Dispatcher?, quotas: QuotaGate) -> AppUsageFigures {
        let appID = app.id
        var figures = AppUsageFigures()
        figures.queueCapacity = app.queueCapacity ?? PushingApp.defaultQueueCapacity
        if let dispatcher {
            if let held = dispatcher.credentialError(appID: appID) {
                figures.held = (held.reason, Int((NIODeadline.now() - held.heldSince).nanoseconds / 1_000_000))
            }
            if let level = dispatcher.queueLevels.first(where: { $0.appID == appID }) {
                figures.queueDepth = level.unfinished
                figures.queueCapacity = level.capacity
            }
            if let counters = dispatcher.counters(appID: appID) {
                figures.pushes =
                    [("delivered", nil, counters.delivered), ("superseded", nil, counters.superseded), ("expired", nil, counters.expired)]
                    + counters.prunes.sorted { $0.key < $1.key }.map { ("pruned", $0.key, $0.value) }
                    + counters.failures.sorted { $0.key < $1.key }.map { ("failed", $0.key, $0.value) }
            }
        }
        let (pushesLastHour, counts) = quotas.usage(of: appID)
        figures.pushesLastHour = pushesLastHour
        figures.tokens = counts.tokens
        figures.liveActivities = counts.liveActivities
        let settings = quotas.settings
        let quota = settings.quota(of: appID)
        figures.nodes = settings.nodes
        figures.callsPerSecond = quota.callsPerSecond.map { $0 / Double(settings.nodes) }
        figures.burst = quota.burst
        figures.pushesPerHour = quota.pushesPerHour.map { max(1, $0 / settings.nodes) }
        figures.maxTokens = quota.maxTokens
        figures.maxLiveActivities = quota.maxLiveActivities
        figures.priorityBudgetPerHour = quota.priorityBudgetPerHour
        return figures
    }
}
