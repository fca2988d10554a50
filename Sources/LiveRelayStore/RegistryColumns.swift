import LiveRelayAPNs
import LiveRelayDomain

/// How registry values map to columns, shared by the SQLite and PostgreSQL
/// registries so that both tables say the same thing in the same words.
package enum RegistryColumns {
    /// An app's APNs key source as two columns: kind (`registry`, `file`,
    /// `env`) and its value (the PEM, the path, the variable's name).
    package static func keySource(_ source: RegisteredCredentials.KeySource) -> (kind: String, value: String) {
        switch source {
        case let .stored(pem): (source.kind, pem)
        case let .file(path): (source.kind, path)
        case let .environment(name): (source.kind, name)
        }
    }

    package static func keySource(kind: String, value: String) -> RegisteredCredentials.KeySource? {
        switch kind {
        case "registry": .stored(pem: value)
        case "file": .file(path: value)
        case "env": .environment(name: value)
        default: nil
        }
    }

    /// A key's role as columns: `admin` or `tenant`, whether it acts for all
    /// apps, its apps (sorted) and its methods (as given).
    package struct Role {
        package var name: String
        package var allApps: Bool
        package var appIDs: [String]
        package var methods: [String]

        package init(_ role: RegisteredAPIKey.Role) {
            switch role {
            case .admin:
                self.init(name: "admin", allApps: false, appIDs: [], methods: [])
            case let .tenant(.all, methods):
                self.init(name: "tenant", allApps: true, appIDs: [], methods: methods)
            case let .tenant(.only(ids), methods):
                self.init(name: "tenant", allApps: false, appIDs: ids.sorted(), methods: methods)
            }
        }

        package init(name: String, allApps: Bool, appIDs: [String], methods: [String]) {
            self.name = name
            self.allApps = allApps
            self.appIDs = appIDs
            self.methods = methods
        }

        package var role: RegisteredAPIKey.Role? {
            switch name {
            case "admin": .admin
            case "tenant": .tenant(apps: allApps ? .all : .only(Set(appIDs)), methods: methods)
            default: nil
            }
        }
    }

    /// An app's webhook as six nullable columns: all NULL when it has none.
    /// The kinds are a JSON array of their raw values as strings, in order
    /// (``webhookKinds(_:)``), the same text in SQLite and PostgreSQL.
    package struct Webhook: Equatable {
        package var url: String?
        package var kinds: String?
        /// The signing secret: bound to its column, never logged nor put in an error.
        package var secret: String?
        package var createdAt: Int64?
        package var updatedAt: Int64?
        /// ``RegisteredWebhook/startCursor`` (a cursor fits a signed 64-bit column).
        package var startCursor: Int64?

        package init(_ webhook: RegisteredWebhook?) {
            url = webhook?.url
            kinds = webhook.map { RegistryColumns.webhookKinds($0.eventKinds) }
            secret = webhook?.secret
            createdAt = webhook?.createdAt.milliseconds
            updatedAt = webhook?.updatedAt.milliseconds
            startCursor = webhook.map { Int64(clamping: $0.startCursor) }
        }

        package init(url: String?, kinds: String?, secret: String?, createdAt: Int64?, updatedAt: Int64?, startCursor: Int64?) {
            self.url = url
            self.kinds = kinds
            self.secret = secret
            self.createdAt = createdAt
            self.updatedAt = updatedAt
            self.startCursor = startCursor
        }

        /// The webhook the columns hold: nil when all are NULL. Some NULL and
        /// others not, or kinds that do not parse, is a corrupt row: the
        /// registry refuses it rather than guess (a webhook without its secret
        /// could not sign; one with a lost kind list would deliver every kind).
        package func webhook() throws(Unreadable) -> RegisteredWebhook? {
            switch (url, kinds, secret, createdAt, updatedAt, startCursor) {
            case (nil, nil, nil, nil, nil, nil):
                return nil
            case let (url?, kinds?, secret?, createdAt?, updatedAt?, startCursor?):
                guard let eventKinds = RegistryColumns.webhookKinds(fromJSONArray: kinds), startCursor >= 0 else { throw Unreadable() }
                return RegisteredWebhook(
                    url: url, eventKinds: eventKinds, secret: secret, createdAt: UnixTime(milliseconds: createdAt),
                    updatedAt: UnixTime(milliseconds: updatedAt), startCursor: UInt64(startCursor))
            default:
                throw Unreadable()
            }
        }

        /// The columns do not make a webhook. Carries nothing of them: one is the secret.
        package struct Unreadable: Error {}
    }

    /// Webhook event kinds as a JSON array of their raw values as strings, in raw-value order.
    package static func webhookKinds(_ kinds: Set<FeedEvent.Kind>) -> String {
        jsonArray(kinds.map(\.rawValue).sorted().map(String.init))
    }

    /// The kinds of ``webhookKinds(_:)``'s array; nil if it is not one or names a kind this build does not know.
    package static func webhookKinds(fromJSONArray text: String) -> Set<FeedEvent.Kind>? {
        guard let strings = strings(fromJSONArray: text) else { return nil }
        var kinds: Set<FeedEvent.Kind> = []
        for string in strings {
            guard let raw = Int(string), let kind = FeedEvent.Kind(rawValue: raw) else { return nil }
            kinds.insert(kind)
        }
        return kinds
    }

    /// A list of strings as a JSON array (SQLite has no array type).
    package static func jsonArray(_ values: [String]) -> String {
        var writer = JSONWriter()
        writer.raw("[")
        for (i, value) in values.enumerated() {
            if i > 0 { writer.raw(",") }
            writer.string(value)
        }
        writer.raw("]")
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The strings of a JSON array written by ``jsonArray(_:)``; nil if it is not one.
    package static func strings(fromJSONArray text: String) -> [String]? {
        guard case let .array(items)? = try? JSONValue.parse(Array(text.utf8)) else { return nil }
        var strings: [String] = []
        for item in items {
            guard let string = item.stringValue else { return nil }
            strings.append(string)
        }
        return strings
    }
}
