import Foundation

/// CPU seconds (user + system, all threads) a process has used so far, or nil without
/// /proc (macOS) or once the process is gone. Server CPU per call is the figure that stays
/// comparable when other work shares the machine, unlike wall-clock throughput.
public func processCPUSeconds(pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
    // proc(5): "pid (comm) state ppid ...", where comm may contain spaces and parentheses,
    // so fields are counted from the last ')'. utime and stime are fields 14 and 15.
    guard let commEnd = stat.range(of: ")", options: .backwards) else { return nil }
    let afterComm = stat[commEnd.upperBound...].split(whereSeparator: { $0 == " " || $0 == "\n" })
    let utimeIndex = 14 - 3, stimeIndex = 15 - 3
    guard afterComm.count > stimeIndex, let utime = Double(afterComm[utimeIndex]), let stime = Double(afterComm[stimeIndex]) else {
        return nil
    }
    return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// CPU seconds this process (the load generator) has used so far.
func ownCPUSeconds() -> Double? { processCPUSeconds(pid: ProcessInfo.processInfo.processIdentifier) }
