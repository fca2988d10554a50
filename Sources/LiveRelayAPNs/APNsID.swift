/// The `apns-id` LiveRelay sets on every request: a lowercase UUID (version
/// 4 layout) whose first 18 characters name the call and whose rest numbers
/// the push within it. APNs echoes it and quotes it in its own diagnostics;
/// our logs carry the call's prefix, so one grep joins both sides. A retry
/// keeps its push's id: it is the same notification.
public struct APNsCallID: Hashable, Sendable, CustomStringConvertible {
    /// 60 bits: a per-process instance number above a call number.
    public let raw: UInt64
    /// `xxxxxxxx-xxxx-4xxx`, made once per call: every push's id starts with it.
    private let prefix: [UInt8]

    /// - Parameters:
    ///   - instance: random per dispatcher, so ids differ across restarts (28 bits are used).
    ///   - call: the dispatcher's call number (32 bits are used).
    public init(instance: UInt32, call: UInt64) {
        let raw = (UInt64(instance & 0x0FFF_FFFF) << 32) | (call & 0xFFFF_FFFF)
        var prefix = [UInt8](repeating: 0, count: 18)
        prefix.withUnsafeMutableBufferPointer { out in
            var at = 0
            Self.writeHex(raw >> 12, digits: 12, dashAt: 8, to: out, at: &at)
            out[at] = UInt8(ascii: "-")
            out[at + 1] = UInt8(ascii: "4")
            at += 2
            Self.writeHex(raw & 0xFFF, digits: 3, dashAt: nil, to: out, at: &at)
        }
        self.raw = raw
        self.prefix = prefix
    }

    public var description: String { String(decoding: prefix, as: UTF8.self) }

    /// The apns-id of the call's push number `index`: `<prefix>-8xxx-xxxxxxxxxxxx`.
    /// One allocation: it is made for every push.
    public func apnsID(push index: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            for i in 0..<18 { out[i] = prefix[i] }
            out[18] = UInt8(ascii: "-")
            out[19] = UInt8(ascii: "8")
            var at = 20
            Self.writeHex(index & 0x0FFF_FFFF_FFFF_FFFF, digits: 15, dashAt: 3, to: out, at: &at)
            return at
        }
    }

    private static func writeHex(
        _ value: UInt64, digits: Int, dashAt dash: Int?, to out: UnsafeMutableBufferPointer<UInt8>, at: inout Int
    ) {
        let hex: StaticString = "0123456789abcdef"
        for i in 0..<digits {
            if i == dash {
                out[at] = UInt8(ascii: "-")
                at += 1
            }
            out[at] = hex.utf8Start[Int((value >> UInt64(4 * (digits - 1 - i))) & 0xF)]
            at += 1
        }
    }
}
