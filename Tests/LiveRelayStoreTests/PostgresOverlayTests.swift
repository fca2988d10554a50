import LiveRelayAPNs
import LiveRelayDomain
import Testing

@testable import LiveRelayStorePostgres

/// The fan-out's narrow read in a PostgreSQL batch: database rows merged with
/// the batch's earlier writes, like the full token reads (no database needed).
@Suite struct PostgresOverlayTests {
    func token(_ hex: String, activity: String = "order-1", expiresAt: UnixTime? = nil) -> Token {
        Token(
            kind: .update, hex: hex, environment: .production, appID: appID, activityID: activity, deviceID: hex,
            createdAt: t0, updatedAt: t0, expiresAt: expiresAt)
    }

    @Test func targetsSeeTheBatchsWrites() {
        let rows = [
            UpdateTargetRow(hex: hex(1), environment: .sandbox, expiresAt: nil),
            UpdateTargetRow(hex: hex(2), environment: .sandbox, expiresAt: nil),
            UpdateTargetRow(hex: hex(3), environment: .sandbox, expiresAt: (t0 + .seconds(10)).milliseconds),
        ]
        var overlay = PostgresOverlay()
        #expect(overlay.merge(rows, of: order1, at: t0).map(\.token) == [hex(1), hex(2), hex(3)])
        #expect(overlay.merge(rows, of: order1, at: t0 + .seconds(10)).map(\.token) == [hex(1), hex(2)])

        overlay.apply(.deleteToken(TokenKey(appID: appID, hex: hex(1))))
        overlay.apply(.putToken(token(hex(2))))  // rewritten: production now
        overlay.apply(.putToken(token(hex(4))))  // new in this batch
        overlay.apply(.putToken(token(hex(5), expiresAt: t0)))  // new but already expired
        overlay.apply(.putToken(token(hex(6), activity: "order-2")))  // another activity
        let merged = overlay.merge(rows, of: order1, at: t0 + .seconds(1))
        #expect(Set(merged.map(\.token)) == [hex(2), hex(3), hex(4)])
        #expect(merged.count == 3)
        #expect(merged.first { $0.token == hex(2) }?.environment == .production)
    }

    /// The sweep's bounded read: the database is asked for the limit plus what
    /// the batch changed, and answers as the batch left the tokens.
    @Test func theSweepsBoundedReadSeesTheBatchsWrites() {
        let reader = PostgresStateReader()
        reader.overlay.apply(.deleteToken(TokenKey(appID: appID, hex: hex(1))))
        reader.overlay.apply(.putToken(token(hex(4))))  // new in this batch
        reader.overlay.apply(.putToken(token(hex(6), activity: "order-2")))  // another activity
        reader.beginPlan()
        #expect(reader.updateTokenKeys(of: order1, limit: 2).isEmpty)
        #expect(reader.misses == [.updateTokenHexes(order1, limit: 5)])
        reader.fill([
            .updateTokenHexes(order1, limit: 5): .hexes([hex(1), hex(2), hex(3)]),
            .updateTokenHexes(order1, limit: 6): .hexes([hex(1), hex(2), hex(3)]),
        ])
        reader.beginPlan()
        #expect(reader.updateTokenKeys(of: order1, limit: 2).map(\.hex) == [hex(2), hex(3)])
        #expect(Set(reader.updateTokenKeys(of: order1, limit: 3).map(\.hex)) == [hex(2), hex(3), hex(4)])
        #expect(reader.misses.isEmpty)
    }
}
