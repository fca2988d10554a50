import COpenSSL
import NIOCore

/// The outcome of one OpenSSL call, and the promise plumbing for coalesced writes.
extension OpenSSLHandler {
    /// One promise for a coalesced network write, completing every application write it carries.
    func combine(_ promises: [EventLoopPromise<Void>], eventLoop: EventLoop) -> EventLoopPromise<Void>? {
        switch promises.count {
        case 0: return nil
        case 1: return promises[0]
        default:
            let combined = eventLoop.makePromise(of: Void.self)
            combined.futureResult.assumeIsolated().whenComplete { result in
                promises.forEach { $0.completeWith(result) }
            }
            return combined
        }
    }

    /// `ERR_clear_error`, the call, then `SSL_get_error`: what the handler acts on.
    enum CallOutcome {
        case complete
        case incomplete
        case closeNotify
        case uncleanEOF
        case failed(String)
    }

    /// Maps a failed (or zero) OpenSSL call result to what the handler must do, emptying the error queue.
    func classify(_ rc: Int32) -> CallOutcome {
        let code = SSL_get_error(ssl, rc)
        switch code {
        case SSL_ERROR_NONE:
            return .complete
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .incomplete
        case SSL_ERROR_ZERO_RETURN:
            return .closeNotify
        case SSL_ERROR_SSL:
            let drained = OpenSSLErrorQueue.drain()
            if drained.reasons.contains(lr_SSL_R_UNEXPECTED_EOF_WHILE_READING) {
                return .uncleanEOF
            }
            var reason = drained.message
            let verifyResult = SSL_get_verify_result(ssl)
            if verifyResult != Int(X509_V_OK), let text = X509_verify_cert_error_string(verifyResult) {
                reason += " (certificate: \(String(cString: text)))"
            }
            return .failed(reason)
        case SSL_ERROR_SYSCALL:
            let drained = OpenSSLErrorQueue.drain()
            return bio.inboundEOF ? .uncleanEOF : .failed("I/O error: \(drained.message)")
        default:
            return .failed("SSL_get_error \(code): \(OpenSSLErrorQueue.message())")
        }
    }
}
