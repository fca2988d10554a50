import CNGHTTP2
import NIOCore

/// What the server did, as values: each nghttp2 callback of a ``HTTP2ClientSession``
/// call becomes one of these, in the order nghttp2 made it.
public enum HTTP2SessionEvent: Equatable, Sendable {
    /// The server's SETTINGS (not an acknowledgement), with the stream limit it set, nil when it set none.
    case settings(maxConcurrentStreams: Int?)
    /// The acknowledgement of a PING we sent, with its data.
    case pingAcknowledged(UInt64)
    /// GOAWAY: streams above `lastStreamID` were not processed (nghttp2 closes them with REFUSED_STREAM).
    case goAway(lastStreamID: Int32, errorCode: UInt32)
    /// One field of a response's header block (or of its trailers). Names arrive lowercase.
    case headerField(streamID: Int32, name: String, value: String)
    /// A piece of a response's body.
    case data(streamID: Int32, [UInt8])
    /// The server ended the stream (END_STREAM on its HEADERS or DATA): the answer is complete.
    case endOfStream(streamID: Int32)
    /// The stream is over: after a complete exchange (code 0), a RST_STREAM (its code,
    /// either side's), or a GOAWAY that left it out (REFUSED_STREAM, 7).
    case streamClosed(streamID: Int32, errorCode: UInt32)
}

/// A fatal error of the session: the connection cannot go on.
public struct HTTP2SessionError: Error, Equatable, CustomStringConvertible {
    /// nghttp2's error code (`NGHTTP2_ERR_*`).
    public let code: Int
    public let operation: String

    public var description: String {
        "HTTP/2 \(operation): \(String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: code))))"
    }
}

/// One HTTP/2 client connection's protocol, run by libnghttp2 with no I/O: bytes
/// from the server go in through ``receive(_:)``, bytes for the server come out of
/// ``write(into:)``, and everything nghttp2 tells us comes back as
/// ``HTTP2SessionEvent`` values from ``takeEvents()``.
///
/// nghttp2 acknowledges SETTINGS and PING, gives back flow-control windows
/// (WINDOW_UPDATE as the application consumes), keeps the HPACK tables and
/// enforces the protocol on every frame; a peer's protocol error makes it queue a
/// GOAWAY, after which ``isFinished`` turns true once that is written.
///
/// The callbacks only append values and copy bytes: none calls back into nghttp2,
/// and no pointer nghttp2 hands them is kept past the callback. Not thread-safe:
/// one connection's event loop owns it.
///
/// Memory, counted through nghttp2's allocator hooks with these settings: 25 KiB
/// for the session once its preface is out (HPACK tables of 4 KiB each way
/// included), plus about 0.25 KiB per open stream, and each request's body until
/// it is sent.
public final class HTTP2ClientSession {
    /// What this client tells the server in its first SETTINGS.
    public struct Settings: Sendable, Equatable {
        /// Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE).
        public var initialWindowSize: Int
        /// The connection's receive window, raised from the protocol's 65,535 by a WINDOW_UPDATE.
        public var connectionWindowSize: Int
        /// The largest response header block accepted (SETTINGS_MAX_HEADER_LIST_SIZE).
        public var maxHeaderListSize: Int

        public init(initialWindowSize: Int = 1 << 20, connectionWindowSize: Int = 1 << 20, maxHeaderListSize: Int = 1 << 14) {
            self.initialWindowSize = initialWindowSize
            self.connectionWindowSize = connectionWindowSize
            self.maxHeaderListSize = maxHeaderListSize
        }
    }

    /// What the callbacks write to: the session's events and the bodies not yet sent.
    /// Behind a pointer the session allocates (nghttp2's `user_data`), so a callback
    /// reaches it without a retain or a class's exclusivity check.
    fileprivate struct Inbox {
        var events: [HTTP2SessionEvent] = []
        /// The last request's body: nearly always taken whole by the `write(into:)`
        /// right after its submission, so it needs no table.
        var currentBody: ByteBuffer?
        var currentBodyStream: Int32 = 0
        /// Bodies that flow control held back when the next request came.
        var heldBodies: [Int32: ByteBuffer] = [:]
        var headersSentThrough: Int32 = 0

        mutating func dropBody(of streamID: Int32) {
            if streamID == currentBodyStream { currentBody = nil }
            if !heldBodies.isEmpty { heldBodies[streamID] = nil }
        }
    }

    private let session: OpaquePointer
    private let inbox: UnsafeMutablePointer<Inbox>

    /// A client session whose preface and SETTINGS are the first bytes ``write(into:)`` gives.
    public init(settings: Settings = Settings()) throws(HTTP2SessionError) {
        let inbox = UnsafeMutablePointer<Inbox>.allocate(capacity: 1)
        inbox.initialize(to: Inbox())
        var sessionCreated = false
        defer {
            if !sessionCreated {
                inbox.deinitialize(count: 1)
                inbox.deallocate()
            }
        }
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTP2SessionError(code: Int(NGHTTP2_ERR_NOMEM.rawValue), operation: "session callbacks")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSent)

        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            throw HTTP2SessionError(code: Int(NGHTTP2_ERR_NOMEM.rawValue), operation: "session options")
        }
        defer { nghttp2_option_del(option) }
        // A client has no use for closed streams (they serve RFC 7540's priority tree).
        nghttp2_option_set_no_closed_streams(option, 1)

        var session: OpaquePointer?
        let created = nghttp2_session_client_new2(&session, callbacks, inbox, option)
        guard created == 0, let session else {
            throw HTTP2SessionError(code: Int(created), operation: "session")
        }
        sessionCreated = true
        self.session = session
        self.inbox = inbox

        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(settings.initialWindowSize)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(settings.maxHeaderListSize)),
        ]
        let submitted = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard submitted == 0 else {
            throw HTTP2SessionError(code: Int(submitted), operation: "SETTINGS")
        }
        if settings.connectionWindowSize > 65_535 {
            let raised = nghttp2_session_set_local_window_size(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: settings.connectionWindowSize))
            guard raised == 0 else {
                throw HTTP2SessionError(code: Int(raised), operation: "connection window")
            }
        }
    }

    deinit {
        nghttp2_session_del(session)
        inbox.deinitialize(count: 1)
        inbox.deallocate()
    }

    // MARK: Bytes

    /// Reads the server's bytes; what they meant is in ``takeEvents()``. Throws only
    /// when the session cannot go on (a flood, memory); a protocol error of the
    /// server is answered by a GOAWAY in the next ``write(into:)`` instead.
    public func receive(_ bytes: ByteBuffer) throws(HTTP2SessionError) {
        let read = bytes.withUnsafeReadableBytes { raw -> Int in
            guard let base = raw.baseAddress, raw.count > 0 else { return 0 }
            return lr_nghttp2_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        if read < 0 { throw HTTP2SessionError(code: read, operation: "receive") }
    }

    /// Appends everything the session has to send (frames of requests submitted,
    /// acknowledgements, window updates, pings, resets, a GOAWAY) to `buffer`.
    public func write(into buffer: inout ByteBuffer) throws(HTTP2SessionError) {
        while true {
            var data: UnsafePointer<UInt8>?
            let count = lr_nghttp2_mem_send(session, &data)
            if count < 0 { throw HTTP2SessionError(code: count, operation: "send") }
            guard count > 0, let data else { return }
            buffer.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
        }
    }

    /// The events of the calls since the last take, in order.
    public func takeEvents() -> [HTTP2SessionEvent] {
        guard !inbox.pointee.events.isEmpty else { return [] }
        let events = inbox.pointee.events
        inbox.pointee.events = []
        return events
    }

    /// True once the session is over: it sent or received a GOAWAY that ends it,
    /// or a protocol error, and has nothing left to write.
    public var isFinished: Bool {
        nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    // MARK: Frames

    /// Queues a request's HEADERS (and its body as DATA); returns its stream id.
    /// Throws when the session takes no new stream: stream ids spent, a GOAWAY sent
    /// or received.
    public func submitRequest(_ headers: HTTP2HeaderList, body: ByteBuffer) throws(HTTP2SessionError) -> Int32 {
        let hasBody = body.readableBytes > 0
        let streamID = headers.bytes.withUnsafeBufferPointer { bytes -> Int32 in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(1, headers.fields.count)) { fields in
                let base = UnsafeMutablePointer(mutating: bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                for (index, field) in headers.fields.enumerated() {
                    fields[index] = nghttp2_nv(
                        name: base + field.nameStart, value: base + field.valueStart, namelen: field.nameCount,
                        valuelen: field.valueCount,
                        flags: UInt8(field.indexable ? NGHTTP2_NV_FLAG_NONE.rawValue : NGHTTP2_NV_FLAG_NO_INDEX.rawValue))
                }
                return lr_nghttp2_submit_request(session, fields.baseAddress, headers.fields.count, hasBody ? readBody : nil)
            }
        }
        guard streamID > 0 else { throw HTTP2SessionError(code: Int(streamID), operation: "request") }
        // nghttp2 asks for the body only from `write(into:)`, after this returns.
        if hasBody {
            if let held = inbox.pointee.currentBody { inbox.pointee.heldBodies[inbox.pointee.currentBodyStream] = held }
            inbox.pointee.currentBody = body
            inbox.pointee.currentBodyStream = streamID
        }
        return streamID
    }

    /// Queues a PING carrying `data`; its acknowledgement comes back as ``HTTP2SessionEvent/pingAcknowledged(_:)``.
    public func submitPing(_ data: UInt64) throws(HTTP2SessionError) {
        var bytes = data.bigEndian
        let result = withUnsafeBytes(of: &bytes) { raw in
            nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        if result != 0 { throw HTTP2SessionError(code: Int(result), operation: "PING") }
    }

    /// Queues RST_STREAM for `streamID` (CANCEL unless told otherwise); the stream's
    /// close comes back as an event. A stream already closed is left as it is.
    public func resetStream(_ streamID: Int32, errorCode: UInt32 = NGHTTP2_CANCEL.rawValue) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    /// Queues a GOAWAY that ends the session once written.
    public func terminate(errorCode: UInt32 = NGHTTP2_NO_ERROR.rawValue) {
        _ = nghttp2_session_terminate_session(session, errorCode)
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS as nghttp2 enforces it (100 until the server's SETTINGS).
    public var remoteMaxConcurrentStreams: Int {
        Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// The highest stream id whose request HEADERS have left the session for the
    /// output: from then on the server may have it. A client's streams open in id
    /// order, so every stream up to this one has been sent, or closed unsent (a
    /// ``HTTP2SessionEvent/streamClosed(streamID:errorCode:)`` says which).
    public var headersSentThrough: Int32 { inbox.pointee.headersSentThrough }

    /// Bodies submitted and not yet handed to the output in full.
    public var bodiesWaiting: Int { inbox.pointee.heldBodies.count + (inbox.pointee.currentBody == nil ? 0 : 1) }
}

// MARK: - Callbacks: values appended, bytes copied, nothing kept, nothing called back.

private func inbox(_ userData: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<HTTP2ClientSession.Inbox> {
    userData!.assumingMemoryBound(to: HTTP2ClientSession.Inbox.self)
}

private let endStreamFlag = UInt8(NGHTTP2_FLAG_END_STREAM.rawValue)
private let ackFlag = UInt8(NGHTTP2_FLAG_ACK.rawValue)

private let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let header = frame.pointee.hd
    switch UInt32(header.type) {
    case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
        if header.flags & endStreamFlag != 0 { inbox(userData).pointee.events.append(.endOfStream(streamID: header.stream_id)) }
    case NGHTTP2_SETTINGS.rawValue where header.flags & ackFlag == 0:
        var limit: Int?
        let settings = frame.pointee.settings
        for index in 0..<settings.niv where settings.iv[index].settings_id == Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue) {
            limit = Int(settings.iv[index].value)
        }
        inbox(userData).pointee.events.append(.settings(maxConcurrentStreams: limit))
    case NGHTTP2_PING.rawValue where header.flags & ackFlag != 0:
        inbox(userData).pointee.events.append(.pingAcknowledged(lr_nghttp2_ping_data(frame)))
    case NGHTTP2_GOAWAY.rawValue:
        let goAway = frame.pointee.goaway
        inbox(userData).pointee.events.append(.goAway(lastStreamID: goAway.last_stream_id, errorCode: goAway.error_code))
    default:
        break
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, let name, let value else { return 0 }
    inbox(userData).pointee.events.append(
        .headerField(
            streamID: frame.pointee.hd.stream_id,
            name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
            value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)))
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    guard let data else { return 0 }
    inbox(userData).pointee.events.append(.data(streamID: streamID, Array(UnsafeBufferPointer(start: data, count: length))))
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    let inbox = inbox(userData)
    inbox.pointee.dropBody(of: streamID)
    inbox.pointee.events.append(.streamClosed(streamID: streamID, errorCode: errorCode))
    return 0
}

private let onFrameSent: nghttp2_on_frame_send_callback = { _, frame, userData in
    guard let frame, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
    inbox(userData).pointee.headersSentThrough = frame.pointee.hd.stream_id
    return 0
}

/// Copies the next part of a request's body into nghttp2's frame buffer.
private let readBody: lr_nghttp2_body_reader = { _, streamID, buffer, length, flags, _, userData in
    let inbox = inbox(userData)
    guard let buffer else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    if streamID == inbox.pointee.currentBodyStream, inbox.pointee.currentBody != nil {
        let done = copy(from: &inbox.pointee.currentBody!, into: buffer, length)
        if done.finished {
            inbox.pointee.currentBody = nil
            flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        }
        return done.count
    }
    guard let index = inbox.pointee.heldBodies.index(forKey: streamID) else {
        flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        return 0
    }
    let done = copy(from: &inbox.pointee.heldBodies.values[index], into: buffer, length)
    if done.finished {
        inbox.pointee.heldBodies.remove(at: index)
        flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    }
    return done.count
}

/// Moves up to `length` bytes of `body` into `buffer`.
private func copy(from body: inout ByteBuffer, into buffer: UnsafeMutablePointer<UInt8>, _ length: Int) -> (count: Int, finished: Bool) {
    let count = min(length, body.readableBytes)
    body.withUnsafeReadableBytes { raw in
        UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress!, byteCount: count)
    }
    body.moveReaderIndex(forwardBy: count)
    return (count, body.readableBytes == 0)
}
