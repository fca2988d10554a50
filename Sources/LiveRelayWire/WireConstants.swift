import NIOCore

/// The numbers of the framing that are fixed by the protocol rather than negotiated.
///
/// They live in one place so that the encoder, the decoder, the state machines
/// and the tests agree on them, and so docs/PROTOCOL.md has one list to mirror.
public enum Wire {
    /// "LRPC\r\n\u{1a}\n": the first 8 bytes a client sends. Like PNG's
    /// signature, it fails fast on the usual mix-ups: an HTTP request starts
    /// with a method name, a TLS ClientHello with 0x16, and a text protocol or
    /// a line-ending translator mangles the CR LF or stops at the ^Z.
    public static let preface: [UInt8] = [0x4C, 0x52, 0x50, 0x43, 0x0D, 0x0A, 0x1A, 0x0A]

    /// The fixed frame header: u32 length, u8 type, u8 flags, u32 request id.
    public static let frameHeaderSize = 10

    /// A HELLO is read before the peer is authenticated, so its size is capped
    /// independently of MAX_FRAME_SIZE to bound what an anonymous peer can make
    /// the server buffer.
    public static let maxHelloPayloadSize = 4096

    public static let apiKeyLengthRange: ClosedRange<Int> = 1...512
    public static let methodLengthRange: ClosedRange<Int> = 1...255

    /// PING and PONG carry exactly this many opaque bytes.
    public static let pingPayloadSize = 8
}

/// Protocol versions. Versions and settings, not ignorable frame types, carry
/// extensions, so a peer never has to guess what an unknown frame meant.
public enum ProtocolVersion {
    public static let v1: UInt16 = 1
    /// The versions this implementation speaks.
    public static let supported: ClosedRange<UInt16> = 1...1

    /// The highest version both sides speak, or nil if the ranges do not meet.
    public static func negotiate(local: ClosedRange<UInt16>, peerMin: UInt16, peerMax: UInt16) -> UInt16? {
        guard peerMin <= peerMax else { return nil }
        let high = Swift.min(local.upperBound, peerMax)
        let low = Swift.max(local.lowerBound, peerMin)
        return high >= low ? high : nil
    }
}
