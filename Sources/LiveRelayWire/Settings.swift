/// The identifier of a setting in HELLO or WELCOME.
///
/// A struct so that unknown ids survive decoding: a receiver ignores ids it
/// does not know, which is how a later version adds a setting without a new
/// protocol version.
public struct SettingID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16

    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// The largest frame payload the sender will accept. Both directions.
    public static let maxFrameSize = SettingID(rawValue: 0x0001)
    /// How many requests the server accepts in flight on this connection. Server to client.
    public static let maxRequestsInFlight = SettingID(rawValue: 0x0002)
    /// How long the server keeps a connection with nothing in flight and nothing received. Server to client; 0 = never.
    public static let idleTimeoutMilliseconds = SettingID(rawValue: 0x0003)

    public var description: String {
        switch self.rawValue {
        case 1: return "MAX_FRAME_SIZE"
        case 2: return "MAX_REQUESTS_IN_FLIGHT"
        case 3: return "IDLE_TIMEOUT_MS"
        default: return "SETTING_0x" + String(self.rawValue, radix: 16, uppercase: true)
        }
    }
}

/// One (u16 id, u32 value) pair, 6 bytes on the wire.
public struct Setting: Hashable, Sendable {
    public var id: SettingID
    public var value: UInt32

    public init(_ id: SettingID, _ value: UInt32) {
        self.id = id
        self.value = value
    }

    public static let defaultMaxFrameSize: UInt32 = 1_048_576
    public static let maxFrameSizeRange: ClosedRange<UInt32> = 16_384...16_777_215
    public static let defaultMaxRequestsInFlight: UInt32 = 100

    /// Why this setting's value is invalid, or nil if it is valid (unknown ids are always valid).
    /// Invalid values are a PROTOCOL_ERROR rather than clamped: a peer that
    /// advertises a nonsensical limit has a bug, and silently changing its
    /// limit would hide it until traffic grows.
    public var invalidReason: String? {
        switch self.id {
        case .maxFrameSize where !Self.maxFrameSizeRange.contains(self.value):
            return "MAX_FRAME_SIZE \(self.value) is outside 16384...16777215"
        case .maxRequestsInFlight where self.value == 0:
            return "MAX_REQUESTS_IN_FLIGHT must be at least 1"
        default:
            return nil
        }
    }
}

/// What a client tells the server in HELLO.
public struct ClientSettings: Hashable, Sendable {
    /// The largest RESPONSE or ERROR payload the client accepts; the server
    /// fails a larger reply with RESOURCE_EXHAUSTED instead of sending it.
    public var maxFrameSize: UInt32

    public init(maxFrameSize: UInt32 = Setting.defaultMaxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    /// Reads the settings a client sent. Only MAX_FRAME_SIZE is a client's
    /// setting; server-only ids (MAX_REQUESTS_IN_FLIGHT, IDLE_TIMEOUT_MS) and
    /// unknown ids are ignored whatever their value, not validated
    /// (docs/PROTOCOL.md section 4).
    public init(validating settings: [Setting]) throws(SettingsError) {
        self.init()
        for setting in settings where setting.id == .maxFrameSize {
            if let reason = setting.invalidReason { throw SettingsError(reason: reason) }
            self.maxFrameSize = setting.value
        }
    }

    /// Every setting, explicitly, so that a log of the HELLO shows what the client meant.
    public var settings: [Setting] {
        [Setting(.maxFrameSize, self.maxFrameSize)]
    }
}

/// What a server tells the client in WELCOME.
public struct ServerSettings: Hashable, Sendable {
    /// The largest REQUEST payload the server accepts.
    public var maxFrameSize: UInt32
    /// The server answers requests beyond this many in flight with RESOURCE_EXHAUSTED,
    /// so a client waits for a reply before sending more.
    public var maxRequestsInFlight: UInt32
    /// 0 means the server never closes an idle connection.
    public var idleTimeoutMilliseconds: UInt32

    public init(
        maxFrameSize: UInt32 = Setting.defaultMaxFrameSize,
        maxRequestsInFlight: UInt32 = Setting.defaultMaxRequestsInFlight,
        idleTimeoutMilliseconds: UInt32 = 0
    ) {
        self.maxFrameSize = maxFrameSize
        self.maxRequestsInFlight = maxRequestsInFlight
        self.idleTimeoutMilliseconds = idleTimeoutMilliseconds
    }

    /// Reads the settings a server sent; unknown ids are ignored, absent ones keep their defaults.
    public init(validating settings: [Setting]) throws(SettingsError) {
        self.init()
        for setting in settings {
            if let reason = setting.invalidReason { throw SettingsError(reason: reason) }
            switch setting.id {
            case .maxFrameSize: self.maxFrameSize = setting.value
            case .maxRequestsInFlight: self.maxRequestsInFlight = setting.value
            case .idleTimeoutMilliseconds: self.idleTimeoutMilliseconds = setting.value
            default: break
            }
        }
    }

    public var settings: [Setting] {
        [
            Setting(.maxFrameSize, self.maxFrameSize),
            Setting(.maxRequestsInFlight, self.maxRequestsInFlight),
            Setting(.idleTimeoutMilliseconds, self.idleTimeoutMilliseconds),
        ]
    }
}

public struct SettingsError: Error, Hashable, Sendable {
    public var reason: String
}
