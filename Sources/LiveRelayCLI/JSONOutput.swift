import Foundation
import LiveRelayAPNs
import LiveRelayClient
import LiveRelayDomain
import LiveRelayMessages

/// JSON with keys in the order given, so a reply prints with its fields in
/// .proto order (what a reader compares against the contract), which a
/// dictionary through JSONSerialization would scramble.
indirect enum JSONValue {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)

    func rendered(indent: Int = 0) -> String {
        let pad = String(repeating: "  ", count: indent)
        let inner = String(repeating: "  ", count: indent + 1)
        switch self {
        case .object(let fields):
            if fields.isEmpty { return "{}" }
            let body = fields.map { "\(inner)\(jsonQuoted($0.0)): \($0.1.rendered(indent: indent + 1))" }
            return "{\n" + body.joined(separator: ",\n") + "\n\(pad)}"
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.rendered(indent: indent + 1) }.joined(separator: ",\n") + "\n\(pad)]"
        case .string(let text): return jsonQuoted(text)
        case .integer(let value): return String(value)
        case .double(let value): return value.isFinite ? String(value) : jsonQuoted(String(value))
        case .bool(let value): return value ? "true" : "false"
        }
    }

    /// On one line: one value per line of a stream (JSON Lines), as `events tail` prints events.
    var compact: String {
        switch self {
        case .object(let fields): "{" + fields.map { "\(jsonQuoted($0.0)):\($0.1.compact)" }.joined(separator: ",") + "}"
        case .array(let items): "[" + items.map(\.compact).joined(separator: ",") + "]"
        default: rendered()
        }
    }

}

/// The proto3 JSON mapping's choices where they help a reader: .proto field
/// names, enum value names, bytes as base64; every scalar field is printed,
/// defaults included, so `"replayed": false` is visible rather than implied.
protocol JSONRepresentable {
    var json: JSONValue { get }
}

extension RegisterTokenReply: JSONRepresentable {
    var json: JSONValue {
        .object([
            ("result", .string(Self.name(self.result))),
            ("replaced_token", .string(self.replacedToken)),
        ])
    }

    static func name(_ result: RegisterTokenResult) -> String {
        switch result {
        case .unspecified: "REGISTER_TOKEN_RESULT_UNSPECIFIED"
        case .created: "REGISTER_TOKEN_RESULT_CREATED"
        case .rotated: "REGISTER_TOKEN_RESULT_ROTATED"
        case .unchanged: "REGISTER_TOKEN_RESULT_UNCHANGED"
        case .removed: "REGISTER_TOKEN_RESULT_REMOVED"
        case .notFound: "REGISTER_TOKEN_RESULT_NOT_FOUND"
        case .unrecognized(let n): String(n)
        }
    }
}

extension ActivityState {
    var protoName: String {
        switch self {
        case .unspecified: "ACTIVITY_STATE_UNSPECIFIED"
        case .starting: "ACTIVITY_STATE_STARTING"
        case .active: "ACTIVITY_STATE_ACTIVE"
        case .ended: "ACTIVITY_STATE_ENDED"
        case .expired: "ACTIVITY_STATE_EXPIRED"
        case .dismissed: "ACTIVITY_STATE_DISMISSED"
        case .unrecognized(let n): String(n)
        }
    }
}

extension TargetKind {
    var protoName: String {
        switch self {
        case .unspecified: "TARGET_KIND_UNSPECIFIED"
        case .pushToStartToken: "TARGET_KIND_PUSH_TO_START_TOKEN"
        case .externalUserID: "TARGET_KIND_EXTERNAL_USER_ID"
        case .allDevices: "TARGET_KIND_ALL_DEVICES"
        case .unrecognized(let n): String(n)
        }
    }
}

extension DeliverySummary: JSONRepresentable {
    var json: JSONValue {
        .object([
            ("targeted", .integer(Int64(self.targeted))),
            ("queued", .integer(Int64(self.queued))),
            ("delivered", .integer(Int64(self.delivered))),
            ("failed", .integer(Int64(self.failed))),
            ("failures", .array(self.failures.map { .object([("reason", .string($0.reason)), ("count", .integer(Int64($0.count)))]) })),
            ("pruned", .integer(Int64(self.pruned))),
            ("superseded", .integer(Int64(self.superseded))),
            ("expired", .integer(Int64(self.expired))),
            (
                "unresolved",
                .array(
                    self.unresolved.map {
                        .object([("kind", .string($0.kind.protoName)), ("value", .string($0.value)), ("reason", .string($0.reason))])
                    })
            ),
            ("complete", .bool(self.complete)),
            ("downgraded", .integer(Int64(self.downgraded))),
        ])
    }
}

extension BroadcastChannel: JSONRepresentable {
    var json: JSONValue {
        .object([
            ("app_id", .string(self.appID)), ("channel_id", .string(self.channelID)),
            ("environment", .string(self.environment == .sandbox ? "sandbox" : "production")),
            ("storage_policy", .string(self.storagePolicy == .noStorage ? "no-storage" : "most-recent-message")),
            ("created_at", .integer(self.createdAt)),
        ])
    }
}

extension CreateChannelReply: JSONRepresentable {
    var json: JSONValue { self.channel?.json ?? .object([]) }
}

extension ListChannelsReply: JSONRepresentable {
    var json: JSONValue {
        .object([("channels", .array(self.channels.map(\.json))), ("next_page_token", .string(self.nextPageToken))])
    }
}

extension DeleteChannelReply: JSONRepresentable {
    var json: JSONValue { .object([("deleted", .bool(true))]) }
}

/// The fields the three activity replies share, in their .proto order after the first.
private func activityFields(timestamp: Int64, summary: DeliverySummary?, replayed: Bool, state: ActivityState) -> [(String, JSONValue)] {
    var fields: [(String, JSONValue)] = [("timestamp", .integer(timestamp))]
    if let summary { fields.append(("summary", summary.json)) }
    fields.append(("replayed", .bool(replayed)))
    fields.append(("state", .string(state.protoName)))
    return fields
}

extension StartActivityReply: JSONRepresentable {
    var json: JSONValue {
        .object(
            [("activity_id", .string(self.activityID))]
                + activityFields(timestamp: self.timestamp, summary: self.summary, replayed: self.replayed, state: self.state))
    }
}

extension UpdateActivityReply: JSONRepresentable {
    var json: JSONValue {
        .object(activityFields(timestamp: self.timestamp, summary: self.summary, replayed: self.replayed, state: self.state))
    }
}

extension EndActivityReply: JSONRepresentable {
    var json: JSONValue {
        .object(activityFields(timestamp: self.timestamp, summary: self.summary, replayed: self.replayed, state: self.state))
    }
}

extension PingReply: JSONRepresentable {
    var json: JSONValue {
        .object([
            ("payload", .string(Data(self.payload).base64EncodedString())),
            ("server_time_ms", .integer(self.serverTimeMS)),
            ("server_version", .string(self.serverVersion)),
        ])
    }
}

extension LiveRelayClientError {
    /// What the CLI prints on stderr: the status and message, then whatever the details add.
    var report: String {
        var lines = ["error: \(self.status): \(self.message)"]
        for violation in self.details.fieldViolations where "\(violation.field): \(violation.description)" != self.message {
            lines.append("  \(violation.field): \(violation.description)")
        }
        if !self.details.reason.isEmpty { lines.append("  reason: \(self.details.reason)") }
        if self.details.retryAfterMS > 0 { lines.append("  retry after: \(self.details.retryAfterMS) ms") }
        if self.processing == .mayHaveBeenProcessed {
            lines.append("  (the call may have been processed; resend it with the same idempotency key to learn its outcome)")
        }
        return lines.joined(separator: "\n")
    }
}
