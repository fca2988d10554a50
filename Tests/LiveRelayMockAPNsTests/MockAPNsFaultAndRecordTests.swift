import LiveRelayAPNs
import Testing

@testable import LiveRelayMockAPNs

@Suite("Fault plan, connection policy, JSON reader, records")
struct MockAPNsFaultAndRecordTests {
    let ok = MockAPNsVerdict(status: 200, apnsID: "id", providerTokenAccepted: true)

    @Test("the same seed injects the same errors in the same places")
    func deterministic() {
        let errors = [
            MockAPNsInjectedError(reason: "TooManyRequests", rate: 0.2),
            MockAPNsInjectedError(reason: "InternalServerError", rate: 0.1),
        ]
        var a = MockAPNsFaultPlan(injectedErrors: errors, latency: .none, seed: 42)
        var b = MockAPNsFaultPlan(injectedErrors: errors, latency: .none, seed: 42)
        var c = MockAPNsFaultPlan(injectedErrors: errors, latency: .none, seed: 43)
        let runA = (0..<200).map { _ in a.apply(to: ok).status }
        let runB = (0..<200).map { _ in b.apply(to: ok).status }
        let runC = (0..<200).map { _ in c.apply(to: ok).status }
        #expect(runA == runB)
        #expect(runA != runC)
        #expect(Set(runA) == [200, 429, 500])
    }

    @Test("rates hold over many draws, with APNs's status per reason")
    func rates() {
        var plan = MockAPNsFaultPlan(
            injectedErrors: [MockAPNsInjectedError(reason: "ServiceUnavailable", rate: 0.25)],
            latency: .none, seed: 7)
        let verdicts = (0..<20_000).map { _ in plan.apply(to: ok) }
        let injected = verdicts.filter { $0.status == 503 }
        #expect((4_600...5_400).contains(injected.count))
        #expect(injected.allSatisfy { $0.reason == "ServiceUnavailable" && $0.apnsID == "id" })
        #expect(injected.first?.responseBody == Array(#"{"reason":"ServiceUnavailable"}"#.utf8))
    }

    @Test("rate 1 always fires, rate 0 never, and a refused request is never replaced")
    func edges() {
        var always = MockAPNsFaultPlan(injectedErrors: [MockAPNsInjectedError(reason: "Shutdown", rate: 1)], latency: .none, seed: 1)
        #expect((0..<100).allSatisfy { _ in always.apply(to: ok).status == 503 })
        let refused = MockAPNsVerdict(status: 400, reason: "BadTopic", apnsID: "id")
        #expect(always.apply(to: refused) == refused)
        var never = MockAPNsFaultPlan(injectedErrors: [MockAPNsInjectedError(reason: "Shutdown", rate: 0)], latency: .none, seed: 1)
        #expect((0..<100).allSatisfy { _ in never.apply(to: ok).status == 200 })
        #expect(MockAPNsInjectedError(reason: "X", rate: 7).rate == 1)
        #expect(MockAPNsInjectedError(reason: "Forbidden", rate: 0.5).status == 403)
        #expect(MockAPNsInjectedError(reason: "Forbidden", status: 418, rate: 0.5).status == 418)
    }

    @Test("latency is the fixed part plus a draw within the random range")
    func latency() {
        var plan = MockAPNsFaultPlan(
            injectedErrors: [],
            latency: MockAPNsLatency(
                fixed: .milliseconds(5),
                random: .milliseconds(1) ... .milliseconds(3)), seed: 9)
        let delays = (0..<1000).map { _ in plan.nextDelay() }
        #expect(delays.allSatisfy { $0 >= .milliseconds(6) && $0 <= .milliseconds(8) })
        #expect(Set(delays).count > 100)
        #expect(plan.hasLatency)
        var none = MockAPNsFaultPlan(injectedErrors: [], latency: .none, seed: 9)
        #expect(none.nextDelay() == .zero && !none.hasLatency)
    }

    @Test("GOAWAY on the N-th stream; a drop once the limit is passed")
    func policy() {
        let goAway = MockAPNsConnectionPolicy(goAwayAfterStreams: 3, dropConnectionAfterStreams: nil)
        #expect((1...5).map { goAway.action(forStreamNumber: $0) } == [.serve, .serve, .serveThenGoAway, .serve, .serve])
        let drop = MockAPNsConnectionPolicy(goAwayAfterStreams: nil, dropConnectionAfterStreams: 2)
        #expect((1...4).map { drop.action(forStreamNumber: $0) } == [.serve, .serve, .drop, .drop])
        let dropFirst = MockAPNsConnectionPolicy(goAwayAfterStreams: 1, dropConnectionAfterStreams: 0)
        #expect(dropFirst.action(forStreamNumber: 1) == .drop)
    }

    @Test("the JSON reader keeps number text, decodes escapes and refuses what RFC 8259 refuses")
    func json() throws {
        let value = try JSONValue.parse(Array(#" {"a":[1,-0.5e3,true,false,null],"s":"\u00e9\ud83d\ude00\n\"","i":-12} "#.utf8))
        #expect(value["i"]?.integerValue == -12)
        #expect(value["s"]?.stringValue == "é😀\n\"")
        #expect(value["a"] == .array([.number("1"), .number("-0.5e3"), .bool(true), .bool(false), .null]))
        #expect(JSONValue.number("1e3").integerValue == nil)
        #expect(JSONValue.number("99999999999999999999").integerValue == nil)
        for bad in ["", "{", "{\"a\":}", "[1,]", "01", "1.", "\"\\x\"", "\"\u{01}\"", "\"\\ud800\"", "{} x", "tru", "{\"a\" 1}"] {
            #expect(throws: JSONValue.ParseError.self, "\(bad)") { try JSONValue.parse(Array(bad.utf8)) }
        }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array(deep.utf8)) }
    }

    @Test("a JSON line keeps headers and body but not the JWT's signature")
    func jsonLine() {
        let record = MockAPNsRecord(
            path: "/3/device/abcd", method: "POST",
            headers: [("authorization", "bearer eyJh.eyJp.SIGNATURE"), ("apns-topic", "t\"q")],
            body: Array(#"{"aps":{}}"#.utf8), status: 410, reason: "Unregistered", apnsID: "x",
            connection: 2, streamID: 5, receivedAtMilliseconds: 12)
        let line = record.jsonLine
        #expect(!line.contains("SIGNATURE"))
        #expect(line.contains(#"["authorization","bearer eyJh.eyJp.<redacted>"]"#))
        #expect(line.contains(#"["apns-topic","t\"q"]"#))
        #expect(line.contains(#""body":"{\"aps\":{}}""#))
        #expect(
            line.hasPrefix(
                #"{"connection":2,"stream":5,"received_ms":12,"method":"POST","path":"/3/device/abcd","status":410,"reason":"Unregistered""#
            ))
        #expect(record.deviceToken == "abcd")
    }

    @Test("the recorder keeps the most recent records up to its capacity and counts the rest")
    func recorderBound() throws {
        let recorder = try MockAPNsRecorder(capacity: 3, recordFile: nil)
        for i in 1...5 {
            recorder.record(
                MockAPNsRecord(
                    path: "/\(i)", method: "POST", headers: [], body: [], status: i == 5 ? 0 : 200,
                    reason: nil, apnsID: nil, connection: 1, streamID: i, receivedAtMilliseconds: 0))
        }
        #expect(recorder.records.map(\.streamID) == [3, 4, 5])
        #expect(recorder.counters.recordsDiscarded == 2)
        #expect(recorder.counters.streamsReceived == 5)
        #expect(recorder.counters.responsesByStatus == [200: 4])
        recorder.reset()
        #expect(recorder.records.isEmpty && recorder.counters == MockAPNsCounters())
    }

    @Test("generated apns-ids are lowercase version 4 UUIDs")
    func uuid() {
        let ids = (0..<50).map { _ in MockAPNsIDs.randomUUID() }
        #expect(ids.allSatisfy { MockAPNsValidator.isUUID($0) && $0 == $0.lowercased() && Array($0)[14] == "4" })
        #expect(ids.allSatisfy { "89ab".contains(Array($0)[19]) })  // the RFC 4122 variant
        #expect(Set(ids).count == 50)
        var generator = MockAPNsIDs.Generator()
        let drawn = (0..<1000).map { _ in MockAPNsIDs.randomUUID(using: &generator) }
        #expect(drawn.allSatisfy { MockAPNsValidator.isUUID($0) && Array($0)[14] == "4" && "89ab".contains(Array($0)[19]) })
        #expect(Set(drawn).count == 1000)
        var other = MockAPNsIDs.Generator()
        #expect(MockAPNsIDs.randomUUID(using: &other) != drawn[0])  // seeded per connection, not fixed
    }
}
