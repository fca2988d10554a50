import CLiveRelayProto
import NIOCore

/// A liverelay.v1 message as a Swift value, encoded and decoded through the
/// hand-written protobuf-c descriptors.
///
/// Why values and not the C structs: callers get ordinary `String`s and arrays
/// with no manual memory management; the C structs live only for the duration
/// of one pack or unpack, and every unpacked struct is freed before decode returns.
///
/// Decoding enforces, in this order: the size limit (before protobuf-c sees a
/// byte), a descriptor-guided pre-scan that every string field, at any depth,
/// is UTF-8 without NUL (protobuf-c checks neither and cuts strings at NUL),
/// `protobuf_c_message_unpack`, and for requests `validate()`.
/// Unknown fields are accepted and dropped: a newer client's additions must not
/// break an older server, and LiveRelay never forwards messages it did not build.
public protocol LiveRelayMessage: Sendable, Hashable {
    /// The fully-qualified proto name, e.g. "liverelay.v1.RegisterTokenRequest".
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

extension LiveRelayMessage {
    public init(serializedBytes bytes: UnsafeRawBufferPointer) throws(MessageError) {
        try self.init(serializedBytes: bytes, limit: MessageLimits.maxMessageBytes)
    }

    public init(serializedBytes bytes: [UInt8], limit: Int = MessageLimits.maxMessageBytes) throws(MessageError) {
        let result: Result<Self, MessageError> = bytes.withUnsafeBytes { raw in
            Result { () throws(MessageError) -> Self in try Self(serializedBytes: raw, limit: limit) }
        }
        self = try result.get()
    }

    public init(serializedBytes buffer: ByteBuffer, limit: Int = MessageLimits.maxMessageBytes) throws(MessageError) {
        let result: Result<Self, MessageError> = buffer.withUnsafeReadableBytes { raw in
            Result { () throws(MessageError) -> Self in try Self(serializedBytes: raw, limit: limit) }
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
        }
    }
}

/// What every message type provides to the shared codec: its descriptor and
/// the conversions to and from its C struct.
protocol CMessageConvertible {
    associatedtype CStruct
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { get }
    /// Reads an unpacked struct (which the codec frees afterwards).
    init(c: UnsafePointer<CStruct>)
    /// An upper bound of the arena bytes `build` uses (8-byte granules).
    var arenaBytes: Int { get }
    /// Builds the C struct, every string and sub-struct inside `arena`.
    func build(in arena: inout Arena) -> UnsafeMutablePointer<CStruct>
}

/// The one place that talks to protobuf_c_message_pack / unpack.
enum Codec {
    static func decode<M: CMessageConvertible>(
        _ bytes: UnsafeRawBufferPointer, limit: Int
    ) throws(MessageError) -> M {
        if bytes.count > limit {
            throw MessageError(.tooLarge(size: bytes.count, limit: limit))
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            // An empty message: every field at its default. Unpack a real buffer anyway
            // so the defaults come from the same code path as everything else.
            var zero: UInt8 = 0
            return try unpack(&zero, count: 0)
        }
        let p = base.assumingMemoryBound(to: UInt8.self)
        try WireScan.check(p, count: bytes.count, descriptor: M.cDescriptor)
        return try unpack(p, count: bytes.count)
    }

    private static func unpack<M: CMessageConvertible>(
        _ p: UnsafePointer<UInt8>, count: Int
    ) throws(MessageError) -> M {
        guard let message = protobuf_c_message_unpack(M.cDescriptor, nil, count, p) else {
            throw MessageError(.malformed, detail: "protobuf-c could not unpack \(count) bytes as \(String(cString: M.cDescriptor.pointee.name))")
        }
        defer { protobuf_c_message_free_unpacked(message, nil) }
        return M(c: UnsafeRawPointer(message).assumingMemoryBound(to: M.CStruct.self))
    }

    static func encode<M: CMessageConvertible>(_ value: M) -> [UInt8] {
        withUnsafeTemporaryAllocation(byteCount: value.arenaBytes, alignment: 16) { raw in
            var arena = Arena(raw)
            let message = asMessage(value.build(in: &arena))
            let size = protobuf_c_message_get_packed_size(message)
            if size == 0 { return [] }
            return [UInt8](unsafeUninitializedCapacity: size) { out, written in
                written = protobuf_c_message_pack(message, out.baseAddress!)
            }
        }
    }

    static func encode<M: CMessageConvertible>(_ value: M, into buffer: inout ByteBuffer) {
        withUnsafeTemporaryAllocation(byteCount: value.arenaBytes, alignment: 16) { raw in
            var arena = Arena(raw)
            let message = asMessage(value.build(in: &arena))
            let size = protobuf_c_message_get_packed_size(message)
            if size == 0 { return }
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { out in
                protobuf_c_message_pack(message, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    @inline(__always)
    static func asMessage<T>(_ p: UnsafeMutablePointer<T>) -> UnsafePointer<ProtobufCMessage> {
        UnsafeRawPointer(p).assumingMemoryBound(to: ProtobufCMessage.self)
    }
}
