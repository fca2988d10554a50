import Foundation
import LiveRelayTestSupport

@testable import LiveRelayAPNs

let testNow: Int64 = 1_700_000_000

/// One key per test process: generating is cheap, but sharing keeps failures comparable.
let testKey: APNsSigningKey = try! APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")

func verifier(for key: APNsSigningKey = testKey, keyID: String? = nil, teamID: String? = nil) throws -> ProviderTokenVerifier {
    try ProviderTokenVerifier(publicKeyPEM: try key.publicKeyPEM, keyID: keyID ?? key.keyID, teamID: teamID ?? key.teamID)
}

func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

/// A token from raw JSON texts, signed (raw r||s) with `key` over exactly the parts given.
func craftedToken(header: String, claims: String, key: APNsSigningKey = testKey) throws -> String {
    let input = b64(header) + "." + b64(claims)
    let signature = try ES256.sign(Array(input.utf8), with: key.key)
    return input + "." + Base64URL.encode(signature)
}

/// The three parts of a compact JWS.
func parts(_ jwt: String) -> [String] { jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init) }

/// Runs a program to completion and returns its exit status and combined output.
func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = try ChildProcesses.start(process, output: .combined).output!
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
