import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayServer

/// The config file (or the development setup) as a seed of the tenant
/// registry: its apps and keys, applied declaratively at every start
/// (``RegistryChange/seed(apps:keys:)``), so existing setups keep working and
/// what an operator changed through the registry is never undone.
enum RegistrySeed {
    /// A config file's app: its key file and trust certificate by absolute path (read again by every node at each reload).
    static func app(_ configuration: AppConfiguration, base: String) throws -> RegisteredApp {
        let apns = configuration.apns
        var trustPEM: String?
        if let trust = apns.trustCertificate {
            let path = DevSetup.absolute(trust, relativeTo: base)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("app \(configuration.id): cannot read apns.trust_certificate \(path)")
            }
            trustPEM = String(decoding: data, as: UTF8.self)
        }
        return RegisteredApp(
            id: configuration.id, bundleID: configuration.bundleID, queueCapacity: configuration.queueCapacity,
            weight: configuration.weight, maxPushLifetimeSeconds: configuration.maxPushLifetimeSeconds.map { Int($0.rounded(.up)) },
            quotas: try configuration.quotas?.registered(where: "apps[\(configuration.id)].quotas") ?? .defaults,
            credentials: RegisteredCredentials(
                teamID: apns.teamID, keyID: apns.keyID, endpoint: apns.endpoint ?? "apple",
                keySource: .file(path: DevSetup.absolute(apns.keyFile, relativeTo: base)), trustPEM: trustPEM),
            source: .seed)
    }

    /// A key of the API key file, as a tenant key.
    static func key(_ record: APIKeyRecord) throws -> RegisteredAPIKey {
        let apps: RegisteredAPIKey.Apps
        do {
            switch try record.scope() {
            case .all: apps = .all
            case let .only(ids): apps = .only(ids)
            }
            _ = try record.principal()
        } catch {
            throw CLIError("\(error)")
        }
        return RegisteredAPIKey(
            keyID: record.keyID, secretSHA256: record.secretSHA256,
            role: .tenant(apps: apps, methods: record.allowedMethods), label: record.label,
            createdAt: UnixTime(milliseconds: Int64(record.createdAt.timeIntervalSince1970 * 1000)), source: .seed)
    }
}

extension AppQuota {
    /// `defaults` with an app's registered limits on top: nil keeps the default, 0 lifts the limit.
    init(_ registered: RegisteredQuotas, over defaults: AppQuota) {
        func merge<T: Numeric & Comparable>(_ own: T?, _ fallback: T?) -> T? {
            guard let own else { return fallback }
            return own == 0 ? nil : own
        }
        self.init(
            callsPerSecond: merge(registered.callsPerSecond, defaults.callsPerSecond),
            burst: merge(registered.burst, defaults.burst),
            pushesPerHour: merge(registered.pushesPerHour, defaults.pushesPerHour),
            maxTokens: merge(registered.maxTokens, defaults.maxTokens),
            maxLiveActivities: merge(registered.maxLiveActivities, defaults.maxLiveActivities))
    }
}
