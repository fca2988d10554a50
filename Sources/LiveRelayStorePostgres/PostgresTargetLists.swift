import LiveRelayAPNs
import NIOCore

/// One token as a fan-out reads it (an update's, or a start's to `all_devices`):
/// expiry is filtered by the plan (its `now`), so one cached answer serves
/// every plan of a batch.
struct TargetRow: Sendable {
    var hex: String
    var environment: APNsEnvironment
    /// UNIX milliseconds; nil for none.
    var expiresAt: Int64?

    func isLive(at now: UnixTime) -> Bool { expiresAt.map { $0 > now.milliseconds } ?? true }
}

/// A fan-out's targets (an activity's update tokens, or a type's push-to-start
/// tokens) as one text value, aggregated by the database.
///
/// A row per token cost the server about 2 µs each in postgres-nio (the row's
/// message, its state machine step, its column decoding): 100,000 tokens took
/// 200 ms of the event loop's and the batch's CPU, more than PostgreSQL spent
/// finding them. One aggregated value per activity is one message, and this
/// parser reads it in one pass over the bytes.
///
/// Each token is `hex environment[ expires]` (the environment's stored number,
/// the expiry in UNIX milliseconds when there is one), tokens separated by `,`.
/// A stored token is hex (validation refuses anything else), never a space or
/// a comma, so the format needs no escaping. PostgreSQL caps a value at 1 GB:
/// about 13 million tokens of one activity, far past what one activity's
/// fan-out is for (a broadcast channel serves audiences that large).
enum TargetList {
    /// The aggregate the fan-out query selects, over the `tokens` row `t`.
    static let aggregateSQL = "string_agg(t.hex || ' ' || t.environment || coalesce(' ' || t.expires_at, ''), ',')"

    /// Parses what ``aggregateSQL`` produced; anything else is a corrupt row, not a guess.
    static func parse(_ list: ByteBuffer) throws(PostgresStoreError) -> [TargetRow] {
        let parsed = list.withUnsafeReadableBytes { bytes -> [TargetRow]? in
            var rows: [TargetRow] = []
            rows.reserveCapacity(bytes.count / 72)
            var i = 0
            while i < bytes.count {
                guard let row = parseEntry(bytes, at: &i) else { return nil }
                rows.append(row)
                if i < bytes.count {
                    guard bytes[i] == UInt8(ascii: ","), i + 1 < bytes.count else { return nil }
                    i += 1
                }
            }
            return rows
        }
        guard let parsed else { throw .corruptRow("update target list") }
        return parsed
    }

    /// One `hex environment[ expires]` from `i`, leaving `i` after it.
    private static func parseEntry(_ bytes: UnsafeRawBufferPointer, at i: inout Int) -> TargetRow? {
        let start = i
        while i < bytes.count, bytes[i] != UInt8(ascii: " ") {
            guard bytes[i] != UInt8(ascii: ",") else { return nil }
            i += 1
        }
        guard i > start, i + 1 < bytes.count else { return nil }
        let hex = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        let environment: APNsEnvironment
        switch bytes[i + 1] {
        case UInt8(ascii: "0"): environment = .sandbox
        case UInt8(ascii: "1"): environment = .production
        default: return nil
        }
        i += 2
        guard i < bytes.count, bytes[i] == UInt8(ascii: " ") else {
            return TargetRow(hex: hex, environment: environment, expiresAt: nil)
        }
        i += 1
        guard let expiresAt = parseInt64(bytes, at: &i) else { return nil }
        return TargetRow(hex: hex, environment: environment, expiresAt: expiresAt)
    }

    /// A decimal `Int64` (optionally negative) from `i`, refusing an empty or overflowing one.
    private static func parseInt64(_ bytes: UnsafeRawBufferPointer, at i: inout Int) -> Int64? {
        let negative = i < bytes.count && bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        let start = i
        var value: Int64 = 0
        while i < bytes.count, bytes[i] != UInt8(ascii: ",") {
            let digit = bytes[i] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int64(digit))
            guard !o1, !o2 else { return nil }
            value = sum
            i += 1
        }
        guard i > start else { return nil }
        return negative ? -value : value
    }
}

/// Some of an activity's update token keys (the sweep's pass, an end's deletions) as one
/// text value, `hex,hex,...`, for the reason ``TargetList`` is one: as a row per key,
/// an end of a 100,000-token activity (which reads them all) would pay postgres-nio's
/// cost per row 100,000 times.
enum UpdateTokenHexList {
    /// Parses a `,`-separated list of non-empty tokens without spaces; anything else is a corrupt row.
    static func parse(_ list: ByteBuffer) throws(PostgresStoreError) -> [String] {
        let parsed = list.withUnsafeReadableBytes { bytes -> [String]? in
            var hexes: [String] = []
            hexes.reserveCapacity(bytes.count / 65 + 1)
            var start = 0
            for i in 0...bytes.count where i == bytes.count || bytes[i] == UInt8(ascii: ",") || bytes[i] == UInt8(ascii: " ") {
                guard i > start, i == bytes.count || bytes[i] == UInt8(ascii: ",") else { return nil }
                hexes.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self))
                start = i + 1
            }
            return hexes
        }
        guard let parsed else { throw .corruptRow("update token list") }
        return parsed
    }
}
