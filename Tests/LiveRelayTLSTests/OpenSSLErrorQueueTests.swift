import COpenSSL
import Testing

@testable import LiveRelayTLS

/// `lr_ERR_drain`, the one drain of OpenSSL's error queue that LiveRelayTLS and
/// LiveRelayAPNs share. Errors are made by failing real OpenSSL calls, so the
/// queue holds what production failures put there.
///
/// The queue is per thread, and a synchronous test runs on one thread from
/// start to end, so no other test's errors can show up here.
@Suite("OpenSSL error queue drain")
struct OpenSSLErrorQueueTests {
    /// Two failed calls, three errors, oldest first: opening a missing file
    /// (a system error, then BIO's "no such file"), then reading PEM from text
    /// that is not PEM ("no start line").
    static func failTwoCalls() {
        ERR_clear_error()
        #expect(BIO_new_file("/nonexistent/liverelay-test.pem", "r") == nil)
        let text = Array("not a certificate".utf8)
        text.withUnsafeBytes { raw in
            let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count))
            #expect(PEM_read_bio_X509(bio, nil, nil, nil) == nil)
            BIO_free(bio)
        }
    }

    static func drainToString(capacity: Int = 4096) -> (count: Int, text: String, reasons: [Int32]) {
        var text = [CChar](repeating: 0, count: capacity)
        var reasons = [Int32](repeating: 0, count: lr_ERR_QUEUE_CAPACITY)
        let count = lr_ERR_drain(&text, text.count, &reasons, reasons.count)
        return (count, text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }, Array(reasons.prefix(count)))
    }

    @Test func drainsEveryErrorOldestFirstJoinedAndEmptiesTheQueue() {
        Self.failTwoCalls()
        let drained = Self.drainToString()

        #expect(drained.count >= 2, "text: \(drained.text)")
        let messages = drained.text.components(separatedBy: "; ")
        #expect(messages.count == drained.count, "one message per error: \(drained.text)")
        let missingFile = messages.firstIndex { $0.contains("no such file") || $0.contains("No such file") }
        let notPEM = messages.firstIndex { $0.contains("no start line") }
        #expect(missingFile != nil && notPEM != nil, "text: \(drained.text)")
        if let missingFile, let notPEM { #expect(missingFile < notPEM, "oldest first") }
        #expect(drained.reasons.last == PEM_R_NO_START_LINE)
        #expect(ERR_peek_error() == 0, "the queue is empty afterwards")
    }

    @Test func cutsTextThatDoesNotFitWithoutWritingPastTheBuffer() {
        Self.failTwoCalls()
        let full = Self.drainToString()

        Self.failTwoCalls()
        let capacity = 32
        let sentinel = CChar(bitPattern: 0xA5)
        var buffer = [CChar](repeating: sentinel, count: capacity + 8)
        let count = lr_ERR_drain(&buffer, capacity, nil, 0)
        let cut = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }

        #expect(count == full.count, "errors that do not fit are still drained and counted")
        #expect(cut.utf8.count == capacity - 1, "filled up to the terminator")
        #expect(full.text.hasPrefix(cut))
        #expect(buffer[capacity...].allSatisfy { $0 == sentinel }, "nothing written past the capacity")
        #expect(ERR_peek_error() == 0)
    }

    @Test func anEmptyQueueGivesNoErrorsAndEmptyText() {
        ERR_clear_error()
        var buffer = [CChar](repeating: CChar(bitPattern: 0xA5), count: 16)
        #expect(lr_ERR_drain(&buffer, buffer.count, nil, 0) == 0)
        #expect(buffer[0] == 0, "a stale buffer must not pass for a message")
    }

    @Test func withoutABufferTheQueueIsStillEmptied() {
        Self.failTwoCalls()
        #expect(lr_ERR_drain(nil, 0, nil, 0) >= 2)
        #expect(ERR_peek_error() == 0)
    }

    /// The TLS handler tells an EOF without close_notify from a real failure
    /// by a reason code, so the wrapper must keep the codes with the text.
    @Test func tlsWrapperKeepsTheReasonsAndNamesAnEmptyQueue() {
        Self.failTwoCalls()
        let drained = OpenSSLErrorQueue.drain()
        #expect(drained.reasons.contains(PEM_R_NO_START_LINE))
        #expect(drained.message.contains("no start line"))
        #expect(ERR_peek_error() == 0)
        #expect(OpenSSLErrorQueue.drain().message == "no OpenSSL error reported")
        #expect(OpenSSLErrorQueue.drain().reasons.isEmpty)
    }
}
