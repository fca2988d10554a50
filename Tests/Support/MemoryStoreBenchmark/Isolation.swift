// memory-store-benchmark --shape isolation [--tokens 100000] [--seconds 10] [--store memory|journal] [--dir /var/tmp]
//
// What one app's large calls cost another app's calls inside the store (docs/BENCHMARKS.md,
// "One lock per app"): big.app has one activity with --tokens update tokens, and a thread
// sends it UpdateActivity calls back to back (each reads every token's target under the
// store's lock); meanwhile another thread registers new tokens of small.app one after the
// other. Prints big.app's call times and small.app's latency percentiles. No network and no
// event loop in the figures: the store's `apply`, called from two threads, on 2 cores. The
// journaled store's directory is deleted at the end.

import Dispatch
import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
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
    let kind = option("--store", "memory")
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    let journal = option("--dir", "/var/tmp") + "/isolation-\(getpid())-\(Int(monotonic() * 1e6))"
    let store: any ActivityStore =
        kind == "journal" ? try JournaledActivityStore(configuration: .init(directory: journal)) : InMemoryActivityStore()
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

    let bigCalls = Latencies()
    let smallCalls = Latencies()
    let done = DispatchGroup()
    let end = monotonic() + seconds
    DispatchQueue.global().async(group: done) {
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
        while monotonic() < end {
            let request = RegisterTokenRequest(
                appID: "small.app", kind: .pushToStart, token: hexToken("5", n), environment: .production,
                attributesType: "DeliveryAttributes", deviceID: "s\(n)")
            n += 1
            let before = monotonic()
            _ = try! store.apply(RegisterToken(request), now: now, on: loop).wait()
            smallCalls.seconds.append(monotonic() - before)
        }
    }
    done.wait()
    print("\(kind) store, \(tokens) update tokens of big.app's activity, \(seconds) s")
    print("big.app's UpdateActivity: \(bigCalls.summary)")
    print("small.app's RegisterToken meanwhile: \(smallCalls.summary)")
    try await store.close()
    if kind == "journal" { try? FileManager.default.removeItem(atPath: journal) }
}
