import LiveRelayMessages
import Testing

/// `BroadcastChannel.isValidID` is the one statement of what a broadcast channel id looks like: requests
/// are checked with it at decode, the channel service checks APNs's new ids with it, and the mock
/// APNs answers BadChannelId by it. Here it is held to its definition (1-128 characters of the
/// standard and URL-safe base64 alphabets), and the decode check to it.
@Suite struct ChannelIDRuleTests {
    static let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_".unicodeScalars)

    static func acceptedByDecode(_ id: String) -> Bool {
        (try? DeleteChannelRequest(appID: "com.example.app", channelID: id).validate()) != nil
    }

    @Test func everyASCIICharacterAloneIsAcceptedExactlyWhenBase64() {
        for byte in UInt8(0)...UInt8(127) {
            let id = String(decoding: [byte], as: UTF8.self)
            #expect(BroadcastChannel.isValidID(id) == Self.alphabet.contains(Unicode.Scalar(byte)), "byte \(byte)")
            #expect(Self.acceptedByDecode(id) == BroadcastChannel.isValidID(id), "byte \(byte)")
        }
    }

    @Test func lengthsAndOtherText() {
        let accepted = ["A", String(repeating: "A", count: 128), "dHdvLWNoYW5uZWwtaWQtMQ==", "url-safe_id"]
        let refused = ["", String(repeating: "A", count: 129), "é", "Ω=", "a b", "a\u{0}", "🚀", "a\u{85}b"]
        for id in accepted {
            #expect(BroadcastChannel.isValidID(id), "\(id.debugDescription)")
            #expect(Self.acceptedByDecode(id), "\(id.debugDescription)")
        }
        for id in refused {
            #expect(!BroadcastChannel.isValidID(id), "\(id.debugDescription)")
            #expect(!Self.acceptedByDecode(id), "\(id.debugDescription)")
        }
    }
}
