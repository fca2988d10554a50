import CLiveRelayProto

/// A bump allocator for building one C message tree for `protobuf_c_message_pack`.
///
/// Why: the Swift-to-C conversion, not protobuf-c, dominates encode time. One
/// (usually stack) allocation sized up front by `arenaBytes` holds the structs,
/// pointer arrays and every NUL-terminated string copy, instead of one
/// `withCString` closure or malloc per string. Every block is a multiple of 8
/// bytes so structs stay aligned. The arena never frees: its memory goes away
/// with the temporary allocation once the message is packed.
struct Arena {
    private let base: UnsafeMutableRawPointer
    private var used = 0
    private let capacity: Int

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        base = buffer.baseAddress!
        capacity = buffer.count
    }

    @inline(__always)
    static func round(_ n: Int) -> Int { (n + 7) & ~7 }

    /// Bytes a NUL-terminated copy of `s` takes.
    @inline(__always)
    static func size(_ s: String) -> Int { round(s.utf8.count + 1) }

    /// Bytes a proto3 string takes: nothing when empty, the init default covers it.
    @inline(__always)
    static func size3(_ s: String) -> Int { s.isEmpty ? 0 : round(s.utf8.count + 1) }

    @inline(__always)
    static func size(_ s: String?) -> Int {
        guard let s else { return 0 }
        return round(s.utf8.count + 1)
    }

    @inline(__always)
    static func size<T>(_: T.Type) -> Int { round(MemoryLayout<T>.stride) }

    /// Bytes a repeated string field takes: the pointer array and the strings.
    static func size(_ strings: [String]) -> Int {
        if strings.isEmpty { return 0 }
        var total = strings.count * MemoryLayout<UnsafeMutableRawPointer>.stride
        for s in strings { total &+= size(s) }
        return total
    }

    @inline(__always)
    private mutating func take(_ n: Int) -> UnsafeMutableRawPointer {
        precondition(used + n <= capacity, "Arena overflow: arenaBytes underestimated")
        let p = base + used
        used += n
        return p
    }

    /// Room for one C message struct; the caller runs its lr_*_init on it.
    @inline(__always)
    mutating func allocate<T>(_: T.Type) -> UnsafeMutablePointer<T> {
        take(Arena.size(T.self)).bindMemory(to: T.self, capacity: 1)
    }

    /// An array of `count` pointers (for repeated fields).
    @inline(__always)
    mutating func pointers<T>(_: T.Type, _ count: Int) -> UnsafeMutablePointer<UnsafeMutablePointer<T>?> {
        take(count * MemoryLayout<UnsafeMutableRawPointer>.stride)
            .bindMemory(to: UnsafeMutablePointer<T>?.self, capacity: count)
    }

    /// A NUL-terminated copy of `s`.
    @inline(__always)
    mutating func copy(_ s: String) -> UnsafeMutablePointer<CChar> {
        let n = s.utf8.count
        let dst = take(Arena.round(n + 1))
        if n > 0 {
            let copied: Void? = s.utf8.withContiguousStorageIfAvailable { src in
                dst.copyMemory(from: src.baseAddress!, byteCount: n)
            }
            if copied == nil { Arena.slowCopy(s, to: dst) }
        }
        dst.storeBytes(of: 0, toByteOffset: n, as: UInt8.self)
        return dst.bindMemory(to: CChar.self, capacity: n + 1)
    }

    @inline(never)
    private static func slowCopy(_ s: String, to dst: UnsafeMutableRawPointer) {
        var i = 0
        for byte in s.utf8 {
            dst.storeBytes(of: byte, toByteOffset: i, as: UInt8.self)
            i += 1
        }
    }

    @inline(__always)
    mutating func copy(_ s: String?) -> UnsafeMutablePointer<CChar>? {
        guard let s else { return nil }
        return copy(s)
    }

    /// A repeated string field: returns the pointer array (nil when empty).
    mutating func copy(_ strings: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        if strings.isEmpty { return nil }
        let array = pointers(CChar.self, strings.count)
        for i in strings.indices { array[i] = copy(strings[i]) }
        return array
    }

    /// A bytes field; the data is not NUL-terminated (protobuf-c uses the length).
    mutating func binary(_ bytes: [UInt8]) -> ProtobufCBinaryData {
        if bytes.isEmpty { return ProtobufCBinaryData(len: 0, data: nil) }
        let dst = take(Arena.round(bytes.count))
        bytes.withUnsafeBytes { dst.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return ProtobufCBinaryData(len: bytes.count, data: dst.bindMemory(to: UInt8.self, capacity: bytes.count))
    }
}

// Reading unpacked structs. Strings were checked for UTF-8 and NUL by WireScan
// before unpack, so decoding them cannot repair or truncate anything.

@inline(__always)
func cString(_ p: UnsafeMutablePointer<CChar>?) -> String {
    guard let p else { return "" }
    return String(cString: p)
}

@inline(__always)
func cOptionalString(_ p: UnsafeMutablePointer<CChar>?) -> String? {
    guard let p else { return nil }
    return String(cString: p)
}

func cStrings(_ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> [String] {
    guard n > 0, let p else { return [] }
    var out = [String]()
    out.reserveCapacity(n)
    for i in 0..<n { out.append(cString(p[i])) }
    return out
}

func cMessages<M: CMessageConvertible>(
    _ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<M.CStruct>?>?, as _: M.Type
) -> [M] {
    guard n > 0, let p else { return [] }
    var out = [M]()
    out.reserveCapacity(n)
    for i in 0..<n {
        if let element = p[i] { out.append(M(c: element)) }
    }
    return out
}

@inline(__always)
func cBytes(_ d: ProtobufCBinaryData) -> [UInt8] {
    guard d.len > 0, let data = d.data else { return [] }
    return [UInt8](UnsafeBufferPointer(start: data, count: d.len))
}

@inline(__always)
func cBool(_ b: protobuf_c_boolean) -> Bool { b != 0 }

@inline(__always)
func cBool(_ b: Bool) -> protobuf_c_boolean { b ? 1 : 0 }

/// Reads a C enum field as its wire number (C enums import with an unsigned raw type).
@inline(__always)
func cEnumValue<E: RawRepresentable>(_ e: E) -> Int32 where E.RawValue: FixedWidthInteger {
    Int32(truncatingIfNeeded: e.rawValue)
}

@inline(__always)
func cEnum<E: RawRepresentable>(_ value: Int32) -> E where E.RawValue: FixedWidthInteger {
    E(rawValue: E.RawValue(truncatingIfNeeded: value))!
}

extension Arena {
    /// A proto3 string: empty stays protobuf_c_empty_string (proto3 omits it anyway).
    @inline(__always)
    mutating func copy3(_ s: String) -> UnsafeMutablePointer<CChar> {
        s.isEmpty ? lr_empty_string() : copy(s)
    }
}
