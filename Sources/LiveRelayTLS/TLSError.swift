import COpenSSL

/// Failures of a TLS connection, fired through `errorCaught` by `OpenSSLHandler`.
///
/// Each carries OpenSSL's own reason text, because "handshake failed" alone
/// cannot tell an expired certificate from a protocol-version mismatch.
public enum TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The handshake was rejected, by us or the peer; the connection is closed.
    case handshakeFailed(reason: String)
    /// The handshake did not finish within `TLSConfiguration.handshakeTimeout`.
    case handshakeTimeout
    /// The peer closed the TCP connection without a close_notify: the data
    /// received may have been truncated by an attacker, so callers must not
    /// treat the stream as complete.
    case uncleanShutdown
    /// A record could not be decrypted or the peer broke the protocol after the handshake.
    case protocolError(reason: String)
    /// A write could not be encrypted.
    case writeFailed(reason: String)

    public var description: String {
        switch self {
        case .handshakeFailed(let reason): return "TLS handshake failed: \(reason)"
        case .handshakeTimeout: return "TLS handshake timed out"
        case .uncleanShutdown: return "TLS connection closed without close_notify (possible truncation)"
        case .protocolError(let reason): return "TLS protocol error: \(reason)"
        case .writeFailed(let reason): return "TLS write failed: \(reason)"
        }
    }
}

/// Failures building a `TLSContext`: each names the setting or file at fault,
/// so an operator can fix a config file without reading OpenSSL's source.
public struct TLSContextError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The setting at fault, e.g. "certificate chain", "private key", "cipher list".
    public var setting: String
    /// The file or source involved, if any (never the key material itself).
    public var source: String?
    /// OpenSSL's error queue, formatted.
    public var openSSLError: String

    public var description: String {
        if let source {
            return "TLS configuration: \(setting) from \(source): \(openSSLError)"
        }
        return "TLS configuration: \(setting): \(openSSLError)"
    }
}

/// OpenSSL's thread-local error queue, read and emptied.
enum OpenSSLErrorQueue {
    struct Drained {
        var message: String
        var reasons: [Int32]
    }

    /// Reads every queued error, oldest first, and empties the queue so the
    /// next call on this thread starts clean. The reasons are kept because
    /// one of them (an EOF without close_notify) changes what the handler does.
    static func drain() -> Drained {
        var text = [CChar](repeating: 0, count: 4096)
        var reasons = [Int32](repeating: 0, count: lr_ERR_QUEUE_CAPACITY)
        let count = lr_ERR_drain(&text, text.count, &reasons, reasons.count)
        let message = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return Drained(
            message: count == 0 ? "no OpenSSL error reported" : message,
            reasons: Array(reasons.prefix(count))
        )
    }

    static func message() -> String { drain().message }
}
