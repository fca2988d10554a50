import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet

/// How the SQL stores keep an idempotency record's reply: two text columns
/// of small JSON, shared by SQLite and PostgreSQL so that both read what
/// either wrote.
extension StoredReply {
    /// `{"targeted":N,"unresolved":[[kind,value,reason],...]}`: how the SQL
    /// stores keep the targets part of the record (one text column, no wire format).
    public var targetsJSON: String {
        var w = JSONWriter()
        w.raw("{\"targeted\":")
        w.integer(Int64(targeted))
        w.raw(",\"unresolved\":[")
        for (i, target) in unresolved.enumerated() {
            w.raw(i == 0 ? "[" : ",[")
            w.string(target.kind.rawValue)
            w.raw(",")
            w.string(target.value)
            w.raw(",")
            w.string(target.reason)
            w.raw("]")
        }
        w.raw("]}")
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// Reads ``targetsJSON`` back; nil for anything else (a corrupt row).
    public init?(timestamp: Int64, state: Activity.State, targetsJSON: String) {
        guard let json = try? JSONValue.parse(Array(targetsJSON.utf8)),
            let targeted = json["targeted"]?.integerValue, targeted >= 0,
            case let .array(items)? = json["unresolved"]
        else { return nil }
        var unresolved: [UnresolvedStartTarget] = []
        for item in items {
            guard case let .array(fields) = item, fields.count == 3,
                let kind = fields[0].stringValue.flatMap(UnresolvedStartTarget.Kind.init(rawValue:)),
                let value = fields[1].stringValue, let reason = fields[2].stringValue
            else { return nil }
            unresolved.append(UnresolvedStartTarget(kind: kind, value: value, reason: reason))
        }
        self.init(timestamp: timestamp, state: state, targeted: Int(targeted), unresolved: unresolved)
    }

    /// `{"delivered":N,"pruned":N,"superseded":N,"expired":N,"failures":{"Reason":N,...}}`:
    /// how the SQL stores keep ``account`` (a text column of its own, so that
    /// settling a call is one UPDATE that need not read the rest of the record).
    public static func accountJSON(_ account: EnqueueResult) -> String {
        var w = JSONWriter()
        for (i, (name, value)) in [
            ("delivered", account.delivered), ("pruned", account.pruned), ("superseded", account.superseded),
            ("expired", account.expired),
        ].enumerated() {
            w.raw(i == 0 ? "{" : ",")
            w.string(name)
            w.raw(":")
            w.integer(Int64(value))
        }
        w.raw(",\"failures\":{")
        for (i, (reason, count)) in account.failures.sorted(by: { $0.key < $1.key }).enumerated() {
            if i > 0 { w.raw(",") }
            w.string(reason)
            w.raw(":")
            w.integer(Int64(count))
        }
        w.raw("}}")
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// Reads ``accountJSON(_:)`` back; nil for anything else (a corrupt row).
    public static func account(json: String) -> EnqueueResult? {
        (try? JSONValue.parse(Array(json.utf8))).flatMap(account(parsed:))
    }

    /// ``account(json:)`` of JSON already parsed (an account inside another document).
    static func account(parsed value: JSONValue) -> EnqueueResult? {
        guard case let .object(failureMembers)? = value["failures"] else { return nil }
        func count(_ v: JSONValue?) -> Int? { v?.integerValue.flatMap { $0 >= 0 ? Int(exactly: $0) : nil } }
        guard let delivered = count(value["delivered"]), let pruned = count(value["pruned"]),
            let superseded = count(value["superseded"]), let expired = count(value["expired"])
        else { return nil }
        var failures: [String: Int] = [:]
        for (reason, n) in failureMembers {
            guard let n = count(n) else { return nil }
            failures[reason, default: 0] += n
        }
        return EnqueueResult(delivered: delivered, pruned: pruned, superseded: superseded, expired: expired, failures: failures)
    }
}
