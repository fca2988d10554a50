import LiveRelayAPNs
import LiveRelayEndpoint

/// The checks every registry value passes before the rules write it: what a
/// node must be able to serve once it loads the registry. A value that fails
/// here would otherwise fail on every node at once, at its next load.
enum RegistryValidation {
    /// Up to a year: far beyond any activity's life, and far from TimeAmount's overflow.
    static let maxPushLifetimeSeconds = 31_536_000

    static func check(_ app: RegisteredApp) throws(RegistryError) {
        try checkAppID(app.id, field: "app_id")
        let bundle = app.bundleID.utf8
        guard !bundle.isEmpty, bundle.count <= 255, bundle.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw .invalid(field: "bundle_id", detail: "must be 1 to 255 bytes without spaces or control characters")
        }
        if let capacity = app.queueCapacity, capacity <= 0 {
            throw .invalid(field: "queue_capacity", detail: "must be above 0, not \(capacity)")
        }
        if let weight = app.weight, weight <= 0 {
            throw .invalid(field: "weight", detail: "must be above 0, not \(weight)")
        }
        if let lifetime = app.maxPushLifetimeSeconds, !(0...maxPushLifetimeSeconds).contains(lifetime) {
            throw .invalid(field: "max_push_lifetime_s", detail: "must be 0 to \(maxPushLifetimeSeconds), not \(lifetime)")
        }
        try check(app.quotas)
        if let credentials = app.credentials { try check(credentials) }
        if let webhook = app.webhook { try check(webhook) }
    }

    static func check(_ webhook: RegisteredWebhook) throws(RegistryError) {
        if case let .failure(error) = WebhookURL.parse(webhook.url) { throw .invalid(field: "url", detail: error.message) }
        let secret = webhook.secret.utf8
        guard secret.count == 70, webhook.secret.hasPrefix("whsec_"),
            secret.dropFirst(6).allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw .invalid(field: "signing_secret", detail: "must be whsec_ and 64 lowercase hex digits") }
    }

    static func check(_ quotas: RegisteredQuotas) throws(RegistryError) {
        if let rate = quotas.callsPerSecond, !(rate.isFinite && rate >= 0) {
            throw .invalid(field: "quotas.calls_per_second", detail: "must be a finite number of at least 0")
        }
        for (field, value) in [
            ("quotas.burst", quotas.burst), ("quotas.pushes_per_hour", quotas.pushesPerHour), ("quotas.max_tokens", quotas.maxTokens),
            ("quotas.max_live_activities", quotas.maxLiveActivities),
        ] {
            if let value, value < 0 { throw .invalid(field: field, detail: "must be at least 0, not \(value)") }
        }
        if let budget = quotas.priorityBudgetPerHour, !(0...Int(Int32.max)).contains(budget) {
            throw .invalid(field: "quotas.priority_budget_per_hour", detail: "must be 0 to \(Int32.max), not \(budget)")
        }
    }

    static func check(_ credentials: RegisteredCredentials) throws(RegistryError) {
        guard !credentials.teamID.isEmpty else { throw .invalid(field: "team_id", detail: "is empty") }
        guard !credentials.keyID.isEmpty else { throw .invalid(field: "key_id", detail: "is empty") }
        do {
            _ = try APNsDestination(parsing: credentials.endpoint)
        } catch {
            throw .invalid(field: "endpoint", detail: error.description)
        }
        switch credentials.keySource {
        case let .stored(pem) where pem.isEmpty: throw .invalid(field: "private_key_pem", detail: "is empty")
        case let .file(path) where path.isEmpty: throw .invalid(field: "private_key_file", detail: "is empty")
        case let .environment(name) where name.isEmpty: throw .invalid(field: "private_key_env", detail: "is empty")
        default: break
        }
    }

    static func check(_ key: RegisteredAPIKey) throws(RegistryError) {
        let id = key.keyID.utf8
        guard id.count == 12, id.allSatisfy({ (0x61...0x7A).contains($0) || (0x32...0x37).contains($0) }) else {
            throw .invalid(field: "key_id", detail: "must be 12 lowercase base32 characters (a-z, 2-7)")
        }
        let hash = key.secretSHA256.utf8
        guard hash.count == 64, hash.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            // The value itself is never echoed: it identifies a secret.
            throw .invalid(field: "secret_sha256", detail: "key \(key.keyID): must be 64 lowercase hex digits")
        }
        guard case let .tenant(apps, methods) = key.role else { return }
        if case let .only(ids) = apps {
            guard !ids.isEmpty else {
                throw .invalid(field: "app_ids", detail: "key \(key.keyID): list the apps it may act for, or make it an all-apps key")
            }
            for id in ids { try checkAppID(id, field: "app_ids") }
        }
        if methods.contains(where: \.isEmpty) {
            throw .invalid(field: "allowed_methods", detail: "key \(key.keyID): a method name is empty")
        }
    }

    /// 1 to 255 of `a-z A-Z 0-9 . _ -` (admin.proto's App.app_id).
    static func checkAppID(_ id: String, field: String) throws(RegistryError) {
        let bytes = id.utf8
        let valid =
            !bytes.isEmpty && bytes.count <= 255
            && bytes.allSatisfy { c in
                (0x61...0x7A).contains(c) || (0x41...0x5A).contains(c) || (0x30...0x39).contains(c) || c == 0x2E || c == 0x5F || c == 0x2D
            }
        guard valid else { throw .invalid(field: field, detail: "an app id is 1 to 255 of a-z A-Z 0-9 . _ -") }
    }
}

/// The details of audit rows: small JSON objects of field names and values,
/// written here only, so that what they may hold is decided in one place.
/// Never a key's hash, a PEM or an environment variable's value.
enum AuditDetails {
    /// Builds one JSON object, fields in the order written.
    struct Object {
        private var writer = JSONWriter()
        private var empty = true

        private mutating func name(_ name: String) {
            writer.raw(empty ? "{" : ",")
            empty = false
            writer.string(name)
            writer.raw(":")
        }

        mutating func field(_ name: String, _ value: String) {
            self.name(name)
            writer.string(value)
        }

        mutating func field(_ name: String, _ value: Int) {
            self.name(name)
            writer.integer(Int64(value))
        }

        mutating func field(_ name: String, _ value: Bool) {
            self.name(name)
            writer.raw(value ? "true" : "false")
        }

        mutating func field(_ name: String, strings: [String]) {
            self.name(name)
            writer.raw("[")
            for (i, value) in strings.enumerated() {
                if i > 0 { writer.raw(",") }
                writer.string(value)
            }
            writer.raw("]")
        }

        mutating func field(_ name: String, object build: (inout Object) -> Void) {
            self.name(name)
            writer.raw(AuditDetails.object(build))
        }

        /// `null` for "the server's default".
        mutating func field(_ name: String, optional value: Int?) {
            if let value { field(name, value) } else { null(name) }
        }

        mutating func null(_ name: String) {
            self.name(name)
            writer.raw("null")
        }

        mutating func quotas(_ quotas: RegisteredQuotas) {
            if let rate = quotas.callsPerSecond {
                name("calls_per_second")
                writer.number(rate)
            }
            if let burst = quotas.burst { field("burst", burst) }
            if let pushes = quotas.pushesPerHour { field("pushes_per_hour", pushes) }
            if let tokens = quotas.maxTokens { field("max_tokens", tokens) }
            if let live = quotas.maxLiveActivities { field("max_live_activities", live) }
            if let budget = quotas.priorityBudgetPerHour { field("priority_budget_per_hour", budget) }
        }

        /// Team id, key id, endpoint, the kind of key source and its path or
        /// variable name: never the PEM, nor what the variable holds.
        mutating func credentials(_ credentials: RegisteredCredentials) {
            field("team_id", credentials.teamID)
            field("key_id", credentials.keyID)
            field("endpoint", credentials.endpoint)
            field("key_source", credentials.keySource.kind)
            switch credentials.keySource {
            case .stored: break
            case let .file(path): field("key_file", path)
            case let .environment(name): field("key_env", name)
            }
        }

        func finish() -> String { empty ? "{}" : String(decoding: writer.bytes + [UInt8(ascii: "}")], as: UTF8.self) }
    }

    static func object(_ build: (inout Object) -> Void) -> String {
        var object = Object()
        build(&object)
        return object.finish()
    }

    static func app(_ app: RegisteredApp) -> String {
        object { object in
            object.field("bundle_id", app.bundleID)
            object.field("enabled", app.enabled)
            if let capacity = app.queueCapacity { object.field("queue_capacity", capacity) }
            if let weight = app.weight { object.field("weight", weight) }
            if let lifetime = app.maxPushLifetimeSeconds { object.field("max_push_lifetime_s", lifetime) }
            if app.quotas != .defaults { object.field("quotas") { $0.quotas(app.quotas) } }
            if let credentials = app.credentials { object.field("credentials") { $0.credentials(credentials) } }
        }
    }

    /// The fields an update changed, with their new values (`null`: back to the default).
    static func changes(from old: RegisteredApp, to new: RegisteredApp) -> String {
        object { object in
            if old.bundleID != new.bundleID { object.field("bundle_id", new.bundleID) }
            if old.enabled != new.enabled { object.field("enabled", new.enabled) }
            if old.queueCapacity != new.queueCapacity { object.field("queue_capacity", optional: new.queueCapacity) }
            if old.weight != new.weight { object.field("weight", optional: new.weight) }
            if old.maxPushLifetimeSeconds != new.maxPushLifetimeSeconds {
                object.field("max_push_lifetime_s", optional: new.maxPushLifetimeSeconds)
            }
            if old.quotas != new.quotas { object.field("quotas") { $0.quotas(new.quotas) } }
        }
    }

    /// The key's id is the row's target; its hash is never written.
    static func key(_ key: RegisteredAPIKey) -> String {
        object { object in
            switch key.role {
            case .admin:
                object.field("role", "admin")
            case let .tenant(apps, methods):
                object.field("role", "tenant")
                switch apps {
                case .all: object.field("all_apps", true)
                case let .only(ids): object.field("app_ids", strings: ids.sorted())
                }
                object.field("allowed_methods", strings: methods)
            }
            if let label = key.label { object.field("label", label) }
        }
    }
}
