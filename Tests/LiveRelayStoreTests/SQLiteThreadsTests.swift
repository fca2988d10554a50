import Foundation
import Testing

@testable import LiveRelayStoreSQLite

@Suite struct SQLiteThreadsTests {
    /// The names every thread of this process has now (`/proc/self/task/*/comm`).
    static func threadNames() throws -> Set<String> {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
        return Set(
            tasks.compactMap { task in
                (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            })
    }

    /// An operator reading `top -H` or a profile tells the writer from the fsync thread
    /// and the readers; unnamed, each would carry the name of the thread that started it.
    @Test(.timeLimit(.minutes(1)))
    func theStoresThreadsAreNamedForWhatTheyDo() async throws {
        #if os(Linux)
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        let expected: Set = ["sqlite-writer", "sqlite-durabili", "sqlite-reader-0"]
        // A thread names itself when it starts, which may be just after the store's init returns.
        var names = try Self.threadNames()
        for _ in 0..<1_000 where !expected.isSubset(of: names) {
            try await Task.sleep(for: .milliseconds(10))
            names = try Self.threadNames()
        }
        try await store.close()
        #expect(expected.isSubset(of: names), "threads: \(names.sorted())")
        #endif
    }
}
