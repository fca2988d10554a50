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

    /// Which of the child's output streams get a pipe; the others stay as the caller set them.
    public enum Output {
        case asSet
        /// Standard output on a pipe.
        case stdout
        /// Standard output and standard error on one pipe, interleaved as written.
        case combined
        /// Each on a pipe of its own.
        case separate
    }

    /// The pipes made for a child: nil for a stream left as the caller set it.
    /// With ``Output/combined``, `output` carries standard error too.
    public struct Pipes {
        public var input: Pipe?
        public var output: Pipe?
        public var error: Pipe?
    }

    /// Starts `process` with pipes for the streams asked for (its standard input when
    /// `input`), made under the lock, so that no other child inherits them.
    @discardableResult
    public static func start(_ process: Process, input: Bool = false, output: Output = .asSet) throws -> Pipes {
        try start(process) { process in
            var pipes = Pipes()
            if input {
                pipes.input = Pipe()
                process.standardInput = pipes.input
            }
            switch output {
            case .asSet: break
            case .stdout, .combined, .separate:
                pipes.output = Pipe()
                process.standardOutput = pipes.output
            }
            switch output {
            case .asSet, .stdout: break
            case .combined: process.standardError = pipes.output
            case .separate:
                pipes.error = Pipe()
                process.standardError = pipes.error
            }
            return pipes
        }
    }

    /// Runs `attach` (which hands `process` what it needs) and starts `process`, with no
    /// other child starting meanwhile.
    static func start<Attached>(_ process: Process, attaching attach: (Process) throws -> Attached) throws -> Attached {
        starting.lock()
        defer { starting.unlock() }
        let attached = try attach(process)
        try process.run()
        return attached
    }
}
