import LiveRelayMessages
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Stops the run with a message libFuzzer shows beside the crash input.
/// A trap, not an `assert`: the checks must hold in optimized builds too.
public func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        let text = "FUZZ CHECK FAILED: \(message())\n"
        writeStandardError(text)
        fatalError(text)
    }
}

/// What a request decoder must guarantee for any input bytes:
/// - decoding never crashes (ASan and the Swift runtime watch every access);
/// - a value that decodes passes `validate()` (decoding runs it, so it is the same rule twice);
/// - encoding it and decoding again gives an equal value;
/// - the encoding is canonical: the value decoded from it encodes to the same bytes;
/// - `serialize(into:)` writes exactly `serializedBytes()`;
/// - the `[UInt8]` and `ByteBuffer` entry points agree with the raw-pointer one.
public func fuzzRequest<M: LiveRelayMessage>(_ type: M.Type, _ data: UnsafePointer<UInt8>?, _ size: Int) {
    let raw = UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size)
    let value: M
    do {
        value = try M(serializedBytes: raw)
    } catch {
        // Refused: the ByteBuffer entry point must refuse it too, with the same error.
        var buffer = ByteBuffer()
        buffer.writeBytes(raw)
        do {
            _ = try M(serializedBytes: buffer)
            fuzzCheck(false, "\(M.protoName): the ByteBuffer decoder accepted what the pointer decoder refused (\(error))")
        } catch let again {
            fuzzCheck(again == error, "\(M.protoName): errors differ: \(error) vs \(again)")
        }
        // Every error names something a client can act on.
        fuzzCheck(!error.description.isEmpty, "\(M.protoName): empty error description")
        return
    }

    do {
        try value.validate()
    } catch {
        fuzzCheck(false, "\(M.protoName) decoded but validate() fails: \(error)\nvalue: \(value)")
    }

    let encoded = value.serializedBytes()
    var buffer = ByteBuffer()
    value.serialize(into: &buffer)
    fuzzCheck(
        buffer.readableBytesView.elementsEqual(encoded),
        "\(M.protoName): serialize(into:) wrote \(buffer.readableBytes) bytes, serializedBytes() \(encoded.count)"
    )

    let again: M
    do {
        again = try M(serializedBytes: encoded)
    } catch {
        fuzzCheck(false, "\(M.protoName): re-encoded value does not decode: \(error)\nvalue: \(value)\nbytes: \(hex(encoded))")
        return
    }
    fuzzCheck(again == value, "\(M.protoName): round trip changed the value\nbefore: \(value)\nafter:  \(again)")
    let reencoded = again.serializedBytes()
    fuzzCheck(reencoded == encoded, "\(M.protoName): encoding is not stable\nfirst:  \(hex(encoded))\nsecond: \(hex(reencoded))")

    do {
        let fromBuffer = try M(serializedBytes: buffer)
        fuzzCheck(fromBuffer == value, "\(M.protoName): the ByteBuffer decoder gave a different value")
    } catch {
        fuzzCheck(false, "\(M.protoName): the ByteBuffer decoder refused the encoding: \(error)")
    }
}

/// Unbuffered, so the message is out before the trap.
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

func hex(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}
