/// The `apns-id` LiveRelay sets on every request: a lowercase UUID (version
/// 4 layout) whose first 18 characters name the call and whose rest numbers
/// the push within it. APNs echoes it and quotes it in its own diagnostics;
/// our logs carry the call's prefix, so one grep joins both sides. A retry
/// keeps its push's id: it is the same notification.
public struct APNsCallID: Hashable, Sendable, CustomStringConvertible {
    /// 60 bits: a per-process instance number above a call number.
    public let raw: UInt64

    /// - Parameters:
    ///   - instance: random per dispatcher, so ids differ across restarts (28 bits are used).
    ///   - call: the dispatcher's call number (32 bits are used).
    public init(instance: UInt32, call: UInt64) {
        raw = (UInt64(instance & 0x0FFF_FFFF) << 32) | (call & 0xFFFF_FFFF)
    }

    /// `xxxxxxxx-xxxx-4xxx`: what every push of the call starts with.
    public var description: String {
        var out = [UInt8]()
        out.reserveCapacity(18)
        Self.appendHex(raw >> 12, digits: 12, dashAt: [8], to: &out)
        out.append(UInt8(ascii: "-"))
        out.append(UInt8(ascii: "4"))
        Self.appendHex(raw & 0xFFF, digits: 3, dashAt: [], to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The apns-id of the call's push number `index`: `<prefix>-8xxx-xxxxxxxxxxxx`.
    public func apnsID(push index: UInt64) -> String {
        var out = Array(description.utf8)
        out.reserveCapacity(36)
        out.append(UInt8(ascii: "-"))
        out.append(UInt8(ascii: "8"))
        Self.appendHex(index & 0x0FFF_FFFF_FFFF_FFFF, digits: 15, dashAt: [3], to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func appendHex(_ value: UInt64, digits: Int, dashAt dashes: [Int], to out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        for i in 0..<digits {
            if dashes.contains(i) { out.append(UInt8(ascii: "-")) }
            let nibble = Int((value >> UInt64(4 * (digits - 1 - i))) & 0xF)
            out.append(hex.utf8Start[nibble])
        }
    }
}
