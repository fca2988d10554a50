#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The files of a journaled store's directory, and their framing.
///
/// - `journal-N.lrj`: the writes made after snapshot N, one record per
///   mutation, appended and `fdatasync`ed before the mutation is acknowledged.
/// - `snapshot-N.lrj`: the whole state at the start of `journal-N` (written to
///   `snapshot-N.tmp`, synced, then renamed, so a snapshot that exists is whole).
///
/// Both start with a 24-byte header (an 8-byte magic, the format version, 4
/// reserved bytes, N) followed by records: a 4-byte length, the CRC-32 of the
/// payload, then the payload (``JournalCodec``). A record cut short or whose
/// checksum fails at the end of the newest journal is a write that never
/// completed (so was never acknowledged): recovery cuts it off. Anywhere else
/// it is damage, and the store refuses to open rather than lose what follows.
enum JournalFile {
    enum Kind: String {
        case journal, snapshot

        var magic: [UInt8] { Array((self == .journal ? "LRJRNL01" : "LRSNAP01").utf8) }
    }

    static let headerSize = 24
    static let recordHeaderSize = 8
    /// A record larger than this is damage, not a write (a start's target list is at most a few MB).
    static let maxRecordSize = 1 << 30

    static func name(_ kind: Kind, _ number: UInt64) -> String { "\(kind.rawValue)-\(number).lrj" }

    static func header(_ kind: Kind, _ number: UInt64) -> [UInt8] {
        var out = JournalEncoder()
        out.bytes.append(contentsOf: kind.magic)
        out.u32(JournalCodec.formatVersion)
        out.u32(0)
        out.u64(number)
        return out.bytes
    }

    /// Appends one record (length, checksum, payload) whose payload `encode` writes.
    static func appendRecord(to out: inout JournalEncoder, _ encode: (inout JournalEncoder) -> Void) {
        let start = out.bytes.count
        out.u32(0)
        out.u32(0)
        encode(&out)
        let length = out.bytes.count - start - recordHeaderSize
        let crc = out.bytes.withUnsafeBytes { crc32(UnsafeRawBufferPointer(rebasing: $0[(start + recordHeaderSize)...])) }
        withUnsafeBytes(of: UInt32(length).littleEndian) { out.bytes.replaceSubrange(start..<start + 4, with: $0) }
        withUnsafeBytes(of: crc.littleEndian) { out.bytes.replaceSubrange(start + 4..<start + 8, with: $0) }
    }

    /// What reading a file found: its records' payloads were handed out, and
    /// `validLength` bytes of it are whole; `damage` says why the rest is not.
    struct Scan {
        var records = 0
        var validLength: Int
        var damage: String?
    }

    /// Reads `path`, checks its header, and hands each whole record's payload
    /// to `body` in order, stopping at the first record that is cut short or
    /// fails its checksum.
    static func scan(
        _ path: String, kind: Kind, number: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Scan {
        try withMapped(path) { file in
            guard file.count >= headerSize else {
                return Scan(validLength: 0, damage: "the file is shorter than its header (\(file.count) bytes)")
            }
            guard file.starts(with: kind.magic) else { throw JournalOpenError("\(path) is not a LiveRelay \(kind.rawValue) file") }
            var header = JournalDecoder(UnsafeRawBufferPointer(rebasing: file[kind.magic.count..<headerSize]))
            let version = try header.u32()
            guard version == JournalCodec.formatVersion else {
                throw JournalOpenError("\(path) has format version \(version); this build reads \(JournalCodec.formatVersion)")
            }
            _ = try header.u32()
            let found = try header.u64()
            guard found == number else { throw JournalOpenError("\(path) says it is number \(found)") }
            var scan = Scan(validLength: headerSize)
            var offset = headerSize
            while offset < file.count {
                guard file.count - offset >= recordHeaderSize else {
                    scan.damage = "a record header cut short at byte \(offset)"
                    break
                }
                let length = Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                let crc = UInt32(littleEndian: file.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
                let start = offset + recordHeaderSize
                guard length <= maxRecordSize, length <= file.count - start else {
                    scan.damage = "a record of \(length) bytes at byte \(offset) runs past the end (\(file.count))"
                    break
                }
                let payload = UnsafeRawBufferPointer(rebasing: file[start..<start + length])
                guard crc32(payload) == crc else {
                    scan.damage = "the record at byte \(offset) fails its checksum"
                    break
                }
                try body(payload)
                scan.records += 1
                offset = start + length
                scan.validLength = offset
            }
            return scan
        }
    }

    /// The file's bytes, mapped read-only for the length of `body`.
    private static func withMapped<T>(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw JournalOpenError("cannot open \(path): \(errnoText())") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw JournalOpenError("cannot stat \(path): \(errnoText())") }
        let size = Int(info.st_size)
        if size == 0 { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard let mapped = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
            throw JournalOpenError("cannot map \(path): \(errnoText())")
        }
        defer { munmap(mapped, size) }
        return try body(UnsafeRawBufferPointer(start: mapped, count: size))
    }

    /// The numbers of the journals and snapshots in `directory`, ascending; removes leftover `.tmp` files.
    static func list(_ directory: String) throws -> (journals: [UInt64], snapshots: [UInt64]) {
        guard let dir = opendir(directory) else { throw JournalOpenError("cannot read \(directory): \(errnoText())") }
        defer { closedir(dir) }
        var journals: [UInt64] = [], snapshots: [UInt64] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".tmp") {
                unlink(directory + "/" + name)
                continue
            }
            guard name.hasSuffix(".lrj"), let dash = name.firstIndex(of: "-") else { continue }
            guard let number = UInt64(name[name.index(after: dash)..<name.index(name.endIndex, offsetBy: -4)]) else { continue }
            switch name[..<dash] {
            case "journal": journals.append(number)
            case "snapshot": snapshots.append(number)
            default: continue
            }
        }
        return (journals.sorted(), snapshots.sorted())
    }

    /// Deletes the journals and snapshots numbered below `number`: what snapshot `number` replaces.
    static func removeReplaced(by number: UInt64, journals: [UInt64], snapshots: [UInt64], in directory: String) {
        for old in journals where old < number { unlink(directory + "/" + name(.journal, old)) }
        for old in snapshots where old < number { unlink(directory + "/" + name(.snapshot, old)) }
    }

    /// Writes all of `bytes` to `fd`.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }

    /// fsync of a directory, so that a file created or renamed in it stays.
    static func syncDirectory(_ directory: String) -> Int32? {
        let fd = open(directory, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return fsync(fd) == 0 ? nil : errno
    }

    static func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) + " (errno \(code))" }
}

/// A journal directory that cannot be opened as it is: damaged, of another
/// format, or unreadable. The store refuses to start rather than serve a state
/// that lost acknowledged writes.
public struct JournalOpenError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`).
func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes { crc = crc32Table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
    return ~crc
}

private let crc32Table: [UInt32] = (0..<256).map { n in
    var c = UInt32(n)
    for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    return c
}
