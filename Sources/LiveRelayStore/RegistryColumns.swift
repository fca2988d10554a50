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
