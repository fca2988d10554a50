import LiveRelayEndpoint
import NIOCore

/// Where an app's pushes go, per token environment.
public enum APNsDestination: Hashable, Sendable, CustomStringConvertible {
    /// Apple: production tokens to api.push.apple.com, sandbox tokens to
    /// api.sandbox.push.apple.com (a sandbox token sent to production answers
    /// BadDeviceToken and would be pruned).
    case apple
    /// Every token to one server: `liverelay mock-apns`, a staging relay, a test.
    case custom(host: String, port: Int)

    /// `"apple"` (or nil) or `"host:port"`: the host a DNS name, a dotted IPv4
    /// address or an IPv6 address in brackets (`[::1]:8443`), the port 1-65535
    /// in decimal digits. A URL (`https://h:443`), a path (`h/x:443`) or an
    /// IPv6 address without brackets (where its last group would read as the
    /// port) is refused here: the registry and the config file check endpoints
    /// through this, so such a value is refused when it is set, not at every
    /// connect. An IPv6 host is kept without its brackets, as connecting and
    /// verifying the certificate want it.
    public init(parsing text: String?) throws(APNsDestinationError) {
        guard let text, text != "apple" else { self = .apple; return }
        guard let (host, port) = EndpointSyntax.hostAndPort(text) else { throw APNsDestinationError(text: text) }
        self = .custom(host: host, port: port)
    }

    /// The endpoint a token of `environment` is sent to.
    public func endpoint(for environment: APNsEnvironment) -> APNsEndpoint {
        switch self {
        case .apple: environment == .sandbox ? .sandbox : .production
        case let .custom(host, port): .custom(host: host, port: port)
        }
    }

    /// Where channel management calls for `environment`'s channels go: Apple's management
    /// hosts (ports 2195 sandbox, 2196 production), or the same server as the pushes for a
    /// custom destination (the mock serves both on one port).
    public func managementEndpoint(for environment: APNsEnvironment) -> APNsEndpoint {
        switch self {
        case .apple: environment == .sandbox ? .sandboxChannelManagement : .productionChannelManagement
        case let .custom(host, port): .custom(host: host, port: port)
        }
    }

    public var description: String {
        switch self {
        case .apple: "apple"
        case let .custom(host, port): EndpointSyntax.authority(host: host, port: port)
        }
    }
}

/// A destination that is neither "apple" nor "host:port".
public struct APNsDestinationError: Error, Hashable, Sendable, CustomStringConvertible {
    public var text: String
    public var description: String {
        "an APNs endpoint must be \"apple\" or \"host:port\" (a DNS name, an IPv4 address or a bracketed IPv6 address, "
            + "and a port of 1-65535), not \"\(text)\""
    }
}

/// The way to APNs that pushes share: one destination and one signing key
/// (team id, key id). The provider token belongs to the key and the
/// connections to the endpoints, so apps that share both share one transport,
/// and the dispatcher's per-transport in-flight limit counts per route.
public struct APNsRoute: Hashable, Sendable, CustomStringConvertible {
    public var destination: APNsDestination
    public var teamID: String
    public var keyID: String

    public init(destination: APNsDestination, teamID: String, keyID: String) {
        self.destination = destination
        self.teamID = teamID
        self.keyID = keyID
    }

    public var description: String { "\(destination)/\(teamID)/\(keyID)" }
}

/// Gives the transport of a route: the APNs client's connection pools in a
/// server, fakes in tests. Looked up per send, so credentials registered or
/// replaced while the server runs take effect at once.
public protocol APNsTransportProvider: Sendable {
    /// nil when the route has no credentials (its pushes fail `ConnectFailed`).
    func transport(for route: APNsRoute) -> (any APNsTransport)?

    /// The route's channel management (create, delete, list broadcast channels); nil
    /// when the route has no credentials or the provider cannot manage channels.
    /// Looked up per call, like ``transport(for:)``: replaced credentials replace it.
    func channelManager(for route: APNsRoute) -> (any APNsChannelManaging)?
}

extension APNsTransportProvider {
    /// Providers that only send (test fakes) manage no channels.
    public func channelManager(for route: APNsRoute) -> (any APNsChannelManaging)? { nil }
}
