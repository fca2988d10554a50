import COpenSSL
import NIOCore

/// A custom OpenSSL BIO that reads ciphertext straight out of the `ByteBuffer`s NIO
/// delivers and writes ciphertext straight into a `ByteBuffer` NIO will send.
///
/// Why not a memory BIO pair: with `BIO_s_mem` every byte is copied twice per
/// direction (NIO buffer -> BIO's buffer -> OpenSSL's record buffer, and back the
/// other way); here it is copied once, and the outgoing bytes of a whole flush
/// end up in one buffer that becomes one socket write. This is the design of
/// swift-nio-ssl's `ByteBufferBIO`, over OpenSSL 3's `BIO_METHOD` API.
///
/// The BIO holds a retained reference to this object (released in the BIO's
/// destroy callback), so it stays valid for as long as OpenSSL can call it.
/// Event-loop confined, like the handler that owns it.
final class ByteBufferBIO {
    /// Ciphertext received and not yet consumed by OpenSSL.
    private var inbound: ByteBuffer?
    /// Ciphertext OpenSSL produced and not yet handed to NIO.
    private var outbound: ByteBuffer?
    /// The peer closed its side of the TCP connection: reads report EOF once `inbound` is drained.
    var inboundEOF = false
    private let allocator: ByteBufferAllocator

    init(allocator: ByteBufferAllocator) {
        self.allocator = allocator
    }

    /// Makes the OpenSSL BIO. The caller gives it to `SSL_set_bio`, which owns it from then on.
    func makeBIO() -> OpaquePointer? {
        guard let method = byteBufferBIOMethod, let bio = BIO_new(method) else { return nil }
        BIO_set_data(bio, Unmanaged.passRetained(self).toOpaque())
        BIO_set_init(bio, 1)
        return bio
    }

    /// Hands received ciphertext to OpenSSL's next read.
    func receive(_ buffer: ByteBuffer) {
        guard buffer.readableBytes > 0 else { return }
        if inbound == nil || inbound!.readableBytes == 0 {
            inbound = buffer
        } else {
            var incoming = buffer
            inbound!.writeBuffer(&incoming)
        }
    }

    var hasPendingInbound: Bool { (inbound?.readableBytes ?? 0) > 0 }

    /// Takes everything OpenSSL has written since the last call, ready to send.
    func takeOutbound() -> ByteBuffer? {
        guard let buffer = outbound, buffer.readableBytes > 0 else { return nil }
        outbound = nil
        return buffer
    }

    // MARK: - Called by OpenSSL through the BIO method

    fileprivate func read(into pointer: UnsafeMutablePointer<CChar>, count: Int, bio: OpaquePointer) -> Int32 {
        lr_BIO_clear_retry_flags(bio)
        guard var buffer = inbound, buffer.readableBytes > 0 else {
            if inboundEOF { return 0 }
            lr_BIO_set_retry_read(bio)
            return -1
        }
        // Release our reference before mutating so the copy-on-write check finds the buffer unique.
        inbound = nil
        let n = min(count, buffer.readableBytes)
        buffer.readWithUnsafeReadableBytes { source in
            UnsafeMutableRawPointer(pointer).copyMemory(from: source.baseAddress!, byteCount: n)
            return n
        }
        inbound = buffer.readableBytes > 0 ? buffer : nil
        return Int32(n)
    }

    fileprivate func write(from pointer: UnsafePointer<CChar>, count: Int) -> Int32 {
        let bytes = UnsafeRawBufferPointer(start: pointer, count: count)
        if outbound == nil {
            // Sized for a full TLS record plus overhead, so most flushes allocate once.
            outbound = allocator.buffer(capacity: max(count, 16_640))
        }
        outbound!.writeBytes(bytes)
        return Int32(count)
    }

    fileprivate func control(_ command: Int32) -> Int {
        switch command {
        case BIO_CTRL_FLUSH: return 1
        case BIO_CTRL_PENDING: return inbound?.readableBytes ?? 0
        case BIO_CTRL_WPENDING: return outbound?.readableBytes ?? 0
        case BIO_CTRL_EOF: return (inboundEOF && !hasPendingInbound) ? 1 : 0
        default: return 0
        }
    }
}

private func bioObject(_ bio: OpaquePointer?) -> ByteBufferBIO? {
    guard let bio, let data = BIO_get_data(bio) else { return nil }
    return Unmanaged<ByteBufferBIO>.fromOpaque(data).takeUnretainedValue()
}

/// The BIO_METHOD table, registered once per process.
nonisolated(unsafe) private let byteBufferBIOMethod: OpaquePointer? = {
    let type = BIO_get_new_index() | BIO_TYPE_SOURCE_SINK
    guard let method = BIO_meth_new(type, "LiveRelay ByteBuffer BIO") else { return nil }
    BIO_meth_set_write(method) { bio, data, length in
        guard let object = bioObject(bio), let data, length >= 0 else { return -1 }
        return object.write(from: data, count: Int(length))
    }
    BIO_meth_set_read(method) { bio, data, length in
        guard let bio, let object = bioObject(bio), let data, length >= 0 else { return -1 }
        return object.read(into: data, count: Int(length), bio: bio)
    }
    BIO_meth_set_puts(method) { bio, string in
        guard let object = bioObject(bio), let string else { return -1 }
        return object.write(from: string, count: strlen(string))
    }
    BIO_meth_set_ctrl(method) { bio, command, _, _ in
        guard let object = bioObject(bio) else { return 0 }
        return object.control(command)
    }
    BIO_meth_set_create(method) { bio in
        BIO_set_init(bio, 0)
        BIO_set_data(bio, nil)
        return 1
    }
    BIO_meth_set_destroy(method) { bio in
        guard let bio else { return 0 }
        if let data = BIO_get_data(bio) {
            Unmanaged<ByteBufferBIO>.fromOpaque(data).release()
            BIO_set_data(bio, nil)
        }
        BIO_set_init(bio, 0)
        return 1
    }
    return method
}()
