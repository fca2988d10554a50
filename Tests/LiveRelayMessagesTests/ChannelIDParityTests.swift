import LiveRelayAPNs
import LiveRelayMessages
import Testing

/// The message layer checks channel ids with a rule of its own (LiveRelayMessages must not
/// import LiveRelayAPNs, which would bring OpenSSL into the codec and the client library).
/// It must agree with `isPlausibleChannelID`, which the dispatch side trusts: a request that
/// decodes names an id APNs's side accepts, and one refused here would be refused there.
@Suite struct ChannelIDParityTests {
    static func acceptedByTheMessageLayer(_ id: String) -> Bool {
        (try? DeleteChannelRequest(appID: "com.example.app", channelID: id).validate()) != nil
    }

    @Test func everyASCIICharacterAlone() {
        for byte in UInt8(0)...UInt8(127) {
            let id = String(decoding: [byte], as: UTF8.self)
            #expect(Self.acceptedByTheMessageLayer(id) == isPlausibleChannelID(id), "byte \(byte)")
        }
    }

    @Test func lengthsAndOtherText() {
        let cases = [
            "", "A", String(repeating: "A", count: 127), String(repeating: "A", count: 128), String(repeating: "A", count: 129),
            "dHdvLWNoYW5uZWwtaWQtMQ==", "url-safe_id", "é", "Ω=", "a b", "a\u{0}", "🚀", "a\u{85}b",
        ]
        for id in cases {
            #expect(Self.acceptedByTheMessageLayer(id) == isPlausibleChannelID(id), "\(id.debugDescription)")
        }
    }

    @Test func randomMixesOfGoodAndBadCharacters() {
        var generator = SplitMix(seed: 13)
        let alphabet = Array("ABCXYZabcxyz0189+/=-_ .:%é\u{0}\t~")
        for _ in 0..<2000 {
            let length = Int(generator.next() % 140)
            let id = String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
            #expect(Self.acceptedByTheMessageLayer(id) == isPlausibleChannelID(id), "\(id.debugDescription)")
        }
    }
}

/// A small deterministic generator, so that a failure names the same strings every run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
