import Foundation
import LiveRelayComposition
import LiveRelayMessages
import LiveRelayServer
import LiveRelayTLS

/// What `liverelay serve` without a config file needs to come up over TLS on
/// a fresh machine: a data directory, a self-signed certificate, a dev app
/// and an API key for it.
///
/// Everything is made once and reused, so restarting keeps existing clients
/// working. The key's plaintext is printed on the start that mints it and
/// never stored: `api-keys.json` holds its SHA-256 only, like a production
/// key file, so the development setup exercises the production path.
enum DevSetup {
    static let defaultDataDirectory = ".liverelay-dev"
    static let appID = "dev.app"
    static let keyLabel = "liverelay serve development key for dev.app"

    struct Prepared {
        var dataDirectory: String
        var certificatePath: String
        var privateKeyPath: String
        var keyFilePath: String
        var keyFile: APIKeyFile
        /// For stdout: where things are, and the key itself when it was just minted.
        var announcement: String
    }

    static func prepare(dataDirectory: String, host: String) throws -> Prepared {
        let directory = absolute(dataDirectory)
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let certificatePath = directory + "/cert.pem"
        let privateKeyPath = directory + "/key.pem"
        let keyFilePath = directory + "/api-keys.json"
        var lines = ["LiveRelay development setup in \(directory)"]

        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: certificatePath), fileManager.fileExists(atPath: privateKeyPath) {
            lines.append("  TLS certificate (self-signed, reused): \(certificatePath)")
        } else {
            var names = ["localhost", "127.0.0.1", "::1"]
            if !names.contains(host), host != "0.0.0.0", host != "::" { names.append(host) }
            let generated = try SelfSignedCertificate.generate(commonName: "localhost", subjectAltNames: names)
            try writeFile(certificatePath, generated.certificatePEM, mode: 0o644)
            try writeFile(privateKeyPath, generated.privateKeyPEM, mode: 0o600)
            lines.append("  TLS certificate (self-signed, new, for \(names.joined(separator: ", "))): \(certificatePath)")
        }
        lines.append("  Clients trust it as their CA: --ca-file \(certificatePath) (the CLI's default)")

        var keyFile = fileManager.fileExists(atPath: keyFilePath) ? try APIKeyFile.load(path: keyFilePath) : APIKeyFile()
        if let existing = keyFile.keys.first(where: { $0.appIDs == [appID] }) {
            lines.append("  API key for app \(appID): key id \(existing.keyID), printed on the first start only")
            lines.append("  (only its hash is kept, in \(keyFilePath); delete that file and restart to mint a new key)")
        } else {
            let minted = APIKeyAuthenticator.generateKey(
                apps: .only([appID]), allowedMethods: Set(LiveRelayMethod.allCases), label: keyLabel)
            keyFile.keys.append(minted.record)
            try keyFile.save(path: keyFilePath)
            lines.append("  API key for app \(appID), all RPCs (shown only now; \(keyFilePath) keeps its hash only):")
            lines.append("")
            lines.append("export LIVERELAY_API_KEY=\(minted.plaintext)")
            lines.append("")
        }
        return Prepared(
            dataDirectory: directory, certificatePath: certificatePath, privateKeyPath: privateKeyPath,
            keyFilePath: keyFilePath, keyFile: keyFile, announcement: lines.joined(separator: "\n")
        )
    }

    static func absolute(_ path: String, relativeTo base: String? = nil) -> String {
        if path.hasPrefix("/") { return path }
        let root = base ?? FileManager.default.currentDirectoryPath
        var joined = URL(fileURLWithPath: root).appendingPathComponent(path).standardizedFileURL.path
        while joined.count > 1, joined.hasSuffix("/") { joined.removeLast() }
        return joined
    }

    /// Written to a temporary file and renamed, so a crash leaves the old file or the new one, never half of one.
    static func writeFile(_ path: String, _ contents: String, mode: Int) throws {
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(contents.utf8), attributes: [.posixPermissions: mode]) else {
            throw CLIError("cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CLIError("cannot write \(path): \(reason)")
        }
    }
}

/// A failure the CLI reports as one `error: ...` line.
typealias CLIError = SetupError
