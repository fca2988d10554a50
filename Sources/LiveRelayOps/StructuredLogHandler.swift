import Foundation
import Logging

/// How `serve` writes its log lines: swift-log's plain text, logfmt, or one
/// JSON object per line. The structured two are for log shippers (Loki,
/// Elasticsearch, CloudWatch): every metadata key (`request_id`, `app`,
/// `apns_id`, `key_id`, ...) becomes a field a query can filter on, with no
/// parsing of free text. Nothing LiveRelay logs holds a secret (API keys and
/// .p8 keys are never logged), so the formats add none.
public enum LogFormat: String, CaseIterable, Sendable {
    case text, logfmt, json
}

/// One line per event on a stream (standard error in `serve`): `ts`, `level`,
/// `logger`, `msg`, then the metadata sorted by key (handler metadata, the
/// metadata provider's, then the event's, later ones winning), then `source`.
/// Writes go through one lock, so lines from several threads never interleave.
public struct StructuredLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info

    private let label: String
    private let format: LogFormat
    private let sink: LineSink

    /// - Parameter write: where each line (with its newline) goes; standard error by default.
    public init(label: String, format: LogFormat, write: (@Sendable (String) -> Void)? = nil) {
        self.label = label
        self.format = format
        self.sink = LineSink(write: write ?? { line in FileHandle.standardError.write(Data(line.utf8)) })
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        let timestamp = Self.timestamp()
        var fields: [(String, String)] = [
            ("ts", timestamp), ("level", event.level.rawValue), ("logger", label), ("msg", event.message.description),
        ]
        for key in merged.keys.sorted() { fields.append((key, merged[key]!.description)) }
        if let error = event.error { fields.append(("error", "\(error)")) }
        fields.append(("source", event.source))
        sink.write(Self.line(fields, format: format))
    }

    /// One line in `format` (text falls back to logfmt: the plain format is swift-log's own handler).
    static func line(_ fields: [(String, String)], format: LogFormat) -> String {
        switch format {
        case .json:
            return "{" + fields.map { "\(jsonString($0.0)):\(jsonString($0.1))" }.joined(separator: ",") + "}\n"
        case .logfmt, .text:
            return fields.map { "\($0.0)=\(logfmtValue($0.1))" }.joined(separator: " ") + "\n"
        }
    }

    /// Quoted when empty or when it holds a space, `=`, a quote or a control character.
    static func logfmtValue(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0.value < 0x20 }
        guard needsQuotes else { return value }
        return jsonString(value)
    }

    static func jsonString(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u00" + String(scalar.value >> 4, radix: 16) + String(scalar.value & 0xF, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// RFC 3339 in UTC with milliseconds.
    static func timestamp(_ date: Date = Date()) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let milliseconds = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)Z"
    }
}

/// Serializes whole lines onto one stream.
private final class LineSink: @unchecked Sendable {
    private let lock = NSLock()
    private let write: @Sendable (String) -> Void

    init(write: @escaping @Sendable (String) -> Void) { self.write = write }

    func write(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        write(line)
    }
}
