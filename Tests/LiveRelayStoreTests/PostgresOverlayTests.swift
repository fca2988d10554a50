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

    /// Rows as the database answered them: the third expires 10 s after `t0`.
    let rows = [
        TargetRow(hex: hex(1), environment: .sandbox, expiresAt: nil),
        TargetRow(hex: hex(2), environment: .sandbox, expiresAt: nil),
        TargetRow(hex: hex(3), environment: .sandbox, expiresAt: (t0 + .seconds(10)).milliseconds),
    ]

    @Test func targetsSeeTheBatchsWrites() {
        let reader = PostgresStateReader()
        reader.fill([.updateTargets(order1): .targets(rows)])
        #expect(reader.updateTargets(of: order1, at: t0).map(\.token) == [hex(1), hex(2), hex(3)])
        #expect(reader.updateTargets(of: order1, at: t0 + .seconds(10)).map(\.token) == [hex(1), hex(2)])

        reader.overlay.apply(.deleteToken(TokenKey(appID: appID, hex: hex(1))))
        reader.overlay.apply(.putToken(token(hex(2))))  // rewritten: production now
        reader.overlay.apply(.putToken(token(hex(4))))  // new in this batch
        reader.overlay.apply(.putToken(token(hex(5), expiresAt: t0)))  // new but already expired
        reader.overlay.apply(.putToken(token(hex(6), activity: "order-2")))  // another activity
        reader.overlay.apply(.putToken(pushToStart(hex(7))))  // not an update token
        let merged = reader.updateTargets(of: order1, at: t0 + .seconds(1))
        #expect(Set(merged.map(\.token)) == [hex(2), hex(3), hex(4)])
        #expect(merged.count == 3)
        #expect(merged.first { $0.token == hex(2) }?.environment == .production)
        #expect(reader.misses.isEmpty)
    }

    func pushToStart(_ hex: String, type: String = "DeliveryAttributes", app: String = appID) -> Token {
        Token(
            kind: .pushToStart, hex: hex, environment: .production, appID: app, attributesType: type, deviceID: hex,
            createdAt: t0, updatedAt: t0)
    }

    /// A start to `all_devices` reads the type's targets narrowly, merged with the
    /// batch's writes as an update's are: only the app's live tokens of that type.
    @Test func startTargetsSeeTheBatchsWrites() {
        let reader = PostgresStateReader()
        let ofType = ReadKey.pushToStartTargets(appID: appID, attributesType: "DeliveryAttributes")
        reader.beginPlan()
        #expect(reader.pushToStartTargets(appID: appID, attributesType: "DeliveryAttributes", at: t0).isEmpty)
        #expect(reader.misses == [ofType])
        reader.fill([ofType: .targets(rows)])
        reader.beginPlan()
        #expect(reader.pushToStartTargets(appID: appID, attributesType: "DeliveryAttributes", at: t0 + .seconds(10)).count == 2)

        reader.overlay.apply(.deleteToken(TokenKey(appID: appID, hex: hex(2))))
        reader.overlay.apply(.putToken(pushToStart(hex(4))))  // new in this batch
        reader.overlay.apply(.putToken(pushToStart(hex(5), type: "FlightAttributes")))  // another type
        reader.overlay.apply(.putToken(pushToStart(hex(6), app: "other.app")))  // another app
        reader.overlay.apply(.putToken(token(hex(8))))  // an update token
        let merged = reader.pushToStartTargets(appID: appID, attributesType: "DeliveryAttributes", at: t0 + .seconds(1))
        #expect(merged.map(\.token) == [hex(1), hex(3), hex(4)])
        #expect(merged.map(\.environment) == [.sandbox, .sandbox, .production])
        #expect(reader.misses.isEmpty)
    }

    /// An end deletes the activity's update tokens with one write: every later read of the
    /// batch answers as if the database's rows of them were gone, while tokens put after it,
    /// other activities' tokens and push-to-start tokens stay.
    @Test func anEndsDeletionHidesTheActivitysRowsFromLaterReads() throws {
        let reader = PostgresStateReader()
        let inDatabase = token(hex(1))
        let slot = try #require(inDatabase.slot)
        let other = token(hex(6), activity: "order-2")
        reader.fill([
            .updateTargets(order1): .targets(rows),
            .token(inDatabase.key): .token(inDatabase),
            .slot(slot): .token(inDatabase),
            .updateTokens(order1): .tokens([inDatabase]),
            .token(other.key): .token(other),
        ])
        reader.overlay.apply(.putToken(token(hex(4))))  // put before the end: deleted with the rest
        reader.overlay.apply(.deleteUpdateTokens(of: order1))
        reader.beginPlan()
        #expect(reader.token(inDatabase.key) == nil)
        #expect(reader.token(in: slot) == nil)
        #expect(reader.token(TokenKey(appID: appID, hex: hex(4))) == nil)
        #expect(reader.updateTokens(of: order1).isEmpty)
        #expect(reader.updateTargets(of: order1, at: t0).isEmpty)
        #expect(reader.updateTokenKeys(of: order1, limit: 10).isEmpty)
        #expect(reader.token(other.key) == other, "another activity's token stays")
        #expect(reader.misses.isEmpty, "nothing of the ended activity is asked of the database")

        reader.overlay.apply(.putToken(token(hex(5))))  // registered again after the end
        #expect(reader.updateTargets(of: order1, at: t0).map(\.token) == [hex(5)])
        #expect(reader.updateTokenKeys(of: order1, limit: 10).map(\.hex) == [hex(5)])
        #expect(reader.updateTokens(of: order1).map(\.hex) == [hex(5)])
        #expect(reader.overlay.tokens[TokenKey(appID: appID, hex: hex(4))] == .some(nil), "deleted by key as well")
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
