import LiveRelayCollections

/// The building blocks of ``TokenTable``'s compact storage: packed token
/// bytes, interned strings and an index of the records that expire (its hash index of
/// record numbers, `RecordIndex`, its chunked arrays and maps are in
/// LiveRelayCollections, which the dispatcher's lanes share).
///
/// Why they exist: each token as a `Token` (seven strings) in a dictionary
/// keyed by two more, plus three index dictionaries keyed by strings, costs
/// about 1.2 KB per registered token. These keep the same facts in about a
/// sixth of that (docs/BENCHMARKS.md, "Memory").

/// Lowercase hex of even length up to 64 characters (an APNs device token
/// today is 32 bytes), two characters a byte in 32 inline bytes: no heap
/// allocation per token. Anything else (odd length, longer, not lowercase
/// hex: only hand-made tokens, validation refuses them) is not packable, and
/// ``TokenTable`` keeps it as an interned string instead.
struct PackedHex: Hashable, Sendable {
    /// Character `i` is nibble `15 - i % 16` of word `i / 16` (the first character on top).
    private var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0
    /// Characters; 0 for "not packed" (the token is interned instead).
    private(set) var length: UInt8 = 0

    static let none = PackedHex()

    private init() {}

    /// Every lookup and write of a token packs its hex (twice per
    /// RegisterToken), and every fan-out target unpacks one: eight
    /// characters at a time in one 64-bit word (SWAR), the rest one by one,
    /// about half the instructions of a loop per character.
    init?(_ hex: String) {
        var hex = hex
        // Native strings are contiguous; a bridged or lazily made one is made so once.
        guard let packed = hex.withUTF8({ Self.pack($0) }) else { return nil }
        self = packed
    }

    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The nibbles of eight hex characters (the first in the low byte, as
    /// loaded from memory), nil unless each is `0-9` or `a-f`.
    private static func nibbles(_ chars: UInt64) -> UInt64? {
        // Bytes below 0x80 add without carrying into the next byte: bit 7 of
        // `c + (0x80 - lo)` says `c >= lo`.
        guard chars & highBits == 0 else { return nil }
        let digit = (chars &+ ones &* 0x50) & ~(chars &+ ones &* 0x46)
        let letter = (chars &+ ones &* 0x1F) & ~(chars &+ ones &* 0x19)
        guard (digit | letter) & highBits == highBits else { return nil }
        // '0'...'9' -> 0...9; 'a'...'f' -> 1...6, plus 9.
        return (chars & (ones &* 0x0F)) &+ ((letter & highBits) >> 7) &* 9
    }

    /// Eight nibbles, one per byte with the first in the low byte, as 32 bits with the first on top.
    private static func gather(_ n: UInt64) -> UInt64 {
        let pairs = (n & 0x000F_000F_000F_000F) << 4 | (n >> 8) & 0x000F_000F_000F_000F
        let quads = (pairs & 0x0000_00FF_0000_00FF) << 8 | (pairs >> 16) & 0x0000_00FF_0000_00FF
        return (quads & 0xFFFF) << 16 | (quads >> 32) & 0xFFFF
    }

    /// The inverse of ``gather(_:)``.
    private static func scatter(_ bits: UInt64) -> UInt64 {
        let quads = (bits >> 16) & 0xFFFF | (bits & 0xFFFF) << 32
        let pairs = (quads >> 8) & 0x0000_00FF_0000_00FF | (quads & 0x0000_00FF_0000_00FF) << 16
        return (pairs >> 4) & 0x000F_000F_000F_000F | (pairs & 0x000F_000F_000F_000F) << 8
    }

    private static func nibble(_ c: UInt8) -> UInt64? {
        if c &- 0x30 < 10 { return UInt64(c &- 0x30) }
        if c &- 0x61 < 6 { return UInt64(c &- 0x61 &+ 10) }
        return nil
    }

    private static func pack(_ bytes: UnsafeBufferPointer<UInt8>) -> PackedHex? {
        let count = bytes.count
        guard count > 0, count <= 64, count % 2 == 0, let base = bytes.baseAddress else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        func add(_ bits: UInt64, at i: Int) {
            switch i / 16 {
            case 0: words.0 |= bits
            case 1: words.1 |= bits
            case 2: words.2 |= bits
            default: words.3 |= bits
            }
        }
        var i = 0
        while i + 8 <= count {
            let chars = UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
            guard let n = nibbles(chars) else { return nil }
            add(gather(n) << (i % 16 == 0 ? 32 : 0), at: i)
            i += 8
        }
        while i < count {
            guard let n = nibble(bytes[i]) else { return nil }
            add(n << UInt64((15 - i % 16) * 4), at: i)
            i += 1
        }
        var packed = PackedHex()
        (packed.w0, packed.w1, packed.w2, packed.w3) = words
        packed.length = UInt8(count)
        return packed
    }

    private func word(_ i: Int) -> UInt64 {
        switch i / 16 {
        case 0: w0
        case 1: w1
        case 2: w2
        default: w3
        }
    }

    /// The hex it was made from.
    var string: String {
        String(unsafeUninitializedCapacity: Int(length)) { buffer in
            let count = Int(length)
            guard let base = buffer.baseAddress else { return 0 }
            var i = 0
            while i + 8 <= count {
                let n = Self.scatter(word(i) >> (i % 16 == 0 ? 32 : 0) & 0xFFFF_FFFF)
                // 0...9 -> '0'...'9'; 10...15 -> 'a'...'f' (0x57 + n = 0x30 + n + 0x27).
                let letter = ((n &+ Self.ones &* 0x76) & Self.highBits) >> 7
                let chars = n &+ Self.ones &* 0x30 &+ letter &* 0x27
                UnsafeMutableRawPointer(base + i).storeBytes(of: chars.littleEndian, as: UInt64.self)
                i += 8
            }
            while i < count {
                let v = UInt8(truncatingIfNeeded: word(i) >> UInt64((15 - i % 16) * 4)) & 0xF
                buffer[i] = v < 10 ? 0x30 &+ v : 0x57 &+ v
                i += 1
            }
            return count
        }
    }
}

/// Strings shared by many tokens (app ids, activity ids, attributes types,
/// user ids) kept once and named by a 4-byte id; 0 names "absent". Reference
/// counted, so the ids of activities that are gone are reused and the pool
/// does not grow with the history of the server, only with what is stored.
/// Found through a ``RecordIndex`` of ids, not a `[String: UInt32]`, so that
/// growing never hashes the strings again (a user id per few tokens: a
/// dictionary of them stalled a registration for 80 ms when it grew).
struct StringPool: Sendable {
    private var index = RecordIndex()
    private var strings = ChunkedArray<String>()
    private var counts = ChunkedArray<UInt32>()
    private var free: [UInt32] = []

    init() {
        strings.append("")
        counts.append(0)
    }

    private func find(_ string: String, hash: Int) -> UInt32? {
        index.find(hash: hash) { strings[Int($0)] == string }.map { UInt32($0) }
    }

    /// The id of `string` if some stored token uses it.
    func id(of string: String) -> UInt32? { find(string, hash: string.hashValue) }

    /// Whether `hint` is the id of `string`: a comparison instead of a hash.
    /// Each stored string has one id, so a live id holding an equal string is
    /// the answer, however old the hint (a freed id holds no user).
    private func names(_ hint: UInt32, _ string: String) -> Bool {
        hint != 0 && Int(hint) < counts.count && counts[Int(hint)] > 0 && strings[Int(hint)] == string
    }

    /// ``id(of:)``, trying `hint` first: an id that often names `string`
    /// (see ``TokenTable``'s hints).
    func id(of string: String, hint: UInt32) -> UInt32? { names(hint, string) ? hint : id(of: string) }

    subscript(id: UInt32) -> String? { id == 0 ? nil : strings[Int(id)] }

    /// The id of `string` (0 for nil), counting one more user of it; `hint`
    /// as for ``id(of:hint:)``.
    mutating func retain(_ string: String?, hint: UInt32 = 0) -> UInt32 {
        guard let string else { return 0 }
        if names(hint, string) {
            counts[Int(hint)] += 1
            return hint
        }
        let hash = string.hashValue
        if let id = find(string, hash: hash) {
            counts[Int(id)] += 1
            return id
        }
        let id: UInt32
        if let reused = free.popLast() {
            id = reused
            strings[Int(id)] = string
            counts[Int(id)] = 1
        } else {
            id = UInt32(strings.count)
            strings.append(string)
            counts.append(1)
        }
        index.insert(Int32(id), hash: hash)
        return id
    }

    /// One user fewer; the string is forgotten with its last user.
    mutating func release(_ id: UInt32) {
        guard id != 0 else { return }
        counts[Int(id)] -= 1
        guard counts[Int(id)] == 0 else { return }
        index.remove(Int32(id), hash: strings[Int(id)].hashValue)
        strings[Int(id)] = ""
        free.append(id)
    }
}

/// The tokens with their own expiry: a bit per record number and, for each
/// run of 64 record numbers (one word of bits), the earliest expiry among
/// its members, so that a sweep reads only the words that have a token due.
///
/// Why: the sweeper asks for the expired tokens every minute, inside a
/// mutation (under the memory store's lock). Most push-to-start tokens have
/// an expiry (the retention, 30 days by default), and reading every member's
/// record to find the due ones took 13 ms at a million tokens, nearly always
/// to find none (docs/BENCHMARKS.md, "Memory"). The earliest
/// expiries cost 8 bytes per 64 records (the bits an eighth of a byte per
/// record), where an index by minute would cost 20 bytes per token.
///
/// The earliest expiry of a word is exact: removing the member that had it
/// reads the word's other members again (at most 63 records, and only for
/// that member). Record numbers are handed out in registration order, so a
/// word's members mostly expire in the order they came.
struct ExpiryIndex: Sendable {
    private var words: [UInt64] = []
    /// Per word: the earliest expiry of its members; `Int64.max` when it has none.
    private var earliest: [Int64] = []

    mutating func insert(_ record: Int32, expiresAt: Int64) {
        let (word, bit) = Int(record).quotientAndRemainder(dividingBy: 64)
        if word >= words.count {
            let added = word - words.count + 1
            words.append(contentsOf: repeatElement(0, count: added))
            earliest.append(contentsOf: repeatElement(.max, count: added))
        }
        words[word] |= 1 << UInt64(bit)
        earliest[word] = min(earliest[word], expiresAt)
    }

    /// Takes `record` (whose expiry was `expiresAt`) out. Returns its word
    /// when `record` had the word's earliest expiry and others remain: the
    /// caller then finds the new earliest among ``forEachMember(ofWord:_:)``
    /// and sets it with ``setEarliest(_:ofWord:)`` (the expiries are in its
    /// records, not here). Until then the old one stands: a word read too
    /// early, never one skipped.
    mutating func remove(_ record: Int32, expiresAt: Int64) -> Int? {
        let (word, bit) = Int(record).quotientAndRemainder(dividingBy: 64)
        guard word < words.count, words[word] & (1 << UInt64(bit)) != 0 else { return nil }
        words[word] &= ~(1 << UInt64(bit))
        if words[word] == 0 {
            earliest[word] = .max
            return nil
        }
        return expiresAt <= earliest[word] ? word : nil
    }

    /// The members of `word` in increasing order, until `body` returns false.
    func forEachMember(ofWord word: Int, _ body: (Int32) -> Bool) {
        var rest = words[word]
        while rest != 0 {
            guard body(Int32(word * 64 + rest.trailingZeroBitCount)) else { return }
            rest &= rest - 1
        }
    }

    mutating func setEarliest(_ expiresAt: Int64, ofWord word: Int) { earliest[word] = expiresAt }

    /// In increasing order, the members of the words whose earliest expiry
    /// is at or before `now`, until `body` returns false. Members that are
    /// not due yet are among them: `body` checks each one's own expiry.
    func forEach(dueBy now: Int64, _ body: (Int32) -> Bool) {
        for w in words.indices where earliest[w] <= now {
            var rest = words[w]
            while rest != 0 {
                guard body(Int32(w * 64 + rest.trailingZeroBitCount)) else { return }
                rest &= rest - 1
            }
        }
    }
}
