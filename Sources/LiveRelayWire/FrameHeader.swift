import NIOCore

/// The 10 bytes in front of every frame.
///
/// Everything a receiver needs to route or reject a frame is here: the length
/// (to refuse an oversized frame before buffering it), the type and the
/// request id (to check the id's kind before the payload arrives). The same
/// idea as TChannel's fixed frame header, without its per-frame checksums,
/// which TLS already provides.
///
/// | Offset | Size | Field          |
/// |--------|------|----------------|
/// | 0      | 4    | payload length |
/// | 4      | 1    | type           |
/// | 5      | 1    | flags (0)      |
/// | 6      | 4    | request id     |
public struct FrameHeader: Hashable, Sendable {
    /// The number of payload bytes after the header.
    public var length: UInt32
    /// The raw type byte: kept raw so that an unknown type can be reported with its value.
    public var rawType: UInt8
    /// No flags are defined in v1: sent as 0, ignored on receipt, so a later
    /// version can define some without breaking v1 receivers.
    public var flags: UInt8
    public var requestID: RequestID

    public init(length: UInt32, rawType: UInt8, flags: UInt8 = 0, requestID: RequestID) {
        self.length = length
        self.rawType = rawType
        self.flags = flags
        self.requestID = requestID
    }

    public init(length: UInt32, type: FrameType, flags: UInt8 = 0, requestID: RequestID) {
        self.init(length: length, rawType: type.rawValue, flags: flags, requestID: requestID)
    }

    public var type: FrameType? { FrameType(rawValue: self.rawType) }
}

extension ByteBuffer {
    /// Reads a frame header, or returns nil (consuming nothing) if fewer than 10 bytes are readable.
    @inlinable
    public mutating func readFrameHeader() -> FrameHeader? {
        guard self.readableBytes >= Wire.frameHeaderSize,
            let length = self.getInteger(at: self.readerIndex, as: UInt32.self),
            let type = self.getInteger(at: self.readerIndex + 4, as: UInt8.self),
            let flags = self.getInteger(at: self.readerIndex + 5, as: UInt8.self),
            let id = self.getInteger(at: self.readerIndex + 6, as: UInt32.self)
        else { return nil }
        self.moveReaderIndex(forwardBy: Wire.frameHeaderSize)
        return FrameHeader(length: length, rawType: type, flags: flags, requestID: RequestID(id))
    }

    /// Writes the 10 header bytes; returns the number written (always 10).
    @inlinable
    @discardableResult
    public mutating func writeFrameHeader(_ header: FrameHeader) -> Int {
        self.writeMultipleIntegers(header.length, header.rawType, header.flags, header.requestID.rawValue)
    }
}
