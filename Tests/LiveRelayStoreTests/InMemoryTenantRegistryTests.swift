import LiveRelayStore
import Testing

@Suite struct InMemoryTenantRegistryTests {
    @Test(arguments: RegistryBehaviourSuite.all)
    func behaviour(_ behaviour: RegistryBehaviour) async throws {
        try await behaviour.run { InMemoryTenantRegistry() }
    }
}
