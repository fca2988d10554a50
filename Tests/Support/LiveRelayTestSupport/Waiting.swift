import Foundation
import NIOCore

/// A test's own failure, with a message saying what did not happen.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Runs `body`, failing if it takes longer than `timeout`, so no test can hang the suite.
public func withTimeout<T: Sendable>(
    _ timeout: TimeAmount, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(timeout.nanoseconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("timed out after \(timeout)")
        }
        return value
    }
}

/// Polls `condition` until it holds, failing after `timeout`: for states that
/// another thread reaches (a flag set on a server loop) and that have no event
/// to wait on. The condition, not the polling interval, decides the outcome.
/// The default is a ceiling for a loaded two-core machine, where a test's next
/// turn can wait seconds for a thread; a passing test never waits it out.
public func eventually(
    _ what: String, timeout: TimeAmount = .seconds(60), _ condition: @escaping @Sendable () async -> Bool
) async throws {
    let deadline = NIODeadline.now() + timeout
    while !(await condition()) {
        guard NIODeadline.now() < deadline else { throw TestFailure("timed out waiting for \(what)") }
        try await Task.sleep(nanoseconds: 2_000_000)
    }
}

/// A fresh directory under the system's temporary directory, named after `prefix`.
public func temporaryDirectory(prefix: String = "liverelay-") throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(prefix + UUID().uuidString)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Runs blocking work (a child process's waits, blocking socket reads) on a thread
/// of its own: on the threads async tests share (as many as cores) it would stall
/// every other test for as long as it blocks.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
