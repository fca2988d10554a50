import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet

/// How the SQL stores keep an intent's target list: one column of bytes,
/// shared by SQLite and PostgreSQL so that both read what either wrote.
extension DispatchIntent {
    /// The target list as the SQL stores keep it (``encode(_:withUpdateTokens:)``); nil: none (NULL).
    public var encodedTargets: [UInt8]? {
        targets.map { Self.encode($0, withUpdateTokens: withUpdateTokens) }
    }

    /// The target list as bytes: per token one byte for the environment
    /// (0 sandbox, 1 production), one for the token's length in bytes less one (tokens are 8 to
    /// 256 bytes), then
    /// the token's bytes (its hex decoded): about 34 bytes per token, so an end
    /// to 100,000 devices is one row of 3.4 MB. A channel is a byte 2 (sandbox)
    /// or 3 (production), its storage policy, its id's length and the id as
    /// text; a leading byte 4 says the activity's update tokens go too. A
    /// list of tokens alone is token entries only.
    public static func encode(_ targets: [PushTarget], withUpdateTokens: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(targets.count * 34 + 1)
        if withUpdateTokens { out.append(4) }
        for target in targets {
            if let policy = target.channelPolicy {
                let id = Array(target.token.utf8.prefix(255))
                out.append(target.environment == .sandbox ? 2 : 3)
                out.append(UInt8(policy.rawValue))
                out.append(UInt8(id.count))
                out += id
                continue
            }
            let hex = Array(target.token.utf8)
            out.append(target.environment == .sandbox ? 0 : 1)
            out.append(UInt8(clamping: max(1, hex.count / 2) - 1))
            var i = 0
            while i + 1 < hex.count {
                out.append(Self.nibble(hex[i]) << 4 | Self.nibble(hex[i + 1]))
                i += 2
            }
        }
        return out
    }

    /// nil for bytes that are not a target list (a corrupt row).
    public static func decode(_ bytes: [UInt8]) -> [PushTarget]? { decodeTargets(bytes)?.targets }

    /// The list and whether the update tokens go too; nil for a corrupt row.
    public static func decodeTargets(_ bytes: [UInt8]) -> (targets: [PushTarget], withUpdateTokens: Bool)? {
        let digits = Array("0123456789abcdef".utf8)
        var targets: [PushTarget] = []
        let withUpdateTokens = bytes.first == 4
        var i = withUpdateTokens ? 1 : 0
        while i < bytes.count {
            if bytes[i] == 2 || bytes[i] == 3 {
                guard i + 3 <= bytes.count, let policy = ChannelStoragePolicy(rawValue: Int(bytes[i + 1])),
                    i + 3 + Int(bytes[i + 2]) <= bytes.count, bytes[i + 2] > 0
                else { return nil }
                let id = String(decoding: bytes[(i + 3)..<(i + 3 + Int(bytes[i + 2]))], as: UTF8.self)
                targets.append(.channel(id, environment: bytes[i] == 2 ? .sandbox : .production, storagePolicy: policy))
                i += 3 + Int(bytes[i + 2])
                continue
            }
            guard i + 2 <= bytes.count, bytes[i] <= 1 else { return nil }
            let environment: APNsEnvironment = bytes[i] == 0 ? .sandbox : .production
            let length = Int(bytes[i + 1]) + 1
            i += 2
            guard i + length <= bytes.count else { return nil }
            var hex: [UInt8] = []
            hex.reserveCapacity(length * 2)
            for byte in bytes[i..<(i + length)] {
                hex.append(digits[Int(byte >> 4)])
                hex.append(digits[Int(byte & 0xF)])
            }
            i += length
            targets.append(PushTarget(token: String(decoding: hex, as: UTF8.self), environment: environment))
        }
        return (targets, withUpdateTokens)
    }

    private static func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: 0
        }
    }
}
