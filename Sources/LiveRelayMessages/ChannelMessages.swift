import CLiveRelayProto
import NIOCore

// liverelay.proto (proto3): the broadcast channel RPCs (CreateChannel,
// ListChannels, DeleteChannel). proto3 like the rest of the file: every zero
// value means "not set", so the fields are plain values. Decoding runs
// validate() for requests, which names the first offending field; replies
// only get the UTF-8/NUL scan.

/// A broadcast channel of one app in one APNs environment (liverelay.v1.Channel).
///
/// Not named `Channel`: NIOCore's `Channel` protocol is in scope wherever these
/// messages are, and every module importing both would find the name ambiguous.
public struct BroadcastChannel: LiveRelayMessage {
    public static let protoName = "liverelay.v1.Channel"

    public var appID: String
    /// APNs's id (base64), as APNs answered the creation.
    public var channelID: String
    public var environment: Environment
    public var storagePolicy: BroadcastStoragePolicy
    /// created_at, UNIX seconds.
    public var createdAt: Int64

    public init(
        appID: String = "", channelID: String = "", environment: Environment = .unspecified,
        storagePolicy: BroadcastStoragePolicy = .unspecified, createdAt: Int64 = 0
    ) {
        self.appID = appID
        self.channelID = channelID
        self.environment = environment
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    func validate(prefix: @autoclosure () -> String) throws(MessageError) {
        try Rules.noNUL(appID, prefix() + "app_id")
        try Rules.noNUL(channelID, prefix() + "channel_id")
    }
}

extension BroadcastChannel: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_channel_descriptor() }

    init(c: UnsafePointer<LrChannel>) {
        let m = c.pointee
        appID = cString(m.app_id)
        channelID = cString(m.channel_id)
        environment = Environment(rawValue: cEnumValue(m.environment))
        storagePolicy = BroadcastStoragePolicy(rawValue: cEnumValue(m.storage_policy))
        createdAt = m.created_at
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrChannel> {
        let c = a.allocate(LrChannel.self)
        lr_channel_init(c)
        c.pointee.app_id = a.copy3(appID)
        c.pointee.channel_id = a.copy3(channelID)
        c.pointee.environment = cEnum(environment.rawValue)
        c.pointee.storage_policy = cEnum(storagePolicy.rawValue)
        c.pointee.created_at = createdAt
        return c
    }
}

/// Creates a channel with APNs. The environment and the storage policy are
/// required: neither has a safe default, and APNs cannot change them later.
public struct CreateChannelRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.CreateChannelRequest"

    public var appID: String
    public var environment: Environment
    public var storagePolicy: BroadcastStoragePolicy

    /// The parameters without a default are the fields the server requires of every such request.
    public init(appID: String, environment: Environment, storagePolicy: BroadcastStoragePolicy) {
        self.init(appID: .some(appID), environment: environment, storagePolicy: storagePolicy)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose
    /// (`appID` is optional here only to tell this initialiser apart from the public one).
    @_disfavoredOverload
    package init(appID: String? = nil, environment: Environment = .unspecified, storagePolicy: BroadcastStoragePolicy = .unspecified) {
        self.appID = appID ?? ""
        self.environment = environment
        self.storagePolicy = storagePolicy
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate()
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        try Rules.appID(appID)
        switch environment {
        case .unspecified: throw MessageError(.missing, field: "environment")
        case let .unrecognized(n): throw MessageError(.enumOutOfRange(n), field: "environment")
        case .sandbox, .production: break
        }
        switch storagePolicy {
        case .unspecified: throw MessageError(.missing, field: "storage_policy")
        case let .unrecognized(n): throw MessageError(.enumOutOfRange(n), field: "storage_policy")
        case .noStorage, .mostRecentMessage: break
        }
    }
}

extension CreateChannelRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_create_channel_request_descriptor() }

    init(c: UnsafePointer<LrCreateChannelRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.string3(m.app_id, field: 1)
        environment = Environment(rawValue: t.enum3(m.environment, field: 2))
        storagePolicy = BroadcastStoragePolicy(rawValue: t.enum3(m.storage_policy, field: 3))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrCreateChannelRequest> {
        let c = a.allocate(LrCreateChannelRequest.self)
        lr_create_channel_request_init(c)
        c.pointee.app_id = a.copy3(appID)
        c.pointee.environment = cEnum(environment.rawValue)
        c.pointee.storage_policy = cEnum(storagePolicy.rawValue)
        return c
    }
}

/// The channel CreateChannel made.
public struct CreateChannelReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.CreateChannelReply"

    /// Optional because a present-but-empty channel must round-trip byte-identically.
    public var channel: BroadcastChannel?

    public init(channel: BroadcastChannel? = nil) { self.channel = channel }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try channel?.validate(prefix: "channel.") }
}

extension CreateChannelReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_create_channel_reply_descriptor() }

    init(c: UnsafePointer<LrCreateChannelReply>) {
        channel = c.pointee.channel.map { BroadcastChannel(c: $0) }
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrCreateChannelReply> {
        let c = a.allocate(LrCreateChannelReply.self)
        lr_create_channel_reply_init(c)
        if let channel { c.pointee.channel = channel.build(in: &a) }
        return c
    }
}

/// An app's channels, a page at a time.
public struct ListChannelsRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.ListChannelsRequest"

    /// The largest page: an app may have 10,000 channels per environment, and one
    /// reply of all of them would near the frame limit.
    public static let maxPageSize: UInt32 = 1000
    /// page_size 0 means this many.
    public static let defaultPageSize: UInt32 = 100
    /// Tokens are the server's own (a position in its order); 256 bytes is ample
    /// and keeps a forged one from costing anything.
    public static let maxPageTokenBytes = 256

    public var appID: String
    /// `.unspecified` lists both environments.
    public var environment: Environment
    /// 0: `defaultPageSize`; at most `maxPageSize`.
    public var pageSize: UInt32
    /// The previous reply's next_page_token; empty for the first page.
    public var pageToken: String

    /// The parameters without a default are the fields the server requires of every such request.
    public init(
        appID: String, environment: Environment = .unspecified, pageSize: UInt32 = 0, pageToken: String = ""
    ) {
        self.init(appID: .some(appID), environment: environment, pageSize: pageSize, pageToken: pageToken)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose
    /// (`appID` is optional here only to tell this initialiser apart from the public one).
    @_disfavoredOverload
    package init(appID: String? = nil, environment: Environment = .unspecified, pageSize: UInt32 = 0, pageToken: String = "") {
        self.appID = appID ?? ""
        self.environment = environment
        self.pageSize = pageSize
        self.pageToken = pageToken
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate(decoded: true)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    /// The page size that applies: 0 asks for the default.
    public var effectivePageSize: Int { Int(pageSize == 0 ? Self.defaultPageSize : pageSize) }

    public func validate() throws(MessageError) { try validate(decoded: false) }

    /// `decoded`: called by decode, whose strings hold no NUL (see `Rules.text`).
    func validate(decoded: Bool) throws(MessageError) {
        try Rules.appID(appID)
        if case let .unrecognized(n) = environment { throw MessageError(.enumOutOfRange(n), field: "environment") }
        try Rules.inRange(pageSize, 0...Self.maxPageSize, "page_size")
        try Rules.text(pageToken, max: Self.maxPageTokenBytes, "page_token", decoded: decoded)
    }
}

extension ListChannelsRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_list_channels_request_descriptor() }

    init(c: UnsafePointer<LrListChannelsRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.string3(m.app_id, field: 1)
        environment = Environment(rawValue: t.enum3(m.environment, field: 2))
        pageSize = t.uint32_3(m.page_size, field: 3)
        pageToken = t.string3(m.page_token, field: 4)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrListChannelsRequest> {
        let c = a.allocate(LrListChannelsRequest.self)
        lr_list_channels_request_init(c)
        c.pointee.app_id = a.copy3(appID)
        c.pointee.environment = cEnum(environment.rawValue)
        c.pointee.page_size = pageSize
        c.pointee.page_token = a.copy3(pageToken)
        return c
    }
}

/// One page of channels.
public struct ListChannelsReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.ListChannelsReply"

    public var channels: [BroadcastChannel]
    /// Empty on the last page.
    public var nextPageToken: String

    public init(channels: [BroadcastChannel] = [], nextPageToken: String = "") {
        self.channels = channels
        self.nextPageToken = nextPageToken
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        for (i, channel) in channels.enumerated() { try channel.validate(prefix: "channels[\(i)].") }
        try Rules.noNUL(nextPageToken, "next_page_token")
    }
}

extension ListChannelsReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_list_channels_reply_descriptor() }

    init(c: UnsafePointer<LrListChannelsReply>) {
        let m = c.pointee
        channels = cMessages(m.n_channels, m.channels, as: BroadcastChannel.self)
        nextPageToken = cString(m.next_page_token)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrListChannelsReply> {
        let c = a.allocate(LrListChannelsReply.self)
        lr_list_channels_reply_init(c)
        if !channels.isEmpty {
            let array = a.pointers(LrChannel.self, channels.count)
            for i in channels.indices { array[i] = channels[i].build(in: &a) }
            c.pointee.n_channels = channels.count
            c.pointee.channels = array
        }
        c.pointee.next_page_token = a.copy3(nextPageToken)
        return c
    }
}

/// Deletes one channel. The id alone names it: APNs's ids are unique and the
/// store knows the environment.
public struct DeleteChannelRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.DeleteChannelRequest"

    public var appID: String
    public var channelID: String

    /// The parameters without a default are the fields the server requires of every such request.
    public init(appID: String, channelID: String) {
        self.init(appID: .some(appID), channelID: channelID)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose
    /// (`appID` is optional here only to tell this initialiser apart from the public one).
    @_disfavoredOverload
    package init(appID: String? = nil, channelID: String = "") {
        self.appID = appID ?? ""
        self.channelID = channelID
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate()
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        try Rules.appID(appID)
        try Rules.channelID(channelID, required: true)
    }
}

extension DeleteChannelRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_delete_channel_request_descriptor() }

    init(c: UnsafePointer<LrDeleteChannelRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.string3(m.app_id, field: 1)
        channelID = t.string3(m.channel_id, field: 2)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrDeleteChannelRequest> {
        let c = a.allocate(LrDeleteChannelRequest.self)
        lr_delete_channel_request_init(c)
        c.pointee.app_id = a.copy3(appID)
        c.pointee.channel_id = a.copy3(channelID)
        return c
    }
}

/// The reply to DeleteChannel: no fields (a deleted channel has nothing left to
/// report); a message all the same so that fields can be added later.
public struct DeleteChannelReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.DeleteChannelReply"

    public init() {}

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {}
}

extension DeleteChannelReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_delete_channel_reply_descriptor() }

    init(c: UnsafePointer<LrDeleteChannelReply>) {}

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrDeleteChannelReply> {
        let c = a.allocate(LrDeleteChannelReply.self)
        lr_delete_channel_reply_init(c)
        return c
    }
}

extension BroadcastChannel {
    /// Whether `text` can be an APNs broadcast channel id: 1-128 characters of
    /// the base64 alphabets (standard and URL-safe, `=` padding). The one
    /// statement of the rule: requests are checked with it at decode, the
    /// channel service checks the ids APNs hands out with it (an id no call
    /// could name back is never recorded), and the mock APNs answers
    /// BadChannelId by it.
    public static func isValidID(_ text: String) -> Bool {
        (1...Rules.maxChannelID).contains(text.utf8.count) && Rules.withBytes(text) { Rules.allInSet($0, Rules.channelIDSet) }
    }
}
