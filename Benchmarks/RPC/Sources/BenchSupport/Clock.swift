#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic nanoseconds.
@inline(__always)
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time (user + system, all threads) of a process, from /proc/PID/stat. Nil when unreadable.
public func processCPUSeconds(pid: Int32) -> Double? {
    #if os(Linux)
    guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 4096)
    guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
    let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    // The command name (field 2) is in parentheses and may contain spaces: split after the last ')'.
    guard let close = line.lastIndex(of: ")") else { return nil }
    let fields = line[line.index(after: close)...].split(separator: " ")
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    return (utime + stime) / ticks
    #else
    return nil
    #endif
}

/// Busy CPU seconds of the whole machine (every CPU, every process), from /proc/stat.
public func machineBusyCPUSeconds() -> Double? {
    #if os(Linux)
    guard let file = fopen("/proc/stat", "r") else { return nil }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 1024)
    guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
    let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
    let fields = line.split(separator: " ").dropFirst().compactMap { Double($0.trimmingCharacters()) }
    guard fields.count >= 8 else { return nil }
    let busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy / Double(sysconf(Int32(_SC_CLK_TCK)))
    #else
    return nil
    #endif
}

extension Substring {
    fileprivate func trimmingCharacters() -> Substring {
        var s = self
        while let last = s.last, last == "\n" || last == " " { s = s.dropLast() }
        return s
    }
}

public func currentProcessID() -> Int32 { getpid() }
