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
    /// next call on this thread starts clean.
    static func drain() -> Drained {
        var messages: [String] = []
        var reasons: [Int32] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            reasons.append(lr_ERR_GET_REASON(code))
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return Drained(message: messages.isEmpty ? "no OpenSSL error reported" : messages.joined(separator: "; "), reasons: reasons)
    }

    static func message() -> String { drain().message }
}
