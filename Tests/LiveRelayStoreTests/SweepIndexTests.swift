import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

/// `activitiesDue` through the minute index answers what a scan of every
/// activity answers: the earliest sweep deadlines first, as the SQL stores do.
@Suite struct SweepIndexTests {
    @Test func dueActivitiesMatchAScanThroughStartsEndsAndSweeps() throws {
        var state = InMemoryState()
        var keys: [ActivityKey] = []
        for i in 0..<300 {
            let at = t0 + .seconds(Int64(i) * 17)
            _ = try state.apply(StartActivity(start("a-\(i)"), app: app), now: at)
            keys.append(ActivityKey(appID: app.id, activityID: "a-\(i)"))
            if i % 5 == 0 { _ = try state.apply(ChangeActivity(endRequest("a-\(i)"), app: app), now: at + .seconds(30)) }
        }
        func expectScanAnswer(at now: UnixTime, limit: Int, _ comment: Comment) {
            let all = keys.compactMap { state.activity($0) }.filter { $0.sweepDeadline <= now }
            let expected = all.map(\.sweepDeadline).sorted().prefix(limit)
            let due = state.activitiesDue(at: now, limit: limit)
            #expect(due.map(\.sweepDeadline) == Array(expected), comment)
            #expect(Set(due.map(\.key)).isSubset(of: Set(all.map(\.key))), comment)
        }
        let times: [UnixTime] = [t0, t0 + .minutes(20), t0 + .hours(8) + .minutes(30), t0 + .hours(10), t0 + .hours(200)]
        for now in times {
            for limit in [1, 7, 1_000] { expectScanAnswer(at: now, limit: limit, "at \(now), limit \(limit)") }
        }
        // Sweeps change states (expired, dismissed) and so move deadlines; purges delete.
        for now in times {
            while try !state.apply(Sweep(limit: 50), now: now).isEmpty {}
            for limit in [1, 7, 1_000] { expectScanAnswer(at: now, limit: limit, "after sweeping at \(now), limit \(limit)") }
            #expect(state.activitiesDue(at: now, limit: 1_000).isEmpty)
        }
        #expect(state.activityCount == 0, "everything was purged after its retention")
    }
}
