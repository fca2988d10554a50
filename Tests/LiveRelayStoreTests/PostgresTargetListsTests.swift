import LiveRelayAPNs
import NIOCore
import Testing

@testable import LiveRelayStorePostgres

/// The PostgreSQL fan-out's aggregated target list, parsed without a database
/// (the store's behaviour suite runs the aggregate itself against a real server).
@Suite struct PostgresTargetListsTests {
    func parse(_ text: String) throws(PostgresStoreError) -> [TargetRow] {
        try TargetList.parse(ByteBuffer(string: text))
    }

    @Test func parsesEveryShapeOfEntry() throws {
        let rows = try parse("\(hex(1)) 0,\(hex(2)) 1 1700000060000,ab01 1 -5,\(hex(3)) 0 0")
        #expect(rows.map(\.hex) == [hex(1), hex(2), "ab01", hex(3)])
        #expect(rows.map(\.environment) == [.sandbox, .production, .production, .sandbox])
        #expect(rows.map(\.expiresAt) == [nil, 1_700_000_060_000, -5, 0])
        #expect(try parse("").isEmpty)
        #expect(try parse("ab 1 \(Int64.max)").first?.expiresAt == .max)
    }

    @Test(arguments: [
        ",", "\(hex(1)) 0,", ",\(hex(1)) 0", " 0", "\(hex(1))", "\(hex(1)) ", "\(hex(1)) 2", "\(hex(1)) 01",
        "\(hex(1)) 0 ", "\(hex(1)) 0 12x", "\(hex(1)) 0 -", "\(hex(1)) 0 9223372036854775808", "ab,cd 0",
        "\(hex(1)) 0,,\(hex(2)) 1", "\(hex(1)) 0 5 6",
    ])
    func refusesAnythingElse(_ text: String) {
        #expect(throws: PostgresStoreError.corruptRow("update target list")) { try parse(text) }
    }

    /// The keys' list (`hex,hex,...`): the database sends NULL for none, so an empty value is corrupt too.
    @Test func parsesAHexList() throws {
        #expect(try UpdateTokenHexList.parse(ByteBuffer(string: "\(hex(1)),ab01,\(hex(2))")) == [hex(1), "ab01", hex(2)])
        #expect(try UpdateTokenHexList.parse(ByteBuffer(string: "ab")) == ["ab"])
    }

    @Test(arguments: ["", ",", "ab,", ",ab", "ab,,cd", "ab cd", "ab ", " ab"])
    func refusesAMalformedHexList(_ text: String) {
        #expect(throws: PostgresStoreError.corruptRow("update token list")) {
            try UpdateTokenHexList.parse(ByteBuffer(string: text))
        }
    }
}
