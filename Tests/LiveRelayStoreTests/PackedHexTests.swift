import Testing

@testable import LiveRelayStore

/// ``PackedHex``: what it packs comes back unchanged, what it refuses is
/// exactly what is not lowercase hex of an even length up to 64, and the
/// packed values are equal exactly when the strings are (they are the token
/// table's keys). Both the eight-at-a-time path and the one-by-one tail.
@Suite struct PackedHexTests {
    static let digits = Array("0123456789abcdef")

    struct Generator {
        var seed: UInt64
        mutating func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        mutating func hex(_ count: Int) -> String {
            String((0..<count).map { _ in PackedHexTests.digits[next(16)] })
        }
    }

    @Test func everyEvenLengthComesBackUnchanged() throws {
        var g = Generator(seed: 3)
        for length in stride(from: 2, through: 64, by: 2) {
            for _ in 0..<200 {
                let hex = g.hex(length)
                let packed = try #require(PackedHex(hex))
                #expect(packed.string == hex)
                #expect(packed.length == UInt8(length))
            }
        }
        // Every digit in every position, the range's edges included.
        for d in Self.digits {
            for position in 0..<64 {
                var chars = Array(repeating: Character("5"), count: 64)
                chars[position] = d
                let hex = String(chars)
                #expect(PackedHex(hex)?.string == hex)
            }
        }
    }

    @Test func refusesWhatIsNotLowercaseHexOfAnEvenLength() {
        var g = Generator(seed: 5)
        let base = Array(g.hex(64))
        // The neighbours of each range, upper case, a space, and bytes above ASCII.
        let bad: [Character] = ["/", ":", "`", "g", "@", "A", "F", "G", " ", "\u{7F}", "é", "€"]
        for position in 0..<64 {
            for c in bad {
                var chars = base
                chars[position] = c
                #expect(PackedHex(String(chars)) == nil, "\(c) at \(position)")
            }
        }
        for length in [0, 1, 3, 15, 17, 63, 65, 66, 128] {
            #expect(PackedHex(g.hex(length)) == nil, "length \(length)")
        }
    }

    @Test func equalExactlyWhenTheStringsAre() throws {
        var g = Generator(seed: 7)
        var byValue: [PackedHex: String] = [:]
        for _ in 0..<5_000 {
            let hex = g.hex(2 * (1 + g.next(32)))
            let packed = try #require(PackedHex(hex))
            if let seen = byValue[packed] { #expect(seen == hex) }
            byValue[packed] = hex
            #expect(PackedHex(String(hex.reversed())).map { $0 == packed } == (String(hex.reversed()) == hex))
        }
        // Same nibbles, different lengths: "00" is not "0000".
        #expect(PackedHex("00") != PackedHex("0000"))
        #expect(PackedHex("ab") != PackedHex("ab00"))
    }
}
