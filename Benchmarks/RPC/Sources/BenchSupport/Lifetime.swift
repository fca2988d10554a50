import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Calls `stop` once, on SIGTERM or SIGINT or after `maxSeconds`, whichever comes
/// first: a benchmark server never outlives its run even if the script dies.
public func onStopSignalOrDeadline(maxSeconds: Double, _ stop: @escaping @Sendable (String) -> Void) {
    let queue = DispatchQueue(label: "bench.lifetime")
    let once = OnceFlag()
    for sig in [SIGTERM, SIGINT] {
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
        source.setEventHandler {
            if once.claim() { stop(sig == SIGTERM ? "SIGTERM" : "SIGINT") }
        }
        source.resume()
        retainedSources.append(source)
    }
    queue.asyncAfter(deadline: .now() + maxSeconds) {
        if once.claim() { stop("lifetime of \(Int(maxSeconds)) s reached") }
    }
}

/// Set from the lifetime queue only.
nonisolated(unsafe) private var retainedSources: [any DispatchSourceSignal] = []

private final class OnceFlag: @unchecked Sendable {
    private var claimed = false
    /// Only called on the lifetime queue.
    func claim() -> Bool {
        if claimed { return false }
        claimed = true
        return true
    }
}

/// Simple `--name value` lookup for the servers.
public func argument(_ name: String, in arguments: [String], default defaultValue: String? = nil) -> String {
    if let i = arguments.firstIndex(of: name), i + 1 < arguments.count { return arguments[i + 1] }
    if let defaultValue { return defaultValue }
    fail("\(name) is required")
}
