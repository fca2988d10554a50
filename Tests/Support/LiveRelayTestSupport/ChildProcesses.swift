import Foundation

/// Starts the tests' child processes one at a time, across the whole test binary.
///
/// Why: on Linux, Foundation's `Process.run()` makes a socket pair whose far end
/// only the child should hold (the child's exit closes it, and that is how
/// Foundation learns of the exit), and a `Pipe()` is two descriptors; none of them
/// is close-on-exec. A child another test starts in that window inherits them.
/// Then a short tool's `waitUntilExit()`, or a read of its output to the end,
/// waits until that other child (an nghttpd, a Python receiver) exits, and holds
/// one of the few threads async tests run on while it waits; two such waits stall
/// every test of the run. Making the pipes and starting the child under one lock
/// closes the window: every start sees the others' descriptors already closed in
/// the parent or open before its own close-everything-else step.
///
/// Every test that starts a process goes through here.
public enum ChildProcesses {
    private static let starting = NSLock()

    /// Runs `attach` (which makes the pipes it hands `process`, and returns them)
    /// and starts `process`, with no other child starting meanwhile.
    @discardableResult
    public static func start<Pipes>(_ process: Process, attaching attach: (Process) throws -> Pipes) throws -> Pipes {
        starting.lock()
        defer { starting.unlock() }
        let pipes = try attach(process)
        try process.run()
        return pipes
    }

    /// Starts `process`, whose standard streams are set already (files or the null device).
    public static func start(_ process: Process) throws {
        try start(process) { _ in () }
    }
}
