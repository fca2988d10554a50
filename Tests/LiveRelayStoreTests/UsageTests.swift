import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

/// Live activities counted in slices (as the memory store counts them, letting
/// go of its lock between slices) add up to the one-pass count, per app.
@Suite struct UsageTests {
    @Test(arguments: [1, 5, 64, Int.max])
    func slicedCountsMatchTheWholeScan(limit: Int) throws {
        var state = InMemoryState()
        let other = App(id: "com.example.other", bundleID: "com.example.other")
        for i in 0..<20 { _ = try state.apply(StartActivity(start("order-\(i)"), app: app), now: t0) }
        for i in 0..<7 {
            var request = start("other-\(i)")
            request.appID = other.id
            _ = try state.apply(StartActivity(request, app: other), now: t0 + .hours(4))
        }
        // Ended activities are not live; neither are those past their 8 hours (the first 20 at t0 + 9 h).
        for i in 0..<5 { _ = try state.apply(ChangeActivity(endRequest("order-\(i)"), app: app), now: t0) }
        for now in [t0 + .hours(1), t0 + .hours(9)] {
            var counts = [app.id: 0, other.id: 0]
            var next: Int? = 0
            while let start = next { next = state.countLiveActivities(of: &counts, at: now, from: start, limit: limit) }
            #expect(counts[app.id] == state.usage(of: app.id, at: now).liveActivities)
            #expect(counts[other.id] == state.usage(of: other.id, at: now).liveActivities)
            #expect(counts[app.id] == (now == t0 + .hours(1) ? 15 : 0))
            #expect(counts[other.id] == 7)
        }
    }

    @Test func anAppNotAskedForIsNotCounted() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        var counts = ["com.example.unknown": 0]
        #expect(state.countLiveActivities(of: &counts, at: t0, from: 0, limit: .max) == nil)
        #expect(counts == ["com.example.unknown": 0])
    }
}
