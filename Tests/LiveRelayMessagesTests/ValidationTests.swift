import Testing

@testable import LiveRelayMessages

/// Runs validate() and returns the error (nil when valid).
func validationError(_ message: some LiveRelayMessage) -> MessageError? {
    do {
        try message.validate()
        return nil
    } catch {
        return error
    }
}

/// One test per rule: each mutation breaks exactly one rule of a valid fixture.
@Suite struct ValidationTests {
    @Test func fixturesAreValidAndDecodeValidated() throws {
        #expect(validationError(Fixtures.register) == nil)
        #expect(validationError(Fixtures.start) == nil)
        #expect(validationError(Fixtures.update) == nil)
        #expect(validationError(Fixtures.end) == nil)
        // Decoding a request runs validate().
        let bad = RegisterTokenRequest(
            appID: "bad app", kind: .update, token: Fixtures.token, environment: .sandbox,
            activityID: "a")
        let error = expectError(RegisterTokenRequest.self, bad.serializedBytes())
        #expect(error == MessageError(.invalidValue, field: "app_id", detail: "only A-Z, a-z, 0-9, '.', '_' and '-' are allowed"))
        #expect(error?.fieldViolation.field == "app_id")
    }

    // MARK: app_id

    @Test func appIDRequired() {
        var r = Fixtures.register; r.appID = ""
        #expect(validationError(r) == MessageError(.missing, field: "app_id"))
        var s = Fixtures.start; s.appID = nil
        #expect(validationError(s)?.field == "app_id")
    }

    @Test func appIDLength() {
        var r = Fixtures.register; r.appID = String(repeating: "a", count: 129)
        #expect(validationError(r)?.kind == .tooLong(length: 129, max: 128))
        r.appID = String(repeating: "a", count: 128)
        #expect(validationError(r) == nil)
    }

    @Test func appIDCharset() {
        var u = Fixtures.update; u.appID = "com/example"
        #expect(validationError(u)?.kind == .invalidValue)
        #expect(validationError(u)?.field == "app_id")
    }

    // MARK: activity_id

    @Test func activityIDRequiredForUpdateTokens() {
        var r = Fixtures.register; r.kind = .update; r.attributesType = ""
        #expect(validationError(r) == MessageError(.missing, field: "activity_id"))
        var e = Fixtures.end; e.activityID = ""
        #expect(validationError(e) == MessageError(.missing, field: "activity_id"))
    }

    @Test func activityIDLengthAndControls() {
        var s = Fixtures.start; s.activityID = String(repeating: "x", count: 129)
        #expect(validationError(s)?.kind == .tooLong(length: 129, max: 128))
        s.activityID = "a\tb"
        #expect(validationError(s)?.kind == .invalidValue)
        s.activityID = "a\u{85}b"  // C1 control
        #expect(validationError(s)?.field == "activity_id")
        s.activityID = "commande-été"
        #expect(validationError(s) == nil)
    }

    // MARK: tokens

    @Test func tokenRequired() {
        var r = Fixtures.register; r.token = ""
        #expect(validationError(r) == MessageError(.missing, field: "token"))
    }

    @Test func tokenLowercaseHex() {
        var r = Fixtures.register; r.token = Fixtures.token.uppercased()
        #expect(validationError(r) == MessageError(.invalidToken, field: "token", detail: "not lowercase hex"))
        r.token = String(repeating: "g", count: 16)
        #expect(validationError(r)?.kind == .invalidToken)
    }

    @Test func tokenEvenLength() {
        var r = Fixtures.register; r.token = String(repeating: "a", count: 17)
        #expect(validationError(r) == MessageError(.invalidToken, field: "token", detail: "odd length"))
    }

    @Test func tokenLengthBounds() {
        var r = Fixtures.register; r.token = String(repeating: "a", count: 14)
        #expect(validationError(r)?.kind == .invalidToken)
        r.token = String(repeating: "a", count: 514)
        #expect(validationError(r)?.kind == .invalidToken)
        r.token = String(repeating: "a", count: 512)
        #expect(validationError(r) == nil)
        r.token = String(repeating: "a", count: 16)
        #expect(validationError(r) == nil)
    }

    @Test func pushToStartTokensNameTheIndex() {
        var s = Fixtures.start
        s.targets?.pushToStartTokens = [Fixtures.token, Fixtures.token2, Fixtures.token, "ABCDEF0123456789"]
        let error = validationError(s)
        #expect(error?.field == "targets.push_to_start_tokens[3]")
        #expect(error?.description == "targets.push_to_start_tokens[3]: not lowercase hex")
    }

    // MARK: kind, environment

    @Test func kindRequiredAndKnown() {
        var r = Fixtures.register; r.kind = .unspecified
        #expect(validationError(r) == MessageError(.missing, field: "kind"))
        r.kind = .unrecognized(3)
        #expect(validationError(r) == MessageError(.enumOutOfRange(3), field: "kind"))
    }

    @Test func environmentRequiredUnlessRemove() {
        var r = Fixtures.register; r.environment = .unspecified
        #expect(validationError(r) == MessageError(.missing, field: "environment"))
        r.remove = true
        #expect(validationError(r) == nil)
        r.environment = .unrecognized(9)
        #expect(validationError(r) == MessageError(.enumOutOfRange(9), field: "environment"))
    }

    // MARK: attributes_type

    @Test func attributesTypeRequiredForPushToStartAndStart() {
        var r = Fixtures.register; r.attributesType = ""
        #expect(validationError(r) == MessageError(.missing, field: "attributes_type"))
        r.kind = .update; r.activityID = "a1"
        #expect(validationError(r) == nil)
        var s = Fixtures.start; s.attributesType = nil
        #expect(validationError(s) == MessageError(.missing, field: "attributes_type"))
    }

    @Test func attributesTypeIsASwiftTypeName() {
        var s = Fixtures.start
        for bad in ["1Type", "My Type", "Type<T>", ".Type"] {
            s.attributesType = bad
            #expect(validationError(s)?.field == "attributes_type", "\(bad)")
        }
        s.attributesType = String(repeating: "T", count: 129)
        #expect(validationError(s)?.kind == .tooLong(length: 129, max: 128))
        s.attributesType = "_My.Type2"
        #expect(validationError(s) == nil)
    }

    // MARK: lengths of free text

    @Test func externalUserIDLength() {
        var r = Fixtures.register; r.externalUserID = String(repeating: "u", count: 257)
        #expect(validationError(r)?.field == "external_user_id")
        r = Fixtures.register; r.externalUserID = String(repeating: "u", count: 256)
        #expect(validationError(r) == nil)
    }

    /// docs/PROTOCOL.md section 11: a device id is an identifier, at most 128 bytes (counted in bytes, not characters).
    @Test func deviceIDIsAtMost128Bytes() {
        var r = Fixtures.register; r.deviceID = String(repeating: "d", count: 128)
        #expect(validationError(r) == nil)
        r.deviceID = String(repeating: "d", count: 129)
        #expect(validationError(r) == MessageError(.tooLong(length: 129, max: 128), field: "device_id"))
        r.deviceID = String(repeating: "é", count: 65)  // 65 characters, 130 bytes
        #expect(validationError(r) == MessageError(.tooLong(length: 130, max: 128), field: "device_id"))
    }

    @Test func expiresAtNonNegative() {
        var r = Fixtures.register; r.expiresAt = -1
        #expect(validationError(r) == MessageError(.outOfRange, field: "expires_at", detail: "must not be negative"))
    }

    @Test func idempotencyKeyLength() {
        var e = Fixtures.end; e.idempotencyKey = String(repeating: "k", count: 129)
        #expect(validationError(e)?.field == "idempotency_key")
        var s = Fixtures.start; s.idempotencyKey = String(repeating: "k", count: 129)
        #expect(validationError(s)?.kind == .tooLong(length: 129, max: 128))
    }

    @Test func alertTextLength() {
        var s = Fixtures.start; s.alert?.body = String(repeating: "b", count: 1025)
        #expect(validationError(s) == MessageError(.tooLong(length: 1025, max: 1024), field: "alert.body"))
        var alert = Alert(title: String(repeating: "t", count: 1025))
        #expect(validationError(alert)?.field == "title")
        alert.title = String(repeating: "t", count: 1024)
        #expect(validationError(alert) == nil)
    }

    @Test func nulInSwiftBuiltStrings() {
        var r = Fixtures.register; r.deviceID = "dev\u{0}ice"
        #expect(validationError(r) == MessageError(.embeddedNUL, field: "device_id"))
        var e = Fixtures.end; e.alert = Alert(sound: "a\u{0}")
        #expect(validationError(e)?.field == "alert.sound")
        var s = Fixtures.start; s.targets?.externalUserIDs = ["ok", "x\u{0}"]
        #expect(validationError(s)?.field == "targets.external_user_ids[1]")
        #expect(validationError(ErrorDetails(fieldViolations: [FieldViolation(field: "\u{0}")]))?.field == "field_violations[0].field")
        #expect(
            validationError(StartActivityReply(summary: DeliverySummary(unresolved: [UnresolvedTarget(reason: "\u{0}")])))?.field
                == "summary.unresolved[0].reason")
    }

    // MARK: JSON fields

    @Test func attributesJSONRequiredForStart() {
        var s = Fixtures.start; s.attributesJSON = nil
        #expect(validationError(s) == MessageError(.missing, field: "attributes_json"))
    }

    @Test func contentStateRequiredForStartAndUpdate() {
        var s = Fixtures.start; s.contentStateJSON = ""
        #expect(validationError(s) == MessageError(.missing, field: "content_state_json"))
        var u = Fixtures.update; u.contentStateJSON = nil
        #expect(validationError(u) == MessageError(.missing, field: "content_state_json"))
    }

    @Test func contentStateOptionalWhenEnding() {
        var u = Fixtures.update; u.contentStateJSON = nil; u.endActivity = true
        #expect(validationError(u) == nil)
        var e = Fixtures.end; e.contentStateJSON = nil
        #expect(validationError(e) == nil)
        e.contentStateJSON = "[1]"
        #expect(validationError(e) == MessageError(.notJSONObject, field: "content_state_json"))
    }

    @Test func jsonMustBeAnObject() {
        var s = Fixtures.start; s.attributesJSON = #"["a"]"#
        #expect(validationError(s) == MessageError(.notJSONObject, field: "attributes_json"))
        s.attributesJSON = #"{"a":}"#
        #expect(validationError(s)?.kind == .invalidJSON)
        #expect(validationError(s)?.detail.contains("byte 5") == true)
    }

    @Test func jsonSizeLimit() {
        var u = Fixtures.update
        let filler = String(repeating: "x", count: 4096 - 7)
        u.contentStateJSON = #"{"a":""# + filler + #""}"#
        #expect(validationError(u)?.kind == .tooLong(length: 4097, max: 4096))
        u.contentStateJSON = #"{"a":""# + filler.dropLast() + #""}"#
        #expect(validationError(u) == nil)
    }

    // MARK: dates, score, priority

    @Test func datesNonNegative() {
        var s = Fixtures.start; s.staleDate = -1
        #expect(validationError(s)?.field == "stale_date")
        var u = Fixtures.update; u.dismissalDate = -5
        #expect(validationError(u)?.field == "dismissal_date")
        var e = Fixtures.end; e.dismissalDate = .min
        #expect(validationError(e)?.kind == .outOfRange)
    }

    @Test func relevanceScoreFinite() {
        var s = Fixtures.start; s.relevanceScore = .nan
        #expect(validationError(s)?.field == "relevance_score")
        var u = Fixtures.update; u.relevanceScore = .infinity
        #expect(validationError(u) == MessageError(.outOfRange, field: "relevance_score", detail: "must be finite"))
    }

    @Test func priorityKnown() {
        var s = Fixtures.start; s.priority = .unrecognized(7)
        #expect(validationError(s) == MessageError(.enumOutOfRange(7), field: "priority"))
        var e = Fixtures.end; e.priority = .unspecified
        #expect(validationError(e) == nil)
        e.priority = Priority(rawValue: 1)
        #expect(validationError(e)?.kind == .enumOutOfRange(1))
    }

    // MARK: targets

    @Test func targetsRequiredWithAtLeastOneSet() {
        var s = Fixtures.start; s.targets = nil
        #expect(validationError(s) == MessageError(.missing, field: "targets"))
        s.targets = Targets(allDevices: false)
        #expect(validationError(s)?.field == "targets")
        s.targets = Targets(allDevices: true)
        #expect(validationError(s) == nil)
        s.targets = Targets(externalUserIDs: ["u"])
        #expect(validationError(s) == nil)
    }

    @Test func targetsCounts() {
        var s = Fixtures.start
        s.targets = Targets(pushToStartTokens: Array(repeating: Fixtures.token, count: 1001))
        #expect(validationError(s) == MessageError(.tooMany(count: 1001, max: 1000), field: "targets.push_to_start_tokens"))
        s.targets = Targets(externalUserIDs: Array(repeating: "u", count: 1001))
        #expect(validationError(s)?.kind == .tooMany(count: 1001, max: 1000))
        s.targets = Targets(
            pushToStartTokens: Array(repeating: Fixtures.token, count: 1000),
            externalUserIDs: Array(repeating: "u", count: 1000))
        #expect(validationError(s) == nil)
    }

    @Test func externalUserIDsLength() {
        var s = Fixtures.start
        s.targets = Targets(externalUserIDs: ["a", ""])
        #expect(validationError(s)?.field == "targets.external_user_ids[1]")
        s.targets = Targets(externalUserIDs: [String(repeating: "u", count: 257)])
        #expect(validationError(s) == MessageError(.tooLong(length: 257, max: 256), field: "targets.external_user_ids[0]"))
    }

    @Test func errorDescriptions() {
        #expect(MessageError(.missing, field: "app_id").description == "app_id: required")
        #expect(MessageError(.tooLarge(size: 5, limit: 4)).description == "message of 5 bytes exceeds the limit of 4 bytes")
        let violation = MessageError(.invalidToken, field: "token", detail: "odd length").fieldViolation
        #expect(violation == FieldViolation(field: "token", description: "odd length"))
    }
}
