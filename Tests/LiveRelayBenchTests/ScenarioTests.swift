import Foundation
import LiveRelayBench
import Testing

@Suite("Scenario files and flags")
struct ScenarioTests {
    private func parse(_ json: String) throws(ScenarioError) -> Scenario {
        try ScenarioSpec(json: Data(json.utf8), source: "s.json").resolve()
    }

    /// The error's text, so tests can check it says where and what.
    private func message(_ json: String) -> String {
        do {
            _ = try parse(json)
            return "no error"
        } catch {
            return error.description
        }
    }

    @Test func aCompleteFileResolvesToEveryField() throws {
        let s = try parse(
            """
            {"name": "fanout", "mode": "open", "rate": 2500, "connections": 8, "max_outstanding": 500,
             "mix": {"UpdateActivity": 4, "RegisterToken": 1, "ping": 1}, "apps": 3, "app_id": "com.example",
             "activities_per_app": 10, "tokens_per_activity": 5, "content_state_bytes": 512,
             "requests": 10000, "warmup_seconds": 0.5, "timeout_seconds": 3}
            """)
        #expect(s.name == "fanout")
        #expect(s.shape == .open(rate: 2500, connections: 8, maxOutstanding: 500))
        #expect(s.mix == [MixEntry(.registerToken, 1), MixEntry(.updateActivity, 4), MixEntry(.ping, 1)])
        #expect(s.appIDs == ["com.example-1", "com.example-2", "com.example-3"])
        #expect(s.activitiesPerApp == 10)
        #expect(s.tokensPerActivity == 5)
        #expect(s.contentStateBytes == 512)
        #expect(s.stop == .requests(10000))
        #expect(s.warmupSeconds == 0.5)
        #expect(s.timeoutSeconds == 3)
    }

    @Test func waitForDeliveryIsABooleanThatFlagsOverride() throws {
        #expect(try parse("{}").waitForDelivery == false)
        #expect(try parse(#"{"wait_for_delivery": true}"#).waitForDelivery == true)
        #expect(message(#"{"wait_for_delivery": 1}"#).contains("\"wait_for_delivery\" must be true or false, got 1"))
        var flags = ScenarioSpec()
        flags.waitForDelivery = false
        let file = try ScenarioSpec(json: Data(#"{"wait_for_delivery": true}"#.utf8), source: "s.json")
        #expect(try file.overridden(by: flags).resolve().waitForDelivery == false)
        #expect(try file.overridden(by: ScenarioSpec()).resolve().waitForDelivery == true)
    }

    @Test func defaultsAreClosedLoopRegisterTokenForTenSeconds() throws {
        let s = try parse("{}")
        #expect(s.shape == .closed(connections: 4, depth: 32))
        #expect(s.mix == [MixEntry(.registerToken, 1)])
        #expect(s.stop == .duration(seconds: 10))
        #expect(s.appIDs == ["dev.app"])
    }

    @Test func aRateAloneMeansOpenLoop() throws {
        #expect(try parse(#"{"rate": 100}"#).shape == .open(rate: 100, connections: 4, maxOutstanding: 10_000))
    }

    @Test func unknownKeysAreNamedWithTheKnownOnes() {
        let m = message(#"{"duraton_seconds": 5}"#)
        #expect(m.contains("s.json"))
        #expect(m.contains("unknown key \"duraton_seconds\""))
        #expect(m.contains("duration_seconds"))
    }

    @Test func wrongTypesSayWhatWasGiven() {
        #expect(message(#"{"rate": "fast"}"#).contains("\"rate\" must be a number, got the string \"fast\""))
        #expect(message(#"{"connections": true}"#).contains("\"connections\" must be a number, got a boolean"))
        #expect(message(#"{"depth": 2.5}"#).contains("\"depth\" must be a whole number"))
        #expect(message(#"{"mix": ["Ping"]}"#).contains("\"mix\" must be an object of RPC name to weight"))
        #expect(message(#"[1, 2]"#).contains("expected a JSON object"))
        #expect(message(#"{"rate": 1"#).contains("not valid JSON"))
    }

    @Test func unknownRPCsListTheValidNames() {
        let m = message(#"{"mix": {"Update": 1, "Subscribe": 2}}"#)
        #expect(m.contains("unknown RPC \"Subscribe\""))
        #expect(m.contains("RegisterToken, StartActivity, UpdateActivity, EndActivity, Ping"))
    }

    @Test func contradictionsAndRangesAreRefused() {
        #expect(message(#"{"duration_seconds": 5, "requests": 10}"#).contains("either a duration or a request count"))
        #expect(message(#"{"mode": "open"}"#).contains("open-loop mode needs a rate"))
        #expect(message(#"{"mode": "closed", "rate": 10}"#).contains("rate applies to open-loop mode only"))
        #expect(message(#"{"rate": 10, "depth": 4}"#).contains("depth applies to closed-loop mode only"))
        #expect(message(#"{"mode": "sideways"}"#).contains("must be \"open\" or \"closed\""))
        #expect(message(#"{"rate": -5}"#).contains("rate must be > 0"))
        #expect(message(#"{"content_state_bytes": 5000}"#).contains("content_state_bytes must be 32...4096"))
        #expect(message(#"{"mix": {"Ping": 0}}"#).contains("every weight is 0"))
        #expect(message(#"{"mix": {"UpdateActivity": 1}, "tokens_per_activity": 0}"#).contains("no activity to update"))
        #expect(message(#"{"app_id": "bad app"}"#).contains("app_id must be"))
    }

    @Test func flagsOverrideTheFile() throws {
        let file = try ScenarioSpec(json: Data(#"{"rate": 100, "duration_seconds": 30, "connections": 2}"#.utf8), source: "f")
        var flags = ScenarioSpec()
        flags.requests = 500
        flags.connections = 6
        let s = try file.overridden(by: flags).resolve()
        #expect(s.shape == .open(rate: 100, connections: 6, maxOutstanding: 10_000))
        #expect(s.stop == .requests(500))
    }

    @Test func mixFlagTakesShortNamesAndDefaultWeights() throws {
        #expect(
            try ScenarioSpec.parseMix("update=4, register=1,ping") == [
                MixEntry(.registerToken, 1), MixEntry(.updateActivity, 4), MixEntry(.ping, 1),
            ])
        #expect(throws: ScenarioError.self) { try ScenarioSpec.parseMix("update=lots") }
        #expect(throws: ScenarioError.self) { try ScenarioSpec.parseMix("ping,ping") }
        do {
            _ = try ScenarioSpec.parseMix("subscribe=1")
            Issue.record("expected an error")
        } catch {
            #expect(error.description.contains("--mix: unknown RPC \"subscribe\""))
        }
    }
}
