import NIOCore

/// Turns a byte stream, in chunks split anywhere, into frames.
///
/// Incremental and linear: chunks are appended to one buffer (taken without a
/// copy when nothing is pending), each frame is read once its bytes are all
/// there, and its byte fields are slices of that buffer. The only copies are
/// of a partial frame's bytes when more arrive after a frame was handed out,
/// which is at most once per frame, so bytes arriving one at a time and chunks
/// holding thousands of frames both cost time proportional to their size.
///
/// Checks that need only the header (length, type, kind of id) are made as
/// soon as the 10 header bytes are in, before any of the payload is buffered,
/// so an oversized frame costs the receiver 10 bytes. After an error the
/// decoder reports the same error forever: the stream is no longer aligned.
public struct FrameDecoder: Sendable {
    private enum State: Sendable {
        /// Matching the preface; `matched` bytes of it have been seen so far.
        case awaitingPreface(matched: Int)
        case awaitingHeader
        /// The header has been read and checked; waiting for its payload.
        case awaitingPayload(FrameHeader, FrameType)
        case failed(FrameDecodingError)
    }

    private var state: State
    private var buffer: ByteBuffer

    /// The largest payload this side accepts (what it advertised as
    /// MAX_FRAME_SIZE). HELLO is also capped at 4096 bytes regardless.
    public var maxFrameSize: UInt32

    /// - Parameters:
    ///   - expectPreface: true on the server, which must see the client's 8-byte preface first.
    ///   - maxFrameSize: the limit this side advertised.
    public init(expectPreface: Bool, maxFrameSize: UInt32 = Setting.defaultMaxFrameSize) {
        self.state = expectPreface ? .awaitingPreface(matched: 0) : .awaitingHeader
        self.buffer = ByteBuffer()
        self.maxFrameSize = maxFrameSize
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedBytes: Int { self.buffer.readableBytes }

    /// The payload length of the frame whose header has been read and which has
    /// not been returned yet, nil between frames: what a receiver reserves
    /// memory for before reading the rest of a large frame.
    public var pendingPayloadLength: Int? {
        guard case .awaitingPayload(let header, _) = self.state else { return nil }
        return Int(header.length)
    }

    /// Adds bytes from the network. Decoding happens in `nextFrame()`.
    public mutating func append(_ bytes: ByteBuffer) {
        if case .failed = self.state { return }
        if self.buffer.readableBytes == 0 {
            // Nothing pending: take the chunk as is (no copy).
            self.buffer = bytes
        } else {
            if self.buffer.readerIndex > 0 {
                // Drop consumed bytes so that a copy-on-write (the storage may be
                // shared with frames already handed out) copies only the partial frame.
                self.buffer.discardReadBytes()
            }
            self.buffer.writeImmutableBuffer(bytes)
        }
    }

    /// The next complete frame, nil if more bytes are needed, or the error that ends the connection.
    public mutating func nextFrame() throws(FrameDecodingError) -> Frame? {
        while true {
            switch self.state {
            case .failed(let error):
                throw error

            case .awaitingPreface(var matched):
                while matched < Wire.preface.count, let byte = self.buffer.readInteger(as: UInt8.self) {
                    guard byte == Wire.preface[matched] else {
                        return try self.fail(.badPreface(received: Array(Wire.preface[..<matched]) + [byte]))
                    }
                    matched += 1
                }
                if matched < Wire.preface.count {
                    self.state = .awaitingPreface(matched: matched)
                    self.releaseBufferIfEmpty()
                    return nil
                }
                self.state = .awaitingHeader

            case .awaitingHeader:
                guard let header = self.buffer.readFrameHeader() else {
                    self.releaseBufferIfEmpty()
                    return nil
                }
                guard let type = header.type else {
                    return try self.fail(.unknownFrameType(header.rawType))
                }
                let limit = type == .hello ? UInt32(Wire.maxHelloPayloadSize) : self.maxFrameSize
                guard header.length <= limit else {
                    return try self.fail(.frameTooLarge(type: header.rawType, length: header.length, limit: limit))
                }
                guard type.isRequestLevel != header.requestID.isConnectionLevel else {
                    return try self.fail(.wrongKindOfRequestID(type, header.requestID))
                }
                self.state = .awaitingPayload(header, type)

            case .awaitingPayload(let header, let type):
                guard var payload = self.buffer.readSlice(length: Int(header.length)) else {
                    return nil
                }
                self.state = .awaitingHeader
                do {
                    let frame = try Frame.decode(type: type, requestID: header.requestID, payload: &payload)
                    self.releaseBufferIfEmpty()
                    return frame
                } catch {
                    return try self.fail(error)
                }
            }
        }
    }

    /// Call when the peer closed the connection: throws `.truncated` if it
    /// stopped inside a frame or the preface, since the peer's last frame was cut short.
    public func finish() throws(FrameDecodingError) {
        switch self.state {
        case .failed(let error):
            throw error
        case .awaitingPreface(let matched) where matched > 0:
            throw .truncated(bufferedBytes: matched)
        case .awaitingPayload:
            throw .truncated(bufferedBytes: Wire.frameHeaderSize + self.buffer.readableBytes)
        case .awaitingHeader where self.buffer.readableBytes > 0:
            throw .truncated(bufferedBytes: self.buffer.readableBytes)
        case .awaitingPreface, .awaitingHeader:
            return
        }
    }

    private mutating func fail(_ error: FrameDecodingError) throws(FrameDecodingError) -> Frame? {
        self.state = .failed(error)
        self.buffer = ByteBuffer()
        throw error
    }

    private mutating func releaseBufferIfEmpty() {
        // Forget storage that may be shared with handed-out frames, so the next
        // chunk is taken without a copy and old chunks are freed promptly.
        if self.buffer.readableBytes == 0, self.buffer.capacity > 0 {
            self.buffer = ByteBuffer()
        }
    }
}
