import Logging
import NIOConcurrencyHelpers

/// Keeps every line its loggers write, for tests of what an operator reads:
/// how many lines an event makes, at which level, with which fields.
public final class LogRecorder: Sendable {
    /// One line as a handler would write it: the logger's metadata merged with the call's.
    public struct Line: Sendable, CustomStringConvertible {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]

        public var description: String {
            let fields = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return ([level.rawValue, message] + fields).joined(separator: " ")
        }
    }

    private let recorded = NIOLockedValueBox<[Line]>([])

    public init() {}

    /// Every line so far, in the order written.
    public var lines: [Line] { recorded.withLockedValue { $0 } }

    /// A logger whose lines at `level` and above are kept here.
    public func logger(label: String = "test", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in Handler(recorder: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: Line) {
        recorded.withLockedValue { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            if let own = event.metadata { merged.merge(own) { _, new in new } }
            recorder.append(
                Line(
                    level: event.level, message: event.message.description,
                    metadata: merged.mapValues { $0.description }))
        }
    }
}
