import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

/// The target list of a durable intent as the SQL stores keep it (``DispatchIntent/encode(_:withUpdateTokens:)``).
@Suite struct IntentTargetsTests {
    @Test func aTargetListWithChannelsAndTheUpdateTokenMarkerRoundTrips() throws {
        let targets: [PushTarget] = [
            .channel("dGVzdC1jaGFubmVsLTAwMQ==", environment: .sandbox, storagePolicy: .noStorage),
            PushTarget(token: "ab" + String(repeating: "0", count: 62), environment: .production),
            .channel("b3RoZXI=", environment: .production, storagePolicy: .mostRecentMessage),
        ]
        for withUpdateTokens in [false, true] {
            let bytes = DispatchIntent.encode(targets, withUpdateTokens: withUpdateTokens)
            let decoded = try #require(DispatchIntent.decodeTargets(bytes))
            #expect(decoded.targets == targets)
            #expect(decoded.withUpdateTokens == withUpdateTokens)
        }
        // A list of tokens alone: no channel entry, no marker.
        let tokensOnly = [PushTarget(token: "cd" + String(repeating: "1", count: 62), environment: .sandbox)]
        #expect(DispatchIntent.decode(DispatchIntent.encode(tokensOnly)) == tokensOnly)
        // A truncated channel entry or an unknown policy is a damaged row, not a guess.
        let bytes = DispatchIntent.encode([targets[0]])
        #expect(DispatchIntent.decodeTargets(Array(bytes.dropLast())) == nil)
        var badPolicy = bytes
        badPolicy[1] = 7
        #expect(DispatchIntent.decodeTargets(badPolicy) == nil)
    }
}
