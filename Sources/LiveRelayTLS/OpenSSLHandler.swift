import COpenSSL
import NIOCore

/// TLS over OpenSSL 3 for one connection, in either role.
///
/// Put it first in the pipeline: ciphertext flows below it, plaintext above.
/// The handler drives the handshake itself (the client on `channelActive`, the
/// server on the first bytes it receives), holds application writes until the
/// handshake is done, then encrypts each flush into one network write. It fires
/// `TLSEvent.handshakeCompleted` when the connection is usable, `TLSError`s on
/// failure (closing the connection), and answers or sends close_notify so both
/// sides can tell a complete stream from a truncated one.
///
/// Decisions live in `TLSConnectionStateMachine`; this class performs them.
public final class OpenSSLHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    public enum Role: Sendable, Hashable {
        case server
        case client
    }

    public let role: Role
    private let tlsContext: TLSContext
    let ssl: OpaquePointer
    let bio: ByteBufferBIO
    private var stateMachine = TLSConnectionStateMachine()
    private var pendingWrites = MarkedCircularBuffer<PendingWrite>(initialCapacity: 8)
    private var closePromise: EventLoopPromise<Void>?
    private var handshakeTimer: Scheduled<Void>?
    private var shutdownTimer: Scheduled<Void>?

    /// The protocol ALPN selected, once the handshake has completed.
    public private(set) var negotiatedProtocol: String?
    /// The certificate the peer presented, once the handshake has completed.
    public private(set) var peerCertificate: TLSPeerCertificate?
    /// Server: the host name the client asked for (SNI), so one listener can tell its names apart.
    /// Client: the name it sent. Nil when none was sent (e.g. when dialling an IP address).
    public private(set) var serverName: String?
    /// e.g. "TLSv1.3", once the handshake has completed.
    public private(set) var negotiatedTLSVersion: String?
    /// e.g. "TLS_AES_128_GCM_SHA256", once the handshake has completed.
    public private(set) var negotiatedCipher: String?

    public var state: TLSConnectionState { stateMachine.state }

    private struct PendingWrite {
        var data: ByteBuffer
        var promise: EventLoopPromise<Void>?
    }

    /// - Parameter serverHostname: client only; overrides `TLSConfiguration.serverHostname`
    ///   for this connection (one context typically serves many hosts).
    public init(context tlsContext: TLSContext, role: Role, serverHostname: String? = nil) throws(TLSContextError) {
        ERR_clear_error()
        guard let ssl = tlsContext.makeSSL() else {
            throw TLSContextError(setting: "SSL object", source: nil, openSSLError: OpenSSLErrorQueue.message())
        }
        self.tlsContext = tlsContext
        self.role = role
        self.ssl = ssl
        self.bio = ByteBufferBIO(allocator: ByteBufferAllocator())
        // From here on the object is fully initialized: deinit frees `ssl` if init throws.
        guard let rawBIO = bio.makeBIO() else {
            throw TLSContextError(setting: "BIO", source: nil, openSSLError: OpenSSLErrorQueue.message())
        }
        // One BIO for both directions; SSL_set_bio takes the single reference we hold.
        SSL_set_bio(ssl, rawBIO, rawBIO)
        switch role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client:
            SSL_set_connect_state(ssl)
            try configureClient(hostname: serverHostname ?? tlsContext.configuration.serverHostname)
        }
    }

    deinit {
        SSL_free(ssl)
    }

    private func configureClient(hostname: String?) throws(TLSContextError) {
        let verification = tlsContext.configuration.certificateVerification
        guard let hostname else {
            if verification == .fullVerification || verification == .optional {
                throw TLSContextError(
                    setting: "server hostname", source: nil,
                    openSSLError: "full verification needs the host name or IP address being dialled")
            }
            return
        }
        let isIPAddress: Bool = {
            guard let parsed = a2i_IPADDRESS(hostname) else { return false }
            ASN1_OCTET_STRING_free(parsed)
            return true
        }()
        ERR_clear_error()
        if !isIPAddress {
            guard lr_SSL_set_tlsext_host_name(ssl, hostname) == 1 else {
                throw TLSContextError(setting: "server hostname (SNI)", source: hostname, openSSLError: OpenSSLErrorQueue.message())
            }
        }
        guard verification == .fullVerification || verification == .optional else { return }
        let ok =
            isIPAddress
            ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), hostname) == 1
            : SSL_set1_host(ssl, hostname) == 1
        guard ok else {
            throw TLSContextError(setting: "server hostname (verification)", source: hostname, openSSLError: OpenSSLErrorQueue.message())
        }
    }

    // MARK: - Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        failPendingWrites(ChannelError.ioOnClosedChannel)
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        startHandshake(context: context)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        let action = stateMachine.channelInactive()
        failPendingWrites(ChannelError.ioOnClosedChannel)
        switch action {
        case .reportHandshakeAborted:
            context.fireErrorCaught(TLSError.handshakeFailed(reason: "the peer closed the connection during the handshake"))
        case .reportUncleanShutdown:
            context.fireErrorCaught(TLSError.uncleanShutdown)
        case .completeClose:
            closePromise?.succeed(())
            closePromise = nil
        case .none:
            break
        }
        context.fireChannelInactive()
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard stateMachine.channelActive() == .startHandshake else { return }
        let timeout = tlsContext.configuration.handshakeTimeout
        handshakeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.handshakeTimedOut(context: context)
        }
        if role == .client {
            handshakeStep(context: context)
        }
    }

    // MARK: - Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bio.receive(unwrapInboundIn(data))
        processInbound(context: context)
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // Half-closure: the peer's FIN reaches OpenSSL as EOF, which tells a
            // close_notify-terminated stream from a truncated one.
            bio.inboundEOF = true
            processInbound(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func processInbound(context: ChannelHandlerContext) {
        switch stateMachine.bytesReceived() {
        case .discard:
            return
        case .handshake:
            handshakeStep(context: context)
            // Application data (or TLS 1.3 tickets) may have arrived with the handshake's last flight.
            if (stateMachine.state == .active || stateMachine.state == .closing) && bio.hasPendingInbound {
                readApplicationData(context: context)
            }
        case .read:
            readApplicationData(context: context)
        }
    }

    private func handshakeStep(context: ChannelHandlerContext) {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            guard stateMachine.handshakeCompleted() else { return }
            handshakeTimer?.cancel()
            handshakeTimer = nil
            recordHandshakeResults()
            _ = flushNetwork(context: context)
            context.fireUserInboundEventTriggered(TLSEvent.handshakeCompleted(negotiatedProtocol: negotiatedProtocol))
            encryptFlushedWrites(context: context)
            return
        }
        switch classify(rc) {
        case .complete, .incomplete:
            _ = flushNetwork(context: context)
        case .closeNotify:
            fail(context: context, with: .handshakeFailed(reason: "the peer sent close_notify during the handshake"))
        case .uncleanEOF:
            fail(context: context, with: .handshakeFailed(reason: "the peer closed the connection during the handshake"))
        case .failed(let reason):
            fail(context: context, with: .handshakeFailed(reason: reason))
        }
    }

    private func recordHandshakeResults() {
        var protocolPointer: UnsafePointer<UInt8>? = nil
        var protocolLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolPointer, &protocolLength)
        if let protocolPointer, protocolLength > 0 {
            negotiatedProtocol = String(decoding: UnsafeBufferPointer(start: protocolPointer, count: Int(protocolLength)), as: UTF8.self)
        }
        negotiatedTLSVersion = SSL_get_version(ssl).map { String(cString: $0) }
        negotiatedCipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) }
        peerCertificate = TLSPeerCertificate.read(from: ssl)
        serverName = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
    }

    /// Decrypts everything available and passes it on as one read, so a burst of
    /// small records does not become a burst of pipeline traversals.
    private func readApplicationData(context: ChannelHandlerContext) {
        let chunk = 16_384
        var plaintext: ByteBuffer? = nil
        readLoop: while stateMachine.state == .active || stateMachine.state == .closing {
            if plaintext == nil { plaintext = context.channel.allocator.buffer(capacity: chunk) }
            var rc: Int32 = 0
            ERR_clear_error()
            plaintext!.writeWithUnsafeMutableBytes(minimumWritableBytes: chunk) { buffer in
                rc = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
                return rc > 0 ? Int(rc) : 0
            }
            if rc > 0 {
                if plaintext!.readableBytes >= 256 * 1024 {
                    context.fireChannelRead(wrapInboundOut(plaintext.take()!))
                }
                // Nothing decrypted is left and no ciphertext waits: another SSL_read could only
                // answer WANT_READ, after growing the buffer for nothing.
                if SSL_pending(ssl) == 0 && !bio.hasPendingInbound && !bio.inboundEOF { break readLoop }
                continue
            }
            let outcome = classify(rc)
            if case .incomplete = outcome { break readLoop }
            if case .complete = outcome { break readLoop }
            deliver(&plaintext, context: context)
            switch outcome {
            case .complete, .incomplete:
                break
            case .closeNotify:
                closeNotifyReceived(context: context)
            case .uncleanEOF:
                fail(context: context, with: .uncleanShutdown)
            case .failed(let reason):
                fail(context: context, with: .protocolError(reason: reason))
            }
            break readLoop
        }
        deliver(&plaintext, context: context)
        // TLS 1.3 session tickets and key-update answers are written during SSL_read.
        _ = flushNetwork(context: context)
    }

    private func deliver(_ plaintext: inout ByteBuffer?, context: ChannelHandlerContext) {
        guard let buffer = plaintext.take(), buffer.readableBytes > 0 else { return }
        context.fireChannelRead(wrapInboundOut(buffer))
    }

    private func closeNotifyReceived(context: ChannelHandlerContext) {
        switch stateMachine.closeNotifyReceived() {
        case .replyAndClose:
            cancelTimers()
            failPendingWrites(ChannelError.outputClosed)
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
            closeAfterFlushing(context: context, promise: nil)
        case .completeClose:
            cancelTimers()
            let promise = closePromise
            closePromise = nil
            context.close(promise: promise)
        case .ignore:
            break
        }
    }

    // MARK: - Outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch stateMachine.writeRequested() {
        case .buffer:
            pendingWrites.append(PendingWrite(data: unwrapOutboundIn(data), promise: promise))
        case .fail:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        pendingWrites.mark()
        if stateMachine.canEncrypt {
            encryptFlushedWrites(context: context)
        }
    }

    /// Encrypts every flushed write into the BIO's outbound buffer and sends the
    /// result as one network write, completing the writes' promises with it.
    private func encryptFlushedWrites(context: ChannelHandlerContext) {
        guard stateMachine.canEncrypt, pendingWrites.hasMark else { return }
        var promises: [EventLoopPromise<Void>] = []
        // Small writes are gathered and sealed a full record at a time: every
        // `SSL_write` seals at least one record of its own, and an HTTP/2 peer writes
        // two or three small buffers per stream (HEADERS, DATA's frame header, the
        // body), so sealing each would cost a record (header, AEAD tag, a cipher call)
        // per buffer, three per APNs push. The buffer is made
        // for a flush that has small writes to gather and dropped after it: kept
        // between flushes, it would hold 16 KiB for every idle connection.
        var gathered = ByteBuffer()
        var failure: TLSError?
        while failure == nil, pendingWrites.hasMark, let write = pendingWrites.popFirst() {
            if let promise = write.promise { promises.append(promise) }
            var data = write.data
            if gathered.readableBytes + data.readableBytes > Self.recordPlaintextBytes, gathered.readableBytes > 0 {
                failure = seal(&gathered)
                gathered.clear()
            }
            // A write of a record or more, or the flush's only write, needs no copy.
            if data.readableBytes >= Self.recordPlaintextBytes || (gathered.readableBytes == 0 && !pendingWrites.hasMark) {
                if failure == nil { failure = seal(&data) }
            } else {
                if gathered.capacity == 0 { gathered = context.channel.allocator.buffer(capacity: Self.recordPlaintextBytes) }
                gathered.writeBuffer(&data)
            }
        }
        if failure == nil, gathered.readableBytes > 0 { failure = seal(&gathered) }
        if let failure {
            promises.forEach { $0.fail(failure) }
            fail(context: context, with: failure)
            return
        }
        let promise = combine(promises, eventLoop: context.eventLoop)
        if let ciphertext = bio.takeOutbound() {
            context.writeAndFlush(wrapOutboundOut(ciphertext), promise: promise)
        } else {
            promise?.succeed(())
        }
    }

    /// The most plaintext one TLS record carries (RFC 8446, 5.1).
    static let recordPlaintextBytes = 16 * 1024

    /// Encrypts all of `data` into the BIO's outbound buffer: an error, or nil.
    private func seal(_ data: inout ByteBuffer) -> TLSError? {
        while data.readableBytes > 0 {
            let count = min(data.readableBytes, 1 << 30)
            ERR_clear_error()
            let rc = data.withUnsafeReadableBytes { SSL_write(ssl, $0.baseAddress, Int32(count)) }
            guard rc > 0 else {
                if case .failed(let why) = classify(rc) { return .writeFailed(reason: why) }
                return .writeFailed(reason: "SSL_write returned \(rc)")
            }
            data.moveReaderIndex(forwardBy: Int(rc))
        }
        return nil
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all else {
            // Half-closure is passed through untouched: LiveRelay's protocols do not use it.
            context.close(mode: mode, promise: promise)
            return
        }
        switch stateMachine.closeRequested() {
        case .closeNow:
            cancelTimers()
            failPendingWrites(ChannelError.ioOnClosedChannel)
            context.close(promise: promise)
        case .sendCloseNotify:
            closePromise = promise
            failPendingWrites(ChannelError.ioOnClosedChannel)
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
            _ = flushNetwork(context: context)
            let timeout = tlsContext.configuration.shutdownTimeout
            shutdownTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
                self.shutdownTimedOut(context: context)
            }
        case .joinPendingClose:
            if let promise {
                if let closePromise {
                    closePromise.futureResult.cascade(to: promise)
                } else {
                    closePromise = promise
                }
            }
        case .alreadyClosed:
            context.close(promise: promise)
        }
    }

    // MARK: - Failure and timers

    /// Sends any alert OpenSSL queued (protocol_version to a TLS 1.0 or 1.1
    /// client, handshake_failure, ...), reports the first fatal error of the
    /// connection, and closes once the alert is written. The alert goes out
    /// before the error is reported: a handler that closes the channel on
    /// errorCaught (the RPC server does) would otherwise close it first, and
    /// the peer would see a bare close.
    private func fail(context: ChannelHandlerContext, with error: TLSError) {
        guard stateMachine.failed() else { return }
        cancelTimers()
        failPendingWrites(error)
        let alertWritten = flushNetwork(context: context)
        context.fireErrorCaught(error)
        let promise = closePromise
        closePromise = nil
        if let alertWritten {
            alertWritten.assumeIsolated().whenComplete { _ in
                context.close(promise: promise)
            }
        } else {
            context.close(promise: promise)
        }
    }

    private func handshakeTimedOut(context: ChannelHandlerContext) {
        handshakeTimer = nil
        guard stateMachine.handshakeTimedOut() else { return }
        failPendingWrites(TLSError.handshakeTimeout)
        context.fireErrorCaught(TLSError.handshakeTimeout)
        context.close(promise: nil)
    }

    private func shutdownTimedOut(context: ChannelHandlerContext) {
        shutdownTimer = nil
        guard stateMachine.shutdownTimedOut() else { return }
        let promise = closePromise
        closePromise = nil
        context.close(promise: promise)
    }

    private func cancelTimers() {
        handshakeTimer?.cancel()
        handshakeTimer = nil
        shutdownTimer?.cancel()
        shutdownTimer = nil
    }

    private func failPendingWrites(_ error: Error) {
        while let write = pendingWrites.popFirst() {
            write.promise?.fail(error)
        }
    }

    // MARK: - Network output

    /// Sends whatever OpenSSL wrote to the BIO (handshake messages, alerts, tickets, close_notify).
    private func flushNetwork(context: ChannelHandlerContext) -> EventLoopFuture<Void>? {
        guard let ciphertext = bio.takeOutbound() else { return nil }
        return context.writeAndFlush(wrapOutboundOut(ciphertext))
    }

    /// Closes once the last bytes (an alert or close_notify) are on the wire: closing at
    /// once would drop them with the channel's other pending writes.
    private func closeAfterFlushing(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        if let written = flushNetwork(context: context) {
            written.assumeIsolated().whenComplete { _ in
                context.close(promise: promise)
            }
        } else {
            context.close(promise: promise)
        }
    }
}

@available(*, unavailable)
extension OpenSSLHandler: Sendable {}
