import LiveRelayDomain

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a journaled store's snapshot: every app's state as the writes that
/// rebuild it (``InMemoryState/forEachWrite(_:)``), in records of up to
/// ``writesPerRecord``, to `snapshot-N.tmp`; syncs it, renames it into place,
/// syncs the directory, and only then deletes the journals and snapshots it
/// replaces. A crash at any point leaves either the old files or the new
/// snapshot whole (``JournalRecovery`` removes a leftover `.tmp`).
enum JournalSnapshotWriter {
    static let writesPerRecord = 1_000
    /// Bytes gathered before each `write`.
    static let chunkBytes = 1 << 20

    /// Returns the snapshot's size in bytes.
    static func write(_ states: some Sequence<InMemoryState>, directory: String, number: UInt64) throws -> Int {
        let final = directory + "/" + JournalFile.name(.snapshot, number)
        let temporary = directory + "/snapshot-\(number).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw JournalIOError("cannot create \(temporary): \(JournalFile.errnoText())") }
        var closed = false
        defer { if !closed { close(fd) } }

        var out = JournalEncoder()
        out.bytes.reserveCapacity(chunkBytes + 64 << 10)
        out.bytes.append(contentsOf: JournalFile.header(.snapshot, number))
        var total = 0
        var failed: Int32?
        var batch: [StoreWrite] = []
        batch.reserveCapacity(writesPerRecord)
        func flush(_ force: Bool) {
            guard failed == nil, force || out.bytes.count >= chunkBytes else { return }
            failed = out.bytes.withUnsafeBytes { JournalFile.writeAll(fd, $0) }
            total += out.bytes.count
            out.bytes.removeAll(keepingCapacity: true)
        }
        func record() {
            guard !batch.isEmpty else { return }
            JournalFile.appendRecord(to: &out) { JournalCodec.encode(batch, into: &$0) }
            batch.removeAll(keepingCapacity: true)
            flush(false)
        }
        for state in states {
            state.forEachWrite { write in
                batch.append(write)
                if batch.count == writesPerRecord { record() }
            }
        }
        record()
        flush(true)
        if let failed { throw JournalIOError("cannot write \(temporary): \(JournalFile.errnoText(failed))") }
        guard fdatasync(fd) == 0 else { throw JournalIOError("cannot sync \(temporary): \(JournalFile.errnoText())") }
        closed = true
        close(fd)
        guard rename(temporary, final) == 0 else {
            throw JournalIOError("cannot rename \(temporary) to \(final): \(JournalFile.errnoText())")
        }
        if let failed = JournalFile.syncDirectory(directory) {
            throw JournalIOError("cannot sync \(directory): \(JournalFile.errnoText(failed))")
        }
        let (journals, snapshots) = try JournalFile.list(directory)
        JournalFile.removeReplaced(by: number, journals: journals, snapshots: snapshots, in: directory)
        return total
    }
}
