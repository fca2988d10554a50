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
}
