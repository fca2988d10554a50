import LiveRelayDomain

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Rebuilds a journaled store's state from its directory: the newest
/// snapshot, then every journal from its number on, in order.
///
/// What it refuses (``JournalOpenError``): a snapshot with any damaged record,
/// a journal other than the newest with one, a gap in the journals' numbers,
/// a file of another format. What it repairs: the newest journal's tail after
/// its last whole record (a write the crash cut short, so never acknowledged)
/// is cut off, and the files a finished compaction had not yet deleted are.
struct JournalRecovery {
    /// Each app's state (``AppShards``).
    var states: [String: InMemoryState] = [:]
    /// The newest snapshot's number (0: none).
    var snapshot: UInt64 = 0
    var snapshotBytes = 0
    /// The newest journal's number (0: none).
    var lastJournal: UInt64 = 0
    /// Journal bytes replayed on top of the snapshot.
    var journalBytes = 0
    var recordsReplayed = 0
    /// Bytes cut off the newest journal's tail, and why.
    var cutBytes = 0
    var cutReason: String?

    init(directory: String) throws {
        let (journals, snapshots) = try JournalFile.list(directory)
        snapshot = snapshots.last ?? 0
        if snapshot > 0 {
            let path = directory + "/" + JournalFile.name(.snapshot, snapshot)
            let scan = try JournalFile.scan(path, kind: .snapshot, number: snapshot) { payload in
                AppShards.apply(try JournalCodec.decode(payload), to: &states)
            }
            if let damage = scan.damage { throw JournalOpenError("\(path) is damaged: \(damage)") }
            snapshotBytes = scan.validLength
        }
        // Leftovers of a compaction that finished its snapshot but not its cleanup.
        JournalFile.removeReplaced(by: snapshot, journals: journals, snapshots: snapshots, in: directory)

        let replay = journals.filter { $0 >= snapshot }
        var expected = max(snapshot, 1)
        var emptyAtTheEnd: [UInt64] = []
        for (i, number) in replay.enumerated() {
            let path = directory + "/" + JournalFile.name(.journal, number)
            guard number == expected else {
                throw JournalOpenError(
                    "\(directory) has no \(JournalFile.name(.journal, expected)) between the snapshot \(snapshot) and \(JournalFile.name(.journal, number))"
                )
            }
            expected += 1
            var records = 0
            let scan = try JournalFile.scan(path, kind: .journal, number: number) { payload in
                AppShards.apply(try JournalCodec.decode(payload), to: &states)
                records += 1
            }
            recordsReplayed += records
            journalBytes += scan.validLength
            lastJournal = number
            if records == 0 { emptyAtTheEnd.append(number) } else { emptyAtTheEnd = [] }
            guard let damage = scan.damage else { continue }
            guard i == replay.count - 1 else { throw JournalOpenError("\(path) is damaged before the newest journal: \(damage)") }
            cutBytes = (Self.size(path) ?? scan.validLength) - scan.validLength
            cutReason = damage
            try Self.cut(path, to: scan.validLength)
        }
        // Journals without a record at the end (opened, then closed or killed before any write):
        // the next journal takes the first one's number rather than leaving one empty file per start.
        for number in emptyAtTheEnd.reversed() {
            unlink(directory + "/" + JournalFile.name(.journal, number))
            journalBytes = max(0, journalBytes - JournalFile.headerSize)
            lastJournal = number - 1
        }
        if snapshot > 0, lastJournal < snapshot {
            // A snapshot is written only after its journal exists; without it there is nothing after the snapshot.
            lastJournal = snapshot - 1
        }
    }

    private static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Cuts the newest journal's unfinished tail and syncs the cut.
    private static func cut(_ path: String, to length: Int) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw JournalOpenError("cannot open \(path) to cut its tail: \(JournalFile.errnoText())") }
        defer { close(fd) }
        guard ftruncate(fd, off_t(length)) == 0, fdatasync(fd) == 0 else {
            throw JournalOpenError("cannot cut the tail of \(path): \(JournalFile.errnoText())")
        }
    }
}
