import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

@Suite struct InMemoryStoreTests {
    @Test(arguments: StoreBehaviourSuite.all)
    func behaviour(_ behaviour: StoreBehaviour) async throws {
        try await behaviour.run { InMemoryActivityStore() }
    }

    @Test func theSnapshotIsACopy() async throws {
        let store = InMemoryActivityStore()
        let before = store.snapshot
        _ = try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1))))
        #expect(before.tokenCount == 0)
        #expect(store.snapshot.tokenCount == 1)
    }
}
