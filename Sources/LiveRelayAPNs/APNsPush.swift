// The vocabulary of one Live Activity push as APNs defines it: event, body,
// headers and the token's environment. The domain builds them; the
// dispatcher, the HTTP/2 client and the mock APNs only carry and check them.

import NIOCore

/// The `event` of a Live Activity push.
public enum APNsEvent: String, Hashable, Sendable {
    case start, update, end
}

/// The exact bytes of one push's JSON body, `{"aps":{...}}`.
///
/// Bytes rather than a dictionary: the size APNs enforces is the size of
/// exactly these bytes, and tests and the mock APNs compare them verbatim.
///
/// Held as one `ByteBuffer`, made once per call: every stream of a fan-out
/// writes that same buffer as its DATA frame (a reference, not a copy per
/// token), so a 100,000-token update holds and copies its payload once.
public struct APNsPayload: Hashable, Sendable {
    /// APNs's limit for a per-device push (a broadcast's is ``APNsBroadcast/maxPayloadBytes``).
    public static let maxBytes = 4096

    /// The body as written to the wire; never mutated (so it can be shared across event loops).
    public let buffer: ByteBuffer
    public var count: Int { buffer.readableBytes }

    /// A copy of the bytes, for stores, tests and peers that compare them.
    public var bytes: [UInt8] { Array(buffer.readableBytesView) }

    /// Bytes as they are: for peers (the mock APNs, tests) that received a payload, not built one.
    public init(bytes: [UInt8]) { self.buffer = ByteBuffer(bytes: bytes) }

    /// The JSON as text, for logs and tests.
    public var text: String { String(buffer: buffer) }
}

/// The APNs environment of a token: it picks the endpoint, and a token sent to
/// the wrong one fails with BadDeviceToken, so it is required and never guessed.
public enum APNsEnvironment: String, Hashable, Sendable {
    case sandbox, production
}

/// The HTTP/2 headers of one Live Activity push, besides `authorization`
/// (the transport adds the provider token when the stream opens), `apns-id`
/// and the `:path` with the token.
public struct APNsHeaders: Hashable, Sendable {
    /// Always `liveactivity`: APNs rejects a Live Activity payload under any other push type.
    public var pushType: String
    /// `<bundle id>.push-type.liveactivity`.
    public var topic: String
    /// 10 (immediate, counts against the activity's hourly budget) or 5 (opportunistic, free).
    public var priority: Int
    /// UNIX seconds until which APNs may store and retry the push for an offline device.
    public var expiration: Int64

    /// - Parameter priority: 10 (the default) or 5.
    public init(bundleID: String, priority: Int = 10, expiration: Int64) {
        self.pushType = "liveactivity"
        self.topic = bundleID + Self.topicSuffix
        self.priority = priority
        self.expiration = expiration
    }

    /// The app's bundle id, read back from the topic: a broadcast's path names it.
    public var bundleID: String {
        topic.hasSuffix(Self.topicSuffix) ? String(topic.dropLast(Self.topicSuffix.count)) : topic
    }

    private static let topicSuffix = ".push-type.liveactivity"

    /// In the order they go on the wire.
    public var fields: [(name: String, value: String)] {
        [
            ("apns-push-type", pushType), ("apns-topic", topic), ("apns-priority", String(priority)),
            ("apns-expiration", String(expiration)),
        ]
    }
}
