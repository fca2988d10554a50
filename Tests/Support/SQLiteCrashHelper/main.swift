// sqlite-crash-helper <database> [in-flight=64] [first=0] [mode=default]
//
// For the SIGKILL durability test (Tests/LiveRelayStoreTests/SQLiteDurabilityTests.swift):
// opens a SQLiteActivityStore at <database>, prints "ready", then registers
// push-to-start tokens forever with <in-flight> RegisterToken applies
// outstanding, and prints each token's hex on stdout (one write(2) per line,
// no buffering) only after its future succeeded, i.e. once it is acknowledged.
// It never exits by itself: the test kills it with SIGKILL.
//
// mode: `default` (the store's default configuration), `full` (synchronous=FULL
// instead of the pipelined fsync), `no-checkpoint` (nothing is ever
// checkpointed: every acknowledged token exists only in the WAL when the kill
// comes), `busy-checkpoint` (tiny WAL limits: PASSIVE and RESTART checkpoints
// run all the time, so the kill lands in or between them).

import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import LiveRelayStoreSQLite
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func line(_ text: String, fd: Int32 = 1) {
    var bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 {
            if errno == EINTR { continue }
            exit(3)
        }
        offset += n
    }
    bytes.removeAll()
}

func tokenHex(_ n: Int) -> String {
    let digits = String(n, radix: 16)
    return "cd" + String(repeating: "0", count: 62 - digits.count) + digits
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    line("usage: sqlite-crash-helper <database> [in-flight] [first]", fd: 2)
    exit(2)
}
let inFlight = arguments.count > 2 ? Int(arguments[2]) ?? 64 : 64
let first = arguments.count > 3 ? Int(arguments[3]) ?? 0 : 0
let mode = arguments.count > 4 ? arguments[4] : "default"

var configuration = SQLiteActivityStore.Configuration()
switch mode {
case "default": break
case "full": configuration.durability = .fullSync
case "no-checkpoint":
    configuration.checkpointFrames = 1 << 30
    configuration.walLimitFrames = 1 << 30
case "busy-checkpoint":
    configuration.checkpointFrames = 16
    configuration.walLimitFrames = 64
default:
    line("unknown mode \(mode)", fd: 2)
    exit(2)
}

let store: SQLiteActivityStore
do {
    store = try SQLiteActivityStore(path: arguments[1], configuration: configuration)
} catch {
    line("cannot open \(arguments[1]): \(error)", fd: 2)
    exit(1)
}
let loop = MultiThreadedEventLoopGroup.singleton.next()

/// The next token number; only touched on `loop`.
final class Counter: @unchecked Sendable { var next = first }
let counter = Counter()

@Sendable func registerNext() {
    loop.preconditionInEventLoop()
    let n = counter.next
    counter.next += 1
    let hex = tokenHex(n)
    let request = RegisterTokenRequest(
        appID: "crash.app", kind: .pushToStart, token: hex, environment: .production,
        attributesType: "CrashAttributes", externalUserID: "user-\(n % 97)", deviceID: "device-\(n)")
    store.apply(RegisterToken(request), now: SystemClock().now(), on: loop).whenComplete { result in
        switch result {
        case .success:
            line(hex)
            registerNext()
        case let .failure(error):
            line("apply failed: \(error)", fd: 2)
            exit(1)
        }
    }
}

line("ready")
loop.execute {
    for _ in 0..<inFlight { registerNext() }
}
while true { sleep(1000) }
