#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Command-line options shared by both load generators. `--name value` pairs only.
public struct LoadOptions: Sendable {
    public var host = "127.0.0.1"
    public var port = 0
    /// Connections (C).
    public var connections = 1
    /// Requests in flight per connection (D): a closed loop of D callers per connection.
    public var depth = 1
    public var warmupSeconds = 3.0
    public var durationSeconds = 10.0
    /// The server process whose CPU time is sampled over the measured window (0: none).
    public var serverPID: Int32 = 0
    /// PEM file the client trusts (the servers' self-signed certificate).
    public var caFile = ""
    /// NIO event-loop threads in the load generator.
    public var threads = 1
    /// Per-call timeout.
    public var timeoutMilliseconds = 10_000
    /// LiveRelay only: the API key the null service was given.
    public var apiKey = ""
    /// A label for the report line.
    public var label = ""

    public init(arguments: [String]) {
        var i = 0
        func value() -> String {
            i += 1
            guard i < arguments.count else { fail("\(arguments[i - 1]) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--host": host = value()
            case "--port": port = Self.int(value())
            case "--connections", "-c": connections = Self.int(value())
            case "--depth", "-d": depth = Self.int(value())
            case "--warmup": warmupSeconds = Self.double(value())
            case "--duration": durationSeconds = Self.double(value())
            case "--server-pid": serverPID = Int32(Self.int(value()))
            case "--ca": caFile = value()
            case "--threads": threads = Self.int(value())
            case "--timeout-ms": timeoutMilliseconds = Self.int(value())
            case "--api-key": apiKey = value()
            case "--label": label = value()
            case "--help", "-h":
                print("""
                    options: --port N --ca FILE [--host 127.0.0.1] [-c CONNECTIONS] [-d DEPTH] [--warmup S]
                             [--duration S] [--server-pid PID] [--threads N] [--timeout-ms MS] [--api-key KEY] [--label L]
                    """)
                exit(0)
            default: fail("unknown option \(arguments[i])")
            }
            i += 1
        }
        guard port > 0 else { fail("--port is required") }
        guard connections >= 1, depth >= 1, threads >= 1 else { fail("connections, depth and threads must be >= 1") }
        guard durationSeconds > 0, durationSeconds <= 600, warmupSeconds >= 0, warmupSeconds <= 120 else {
            fail("--duration must be in (0, 600] and --warmup in [0, 120]")
        }
    }

    static func int(_ s: String) -> Int {
        guard let v = Int(s) else { fail("not an integer: \(s)") }
        return v
    }
    static func double(_ s: String) -> Double {
        guard let v = Double(s) else { fail("not a number: \(s)") }
        return v
    }
}

public func fail(_ message: String) -> Never {
    let line = "error: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

/// Prints and flushes at once (stdout is fully buffered when redirected to a file).
public func say(_ message: String) {
    print(message)
    fflush(nil)
}

/// Reads a whole file as text.
public func readTextFile(_ path: String) -> String {
    guard let f = fopen(path, "r") else { fail("cannot open \(path)") }
    defer { fclose(f) }
    var out = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n <= 0 { break }
        out.append(contentsOf: buf[0..<n])
    }
    return String(decoding: out, as: UTF8.self)
}
