import CLiveRelayProto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A bump allocator for building one C message tree for `protobuf_c_message_pack`.
///
/// Why: the Swift-to-C conversion, not protobuf-c, dominates encode time. The
/// per-thread scratch buffer (`lr_scratch_acquire`) holds the structs, pointer
/// arrays, every NUL-terminated string copy and the packed output, instead of a
/// `withCString` closure or malloc per string. Messages larger than the scratch
/// continue in heap chunks, freed by `release()`. Every block is a multiple of
/// 8 bytes so structs stay aligned.
///
/// It also keeps `packedBound`, an upper bound of the packed size of everything
/// built so far, so that encoding needs no `protobuf_c_message_get_packed_size`:
/// - each message struct adds 16 + 4 x its size: every field is a member of at
///   least 4 bytes, and one field's tag (at most 5 bytes) plus a scalar value
///   (at most 10) or a length prefix (at most 10) fits in 16;
/// - each repeated element adds 16 (its tag and length prefix);
/// - each string or bytes value adds its length + 16.
/// Unknown fields never occur in structs built from Swift values.
struct Arena {
    private var base: UnsafeMutableRawPointer
    private var used = 0
    private var capacity: Int
    private(set) var packedBound = 0
    /// The per-thread scratch buffer, when this arena holds it.
    private let scratch: UnsafeMutableRawPointer?
    /// The newest heap chunk taken when the scratch ran out (or was in use); each
    /// chunk's first 16 bytes hold the address of the previous one.
    private var chunks: UnsafeMutableRawPointer? = nil

    private static let chunkBytes = 16 * 1024

    private init(base: UnsafeMutableRawPointer, capacity: Int, scratch: UnsafeMutableRawPointer?) {
        self.base = base
        self.capacity = capacity
        self.scratch = scratch
    }

    /// The thread's scratch buffer, or a heap chunk when it is in use. Call `release()`.
    static func scratch() -> Arena {
        var capacity = 0
        if let p = lr_scratch_acquire(&capacity) {
            return Arena(base: p, capacity: capacity, scratch: p)
        }
        var arena = Arena(base: UnsafeMutableRawPointer(bitPattern: 16)!, capacity: 0, scratch: nil)
        arena.newChunk(chunkBytes)
        return arena
    }

    /// Frees the heap chunks and gives the scratch buffer back. Nothing built
    /// in the arena may be used afterwards.
    func release() {
        var next = chunks
        while let chunk = next {
            next = chunk.load(as: UnsafeMutableRawPointer?.self)
            chunk.deallocate()
        }
        if let scratch { lr_scratch_release(scratch) }
    }

    @inline(__always)
    static func round(_ n: Int) -> Int { (n + 7) & ~7 }

    @inline(__always)
    static func size<T>(_: T.Type) -> Int { round(MemoryLayout<T>.stride) }

    /// `n` bytes (a multiple of 8 keeps later blocks aligned).
    @inline(__always)
    mutating func take(_ n: Int) -> UnsafeMutableRawPointer {
        if _fastPath(n <= capacity &- used) {
            let p = base + used
            used &+= n
            return p
        }
        return grow(n)
    }

    @inline(never)
    private mutating func grow(_ n: Int) -> UnsafeMutableRawPointer {
        newChunk(Swift.max(n, Arena.chunkBytes))
        return take(n)
    }

    /// Continues in a new heap chunk with room for `size` bytes.
    private mutating func newChunk(_ size: Int) {
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: 16 + size, alignment: 16)
        chunk.storeBytes(of: chunks, as: UnsafeMutableRawPointer?.self)
        chunks = chunk
        base = chunk + 16
        capacity = size
        used = 0
    }

    /// Room for one C message struct; the caller runs its lr_*_init on it.
    @inline(__always)
    mutating func allocate<T>(_: T.Type) -> UnsafeMutablePointer<T> {
        packedBound &+= 16 &+ 4 &* MemoryLayout<T>.size
        return take(Arena.size(T.self)).bindMemory(to: T.self, capacity: 1)
    }

    /// An array of `count` pointers (for repeated fields).
    @inline(__always)
    mutating func pointers<T>(_: T.Type, _ count: Int) -> UnsafeMutablePointer<UnsafeMutablePointer<T>?> {
        packedBound &+= 16 &* count
        return take(count * MemoryLayout<UnsafeMutableRawPointer>.stride)
            .bindMemory(to: UnsafeMutablePointer<T>?.self, capacity: count)
    }

    /// A NUL-terminated copy of `s`.
    @inline(__always)
    mutating func copy(_ s: String) -> UnsafeMutablePointer<CChar> {
        let n = s.utf8.count
        packedBound &+= n &+ 16
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
        packedBound &+= bytes.count &+ 16
        let dst = take(Arena.round(bytes.count))
        bytes.withUnsafeBytes { dst.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return ProtobufCBinaryData(len: bytes.count, data: dst.bindMemory(to: UInt8.self, capacity: bytes.count))
    }
}

// Reading unpacked structs. Strings were checked for UTF-8 and NUL by WireScan
// before unpack, so decoding them cannot repair or truncate anything, and they
// need not be validated again: `String(cString:)` re-validated every string and
// took the standard library's slow repairing path for any non-ASCII text.

@inline(__always)
func cString(_ p: UnsafeMutablePointer<CChar>?) -> String {
    guard let p else { return "" }
    return prevalidatedString(UnsafeRawPointer(p))
}

@inline(__always)
func cOptionalString(_ p: UnsafeMutablePointer<CChar>?) -> String? {
    guard let p else { return nil }
    return prevalidatedString(UnsafeRawPointer(p))
}

/// A `String` from a NUL-terminated string that WireScan proved to be valid UTF-8.
/// The ASCII flag is computed exactly, so the result is the same `String` (same
/// fast paths for hashing and comparison) as the validating initializers make.
func prevalidatedString(_ p: UnsafeRawPointer) -> String {
    let n = strlen(p.assumingMemoryBound(to: CChar.self))
    if n == 0 { return "" }
    let bytes = UnsafeBufferPointer(start: p.assumingMemoryBound(to: UInt8.self), count: n)
    let ascii = isASCII(p, n)
    return String(copying: unsafe UTF8Span(unchecked: unsafe Span(_unsafeElements: bytes), isKnownASCII: ascii))
}

/// True when no byte has the high bit set; 8 bytes at a time.
@inline(__always)
func isASCII(_ p: UnsafeRawPointer, _ n: Int) -> Bool {
    var i = 0
    var acc: UInt64 = 0
    while n &- i >= 8 {
        acc |= p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        i &+= 8
    }
    if n &- i >= 4 {
        acc |= UInt64(p.loadUnaligned(fromByteOffset: i, as: UInt32.self))
        i &+= 4
    }
    while i < n {
        acc |= UInt64(p.load(fromByteOffset: i, as: UInt8.self))
        i &+= 1
    }
    return acc & 0x8080_8080_8080_8080 == 0
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
