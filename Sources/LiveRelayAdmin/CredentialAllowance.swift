import Foundation
import LiveRelayAPNs
import LiveRelayDomain

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What an app's APNs credentials may make a node read or connect to, as the
/// operator configured it: the directories a key file (`private_key_file`)
/// may be in, and the `host:port` endpoints allowed besides Apple's own.
///
/// An admin key manages tenants; it must not make every node read any file
/// it can open or connect anywhere its network reaches. So both are checked
/// twice: by the admin API before a change is stored, and by each node
/// against its own configuration before it reads a key file or routes pushes
/// from the registry, which another node or an older build may have written.
/// A node that refuses an app's credentials treats the app like one whose key
/// it cannot read: its pushes are left for a node that can.
///
/// A key file is allowed when its path, with `..` and every symbolic link
/// resolved (realpath), is inside one of ``keyDirectories`` (also resolved),
/// and the node then reads the resolved path, not the one given. The key files
/// and endpoints that the server's own seed names (the config file's `apps`,
/// the development setup's dev.app) are allowed as named: the operator wrote
/// them. Apple's own endpoint (`apple`, or its push hosts by name) is always allowed.
public struct CredentialAllowance: Hashable, Sendable {
    /// Directories key files may be in (absolute). None by default: a `private_key_file` is refused.
    public var keyDirectories: [String]
    /// `host:port` endpoints allowed besides Apple's own, their hosts lowercased.
    public var endpoints: Set<String>
    /// Any endpoint at all (test and development setups).
    public var anyEndpoint: Bool
    /// Key file paths the server's seed names, allowed exactly as written.
    public var seededKeyFiles: Set<String> = []

    /// Apple's APNs push hosts, on the ports Apple documents for them: always allowed by name.
    public static let appleHosts = ["api.push.apple.com", "api.sandbox.push.apple.com"]
    public static let applePorts = [443, 2197]

    /// The default: Apple's endpoint, and no key file.
    public init() {
        keyDirectories = []
        endpoints = []
        anyEndpoint = false
    }

    /// The operator's configuration: absolute directories, and `host:port` endpoints as the admin API's `endpoint` takes them.
    public init(keyDirectories: [String], endpoints: [String] = [], anyEndpoint: Bool = false) throws(CredentialRefusal) {
        for directory in keyDirectories where !directory.hasPrefix("/") {
            throw CredentialRefusal(field: "credential_key_directories", detail: "\(directory) is not an absolute path")
        }
        self.keyDirectories = keyDirectories
        self.endpoints = []
        self.anyEndpoint = anyEndpoint
        for endpoint in endpoints {
            do {
                if let normalized = Self.normalized(try APNsDestination(parsing: endpoint)) { self.endpoints.insert(normalized) }
            } catch {
                throw CredentialRefusal(field: "credential_endpoints", detail: error.description)
            }
        }
    }

    /// This allowance and what `apps` (the server's seed) name: their key files and endpoints.
    public func allowing(seeds apps: [RegisteredApp]) -> CredentialAllowance {
        var allowance = self
        for credentials in apps.compactMap(\.credentials) {
            if case let .file(path) = credentials.keySource { allowance.seededKeyFiles.insert(path) }
            if let destination = try? APNsDestination(parsing: credentials.endpoint), let normalized = Self.normalized(destination) {
                allowance.endpoints.insert(normalized)
            }
        }
        return allowance
    }

    /// The path to read `path`'s key from: `path` itself when the seed names it, otherwise
    /// its resolved path, when that is inside a key directory. Refused otherwise, with the
    /// same answer whether the file exists or not, so that a refusal tells nothing of files
    /// outside the directories.
    public func keyFile(_ path: String) throws(CredentialRefusal) -> String {
        if seededKeyFiles.contains(path) { return path }
        guard path.hasPrefix("/") else {
            throw CredentialRefusal(field: "private_key_file", detail: "\(path) is not an absolute path")
        }
        if let resolved = Self.resolved(path) {
            for directory in keyDirectories {
                guard let root = Self.resolved(directory) else { continue }
                if root == "/" || resolved.hasPrefix(root + "/") { return resolved }
            }
        }
        let configured = keyDirectories.isEmpty ? "none is" : keyDirectories.joined(separator: ", ") + " are"
        throw CredentialRefusal(
            field: "private_key_file",
            detail: "\(path) is not a file in a directory this server allows key files in (\(configured) configured:"
                + " the operator lists them in the config file's \"credential_key_directories\")")
    }

    /// Refuses an endpoint that is neither Apple's nor one the operator allowed.
    public func endpoint(_ endpoint: String) throws(CredentialRefusal) {
        let destination: APNsDestination
        do {
            destination = try APNsDestination(parsing: endpoint)
        } catch {
            throw CredentialRefusal(field: "endpoint", detail: error.description)
        }
        guard case let .custom(host, port) = destination, !anyEndpoint else { return }
        if Self.appleHosts.contains(host.lowercased()) && Self.applePorts.contains(port) { return }
        if let normalized = Self.normalized(destination), endpoints.contains(normalized) { return }
        throw CredentialRefusal(
            field: "endpoint",
            detail: "\(endpoint) is not an APNs endpoint this server allows (apple is; others the operator lists in the config"
                + " file's \"credential_endpoints\", or allows all with \"allow_any_credential_endpoint\": true)")
    }

    /// Both checks on `credentials`: the path its key file is read from (nil when it has none).
    public func check(_ credentials: RegisteredCredentials) throws(CredentialRefusal) -> String? {
        try endpoint(credentials.endpoint)
        guard case let .file(path) = credentials.keySource else { return nil }
        return try keyFile(path)
    }

    /// `host:port` with the host lowercased (DNS names are not case-sensitive); nil for `apple`.
    static func normalized(_ destination: APNsDestination) -> String? {
        guard case let .custom(host, port) = destination else { return nil }
        return APNsDestination.custom(host: host.lowercased(), port: port).description
    }

    /// `path` with `..`, `.` and every symbolic link resolved; nil when it does not exist.
    static func resolved(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// A credential the operator's configuration does not allow: the field, and what is wrong.
public struct CredentialRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    public var field: String
    public var detail: String

    public init(field: String, detail: String) {
        self.field = field
        self.detail = detail
    }

    public var description: String { "\(field): \(detail)" }
}
