import CCallgrind

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// liverelay-instructions: one workload per run, for scripts/instruction-gate.sh.
//
//   valgrind --tool=callgrind --instr-atstart=no liverelay-instructions WORKLOAD [--iterations N]
//   liverelay-instructions --list
//
// Builds the workload and warms it up outside the count, then runs N iterations
// between CALLGRIND_START_INSTRUMENTATION and CALLGRIND_STOP_INSTRUMENTATION, and
// prints `units N` (calls, decodes or pushes done in the measured loop): the gate
// divides callgrind's instruction count by it.

let workloads = DecodeWorkloads.all + RPCWorkloads.all + RefusalWorkload.all + DispatchWorkloads.all + APNsClientWorkloads.all

func usage(_ workloads: [Workload]) -> Never {
    print("usage: liverelay-instructions WORKLOAD [--iterations N] | --list")
    print("workloads: " + workloads.map(\.name).joined(separator: " "))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["--list"] {
    for workload in workloads { print("\(workload.name) \(workload.unit) \(workload.iterations)") }
    exit(0)
}
guard let name = arguments.first, let workload = workloads.first(where: { $0.name == name }) else { usage(workloads) }
arguments.removeFirst()
var iterations = workload.iterations
if arguments.count == 2, arguments[0] == "--iterations", let n = Int(arguments[1]), n > 0 {
    iterations = n
} else if !arguments.isEmpty {
    usage(workloads)
}

do {
    let body = try workload.prepare(iterations)
    let units = try measuredLoop(iterations: iterations, body)
    print("workload \(workload.name)")
    print("unit \(workload.unit)")
    print("iterations \(iterations)")
    print("units \(units)")
    print("client-requests \(liverelay_callgrind_available() == 1 ? "yes" : "no")")
} catch {
    print("liverelay-instructions: \(workload.name): \(error)")
    exit(1)
}
