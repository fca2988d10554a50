import Foundation
import LiveRelayClient
import Testing

/// The shared conformance scenarios (clients/conformance/scenarios.json) through
/// the Swift client, LiveRelayClient. The Python and Go clients run the same
/// file; clients/conformance/README.md describes its format. One server in a
/// fresh data directory is set up as the file's "setup" says (apps, keys and a
/// slow mock APNs made through the admin API), then every scenario runs in the
/// file's order, each step with a client of its own.
@Suite(.serialized)
struct ClientConformanceTests {
    @Test func theSharedScenariosPassThroughTheSwiftClient() async throws {
        let spec = try Conformance.load()
        let env = try await ConformanceServer.start(spec.setup)
        defer { env.stop() }
        var passed = 0
        for scenario in spec.scenarios {
            let name = scenario["name"]?.text ?? "?"
            if let mismatch = scenario["known_mismatch"]?.object,
                mismatch["clients"]?.array.map({ $0.contains(.string("swift")) }) ?? true
            {
                print("conformance: skipping \(name), a known mismatch: \(mismatch["note"]?.text ?? "")")
                continue
            }
            do {
                try await env.run(scenario, variables: spec.variables)
                passed += 1
                print("conformance: \(name) passed")
            } catch {
                Issue.record("\(name): \(error)")
            }
        }
        print("conformance: \(passed) of \(spec.scenarios.count) scenarios passed")
    }
}

// MARK: - The scenario file

/// A JSON value that keeps booleans and numbers apart.
private enum JSON: Decodable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON].self))
        }
    }

    subscript(key: String) -> JSON? { object?[key] }
    var object: [String: JSON]? { if case .object(let value) = self { value } else { nil } }
    var array: [JSON]? { if case .array(let value) = self { value } else { nil } }

    /// The canonical text of a scalar: true/false, decimal integers, strings as they are.
    var text: String {
        switch self {
        case .null: return ""
        case .bool(let value): return value ? "true" : "false"
        case .number(let value):
            return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        case .string(let value): return value
        case .array, .object: return serialized
        }
    }

    /// Compact JSON text, keys sorted.
    var serialized: String {
        switch self {
        case .null: return "null"
        case .bool, .number: return text
        case .string(let value):
            let data = (try? JSONEncoder().encode(value)) ?? Data()
            return String(decoding: data, as: UTF8.self)
        case .array(let values): return "[" + values.map(\.serialized).joined(separator: ",") + "]"
        case .object(let values):
            let members = values.keys.sorted().map { JSON.string($0).serialized + ":" + values[$0]!.serialized }
            return "{" + members.joined(separator: ",") + "}"
        }
    }
}

/// A scenario this runner cannot run (an unknown step, field or key), or a step whose outcome differs.
private struct ConformanceFailure: Error, CustomStringConvertible {
    let description: String
}

private struct Conformance {
    let setup: [String: JSON]
    let variables: [String: String]
    let scenarios: [[String: JSON]]

    static func load() throws -> Conformance {
        let url = E2E.repositoryRoot().appendingPathComponent("clients/conformance/scenarios.json")
        let file = try JSONDecoder().decode(JSON.self, from: Data(contentsOf: url))
        return Conformance(
            setup: file["setup"]?.object ?? [:],
            variables: (file["vars"]?.object ?? [:]).mapValues(\.text),
            scenarios: (file["scenarios"]?.array ?? []).compactMap(\.object))
    }
}

/// `$name` strings become the variable's value; {"$repeat": s, "times": n} becomes s repeated n times.
private func expand(_ value: JSON, _ variables: [String: String]) throws -> JSON {
    switch value {
    case .string(let text) where text.hasPrefix("$"):
        guard let replacement = variables[String(text.dropFirst())] else {
            throw ConformanceFailure(description: "unknown variable \(text)")
        }
        return .string(replacement)
    case .object(let members):
        if let unit = members["$repeat"] {
            return .string(String(repeating: unit.text, count: Int(members["times"]?.text ?? "0") ?? 0))
        }
        return .object(try members.mapValues { try expand($0, variables) })
    case .array(let values):
        return .array(try values.map { try expand($0, variables) })
    default:
        return value
    }
}

// MARK: - Requests: a step's fields mapped onto the typed messages

/// A step's request fields, read one by one; `finish` refuses any field left unread.
private struct Fields {
    let message: String
    let values: [String: JSON]
    private var read: Set<String> = []

    init(_ message: String, _ value: JSON?) throws {
        guard let values = (value ?? .object([:])).object else { throw ConformanceFailure(description: "\(message): not an object") }
        self.message = message
        self.values = values
    }

    private mutating func take(_ name: String) -> JSON? {
        read.insert(name)
        return values[name]
    }

    private func wrong(_ name: String, _ what: String) -> ConformanceFailure {
        ConformanceFailure(description: "\(message).\(name) is not \(what)")
    }

    mutating func string(_ name: String) throws -> String? {
        guard let value = take(name) else { return nil }
        guard case .string(let text) = value else { throw wrong(name, "a string") }
        return text
    }

    mutating func bool(_ name: String) throws -> Bool? {
        guard let value = take(name) else { return nil }
        guard case .bool(let flag) = value else { throw wrong(name, "a boolean") }
        return flag
    }

    mutating func number(_ name: String) throws -> Double? {
        guard let value = take(name) else { return nil }
        guard case .number(let number) = value else { throw wrong(name, "a number") }
        return number
    }

    mutating func integer<Integer: FixedWidthInteger>(_ name: String, as _: Integer.Type = Integer.self) throws -> Integer? {
        guard let number = try number(name) else { return nil }
        guard let integer = Integer(exactly: number) else { throw wrong(name, "an integer of its type") }
        return integer
    }

    /// An enum value by its .proto name.
    mutating func enumeration(_ name: String) throws -> Int32? {
        guard let text = try string(name) else { return nil }
        guard let number = enumNumbers[text] else { throw wrong(name, "a known enum value name") }
        return number
    }

    /// A JSON text field: text is sent as it is, an object as its compact JSON.
    mutating func json(_ name: String) throws -> String? {
        guard let value = take(name) else { return nil }
        if case .string(let text) = value { return text }
        return value.serialized
    }

    mutating func strings(_ name: String) throws -> [String]? {
        guard let value = take(name) else { return nil }
        guard let items = value.array else { throw wrong(name, "a list") }
        return try items.map { item in
            guard case .string(let text) = item else { throw wrong(name, "a list of strings") }
            return text
        }
    }

    mutating func nested(_ name: String) throws -> Fields? {
        guard let value = take(name) else { return nil }
        return try Fields("\(message).\(name)", value)
    }

    func finish() throws {
        let unknown = Set(values.keys).subtracting(read)
        if !unknown.isEmpty { throw ConformanceFailure(description: "\(message) has no field \(unknown.sorted())") }
    }
}

private let enumNumbers: [String: Int32] = [
    "TOKEN_KIND_UNSPECIFIED": 0, "TOKEN_KIND_PUSH_TO_START": 1, "TOKEN_KIND_UPDATE": 2,
    "ENVIRONMENT_UNSPECIFIED": 0, "ENVIRONMENT_SANDBOX": 1, "ENVIRONMENT_PRODUCTION": 2,
    "CHANNEL_STORAGE_POLICY_UNSPECIFIED": 0, "CHANNEL_STORAGE_POLICY_NO_STORAGE": 1,
    "CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE": 2,
    "PRIORITY_UNSPECIFIED": 0, "PRIORITY_LOW": 5, "PRIORITY_HIGH": 10,
]

private func alert(_ fields: Fields?) throws -> Alert? {
    guard var f = fields else { return nil }
    let alert = Alert(title: try f.string("title"), body: try f.string("body"), sound: try f.string("sound"))
    try f.finish()
    return alert
}

private func targets(_ fields: Fields?) throws -> Targets? {
    guard var f = fields else { return nil }
    let targets = Targets(
        pushToStartTokens: try f.strings("push_to_start_tokens") ?? [], externalUserIDs: try f.strings("external_user_ids") ?? [],
        allDevices: try f.bool("all_devices"))
    try f.finish()
    return targets
}

private func quotas(_ fields: Fields?) throws -> Admin.Quotas? {
    guard var f = fields else { return nil }
    let quotas = Admin.Quotas(
        callsPerSecond: try f.number("calls_per_second"), burst: try f.integer("burst"), pushesPerHour: try f.integer("pushes_per_hour"),
        maxTokens: try f.integer("max_tokens"), maxLiveActivities: try f.integer("max_live_activities"),
        priorityBudgetPerHour: try f.integer("priority_budget_per_hour"))
    try f.finish()
    return quotas
}

/// A reply as the values at each of its dotted paths (`[*]` marking every element of a repeated field),
/// named as in the .proto's reply message.
private typealias Flat = [String: [String]]

private typealias PreparedCall = @Sendable (LiveRelayClient, Duration?) async throws(LiveRelayClientError) -> Flat

/// The typed request of a step, and the client's typed method that sends it.
private func prepare(_ rpc: String, _ value: JSON?) throws -> PreparedCall {
    var f = try Fields(rpc, value)
    let call: PreparedCall
    switch rpc {
    case "RegisterToken":
        let request = RegisterTokenRequest(
            appID: try f.string("app_id") ?? "", kind: TokenKind(rawValue: try f.enumeration("kind") ?? 0),
            token: try f.string("token") ?? "",
            environment: Environment(rawValue: try f.enumeration("environment") ?? 0),
            attributesType: try f.string("attributes_type") ?? "",
            activityID: try f.string("activity_id") ?? "", externalUserID: try f.string("external_user_id") ?? "",
            deviceID: try f.string("device_id") ?? "", expiresAt: try f.integer("expires_at") ?? 0, remove: try f.bool("remove") ?? false)
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.registerToken(request, timeout: timeout)) }
    case "StartActivity":
        var request = StartActivityRequest(
            appID: "", activityID: "", attributesType: "", attributesJSON: "", contentStateJSON: "", targets: Targets())
        request.appID = try f.string("app_id")
        request.activityID = try f.string("activity_id")
        request.attributesType = try f.string("attributes_type")
        request.attributesJSON = try f.json("attributes_json")
        request.contentStateJSON = try f.json("content_state_json")
        request.targets = try targets(f.nested("targets"))
        request.alert = try alert(f.nested("alert"))
        request.staleDate = try f.integer("stale_date")
        request.dismissalDate = try f.integer("dismissal_date")
        request.relevanceScore = try f.number("relevance_score")
        request.priority = try f.enumeration("priority").map(Priority.init(rawValue:))
        request.idempotencyKey = try f.string("idempotency_key")
        request.waitForDelivery = try f.bool("wait_for_delivery")
        request.channelID = try f.string("channel_id")
        request.inputPushToken = try f.bool("input_push_token")
        request.strictPriorityBudget = try f.bool("strict_priority_budget")
        call = { [request] client, timeout throws(LiveRelayClientError) in
            flatten(try await client.startActivity(request, timeout: timeout))
        }
    case "UpdateActivity":
        var request = UpdateActivityRequest(appID: "", activityID: "", contentStateJSON: nil)
        request.appID = try f.string("app_id")
        request.activityID = try f.string("activity_id")
        request.contentStateJSON = try f.json("content_state_json")
        request.alert = try alert(f.nested("alert"))
        request.staleDate = try f.integer("stale_date")
        request.dismissalDate = try f.integer("dismissal_date")
        request.relevanceScore = try f.number("relevance_score")
        request.priority = try f.enumeration("priority").map(Priority.init(rawValue:))
        request.endActivity = try f.bool("end_activity")
        request.idempotencyKey = try f.string("idempotency_key")
        request.waitForDelivery = try f.bool("wait_for_delivery")
        request.channelID = try f.string("channel_id")
        request.channelOnly = try f.bool("channel_only")
        request.strictPriorityBudget = try f.bool("strict_priority_budget")
        call = { [request] client, timeout throws(LiveRelayClientError) in
            flatten(try await client.updateActivity(request, timeout: timeout))
        }
    case "EndActivity":
        var request = EndActivityRequest(appID: "", activityID: "")
        request.appID = try f.string("app_id")
        request.activityID = try f.string("activity_id")
        request.contentStateJSON = try f.json("content_state_json")
        request.dismissalDate = try f.integer("dismissal_date")
        request.idempotencyKey = try f.string("idempotency_key")
        request.waitForDelivery = try f.bool("wait_for_delivery")
        request.alert = try alert(f.nested("alert"))
        request.priority = try f.enumeration("priority").map(Priority.init(rawValue:))
        request.staleDate = try f.integer("stale_date")
        request.relevanceScore = try f.number("relevance_score")
        request.channelID = try f.string("channel_id")
        request.channelOnly = try f.bool("channel_only")
        request.strictPriorityBudget = try f.bool("strict_priority_budget")
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.endActivity(request, timeout: timeout))
        }
    case "Ping":
        let request = PingRequest(payload: Array((try f.string("payload") ?? "").utf8))
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.ping(request, timeout: timeout)) }
    case "CreateChannel":
        let request = CreateChannelRequest(
            appID: try f.string("app_id") ?? "", environment: Environment(rawValue: try f.enumeration("environment") ?? 0),
            storagePolicy: BroadcastStoragePolicy(rawValue: try f.enumeration("storage_policy") ?? 0))
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.createChannel(request, timeout: timeout)) }
    case "ListChannels":
        let request = ListChannelsRequest(
            appID: try f.string("app_id") ?? "", environment: Environment(rawValue: try f.enumeration("environment") ?? 0),
            pageSize: try f.integer("page_size") ?? 0, pageToken: try f.string("page_token") ?? "")
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.listChannels(request, timeout: timeout)) }
    case "DeleteChannel":
        let request = DeleteChannelRequest(appID: try f.string("app_id") ?? "", channelID: try f.string("channel_id") ?? "")
        call = { client, timeout throws(LiveRelayClientError) in
            _ = try await client.deleteChannel(request, timeout: timeout)
            return [:]
        }
    case "ListEvents":
        let request = ListEventsRequest(
            appID: try f.string("app_id") ?? "", afterCursor: try f.integer("after_cursor") ?? 0,
            maxEvents: try f.integer("max_events") ?? 0, waitMS: try f.integer("wait_ms") ?? 0)
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.listEvents(request, timeout: timeout)) }
    case "CreateApp":
        var request = Admin.CreateAppRequest(appID: "", bundleID: "")
        request.appID = try f.string("app_id")
        request.bundleID = try f.string("bundle_id")
        request.queueCapacity = try f.integer("queue_capacity")
        request.weight = try f.integer("weight")
        request.maxPushLifetimeSeconds = try f.integer("max_push_lifetime_s")
        request.quotas = try quotas(f.nested("quotas"))
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.createApp(request, timeout: timeout)) }
    case "GetApp":
        var request = Admin.GetAppRequest(appID: "")
        request.appID = try f.string("app_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.getApp(request, timeout: timeout)) }
    case "DisableApp":
        var request = Admin.DisableAppRequest(appID: "")
        request.appID = try f.string("app_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.disableApp(request, timeout: timeout)) }
    case "ListApps":
        let request = Admin.ListAppsRequest(
            pageSize: try f.integer("page_size"), pageToken: try f.string("page_token"), includeDisabled: try f.bool("include_disabled"))
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.listApps(request, timeout: timeout)) }
    case "GetAppStats":
        var request = Admin.GetAppStatsRequest(appID: "")
        request.appID = try f.string("app_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.getAppStats(request, timeout: timeout))
        }
    case "CreateAPIKey":
        let request = Admin.CreateAPIKeyRequest(
            appIDs: try f.strings("app_ids") ?? [], allApps: try f.bool("all_apps"), allowedMethods: try f.strings("allowed_methods") ?? [],
            admin: try f.bool("admin"), label: try f.string("label"))
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.createAPIKey(request, timeout: timeout)) }
    case "ListAPIKeys":
        let request = Admin.ListAPIKeysRequest(
            appID: try f.string("app_id"), includeRevoked: try f.bool("include_revoked"), pageSize: try f.integer("page_size"),
            pageToken: try f.string("page_token"))
        call = { client, timeout throws(LiveRelayClientError) in flatten(try await client.listAPIKeys(request, timeout: timeout)) }
    case "RevokeAPIKey":
        var request = Admin.RevokeAPIKeyRequest(keyID: "")
        request.keyID = try f.string("key_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in
            flatten(try await client.revokeAPIKey(request, timeout: timeout))
        }
    case "PutWebhook":
        var request = Admin.PutWebhookRequest(appID: "", url: "")
        request.appID = try f.string("app_id")
        request.url = try f.string("url")
        request.eventKinds = try f.strings("event_kinds") ?? []
        request.rotateSecret = try f.bool("rotate_secret")
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.putWebhook(request, timeout: timeout)) }
    case "GetWebhook":
        var request = Admin.GetWebhookRequest(appID: "")
        request.appID = try f.string("app_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in flatten(try await client.getWebhook(request, timeout: timeout)) }
    case "DeleteWebhook":
        var request = Admin.DeleteWebhookRequest(appID: "")
        request.appID = try f.string("app_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in
            flatten(try await client.deleteWebhook(request, timeout: timeout))
        }
    case "ResetWebhook":
        var request = Admin.ResetWebhookRequest(appID: "")
        request.appID = try f.string("app_id")
        call = { [request] client, timeout throws(LiveRelayClientError) in
            flatten(try await client.resetWebhook(request, timeout: timeout))
        }
    default:
        throw ConformanceFailure(description: "this runner does not know the step \(rpc): implement it in all three runners")
    }
    try f.finish()
    return call
}

// MARK: - Replies, flattened

private func name(_ state: ActivityState) -> String {
    let names = ["UNSPECIFIED", "STARTING", "ACTIVE", "ENDED", "EXPIRED", "DISMISSED"]
    let raw = Int(state.rawValue)
    return raw < names.count && raw >= 0 ? "ACTIVITY_STATE_" + names[raw] : String(raw)
}

private func name(_ result: RegisterTokenResult) -> String {
    let names = ["UNSPECIFIED", "CREATED", "ROTATED", "UNCHANGED", "REMOVED", "NOT_FOUND"]
    let raw = Int(result.rawValue)
    return raw < names.count && raw >= 0 ? "REGISTER_TOKEN_RESULT_" + names[raw] : String(raw)
}

private func name(_ environment: Environment) -> String {
    let names = ["UNSPECIFIED", "SANDBOX", "PRODUCTION"]
    let raw = Int(environment.rawValue)
    return raw < names.count && raw >= 0 ? "ENVIRONMENT_" + names[raw] : String(raw)
}

private func name(_ policy: BroadcastStoragePolicy) -> String {
    let names = ["UNSPECIFIED", "NO_STORAGE", "MOST_RECENT_MESSAGE"]
    let raw = Int(policy.rawValue)
    return raw < names.count && raw >= 0 ? "CHANNEL_STORAGE_POLICY_" + names[raw] : String(raw)
}

private func name(_ kind: EventKind) -> String {
    let names = [
        "UNSPECIFIED", "CALL_SETTLED", "PUSH_FAILED", "TOKEN_PRUNED", "ACTIVITY_ENDED", "DISPATCH_HELD", "DISPATCH_RESUMED",
        "CHANNEL_DELETED",
    ]
    let raw = Int(kind.rawValue)
    return raw < names.count && raw >= 0 ? "EVENT_KIND_" + names[raw] : String(raw)
}

private func name(_ kind: TokenKind) -> String {
    let names = ["UNSPECIFIED", "PUSH_TO_START", "UPDATE"]
    let raw = Int(kind.rawValue)
    return raw < names.count && raw >= 0 ? "TOKEN_KIND_" + names[raw] : String(raw)
}

private func text(_ value: (some CustomStringConvertible)?) -> String { value.map { "\($0)" } ?? "" }
private func text(_ value: Bool?) -> String { (value ?? false) ? "true" : "false" }
private func text(_ value: (some BinaryInteger)?) -> String { value.map { "\($0)" } ?? "0" }

extension Dictionary where Key == String, Value == [String] {
    fileprivate mutating func put(_ prefix: String, _ values: [String: String]) {
        for (path, value) in values { self[prefix + path, default: []].append(value) }
    }
}

private func summary(_ s: DeliverySummary?) -> [String: String] {
    let s = s ?? DeliverySummary()
    return [
        "summary.targeted": text(s.targeted), "summary.queued": text(s.queued), "summary.delivered": text(s.delivered),
        "summary.failed": text(s.failed), "summary.pruned": text(s.pruned), "summary.superseded": text(s.superseded),
        "summary.expired": text(s.expired), "summary.complete": text(s.complete), "summary.downgraded": text(s.downgraded),
    ]
}

private func channel(_ c: BroadcastChannel?) -> [String: String] {
    guard let c else { return ["app_id": "", "channel_id": "", "environment": "ENVIRONMENT_UNSPECIFIED"] }
    return [
        "app_id": c.appID, "channel_id": c.channelID, "environment": name(c.environment), "storage_policy": name(c.storagePolicy),
        "created_at": text(c.createdAt),
    ]
}

private func app(_ a: Admin.App?) -> [String: String] {
    let a = a ?? Admin.App()
    return [
        "app_id": text(a.appID), "bundle_id": text(a.bundleID), "enabled": text(a.enabled), "queue_capacity": text(a.queueCapacity),
        "weight": text(a.weight), "max_push_lifetime_s": text(a.maxPushLifetimeSeconds), "created_at_ms": text(a.createdAtMS),
        "updated_at_ms": text(a.updatedAtMS), "owner": text(a.owner),
    ]
}

private func key(_ k: Admin.APIKey?, into flat: inout Flat, prefix: String) {
    let k = k ?? Admin.APIKey()
    flat.put(
        prefix,
        [
            "key_id": text(k.keyID), "all_apps": text(k.allApps), "admin": text(k.admin), "label": text(k.label),
            "created_at_ms": text(k.createdAtMS), "last_used_at_ms": text(k.lastUsedAtMS), "revoked_at_ms": text(k.revokedAtMS),
            "owner": text(k.owner),
        ])
    flat[prefix + "app_ids[*]", default: []].append(contentsOf: k.appIDs)
    flat[prefix + "allowed_methods[*]", default: []].append(contentsOf: k.allowedMethods)
}

private func flatten(_ r: RegisterTokenReply) -> Flat {
    ["result": [name(r.result)], "replaced_token": [r.replacedToken]]
}

private func flatten(_ r: StartActivityReply) -> Flat {
    var flat: Flat = [:]
    flat.put("", summary(r.summary))
    flat.put(
        "", ["activity_id": r.activityID, "timestamp": text(r.timestamp), "replayed": text(r.replayed), "state": name(r.state)])
    return flat
}

private func flatten(_ r: UpdateActivityReply) -> Flat {
    var flat: Flat = [:]
    flat.put("", summary(r.summary))
    flat.put("", ["timestamp": text(r.timestamp), "replayed": text(r.replayed), "state": name(r.state)])
    return flat
}

private func flatten(_ r: EndActivityReply) -> Flat {
    var flat: Flat = [:]
    flat.put("", summary(r.summary))
    flat.put("", ["timestamp": text(r.timestamp), "replayed": text(r.replayed), "state": name(r.state)])
    return flat
}

private func flatten(_ r: PingReply) -> Flat {
    [
        "payload": [String(decoding: r.payload, as: UTF8.self)], "server_time_ms": [text(r.serverTimeMS)],
        "server_version": [r.serverVersion],
    ]
}

private func flatten(_ r: CreateChannelReply) -> Flat {
    var flat: Flat = [:]
    flat.put("channel.", channel(r.channel))
    return flat
}

private func flatten(_ r: ListChannelsReply) -> Flat {
    var flat: Flat = ["next_page_token": [r.nextPageToken]]
    for c in r.channels { flat.put("channels[*].", channel(c)) }
    return flat
}

private func flatten(_ r: ListEventsReply) -> Flat {
    var flat: Flat = ["next_cursor": [text(r.nextCursor)], "more": [text(r.more)]]
    for e in r.events {
        flat.put(
            "events[*].",
            [
                "cursor": text(e.cursor), "kind": name(e.kind), "time_ms": text(e.timeMS), "activity_id": e.activityID,
                "call_timestamp": text(e.callTimestamp), "idempotency_key": e.idempotencyKey, "token": e.token,
                "token_kind": name(e.tokenKind), "reason": e.reason, "invalid_since_ms": text(e.invalidSinceMS),
                "activity_state": name(e.activityState), "channel_id": e.channelID,
            ])
        // An absent account reads as its defaults, as in the other runners.
        for (path, value) in summary(e.account) {
            flat["events[*].account." + path.dropFirst("summary.".count), default: []].append(value)
        }
    }
    return flat
}

private func flatten(_ r: Admin.AppReply) -> Flat {
    var flat: Flat = [:]
    flat.put("app.", app(r.app))
    return flat
}

private func flatten(_ r: Admin.ListAppsReply) -> Flat {
    var flat: Flat = ["next_page_token": [text(r.nextPageToken)]]
    for a in r.apps { flat.put("apps[*].", app(a)) }
    return flat
}

private func flatten(_ r: Admin.AppStats) -> Flat {
    [
        "app_id": [text(r.appID)], "queue_depth": [text(r.queueDepth)], "queue_capacity": [text(r.queueCapacity)],
        "pushes_last_hour": [text(r.pushesLastHour)], "tokens": [text(r.tokens)], "live_activities": [text(r.liveActivities)],
        "nodes": [text(r.nodes)], "held_reason": [text(r.heldReason)], "held_for_ms": [text(r.heldForMS)],
        "webhook_state": [text(r.webhookState)], "webhook_backlog": [text(r.webhookBacklog)],
    ]
}

private func webhook(_ w: Admin.Webhook?, into flat: inout Flat) {
    let w = w ?? Admin.Webhook()
    flat.put(
        "webhook.",
        [
            "app_id": text(w.appID), "url": text(w.url), "created_at_ms": text(w.createdAtMS), "updated_at_ms": text(w.updatedAtMS),
            "state": text(w.state), "delivered_cursor": text(w.deliveredCursor), "last_success_at_ms": text(w.lastSuccessAtMS),
            "last_error": text(w.lastError), "failing_since_ms": text(w.failingSinceMS), "attempts": text(w.attempts),
        ])
    flat["webhook.event_kinds[*]", default: []].append(contentsOf: w.eventKinds)
}

private func flatten(_ r: Admin.PutWebhookReply) -> Flat {
    var flat: Flat = ["signing_secret": [text(r.signingSecret)]]
    webhook(r.webhook, into: &flat)
    return flat
}

private func flatten(_ r: Admin.WebhookReply) -> Flat {
    var flat: Flat = [:]
    webhook(r.webhook, into: &flat)
    return flat
}

private func flatten(_ r: Admin.CreateAPIKeyReply) -> Flat {
    var flat: Flat = ["secret": [text(r.secret)]]
    key(r.key, into: &flat, prefix: "key.")
    return flat
}

private func flatten(_ r: Admin.APIKeyReply) -> Flat {
    var flat: Flat = [:]
    key(r.key, into: &flat, prefix: "key.")
    return flat
}

private func flatten(_ r: Admin.ListAPIKeysReply) -> Flat {
    var flat: Flat = ["next_page_token": [text(r.nextPageToken)]]
    for k in r.keys { key(k, into: &flat, prefix: "keys[*].") }
    return flat
}

// MARK: - The server and the steps

private final class ConformanceServer {
    let server: ServerProcess
    let mocks: [ServerProcess]
    let dataDir: URL
    let port: Int
    let keys: [String: String]

    private init(server: ServerProcess, mocks: [ServerProcess], dataDir: URL, port: Int, keys: [String: String]) {
        self.server = server
        self.mocks = mocks
        self.dataDir = dataDir
        self.port = port
        self.keys = keys
    }

    func stop() {
        for mock in mocks { mock.stop() }
        server.stop()
        try? FileManager.default.removeItem(at: dataDir)
    }

    static func configuration(port: Int, dataDir: URL, key: String) -> LiveRelayClient.Configuration {
        LiveRelayClient.Configuration(
            host: "127.0.0.1", port: port, tls: .trusting(caFile: dataDir.path + "/cert.pem"), apiKey: key, clientName: "conformance")
    }

    /// Starts the server and makes the setup's apps, slow mock APNs and keys through the admin API.
    static func start(_ setup: [String: JSON]) async throws -> ConformanceServer {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-conformance")
        // Minted before the first start, so the server knows it from its first HELLO on.
        let bootstrap = try E2E.run(binary.path, ["admin", "bootstrap", "--data-dir", dataDir.path], environment: [:], timeout: 60)
        guard
            let adminKey = bootstrap.output.split(separator: "\n").first(where: { $0.hasPrefix("export LIVERELAY_ADMIN_KEY=") })
                .map({ String($0.dropFirst("export LIVERELAY_ADMIN_KEY=".count)) })
        else { throw ConformanceFailure(description: "admin bootstrap printed no key:\n\(bootstrap.output)") }
        let server = try ServerProcess.start(binary: binary, dataDir: dataDir)
        var mocks: [ServerProcess] = []
        do {
            guard let port = server.waitUntilListening(timeout: 120)?.port, let devKey = server.apiKey() else {
                throw ConformanceFailure(description: "the server did not start:\n\(server.transcript())")
            }
            var keys = ["dev": devKey, "admin": adminKey]
            for (name, value) in setup["fixed_keys"]?.object ?? [:] { keys[name] = value.text }
            try await waitUntilAccepted(port: port, dataDir: dataDir, key: adminKey)
            let p8 = dataDir.path + "/apns-dev-key.p8"
            let keySpecs = (setup["keys"]?.object ?? [:]).sorted { $0.key < $1.key }
            let minted: [String: String] = try await LiveRelayClient.withClient(
                configuration: configuration(port: port, dataDir: dataDir, key: adminKey)
            ) { admin in
                for appSpec in (setup["apps"]?.array ?? []).compactMap(\.object) {
                    let appID = appSpec["app_id"]?.text ?? ""
                    let bundleID = appSpec["bundle_id"]?.text ?? ""
                    var create = Admin.CreateAppRequest(appID: appID, bundleID: bundleID)
                    create.quotas = try quotas(appSpec["quotas"].map { try Fields("quotas", $0) })
                    _ = try await admin.createApp(create)
                    guard let slow = appSpec["slow_apns"] else { continue }
                    let team = slow["team_id"]?.text ?? ""
                    let keyID = slow["key_id"]?.text ?? ""
                    let certificate = dataDir.path + "/mock-\(appID).pem"
                    let mock = try ServerProcess.launch(
                        binary: binary,
                        arguments: [
                            "mock-apns", "--host", "127.0.0.1", "--port", "0", "--cert-out", certificate,
                            "--latency-ms", slow["latency_ms"]?.text ?? "0", "--app", "\(bundleID),\(team),\(keyID),\(p8)",
                        ])
                    mocks.append(mock)
                    // The certificate is written after the listening line.
                    let deadline = Date().addingTimeInterval(60)
                    var mockPort: Int?
                    while Date() < deadline, mockPort == nil {
                        if let listening = mock.waitUntilListening(timeout: 1), mock.transcript().contains("certificate (self-signed") {
                            mockPort = listening.port
                        }
                    }
                    guard let mockPort else { throw ConformanceFailure(description: "the mock APNs did not start:\n\(mock.transcript())") }
                    var credentials = Admin.PutAPNsCredentialsRequest(appID: appID, teamID: team, keyID: keyID)
                    credentials.privateKeyPEM = Array(try Data(contentsOf: URL(fileURLWithPath: p8)))
                    credentials.endpoint = "127.0.0.1:\(mockPort)"
                    credentials.trustCertificatePEM = Array(try Data(contentsOf: URL(fileURLWithPath: certificate)))
                    _ = try await admin.putAPNsCredentials(credentials)
                }
                var minted: [String: String] = [:]
                for (name, spec) in keySpecs {
                    let request = Admin.CreateAPIKeyRequest(
                        appIDs: spec["app_ids"]?.array?.map(\.text) ?? [], allApps: spec["all_apps"] == .bool(true) ? true : nil,
                        allowedMethods: spec["allowed_methods"]?.array?.map(\.text) ?? [], label: spec["label"]?.text)
                    minted[name] = try await admin.createAPIKey(request).secret ?? ""
                }
                return minted
            }
            keys.merge(minted) { $1 }
            for (name, _) in keySpecs { try await waitUntilAccepted(port: port, dataDir: dataDir, key: keys[name] ?? "") }
            return ConformanceServer(server: server, mocks: mocks, dataDir: dataDir, port: port, keys: keys)
        } catch {
            for mock in mocks { mock.stop() }
            server.stop()
            throw error
        }
    }

    /// A key minted while the server runs is accepted once the server has reloaded its registry (a 1 s poll).
    static func waitUntilAccepted(port: Int, dataDir: URL, key: String) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let refused: LiveRelayClientError? = await LiveRelayClient.withClient(
                configuration: configuration(port: port, dataDir: dataDir, key: key)
            ) { (client: LiveRelayClient) async -> LiveRelayClientError? in
                do throws(LiveRelayClientError) {
                    _ = try await client.ping()
                    return nil
                } catch {
                    return error.status == .unauthenticated ? error : nil
                }
            }
            guard let refused else { return }
            if ContinuousClock.now > deadline { throw ConformanceFailure(description: "the key was not accepted: \(refused)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    func run(_ scenario: [String: JSON], variables initial: [String: String]) async throws {
        var variables = initial
        for (index, step) in (scenario["steps"]?.array ?? []).enumerated() {
            guard let step = step.object else { throw ConformanceFailure(description: "step \(index + 1) is not an object") }
            let unknown = Set(step.keys).subtracting(["rpc", "request", "expect", "key", "eventually", "timeout_ms", "save"])
            if !unknown.isEmpty { throw ConformanceFailure(description: "step \(index + 1): unknown step keys \(unknown.sorted())") }
            let rpc = step["rpc"]?.text ?? ""
            let keyName = step["key"]?.text ?? scenario["key"]?.text ?? ""
            let secret = keyName.hasPrefix("$") ? try expand(.string(keyName), variables).text : keys[keyName]
            guard let secret else { throw ConformanceFailure(description: "unknown key \(keyName)") }
            let call = try prepare(rpc, try step["request"].map { try expand($0, variables) })
            let timeout = step["timeout_ms"].flatMap { Int($0.text) }.map { Duration.milliseconds($0) }
            let deadline = ContinuousClock.now + .seconds(step["eventually"] == .bool(true) ? 30 : 0)
            var outcome: Result<Flat, LiveRelayClientError>
            var problem: String?
            repeat {
                outcome = await LiveRelayClient.withClient(configuration: Self.configuration(port: port, dataDir: dataDir, key: secret)) {
                    (client: LiveRelayClient) async -> Result<Flat, LiveRelayClientError> in
                    do throws(LiveRelayClientError) {
                        return .success(try await call(client, timeout))
                    } catch {
                        return .failure(error)
                    }
                }
                problem = try check(step["expect"], outcome, variables)
                if problem == nil || ContinuousClock.now > deadline { break }
                try await Task.sleep(for: .milliseconds(100))
            } while true
            if let problem { throw ConformanceFailure(description: "step \(index + 1), \(rpc) as \(keyName): \(problem)") }
            for (variable, path) in step["save"]?.object ?? [:] {
                guard case .success(let flat) = outcome, let values = flat[path.text], values.count == 1 else {
                    throw ConformanceFailure(description: "save \(variable) from \(path.text): not one value")
                }
                variables[variable] = values[0]
            }
        }
    }

    /// nil when the outcome is the one the step expects; otherwise what differs.
    func check(_ expect: JSON?, _ outcome: Result<Flat, LiveRelayClientError>, _ variables: [String: String]) throws -> String? {
        if let fields = expect?["ok"]?.object {
            let flat: Flat
            switch outcome {
            case .success(let reply): flat = reply
            case .failure(let error):
                return
                    "expected OK, got \(error.status) reason \"\(error.details.reason)\" fields \(error.details.fieldViolations.map(\.field)): \(error.message)"
            }
            for (path, wanted) in fields.sorted(by: { $0.key < $1.key }) {
                guard let values = flat[path] ?? (path.contains("[*]") ? [] : nil) else {
                    throw ConformanceFailure(description: "the reply has no field \(path) (add it to this runner's flatten)")
                }
                if let list = wanted.array {
                    // A list: exactly these values, in this order.
                    let wantedValues = try list.map { try expand($0, variables).text }
                    if values != wantedValues { return "reply field \(path): expected \(wantedValues), got \(values)" }
                    continue
                }
                let want = try expand(wanted, variables).text
                let good: Bool
                if want == "<set>" {
                    good =
                        !values.isEmpty
                        && values.allSatisfy { !["", "0", "false"].contains($0) && !$0.hasSuffix("_UNSPECIFIED") }
                } else if path.contains("[*]") {
                    good = values.contains(want)
                } else {
                    good = values == [want]
                }
                if !good { return "reply field \(path): expected \"\(want)\", got \(values)" }
            }
            return nil
        }
        guard let wanted = expect?["error"]?.object, let status = wanted["status"]?.text else {
            throw ConformanceFailure(description: "a step expects neither ok nor error")
        }
        guard case .failure(let error) = outcome else { return "expected \(status), got OK" }
        if error.status.description != status {
            return "expected \(status), got \(error.status) reason \"\(error.details.reason)\": \(error.message)"
        }
        if let reason = wanted["reason"]?.text, error.details.reason != reason {
            return "expected reason \"\(reason)\", got \"\(error.details.reason)\": \(error.message)"
        }
        if let field = wanted["field"]?.text, !error.details.fieldViolations.contains(where: { $0.field == field }) {
            return "expected a field violation of \(field), got \(error.details.fieldViolations.map(\.field)): \(error.message)"
        }
        if let retryAfter = wanted["retry_after"], (error.details.retryAfterMS > 0) != (retryAfter == .bool(true)) {
            return "expected retry_after present=\(retryAfter.text), got \(error.details.retryAfterMS) ms"
        }
        return nil
    }
}
