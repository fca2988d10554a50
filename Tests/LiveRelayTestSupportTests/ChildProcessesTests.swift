import Foundation
import Testing

@testable import LiveRelayTestSupport

/// ``ChildProcesses`` starts one child at a time: a child's pipes are made and it
/// is started before another start may begin, whatever the threads do.
@Suite struct ChildProcessesTests {
    @Test func aSecondStartWaitsUntilTheFirstChildIsStarted() async throws {
        let first = Self.tool()
        let second = Self.tool()
        let firstAttaching = DispatchSemaphore(value: 0)
        async let firstStart: Void = onThread {
            try ChildProcesses.start(first) { _ in
                firstAttaching.signal()
                // The second start is attempted meanwhile, and must not begin.
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
        async let firstPIDSeenBySecond = onThread { () throws -> Int32 in
            firstAttaching.wait()
            return try ChildProcesses.start(second) { _ in first.processIdentifier }
        }
        let (_, seen) = try await (firstStart, firstPIDSeenBySecond)
        first.waitUntilExit()
        second.waitUntilExit()
        #expect(first.processIdentifier > 0)
        #expect(seen == first.processIdentifier, "the second child's pipes were made before the first child was started")
    }

    static func tool() -> Process {
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: "/bin/true")
        tool.standardInput = FileHandle.nullDevice
        tool.standardOutput = FileHandle.nullDevice
        tool.standardError = FileHandle.nullDevice
        return tool
    }
}
