// memory-store-benchmark --shape isolation [--tokens 100000] [--seconds 10] [--during update|sweep]
//
// What one app's large calls cost another app's calls inside the store (docs/BENCHMARKS.md,
// "Fan-out isolation"): big.app has one activity with --tokens update tokens, and a thread
// sends it UpdateActivity calls back to back (each reads every token's target under the
// store's lock); meanwhile another thread registers new tokens of small.app one after the
// other. Prints big.app's call times and small.app's latency percentiles. No network and no
// event loop in the figures: the store's `apply`, called from two threads, on 2 cores.
//
// With `--during sweep` ("Sweeps and claims app by app") the first thread instead runs the
// expiry sweep 33 hours later (past the activity's 8 hours and the 24 hours' retention),
// pass after pass of the store's `sweepLimit` until one finds nothing: big.app's activity
// expires, its tokens are deleted, `sweepLimit` per pass, and it is purged. --seconds is
// then unused: small.app registers from before the first pass until the last is answered.

import Dispatch
import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import StoreBenchmarkSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Latencies of one thread's calls, in seconds.
final class Latencies: @unchecked Sendable {
    var seconds: [Double] = []

    var summary: String {
        let sorted = seconds.sorted()
        let us = { (p: Double) in Int(percentile(sorted, p) * 1e6) }
        return "\(sorted.count) calls, p50 \(us(0.5)) µs, p99 \(us(0.99)) µs, p99.9 \(us(0.999)) µs, "
            + "max \(format((sorted.last ?? 0) * 1e3, 2)) ms, over 1 ms: \(sorted.filter { $0 > 0.001 }.count)"
    }
}

func measureIsolation(tokens: Int) async throws {
    let seconds = Double(option("--seconds", "10"))!
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    let store: any ActivityStore = InMemoryActivityStore()
    let now = UnixTime(seconds: 1_700_000_000)
    let big = App(id: "big.app", bundleID: "big.app")
    let start = StartActivityRequest(
        appID: big.id, activityID: "big", attributesType: "DeliveryAttributes", attributesJSON: #"{"orderID":"A1"}"#,
        contentStateJSON: #"{"status":"placed"}"#, alert: Alert(title: "Order placed"), targets: Targets(allDevices: true))
    _ = try await store.apply(StartActivity(start, app: big), now: now, on: loop).get()
    for i in 0..<tokens {
        let request = RegisterTokenRequest(
            appID: big.id, kind: .update, token: hexToken("b", i), environment: .production, activityID: "big", deviceID: "d\(i)")
        _ = try await store.apply(RegisterToken(request), now: now, on: loop).get()
    }

    let sweeping = option("--during", "update") == "sweep"
    if sweeping {
        // small.app is in the store before the passes, so a pass that locks every app locks it too.
        let first = RegisterTokenRequest(
            appID: "small.app", kind: .pushToStart, token: hexToken("6", 0), environment: .production,
            attributesType: "DeliveryAttributes", deviceID: "s")
        _ = try await store.apply(RegisterToken(first), now: now, on: loop).get()
    }

    let bigCalls = Latencies()
    let smallCalls = Latencies()
    let done = DispatchGroup()
    let end = monotonic() + seconds
    let swept = NIOLockedValueBox(false)
    let registering = DispatchSemaphore(value: 0)
    DispatchQueue.global().async(group: done) {
        if sweeping {
            defer { swept.withLockedValue { $0 = true } }
            // The passes start once small.app's calls are under way, so every pass has them beside it.
            registering.wait()
            var deleted = 0
            while true {
                let before = monotonic()
                let report = try! store.apply(Sweep(limit: store.sweepLimit), now: now + .seconds(33 * 3600), on: loop).wait()
                bigCalls.seconds.append(monotonic() - before)
                deleted += report.deletedTokens.count
                if report.isEmpty { break }
            }
            precondition(deleted == tokens, "the passes deleted \(deleted) of \(tokens) tokens")
            return
        }
        var n = 0
        while monotonic() < end {
            n += 1
            let update = UpdateActivityRequest(appID: big.id, activityID: "big", contentStateJSON: #"{"status":"\#(n)"}"#)
            let before = monotonic()
            let outcome = try! store.apply(ChangeActivity(update, app: big), now: now + .seconds(Int64(n)), on: loop).wait()
            bigCalls.seconds.append(monotonic() - before)
            precondition(outcome.accepted?.batch.targets.count == tokens)
        }
    }
    DispatchQueue.global().async(group: done) {
        var n = 0
        while sweeping ? !swept.withLockedValue({ $0 }) : monotonic() < end {
            if n == 100 { registering.signal() }
            let request = RegisterTokenRequest(
                appID: "small.app", kind: .pushToStart, token: hexToken("5", n), environment: .production,
                attributesType: "DeliveryAttributes", deviceID: "s\(n)")
            n += 1
            let before = monotonic()
            _ = try! store.apply(RegisterToken(request), now: now, on: loop).wait()
            // With --during sweep the first 100 calls only warm up; they come before the passes.
            if !sweeping || n > 100 { smallCalls.seconds.append(monotonic() - before) }
        }
    }
    done.wait()
    if sweeping {
        print("memory store, \(tokens) update tokens of big.app's activity, swept 33 hours later")
        print("the sweep's passes of \(store.sweepLimit): \(bigCalls.summary)")
    } else {
        print("memory store, \(tokens) update tokens of big.app's activity, \(seconds) s")
        print("big.app's UpdateActivity: \(bigCalls.summary)")
    }
    print("small.app's RegisterToken meanwhile: \(smallCalls.summary)")
    try await store.close()
}
