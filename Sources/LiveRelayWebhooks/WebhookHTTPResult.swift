import NIOCore

/// What one webhook POST came to: the server's status, whatever it was, or why there was none.
///
/// Deciding what a status means (a 2xx acknowledges, anything else is retried) is
/// the delivery loop's job; the client only reports.
public enum WebhookHTTPResult: Sendable, Hashable {
    case response(status: Int)
    case failure(WebhookHTTPFailure)
}

/// Why a POST got no answer. Each `description` is short and names no secret,
/// because it is stored on the endpoint and shown to the tenant's operators:
/// the headers and body are never part of it.
public enum WebhookHTTPFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The host name did not resolve.
    case dns(String)
    /// Every address the host resolved to was refused by the `WebhookAddressPolicy`; the reason for the first.
    case addressRefused(String)
    /// No vetted address accepted a TCP connection; the last address's reason.
    case connect(String)
    /// The TLS handshake failed: most often the certificate did not verify.
    case tls(String)
    /// The call's whole time (resolve, connect, handshake, answer) ran out.
    case timeout(TimeAmount)
    /// The server broke HTTP/1.1 or closed the connection without answering.
    case protocolError(String)
    /// The caller's headers cannot be sent (a name that is not a token, a line break in a value):
    /// nothing was sent, and sending it again will not help.
    case invalidRequest(String)
    /// The calling task was cancelled.
    case cancelled

    public var description: String {
        switch self {
        case .dns(let reason): return "DNS: \(reason)"
        case .addressRefused(let reason): return "address refused: \(reason)"
        case .connect(let reason): return "connect: \(reason)"
        case .tls(let reason): return "TLS: \(reason)"
        case .timeout(let amount): return "timeout after \(Self.format(amount))"
        case .protocolError(let reason): return "HTTP: \(reason)"
        case .invalidRequest(let reason): return "invalid request: \(reason)"
        case .cancelled: return "cancelled"
        }
    }

    /// "10 s" for whole seconds, "1500 ms" otherwise.
    static func format(_ amount: TimeAmount) -> String {
        let nanoseconds = amount.nanoseconds
        if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000) s" }
        return "\(nanoseconds / 1_000_000) ms"
    }

    /// OpenSSL's queue text without its codes: `error:0A000086:SSL routines::certificate verify failed`
    /// becomes `certificate verify failed`, each entry of a `; `-joined queue in turn.
    static func shortOpenSSLReason(_ text: String) -> String {
        text.split(separator: "; ").map { entry -> Substring in
            guard entry.hasPrefix("error:") else { return entry }
            let fields = entry.split(separator: ":", maxSplits: 4, omittingEmptySubsequences: false)
            return fields.count == 5 ? fields[4] : entry
        }.joined(separator: "; ")
    }
}
