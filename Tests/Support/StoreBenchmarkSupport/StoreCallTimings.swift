// The steps the SQLite and PostgreSQL store benchmarks share after their own: timed calls
// through `ActivityStore`, the same for both stores.

import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import NIOCore

/// Makes `runs` timed calls (each given its number; it returns what it reached) and prints
/// `label` of the last call's figure with the first call's time and the median of the rest
/// (the one call's time when `runs` is 1).
public func printCallTimes(runs: Int = 4, _ label: (Int) -> String, _ call: (Int) async throws -> Int) async rethrows {
    var times: [Double] = []
    var reached = 0
    for i in 0..<runs {
        let t = monotonic()
        reached = try await call(i)
        times.append(monotonic() - t)
    }
    let warm = times.dropFirst().sorted()
    guard !warm.isEmpty else { return print("\(label(reached)): \(format(times[0] * 1000)) ms") }
    print("\(label(reached)): first \(format(times[0] * 1000)) ms, median \(format(warm[warm.count / 2] * 1000)) ms")
}

/// Step 3: a StartActivity to `all_devices` of BenchAttributes (every push-to-start token
/// the benchmark registered), four times. Step 4: the EndActivity of `activity`, which holds
/// `tokens` update tokens (its live targets read, its update tokens deleted by one write).
public func timeStartsAndEnd(
    of store: any ActivityStore, app: App, ending activity: ActivityKey, tokens: Int, on loop: any EventLoop
) async throws {
    try await printCallTimes({ "StartActivity to all_devices (\($0) push-to-start tokens: read their targets, commit)" }) { i in
        let request = StartActivityRequest(
            appID: app.id, activityID: "start-\(i)", attributesType: "BenchAttributes", attributesJSON: "{}",
            contentStateJSON: "{}", targets: Targets(allDevices: true))
        let outcome = try await store.apply(StartActivity(request, app: app), now: SystemClock().now(), on: loop).get()
        guard case let .accepted(call) = outcome else { fatalError("unexpected outcome \(outcome)") }
        return call.batch.targets.count
    }
    let ending = ChangeActivity(EndActivityRequest(appID: activity.appID, activityID: activity.activityID), app: app)
    try await printCallTimes(runs: 1, { "EndActivity of the \($0)-token activity (targets read, tokens deleted, commit)" }) { _ in
        let ended = try await store.apply(ending, now: SystemClock().now(), on: loop).get()
        guard case let .accepted(call) = ended, call.batch.targets.count == tokens else { fatalError("unexpected end \(ended)") }
        return call.batch.targets.count
    }
}
