import Foundation
import LiveRelayMessages
import NIOCore

/// What the delivery summaries of a run's measured Start, Update and End calls add up to,
/// when the scenario waits for delivery: the APNs side of the run. Pushes per second is
/// `delivered` over the window; every targeted push must land in exactly one outcome, and
/// `accountedFor` says whether the server's summaries kept that promise.
public struct PushAccount: Sendable, Codable, Equatable {
    public var calls: UInt64 = 0
    public var targeted: UInt64 = 0
    public var delivered: UInt64 = 0
    public var failed: UInt64 = 0
    public var pruned: UInt64 = 0
    public var superseded: UInt64 = 0
    public var expired: UInt64 = 0
    /// Pushes a reply still reported as queued (a summary that was not final).
    public var queued: UInt64 = 0
    /// Failed pushes by APNs reason (or the dispatcher's own, e.g. QueueFull, Timeout).
    public var failures: [String: UInt64] = [:]
    /// Delivered pushes per second over the measured window (filled in by the report).
    public var deliveredPerSecond: Double = 0

    public init() {}

    mutating func add(_ summary: DeliverySummary) {
        calls += 1
        targeted += UInt64(summary.targeted)
        delivered += UInt64(summary.delivered)
        failed += UInt64(summary.failed)
        pruned += UInt64(summary.pruned)
        superseded += UInt64(summary.superseded)
        expired += UInt64(summary.expired)
        queued += UInt64(summary.queued)
        for failure in summary.failures { failures[failure.reason, default: 0] += UInt64(failure.count) }
    }

    /// Every targeted push has exactly one outcome, and the failures by reason add up.
    public var accountedFor: Bool {
        delivered + failed + pruned + superseded + expired + queued == targeted
            && failures.values.reduce(0, +) == failed
    }

    /// The delivery summary in a successful Start, Update or End reply, if it has one.
    static func summary(of rpc: BenchRPC, reply: ByteBuffer) -> DeliverySummary? {
        reply.withUnsafeReadableBytes { bytes -> DeliverySummary? in
            switch rpc {
            case .startActivity: (try? StartActivityReply(serializedBytes: bytes))?.summary
            case .updateActivity: (try? UpdateActivityReply(serializedBytes: bytes))?.summary
            case .endActivity: (try? EndActivityReply(serializedBytes: bytes))?.summary
            case .registerToken, .ping: nil
            }
        }
    }

    var line: String {
        var text =
            "pushes: \(formatCount(Double(targeted))) targeted by \(calls) calls; delivered \(formatCount(Double(delivered))) "
            + "(\(formatCount(deliveredPerSecond))/s), failed \(failed), pruned \(pruned), superseded \(superseded), "
            + "expired \(expired)"
        if queued > 0 { text += ", still queued \(queued)" }
        if !failures.isEmpty {
            text += "; failures: " + failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        return text + (accountedFor ? "" : " (DOES NOT ADD UP)")
    }
}

/// Resident memory of a process from /proc/<pid>/status: now (VmRSS) and its peak so far
/// (VmHWM), in bytes; nil without /proc or once the process is gone.
public func processMemory(pid: Int32) -> (rss: UInt64, peak: UInt64)? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    func kilobytes(_ key: String) -> UInt64? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return nil }
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { UInt64($0) }
    }
    guard let rss = kilobytes("VmRSS"), let peak = kilobytes("VmHWM") else { return nil }
    return (rss * 1024, peak * 1024)
}
