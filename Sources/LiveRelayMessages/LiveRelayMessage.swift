import CLiveRelayProto
import NIOCore

/// A liverelay.v1 or liverelay.admin.v1 message as a Swift value, encoded and
/// decoded through the hand-written protobuf-c descriptors.
///
/// Why values and not the C structs: callers get ordinary `String`s and arrays
/// with no manual memory management; the C structs live only for the duration
/// of one pack or unpack, and every unpacked struct is freed before decode returns.
///
/// Decoding enforces, in this order: the size limit (before protobuf-c sees a
/// byte), a descriptor-guided pre-scan that every string field, at any depth,
/// is UTF-8 without NUL (protobuf-c checks neither and cuts strings at NUL),
/// `protobuf_c_message_unpack`, and for requests `validate()`. Requests prove
/// the pre-scan's result while reading the unpacked struct instead, and run it
/// only when that proof fails (see OnePassDecode.swift): same errors, one walk.
/// Unknown fields are accepted and dropped: a newer client's additions must not
/// break an older server, and LiveRelay never forwards messages it did not build.
public protocol LiveRelayMessage: Sendable, Hashable {
    /// The fully-qualified proto name, e.g. "liverelay.v1.RegisterTokenRequest"
    /// or "liverelay.admin.v1.CreateAppRequest".
    static var protoName: String { get }
    /// Decodes with the default limit, `MessageLimits.maxMessageBytes`.
    init(serializedBytes bytes: UnsafeRawBufferPointer) throws(MessageError)
    /// Decodes, refusing messages larger than `limit` before unpacking them.
    init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError)
    /// The canonical proto encoding (byte-identical with Google's encoders).
    func serializedBytes() -> [UInt8]
    /// Appends the encoding to `buffer` without an intermediate array.
    func serialize(into buffer: inout ByteBuffer)
    /// The semantic rules of the contract. Decoding runs it for requests; replies
    /// only get the UTF-8/NUL scan. On a Swift-built value it also refuses NUL
    /// characters, which protobuf-c would otherwise cut silently when encoding.
    func validate() throws(MessageError)
}

// The convenience entry points are @inlinable so that callers get code
// specialized for the concrete message type: unspecialized generic code (with a
// Result<Self, MessageError> box) cost 160-290 ns per decode, more than a whole
// PingRequest decode. They only call the public protocol requirement.
extension LiveRelayMessage {
    @inlinable
    public init(serializedBytes bytes: UnsafeRawBufferPointer) throws(MessageError) {
        try self.init(serializedBytes: bytes, limit: MessageLimits.maxMessageBytes)
    }

    @inlinable
    public init(serializedBytes bytes: [UInt8], limit: Int = MessageLimits.maxMessageBytes) throws(MessageError) {
        // withUnsafeBufferPointer has typed throws; withUnsafeBytes does not.
        self = try bytes.withUnsafeBufferPointer { (buffer) throws(MessageError) -> Self in
            try Self(serializedBytes: UnsafeRawBufferPointer(buffer), limit: limit)
        }
    }

    @inlinable
    public init(serializedBytes buffer: ByteBuffer, limit: Int = MessageLimits.maxMessageBytes) throws(MessageError) {
        // ByteBuffer's closure APIs rethrow untyped errors: carry the typed one out in a Result
        // (specialized here, so it costs nothing on the success path).
        let result = buffer.withUnsafeReadableBytes { raw -> Result<Self, MessageError> in
            do throws(MessageError) {
                return .success(try Self(serializedBytes: raw, limit: limit))
            } catch {
                return .failure(error)
            }
        }
        self = try result.get()
    }
}

/// The RPC methods, with the wire names the framing carries and the message
/// names the contract check compares with the service descriptor.
public enum LiveRelayMethod: String, CaseIterable, Sendable {
    case registerToken = "/liverelay.v1.LiveRelay/RegisterToken"
    case startActivity = "/liverelay.v1.LiveRelay/StartActivity"
    case updateActivity = "/liverelay.v1.LiveRelay/UpdateActivity"
    case endActivity = "/liverelay.v1.LiveRelay/EndActivity"
    case ping = "/liverelay.v1.LiveRelay/Ping"
    case createChannel = "/liverelay.v1.LiveRelay/CreateChannel"
    case listChannels = "/liverelay.v1.LiveRelay/ListChannels"
    case deleteChannel = "/liverelay.v1.LiveRelay/DeleteChannel"
    case listEvents = "/liverelay.v1.LiveRelay/ListEvents"

    public var requestProtoName: String { requestType.protoName }
    public var replyProtoName: String { replyType.protoName }

    /// The Swift type that decodes this method's request.
    public var requestType: any LiveRelayMessage.Type {
        switch self {
        case .registerToken: RegisterTokenRequest.self
        case .startActivity: StartActivityRequest.self
        case .updateActivity: UpdateActivityRequest.self
        case .endActivity: EndActivityRequest.self
        case .ping: PingRequest.self
        case .createChannel: CreateChannelRequest.self
        case .listChannels: ListChannelsRequest.self
        case .deleteChannel: DeleteChannelRequest.self
        case .listEvents: ListEventsRequest.self
        }
    }

    /// The Swift type of this method's reply.
    public var replyType: any LiveRelayMessage.Type {
        switch self {
        case .registerToken: RegisterTokenReply.self
        case .startActivity: StartActivityReply.self
        case .updateActivity: UpdateActivityReply.self
        case .endActivity: EndActivityReply.self
        case .ping: PingReply.self
        case .createChannel: CreateChannelReply.self
        case .listChannels: ListChannelsReply.self
        case .deleteChannel: DeleteChannelReply.self
        case .listEvents: ListEventsReply.self
        }
    }

    /// The RPC's name without the service path ("StartActivity"): what key
    /// files, the CLI and the admin API's `allowed_methods` use, since the full
    /// path is noise to an operator.
    public var methodName: String { methodNameOfPath(rawValue) }

    public init?(methodName: String) {
        guard let method = LiveRelayMethod.allCases.first(where: { $0.methodName == methodName }) else { return nil }
        self = method
    }
}

/// "/liverelay.v1.LiveRelay/Ping" → "Ping".
func methodNameOfPath(_ path: String) -> String {
    String(path[path.index(after: path.lastIndex(of: "/")!)...])
}

/// What every message type provides to the shared codec: its descriptor and
/// the conversions to and from its C struct.
protocol CMessageConvertible {
    associatedtype CStruct
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { get }
    /// Reads an unpacked struct (which the codec frees afterwards).
    init(c: UnsafePointer<CStruct>)
    /// Builds the C struct, every string and sub-struct inside `arena`.
    func build(in arena: inout Arena) -> UnsafeMutablePointer<CStruct>
}

extension CMessageConvertible {
    /// Decodes through `Codec.unpack` and `init(c:)`, then frees the unpacked struct.
    /// (Swift 6.3 still copies and destroys the finished value once when an
    /// initializer assigns four or more non-trivial stored properties one by one.)
    @inline(__always)
    init(unpacking bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        let message = try Codec.unpack(bytes, limit: limit, descriptor: Self.cDescriptor)
        self.init(c: UnsafeRawPointer(message).assumingMemoryBound(to: CStruct.self))
        lr_free_unpacked(message)
    }
}

/// The one place that talks to protobuf_c_message_pack / unpack.
enum Codec {
    static func decode<M: CMessageConvertible>(
        _ bytes: UnsafeRawBufferPointer, limit: Int
    ) throws(MessageError) -> M {
        try M(unpacking: bytes, limit: limit)
    }

    /// The size limit, the WireScan pre-scan, then protobuf-c's unpack. The result
    /// must go to `lr_free_unpacked` once read.
    ///
    /// With `prescan: false` (for `OnePassDecodable`, which proves what the pre-scan
    /// would) the pre-scan runs only when unpack fails, so that its more precise error
    /// (a byte offset, a field path) is the one reported, as with it.
    static func unpack(
        _ bytes: UnsafeRawBufferPointer, limit: Int, descriptor: UnsafePointer<ProtobufCMessageDescriptor>,
        prescan: Bool = true
    ) throws(MessageError) -> UnsafeMutablePointer<ProtobufCMessage> {
        if bytes.count > limit {
            throw MessageError(.tooLarge(size: bytes.count, limit: limit))
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            // An empty message: every field at its default. Unpack a real buffer anyway
            // so the defaults come from the same code path as everything else.
            var zero: UInt8 = 0
            return try unpack(&zero, count: 0, descriptor: descriptor)
        }
        let p = base.assumingMemoryBound(to: UInt8.self)
        if !prescan, let message = lr_unpack(descriptor, bytes.count, p) { return message }
        try WireScan.check(p, count: bytes.count, descriptor: descriptor)
        return try unpack(p, count: bytes.count, descriptor: descriptor)
    }

    /// The pre-scan alone (`WireScan`).
    static func scan(
        _ bytes: UnsafeRawBufferPointer, descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    ) throws(MessageError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        try WireScan.check(base.assumingMemoryBound(to: UInt8.self), count: bytes.count, descriptor: descriptor)
    }

    private static func unpack(
        _ p: UnsafePointer<UInt8>, count: Int, descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    ) throws(MessageError) -> UnsafeMutablePointer<ProtobufCMessage> {
        // lr_unpack: protobuf_c_message_unpack with a per-thread bump allocator
        // (one reset instead of a malloc per string); lr_free_unpacked still runs
        // protobuf_c_message_free_unpacked, which frees any malloc fallback pieces.
        guard let message = lr_unpack(descriptor, count, p) else {
            throw MessageError(
                .malformed, detail: "protobuf-c could not unpack \(count) bytes as \(String(cString: descriptor.pointee.name))")
        }
        return message
    }

    // Encoding: build the C structs in an arena (the per-thread scratch buffer),
    // then pack. Instead of protobuf_c_message_get_packed_size (a second walk and
    // a strlen per string) the arena's running upper bound sizes the output.

    static func encode<M: CMessageConvertible>(_ value: M) -> [UInt8] {
        var arena = Arena.scratch()
        defer { arena.release() }
        let message = asMessage(value.build(in: &arena))
        let bound = arena.packedBound
        let out = arena.take(bound).assumingMemoryBound(to: UInt8.self)
        let size = protobuf_c_message_pack(message, out)
        precondition(size <= bound, "packed size exceeds its bound")
        if size == 0 { return [] }
        return [UInt8](UnsafeBufferPointer(start: out, count: size))
    }

    static func encode<M: CMessageConvertible>(_ value: M, into buffer: inout ByteBuffer) {
        var arena = Arena.scratch()
        defer { arena.release() }
        let message = asMessage(value.build(in: &arena))
        let bound = arena.packedBound
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { out in
            let size = protobuf_c_message_pack(message, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            precondition(size <= bound, "packed size exceeds its bound")
            return size
        }
    }

    @inline(__always)
    static func asMessage<T>(_ p: UnsafeMutablePointer<T>) -> UnsafePointer<ProtobufCMessage> {
        UnsafeRawPointer(p).assumingMemoryBound(to: ProtobufCMessage.self)
    }
}
