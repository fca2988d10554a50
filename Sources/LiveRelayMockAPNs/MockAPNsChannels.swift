import LiveRelayAPNs
import NIOConcurrencyHelpers

/// One broadcast channel as the mock keeps it.
public struct MockAPNsChannel: Sendable, Hashable {
    /// Base64 of 16 random bytes, as APNs's ids look.
    public var id: String
    public var bundleID: String
    public var environment: APNsEnvironment
    public var storagePolicy: ChannelStoragePolicy
    /// Device tokens (lowercase) subscribed by an accepted push-to-start whose `aps`
    /// named this channel in `input-push-channel`, in the order they subscribed.
    public var subscribers: [String]

    public init(
        id: String, bundleID: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy, subscribers: [String] = []
    ) {
        self.id = id
        self.bundleID = bundleID
        self.environment = environment
        self.storagePolicy = storagePolicy
        self.subscribers = subscribers
    }
}

/// What a channel request asks of the registry, once the stateless checks
/// (``MockAPNsValidator``) have passed.
public enum MockAPNsChannelOperation: Sendable, Hashable {
    case create(bundleID: String, storagePolicy: ChannelStoragePolicy)
    case read(bundleID: String, channelID: String)
    case delete(bundleID: String, channelID: String)
    case list(bundleID: String)
    /// `expiration` is the `apns-expiration` header as sent (nil when absent).
    case broadcast(bundleID: String, channelID: String, expiration: String?)
}

/// The registry's answer to one operation.
public struct MockAPNsChannelOutcome: Sendable, Hashable {
    public var status: Int
    public var reason: String?
    /// The created channel's id (a 201), or the channel read.
    public var channelID: String?
    /// A read's or a list's JSON.
    public var body: [UInt8]

    public init(status: Int, reason: String? = nil, channelID: String? = nil, body: [UInt8] = []) {
        self.status = status
        self.reason = reason
        self.channelID = channelID
        self.body = body
    }

    static func rejected(_ reason: String) -> Self { Self(status: MockAPNsReasons.status(for: reason), reason: reason) }
}

/// Every channel the mock knows, and who is subscribed: a value with pure
/// rules, so each one is unit-tested without a socket.
///
/// Channels are kept per bundle id and environment, as APNs keeps them: a
/// channel of another app or of the other environment is, for a request,
/// ChannelNotRegistered, whatever its id.
public struct MockAPNsChannelRegistry: Sendable {
    public private(set) var channels: [String: MockAPNsChannel] = [:]
    /// Ids per "environment/bundle", in creation order (the list answers in it).
    private var order: [String: [String]] = [:]

    public init() {}

    private static func appKey(_ bundleID: String, _ environment: APNsEnvironment) -> String {
        environment.rawValue + "/" + bundleID
    }

    /// The channel `id` if it belongs to `bundleID` in `environment`.
    public func channel(_ id: String, bundleID: String, environment: APNsEnvironment) -> MockAPNsChannel? {
        guard let channel = channels[id], channel.bundleID == bundleID, channel.environment == environment else { return nil }
        return channel
    }

    /// The app's channels in creation order.
    public func channels(bundleID: String, environment: APNsEnvironment) -> [MockAPNsChannel] {
        (order[Self.appKey(bundleID, environment)] ?? []).compactMap { channels[$0] }
    }

    /// - Parameters:
    ///   - maxChannelsPerApp: beyond it a create is CannotCreateChannelConfig.
    ///   - newChannelID: a fresh id (drawn again on the unlikely collision).
    public mutating func apply(
        _ operation: MockAPNsChannelOperation, environment: APNsEnvironment, maxChannelsPerApp: Int,
        newChannelID: () -> String
    ) -> MockAPNsChannelOutcome {
        switch operation {
        case let .create(bundleID, policy):
            let key = Self.appKey(bundleID, environment)
            guard order[key, default: []].count < maxChannelsPerApp else { return .rejected("CannotCreateChannelConfig") }
            var id = newChannelID()
            while channels[id] != nil { id = newChannelID() }
            channels[id] = MockAPNsChannel(id: id, bundleID: bundleID, environment: environment, storagePolicy: policy)
            order[key, default: []].append(id)
            return MockAPNsChannelOutcome(status: 201, channelID: id)
        case let .read(bundleID, id):
            guard let channel = channel(id, bundleID: bundleID, environment: environment) else {
                return .rejected("ChannelNotRegistered")
            }
            let body = "{\"message-storage-policy\":\(channel.storagePolicy.rawValue),\"push-type\":\"LiveActivity\"}"
            return MockAPNsChannelOutcome(status: 200, channelID: id, body: Array(body.utf8))
        case let .delete(bundleID, id):
            guard channel(id, bundleID: bundleID, environment: environment) != nil else { return .rejected("ChannelNotRegistered") }
            channels[id] = nil
            order[Self.appKey(bundleID, environment)]?.removeAll { $0 == id }
            return MockAPNsChannelOutcome(status: 204)
        case let .list(bundleID):
            let ids = channels(bundleID: bundleID, environment: environment).map { jsonQuoted($0.id) }
            return MockAPNsChannelOutcome(status: 200, body: Array(("{\"channels\":[" + ids.joined(separator: ",") + "]}").utf8))
        case let .broadcast(bundleID, id, expiration):
            guard let channel = channel(id, bundleID: bundleID, environment: environment) else {
                return .rejected("ChannelNotRegistered")
            }
            // A channel that stores nothing takes only "try once" sends.
            if channel.storagePolicy == .noStorage, expiration != "0" { return .rejected("BadExpirationDate") }
            return MockAPNsChannelOutcome(status: 200, channelID: id)
        }
    }

    /// Subscribes `deviceToken` to the channel, as the device does after a
    /// push-to-start naming it; false (nothing changes) when the channel is not
    /// the app's in this environment, where the device's subscription would fail.
    @discardableResult
    public mutating func subscribe(deviceToken: String, to id: String, bundleID: String, environment: APNsEnvironment) -> Bool {
        guard channel(id, bundleID: bundleID, environment: environment) != nil else { return false }
        let token = deviceToken.lowercased()
        if !channels[id]!.subscribers.contains(token) { channels[id]!.subscribers.append(token) }
        return true
    }

    /// The lowercase tokens subscribed to `id`, in subscription order (empty for an unknown channel).
    public func subscribers(of id: String) -> [String] { channels[id]?.subscribers ?? [] }
}

/// The channel registry behind a lock, shared by every connection of a mock,
/// or by two mocks (a sandbox one and a production one) to model APNs's one
/// space of channel ids: a channel made on one is ChannelNotRegistered on the other.
public final class MockAPNsChannelStore: Sendable {
    private let registry = NIOLockedValueBox(MockAPNsChannelRegistry())

    public init() {}

    /// Runs `body` on the registry under the lock.
    public func withRegistry<T>(_ body: (inout MockAPNsChannelRegistry) -> T) -> T {
        registry.withLockedValue { body(&$0) }
    }

    public func channels(bundleID: String, environment: APNsEnvironment) -> [MockAPNsChannel] {
        withRegistry { $0.channels(bundleID: bundleID, environment: environment) }
    }

    public func subscribers(of channelID: String) -> [String] { withRegistry { $0.subscribers(of: channelID) } }

    /// A new channel id: 16 random bytes in standard base64 with padding (24 characters).
    public static func randomChannelID() -> String {
        var generator = SystemRandomNumberGenerator()
        let (high, low) = (generator.next() as UInt64, generator.next() as UInt64)
        let bytes = (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (i % 8))) }
        return base64(bytes)
    }

    /// Standard base64 (RFC 4648 §4) with `=` padding.
    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = bytes[index]
            let b1 = index + 1 < bytes.count ? bytes[index + 1] : nil
            let b2 = index + 2 < bytes.count ? bytes[index + 2] : nil
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            out.append(b1.map { alphabet[Int(($0 & 0x0F) << 2 | (b2 ?? 0) >> 6)] } ?? UInt8(ascii: "="))
            out.append(b2.map { alphabet[Int($0 & 0x3F)] } ?? UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
