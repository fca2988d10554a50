import Foundation
import Testing

/// One edit of a copy of Protos/ and the contract differences it must cause.
struct ProtoMutation: Sendable, CustomTestStringConvertible {
    var name: String
    var file: String
    var old: String
    var new: String
    var expected: [String]

    var testDescription: String { name }

    /// Copies the .proto files of Protos/liverelay/v1 and Protos/liverelay/admin/v1 to a temporary
    /// Protos/ and applies the edit there (the caller removes its parent directory). `file` is a
    /// name in liverelay/v1 ("activity.proto") or a path under Protos/ ("liverelay/admin/v1/admin.proto").
    /// The edit's text must occur exactly once, so a test whose anchor has gone fails instead of
    /// testing nothing.
    func apply() throws -> URL {
        let protos = try ExternalTools.temporaryDirectory().appendingPathComponent("Protos")
        // Copy the contents file by file (never the files or links themselves), so that an
        // edit can only ever reach the copy.
        for package in ExternalTools.protoPackages {
            let source = ExternalTools.protosDir.appendingPathComponent(package).resolvingSymlinksInPath()
            let target = protos.appendingPathComponent(package)
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            for name in try FileManager.default.contentsOfDirectory(atPath: source.path) where name.hasSuffix(".proto") {
                try Data(contentsOf: source.appendingPathComponent(name)).write(to: target.appendingPathComponent(name))
            }
        }
        let url = protos.appendingPathComponent(file.contains("/") ? file : "liverelay/v1/\(file)")
        let text = try String(contentsOf: url, encoding: .utf8)
        let occurrences = text.components(separatedBy: old).count - 1
        guard occurrences == 1 else {
            throw ExternalTools.Failure(description: "mutation \(name): \(old.debugDescription) occurs \(occurrences) times in \(file)")
        }
        try Data(text.replacingOccurrences(of: old, with: new).utf8).write(to: url)
        return protos
    }

    static func addingToErrorDetails(_ line: String) -> ProtoMutation {
        ProtoMutation(
            name: "ErrorDetails + \(line)", file: "liverelay.proto",
            old: "  string reason = 3;\n}\n\nmessage FieldViolation",
            new: "  string reason = 3;\n\(line)\n}\n\nmessage FieldViolation", expected: [])
    }

    static func addingToTargets(_ line: String) -> ProtoMutation {
        ProtoMutation(
            name: "Targets + \(line)", file: "activity.proto",
            old: "  optional bool all_devices = 3;\n",
            new: "  optional bool all_devices = 3;\n\(line)\n", expected: [])
    }

    private static let ping = "  rpc Ping(PingRequest) returns (PingReply);"
    private static let admin = "liverelay/admin/v1/admin.proto"
    private static let appStats = "  rpc GetAppStats(GetAppStatsRequest) returns (AppStats);"

    static let all: [ProtoMutation] = [
        ProtoMutation(
            name: "renumber a field", file: "liverelay.proto",
            old: "  string token = 3;", new: "  string token = 33;",
            expected: ["field liverelay.v1.RegisterTokenRequest.token: number 33 in the .proto, 3 in the bindings"]),
        ProtoMutation(
            name: "rename a field", file: "liverelay.proto",
            old: "  string replaced_token = 2;", new: "  string previous_token = 2;",
            expected: [
                "field liverelay.v1.RegisterTokenReply.previous_token: in the .proto, missing from the bindings",
                "field liverelay.v1.RegisterTokenReply.replaced_token: in the bindings, not in the .proto",
            ]),
        ProtoMutation(
            name: "add a field", file: "liverelay.proto",
            old: "  string description = 2;\n}", new: "  string description = 2;\n  string hint = 3;\n}",
            expected: ["field liverelay.v1.FieldViolation.hint: in the .proto, missing from the bindings"]),
        ProtoMutation(
            name: "change a scalar type", file: "liverelay.proto",
            old: "  uint32 count = 2;", new: "  uint64 count = 2;",
            expected: ["field liverelay.v1.FailureCount.count: type uint64 in the .proto, uint32 in the bindings"]),
        ProtoMutation(
            name: "change a message type", file: "activity.proto",
            old: "  optional Alert alert = 7;", new: "  optional Targets alert = 7;",
            expected: [
                "field liverelay.v1.EndActivityRequest.alert: type message liverelay.v1.Targets in the .proto, message liverelay.v1.Alert in the bindings"
            ]),
        ProtoMutation(
            name: "change an enum type", file: "liverelay.proto",
            old: "  TokenKind kind = 2;", new: "  Environment kind = 2;",
            expected: [
                "field liverelay.v1.RegisterTokenRequest.kind: type enum liverelay.v1.Environment in the .proto, enum liverelay.v1.TokenKind in the bindings"
            ]),
        ProtoMutation(
            name: "proto2 optional to repeated", file: "activity.proto",
            old: "  optional bool all_devices = 3;", new: "  repeated bool all_devices = 3;",
            expected: ["field liverelay.v1.Targets.all_devices: label repeated in the .proto, optional in the bindings"]),
        ProtoMutation(
            name: "proto2 optional to required", file: "activity.proto",
            old: "  optional string title = 1;", new: "  required string title = 1;",
            expected: ["field liverelay.v1.Alert.title: label required in the .proto, optional in the bindings"]),
        ProtoMutation(
            name: "proto3 singular to repeated (packed)", file: "liverelay.proto",
            old: "  bool complete = 10;", new: "  repeated bool complete = 10;",
            expected: [
                "field liverelay.v1.DeliverySummary.complete: label repeated in the .proto, none in the bindings",
                "field liverelay.v1.DeliverySummary.complete: packed true in the .proto, false in the bindings",
            ]),
        ProtoMutation(
            name: "proto3 singular to proto3 optional", file: "liverelay.proto",
            old: "  int64 expires_at = 9;", new: "  optional int64 expires_at = 9;",
            expected: ["field liverelay.v1.RegisterTokenRequest.expires_at: label optional in the .proto, none in the bindings"]),
        ProtoMutation(
            name: "move a field into a oneof", file: "liverelay.proto",
            old: "  string value = 2;", new: "  oneof v { string value = 2; }",
            expected: ["field liverelay.v1.UnresolvedTarget.value: oneof true in the .proto, false in the bindings"]),
        ProtoMutation(
            name: "renumber an enum value", file: "liverelay.proto",
            old: "  TOKEN_KIND_UPDATE = 2;", new: "  TOKEN_KIND_UPDATE = 3;",
            expected: ["enum value liverelay.v1.TokenKind.TOKEN_KIND_UPDATE: number 3 in the .proto, 2 in the bindings"]),
        ProtoMutation(
            name: "rename an enum value", file: "liverelay.proto",
            old: "  ACTIVITY_STATE_DISMISSED = 5;", new: "  ACTIVITY_STATE_GONE = 5;",
            expected: [
                "enum value liverelay.v1.ActivityState.ACTIVITY_STATE_GONE: in the .proto, missing from the bindings",
                "enum value liverelay.v1.ActivityState.ACTIVITY_STATE_DISMISSED: in the bindings, not in the .proto",
            ]),
        ProtoMutation(
            name: "add an enum value", file: "activity.proto",
            old: "  PRIORITY_HIGH = 10;", new: "  PRIORITY_HIGH = 10;\n  PRIORITY_URGENT = 11;",
            expected: ["enum value liverelay.v1.Priority.PRIORITY_URGENT: in the .proto, missing from the bindings"]),
        ProtoMutation(
            name: "add an enum", file: "liverelay.proto",
            old: "message FieldViolation {", new: "enum Color {\n  COLOR_UNSPECIFIED = 0;\n}\n\nmessage FieldViolation {",
            expected: ["enum liverelay.v1.Color: in the .proto, missing from the bindings"]),
        ProtoMutation(
            name: "add a message", file: "activity.proto",
            old: "message Alert {", new: "message Extra {\n  optional string note = 1;\n}\n\nmessage Alert {",
            expected: [
                "message liverelay.v1.Extra: in the .proto, missing from the bindings",
                "Swift type for message liverelay.v1.Extra: in the .proto, missing from the bindings",
            ]),
        ProtoMutation(
            name: "rename a message", file: "liverelay.proto",
            old: "message ErrorDetails {", new: "message ErrorDetail {",
            expected: [
                "message liverelay.v1.ErrorDetail: in the .proto, missing from the bindings",
                "message liverelay.v1.ErrorDetails: in the bindings, not in the .proto",
                "Swift type for message liverelay.v1.ErrorDetail: in the .proto, missing from the bindings",
                "Swift type for message liverelay.v1.ErrorDetails: in the bindings, not in the .proto",
            ]),
        ProtoMutation(
            name: "remove a method", file: "liverelay.proto",
            old: "\(ping)\n", new: "",
            expected: ["method /liverelay.v1.LiveRelay/Ping: in the bindings, not in the .proto"]),
        ProtoMutation(
            name: "change a method's request", file: "liverelay.proto",
            old: ping, new: "  rpc Ping(PingReply) returns (PingReply);",
            expected: [
                "method /liverelay.v1.LiveRelay/Ping: request liverelay.v1.PingReply in the .proto, liverelay.v1.PingRequest in the bindings"
            ]),
        ProtoMutation(
            name: "add a method", file: "liverelay.proto",
            old: ping, new: "\(ping)\n  rpc Pong(PingRequest) returns (PingReply);",
            expected: ["method /liverelay.v1.LiveRelay/Pong: in the .proto, missing from the bindings"]),
        ProtoMutation(
            name: "make a method streaming", file: "liverelay.proto",
            old: ping, new: "  rpc Ping(PingRequest) returns (stream PingReply);",
            expected: ["method /liverelay.v1.LiveRelay/Ping: streaming true in the .proto, false in the bindings"]),
        // The admin API (liverelay.admin.v1, admin.proto).
        ProtoMutation(
            name: "admin: renumber a field", file: admin,
            old: "  optional uint64 max_live_activities = 5;", new: "  optional uint64 max_live_activities = 15;",
            expected: ["field liverelay.admin.v1.Quotas.max_live_activities: number 15 in the .proto, 5 in the bindings"]),
        ProtoMutation(
            name: "admin: rename a field", file: admin,
            old: "  optional bool include_revoked = 2;", new: "  optional bool include_deleted = 2;",
            expected: [
                "field liverelay.admin.v1.ListAPIKeysRequest.include_deleted: in the .proto, missing from the bindings",
                "field liverelay.admin.v1.ListAPIKeysRequest.include_revoked: in the bindings, not in the .proto",
            ]),
        ProtoMutation(
            name: "admin: bytes to string", file: admin,
            old: "  optional bytes trust_certificate_pem = 8;", new: "  optional string trust_certificate_pem = 8;",
            expected: [
                "field liverelay.admin.v1.PutAPNsCredentialsRequest.trust_certificate_pem: type string in the .proto, bytes in the bindings"
            ]),
        ProtoMutation(
            name: "admin: change a message type", file: admin,
            old: "  optional APNsCredentialsInfo credentials = 8;", new: "  optional Quotas credentials = 8;",
            expected: [
                "field liverelay.admin.v1.App.credentials: type message liverelay.admin.v1.Quotas in the .proto, message liverelay.admin.v1.APNsCredentialsInfo in the bindings"
            ]),
        ProtoMutation(
            name: "admin: repeated to optional", file: admin,
            old: "  repeated OutcomeCount pushes = 4;", new: "  optional OutcomeCount pushes = 4;",
            expected: ["field liverelay.admin.v1.AppStats.pushes: label optional in the .proto, repeated in the bindings"]),
        ProtoMutation(
            name: "admin: add a message", file: admin,
            old: "message GetAppRequest {", new: "message Extra {\n  optional string note = 1;\n}\n\nmessage GetAppRequest {",
            expected: [
                "message liverelay.admin.v1.Extra: in the .proto, missing from the bindings",
                "Swift type for message liverelay.admin.v1.Extra: in the .proto, missing from the bindings",
            ]),
        ProtoMutation(
            name: "admin: change a method's reply", file: admin,
            old: appStats, new: "  rpc GetAppStats(GetAppStatsRequest) returns (AppReply);",
            expected: [
                "method /liverelay.admin.v1.Admin/GetAppStats: reply liverelay.admin.v1.AppReply in the .proto, liverelay.admin.v1.AppStats in the bindings"
            ]),
        ProtoMutation(
            name: "admin: add a method", file: admin,
            old: appStats, new: "\(appStats)\n  rpc DeleteApp(DisableAppRequest) returns (AppReply);",
            expected: ["method /liverelay.admin.v1.Admin/DeleteApp: in the .proto, missing from the bindings"]),
        ProtoMutation(
            name: "admin: remove a method", file: admin,
            old: "\(appStats)\n", new: "",
            expected: ["method /liverelay.admin.v1.Admin/GetAppStats: in the bindings, not in the .proto"]),
        // Broadcast channels.
        ProtoMutation(
            name: "channels: renumber a new activity field", file: "activity.proto",
            old: "  optional bool channel_only = 13;", new: "  optional bool channel_only = 15;",
            expected: ["field liverelay.v1.UpdateActivityRequest.channel_only: number 15 in the .proto, 13 in the bindings"]),
        ProtoMutation(
            name: "channels: change the type of downgraded", file: "liverelay.proto",
            old: "  uint32 downgraded = 11;", new: "  uint64 downgraded = 11;",
            expected: ["field liverelay.v1.DeliverySummary.downgraded: type uint64 in the .proto, uint32 in the bindings"]),
        ProtoMutation(
            name: "channels: add a storage policy", file: "liverelay.proto",
            old: "  CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE = 2;",
            new: "  CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE = 2;\n  CHANNEL_STORAGE_POLICY_FOREVER = 3;",
            expected: [
                "enum value liverelay.v1.ChannelStoragePolicy.CHANNEL_STORAGE_POLICY_FOREVER: in the .proto, missing from the bindings"
            ]),
        ProtoMutation(
            name: "channels: a field in the empty reply", file: "liverelay.proto",
            old: "message DeleteChannelReply {}", new: "message DeleteChannelReply {\n  bool deleted = 1;\n}",
            expected: ["field liverelay.v1.DeleteChannelReply.deleted: in the .proto, missing from the bindings"]),
        ProtoMutation(
            name: "channels: remove a method", file: "liverelay.proto",
            old: "  rpc DeleteChannel(DeleteChannelRequest) returns (DeleteChannelReply);\n", new: "",
            expected: ["method /liverelay.v1.LiveRelay/DeleteChannel: in the bindings, not in the .proto"]),
    ]
}
