import Foundation
import NIOConcurrencyHelpers
import Prometheus

/// The process's own figures in Prometheus's standard names (`process_resident_memory_bytes`,
/// `process_cpu_seconds_total`, `process_open_fds`, `process_max_fds`, `process_start_time_seconds`),
/// read from `/proc/self` at each scrape: swift-prometheus exports none, and memory and file
/// descriptors are what an operator watches against the container's limits.
final class ProcessMetrics: Sendable {
    /// One reading of `/proc/self/stat`'s fields that matter here.
    struct Stat: Equatable {
        /// User plus system CPU time, in clock ticks.
        var cpuTicks: Int64
        /// When the process started, in clock ticks after boot.
        var startTicks: Int64
        /// Resident set size, in pages.
        var residentPages: Int64

        /// Parses `/proc/self/stat`. The command name (field 2) is in parentheses and may hold
        /// spaces or parentheses itself, so fields are counted from the last `)`.
        init?(parsing text: String) {
            guard let close = text.lastIndex(of: ")") else { return nil }
            // Fields from 3 (state) on; proc(5) numbers them from 1.
            let fields = text[text.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
            func field(_ number: Int) -> Int64? {
                let index = number - 3
                return index < fields.count ? Int64(fields[index]) : nil
            }
            guard let utime = field(14), let stime = field(15), let start = field(22), let rss = field(24) else { return nil }
            self.init(cpuTicks: utime + stime, startTicks: start, residentPages: rss)
        }

        init(cpuTicks: Int64, startTicks: Int64, residentPages: Int64) {
            self.cpuTicks = cpuTicks
            self.startTicks = startTicks
            self.residentPages = residentPages
        }
    }

    private let resident: Gauge
    private let cpu: Counter
    private let openFDs: Gauge
    private let maxFDs: Gauge
    private let startTime: Gauge
    /// The CPU seconds already added to the counter (it only grows by differences).
    private let cpuRecorded = NIOLockedValueBox<Double>(0)

    init(registry: PrometheusCollectorRegistry) {
        resident = registry.makeGauge(name: "process_resident_memory_bytes", help: "Resident memory size in bytes.")
        cpu = registry.makeCounter(name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.")
        openFDs = registry.makeGauge(name: "process_open_fds", help: "Number of open file descriptors.")
        maxFDs = registry.makeGauge(name: "process_max_fds", help: "Maximum number of open file descriptors.")
        startTime = registry.makeGauge(name: "process_start_time_seconds", help: "Start time of the process since unix epoch in seconds.")
    }

    /// Reads `/proc/self` and sets the figures; a figure that cannot be read keeps its last value.
    func update() {
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        if let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let stat = Stat(parsing: text),
            ticksPerSecond > 0
        {
            resident.set(to: Double(stat.residentPages) * Double(sysconf(Int32(_SC_PAGESIZE))))
            let seconds = Double(stat.cpuTicks) / ticksPerSecond
            let added = cpuRecorded.withLockedValue { recorded -> Double in
                let delta = max(0, seconds - recorded)
                recorded += delta
                return delta
            }
            if added > 0 { cpu.increment(by: added) }
            if let bootTime = Self.bootTime() { startTime.set(to: Double(bootTime) + Double(stat.startTicks) / ticksPerSecond) }
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            // One of them is the directory being listed.
            openFDs.set(to: Double(max(0, entries.count - 1)))
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs.set(to: Double(limit.rlim_cur)) }
    }

    /// The boot time (`btime` of `/proc/stat`), UNIX seconds.
    static func bootTime() -> Int64? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Int64(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
