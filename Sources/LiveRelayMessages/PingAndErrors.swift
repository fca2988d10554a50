import CLiveRelayProto
import NIOCore

// liverelay.proto (proto3): Ping and the ERROR frame's details.

/// A health check through authentication and the service; the payload is echoed.
public struct PingRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.PingRequest"

    /// `bytes`, not `string`: arbitrary binary is legitimate here, so no UTF-8 rules apply.
    public var payload: [UInt8]

    public init(payload: [UInt8] = []) { self.payload = payload }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate()
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    /// Nothing to check: any payload within the message size limit is valid.
    public func validate() throws(MessageError) {}
}

extension PingRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_ping_request_descriptor() }

    init(c: UnsafePointer<LrPingRequest>, tally t: inout WireTally) {
        t.noUnknownFields(c.pointee.base)
        payload = t.bytes3(c.pointee.payload, field: 1)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrPingRequest> {
        let c = a.allocate(LrPingRequest.self)
        lr_ping_request_init(c)
        c.pointee.payload = a.binary(payload)
        return c
    }
}

/// The answer to Ping, with the server clock to spot skew.
public struct PingReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.PingReply"

    public var payload: [UInt8]
    public var serverTimeMS: Int64
    public var serverVersion: String

    public init(payload: [UInt8] = [], serverTimeMS: Int64 = 0, serverVersion: String = "") {
        self.payload = payload
        self.serverTimeMS = serverTimeMS
        self.serverVersion = serverVersion
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try Rules.noNUL(serverVersion, "server_version") }
}

extension PingReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_ping_reply_descriptor() }

    init(c: UnsafePointer<LrPingReply>) {
        self.init(
            payload: cBytes(c.pointee.payload), serverTimeMS: c.pointee.server_time_ms,
            serverVersion: cString(c.pointee.server_version))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrPingReply> {
        let c = a.allocate(LrPingReply.self)
        lr_ping_reply_init(c)
        c.pointee.payload = a.binary(payload)
        c.pointee.server_time_ms = serverTimeMS
        c.pointee.server_version = a.copy3(serverVersion)
        return c
    }
}

/// One invalid request field, as `MessageError.fieldViolation` reports it.
public struct FieldViolation: LiveRelayMessage {
    public static let protoName = "liverelay.v1.FieldViolation"

    /// The field path in proto names, e.g. "targets.push_to_start_tokens[3]".
    public var field: String
    public var description: String

    public init(field: String = "", description: String = "") {
        self.field = field
        self.description = description
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    func validate(prefix: @autoclosure () -> String) throws(MessageError) {
        try Rules.noNUL(field, prefix() + "field")
        try Rules.noNUL(description, prefix() + "description")
    }
}

extension FieldViolation: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_field_violation_descriptor() }

    init(c: UnsafePointer<LrFieldViolation>) {
        self.init(field: cString(c.pointee.field), description: cString(c.pointee.description))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrFieldViolation> {
        let c = a.allocate(LrFieldViolation.self)
        lr_field_violation_init(c)
        c.pointee.field = a.copy3(field)
        c.pointee.description = a.copy3(description)
        return c
    }
}

/// The body of an ERROR frame: machine-readable details beside the status code.
public struct ErrorDetails: LiveRelayMessage {
    public static let protoName = "liverelay.v1.ErrorDetails"

    public var fieldViolations: [FieldViolation]
    public var retryAfterMS: UInt32
    public var reason: String

    /// The reason of an UNAVAILABLE call that may have taken effect after all
    /// (its commit's outcome is unknown): unlike every other UNAVAILABLE, it
    /// may be resent only with the same idempotency key. Server and client
    /// share the spelling here so that they cannot drift apart.
    public static let outcomeUnknownReason = "OutcomeUnknown"

    public init(fieldViolations: [FieldViolation] = [], retryAfterMS: UInt32 = 0, reason: String = "") {
        self.fieldViolations = fieldViolations
        self.retryAfterMS = retryAfterMS
        self.reason = reason
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        for (i, violation) in fieldViolations.enumerated() {
            try violation.validate(prefix: "field_violations[\(i)].")
        }
        try Rules.noNUL(reason, "reason")
    }
}

extension ErrorDetails: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_error_details_descriptor() }

    init(c: UnsafePointer<LrErrorDetails>) {
        let m = c.pointee
        self.init(
            fieldViolations: cMessages(m.n_field_violations, m.field_violations, as: FieldViolation.self),
            retryAfterMS: m.retry_after_ms, reason: cString(m.reason))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrErrorDetails> {
        let c = a.allocate(LrErrorDetails.self)
        lr_error_details_init(c)
        if !fieldViolations.isEmpty {
            let array = a.pointers(LrFieldViolation.self, fieldViolations.count)
            for i in fieldViolations.indices { array[i] = fieldViolations[i].build(in: &a) }
            c.pointee.n_field_violations = fieldViolations.count
            c.pointee.field_violations = array
        }
        c.pointee.retry_after_ms = retryAfterMS
        c.pointee.reason = a.copy3(reason)
        return c
    }
}
