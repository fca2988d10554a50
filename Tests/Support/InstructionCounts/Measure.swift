import CCallgrind

/// One workload of the instruction-count gate: `units` is what the measured
/// loop does (calls, decodes, pushes), so the gate divides callgrind's count by it.
struct Workload {
    var name: String
    var unit: String
    /// Iterations of the measured loop by default (the gate uses these).
    var iterations: Int
    /// Builds the workload's state (outside the count) and returns the body of one
    /// iteration, which returns how many units it did.
    var prepare: (_ iterations: Int) throws -> () throws -> Int
}

/// The measured loop: only what runs between start and stop is counted.
/// Not inlined, so it also names the loop for `--toggle-collect` where the
/// client requests are unavailable.
@inline(never)
func measuredLoop(iterations: Int, _ body: () throws -> Int) rethrows -> Int {
    var units = 0
    liverelay_callgrind_start()
    for _ in 0..<iterations { units += try body() }
    liverelay_callgrind_stop()
    return units
}

/// Keeps a value alive past the optimizer: the branch is never taken, but the
/// compiler cannot prove it.
@inline(never)
func keep<T>(_ value: T) {
    if CommandLine.arguments.count > 1_000 { print(value) }
}

struct WorkloadFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
