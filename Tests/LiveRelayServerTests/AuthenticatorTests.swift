import Foundation
import LiveRelayMessages
import LiveRelayService
import LiveRelayTestSupport
import NIOCore
import Testing

@testable import LiveRelayServer

@Suite("API keys", .timeLimit(.minutes(1)))
struct AuthenticatorTests {
    static func key(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func generatedKeyHasTheDocumentedShapeAndAuthenticates() throws {
        let (plaintext, record) = APIKeyAuthenticator.generateKey(
            apps: .only(["com.example.app"]), allowedMethods: [.ping, .startActivity], label: "test")
        let parts = plaintext.split(separator: "_", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(parts[0] == "lrk")
        #expect(parts[1] == Substring(record.keyID))
        #expect(record.keyID.count == 12)
        #expect(record.keyID.allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) })
        #expect(parts[2].count == 64)
        #expect(parts[2].allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(record.allowedMethods == ["Ping", "StartActivity"])

        let authenticator = try APIKeyAuthenticator(records: [record])
        let principal = try authenticator.authenticate(apiKey: Self.key(plaintext)).get()
        #expect(principal == Principal(keyID: record.keyID, apps: .only(["com.example.app"]), allowedMethods: [.ping, .startActivity]))
    }

    @Test func storedHashIsSHA256OfTheSecret() throws {
        let (plaintext, record) = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping])
        let secret = String(plaintext.split(separator: "_")[2])
        // Checked against coreutils, not against the code under test.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        let pipes = try ChildProcesses.start(process, input: true, output: .stdout)
        let (input, output) = (pipes.input!, pipes.output!)
        input.fileHandleForWriting.write(Data(secret.utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text.split(separator: " ").first.map(String.init) == record.secretSHA256)
        #expect(!record.secretSHA256.contains(secret))
    }

    @Test func unknownKeyIDAndWrongSecretFailAlikeThroughTheSameSteps() throws {
        let (plaintext, record) = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping])
        let authenticator = try APIKeyAuthenticator(records: [record])
        let secret = plaintext.split(separator: "_")[2]
        var wrongSecret = Array(secret)
        wrongSecret[0] = wrongSecret[0] == "0" ? "1" : "0"
        let wrong = "lrk_\(record.keyID)_\(String(wrongSecret))"
        let unknownID = "lrk_\(record.keyID == "aaaaaaaaaaaa" ? "bbbbbbbbbbbb" : "aaaaaaaaaaaa")_\(secret)"

        let (wrongResult, wrongTrace) = authenticator.check(apiKey: Self.key(wrong))
        let (unknownResult, unknownTrace) = authenticator.check(apiKey: Self.key(unknownID))
        let (goodResult, goodTrace) = authenticator.check(apiKey: Self.key(plaintext))
        #expect(wrongResult == .failure(.invalidAPIKey))
        #expect(unknownResult == .failure(.invalidAPIKey))
        #expect(wrongTrace == unknownTrace, "same lookup, digest and comparison whether or not the id exists")
        #expect(goodTrace == wrongTrace, "success takes the same steps too")
        #expect(wrongTrace.comparedBytes == 32)
        #expect(try goodResult.get().keyID == record.keyID)
    }

    @Test(arguments: [
        "", "x", "lrk_", "LRK_aaaaaaaaaaaa_" + String(repeating: "0", count: 64),
        "lrk_AAAAAAAAAAAA_" + String(repeating: "0", count: 64),
        "lrk_aaaaaaaaaaaa-" + String(repeating: "0", count: 64),
    ])
    func malformedKeysFailTheSameWayAndStillRunTheComparison(text: String) throws {
        let authenticator = try APIKeyAuthenticator(records: [TestKeys.all.record])
        let (result, trace) = authenticator.check(apiKey: Self.key(text))
        #expect(result == .failure(.invalidAPIKey))
        #expect(trace.lookedUp)
        #expect(trace.comparedBytes == 32)
        #expect(trace.hashedBytes == text.utf8.count)
    }

    @Test func keyFileHoldsOnlyHashesAndRoundTrips() throws {
        let first = APIKeyAuthenticator.generateKey(apps: .only(["a.b"]), allowedMethods: Set(LiveRelayMethod.allCases), label: "ops")
        let second = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("keys.json").path

        try APIKeyFile(keys: [first.record, second.record]).save(path: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        for key in [first.plaintext, second.plaintext] {
            let secret = String(key.split(separator: "_")[2])
            #expect(!text.contains(secret), "the secret never reaches the file")
            #expect(!text.contains(key))
        }
        #expect(text.contains(first.record.secretSHA256))
        #expect(text.contains("\"allowed_methods\""))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["keys.json"], "no temporary left behind")

        let loaded = try APIKeyFile.load(path: path)
        #expect(loaded == APIKeyFile(keys: [first.record, second.record]))
        let authenticator = try APIKeyAuthenticator(records: loaded.keys)
        #expect(try authenticator.authenticate(apiKey: Self.key(first.plaintext)).get().allowedMethods == Set(LiveRelayMethod.allCases))
        #expect(try authenticator.authenticate(apiKey: Self.key(second.plaintext)).get().allowedMethods == [.ping])
    }

    @Test func badRecordsAreRefusedAtLoad() {
        var record = TestKeys.all.record
        record.allowedMethods = ["Ping", "Teleport"]
        #expect(throws: APIKeyError.self) { try APIKeyAuthenticator(records: [record]) }
        record = TestKeys.all.record
        record.secretSHA256 = "abc"
        #expect(throws: APIKeyError.self) { try APIKeyAuthenticator(records: [record]) }
        #expect(throws: APIKeyError.self) { try APIKeyAuthenticator(records: [TestKeys.all.record, TestKeys.all.record]) }
    }

    @Test func anOperatorKeyMustSayAllAppsAndAnEmptyListIsRefused() throws {
        func record(_ json: String) throws -> APIKeyRecord {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return try decoder.decode(APIKeyRecord.self, from: Data(json.utf8))
        }
        let head = #"{"key_id": "abcdefghijkl", "secret_sha256": "\#(String(repeating: "ab", count: 32))", "#
        let tail = #""allowed_methods": ["Ping"], "created_at": "2026-01-01T00:00:00Z"}"#
        // An empty list no longer means every app: the key is refused at load, saying what to write.
        for apps in [#""app_ids": [], "#, ""] {
            #expect {
                try APIKeyAuthenticator(records: [try record(head + apps + tail)])
            } throws: { error in
                "\(error)".contains("\"app_ids\" is empty") && "\(error)".contains("\"all_apps\": true")
            }
        }
        #expect(throws: APIKeyError.self) {
            try APIKeyAuthenticator(records: [try record(head + #""all_apps": true, "app_ids": ["a.b"], "# + tail)])
        }
        let operatorKey = try record(head + #""all_apps": true, "# + tail)
        #expect(try operatorKey.principal().apps == .all)
        #expect(try record(head + #""app_ids": ["a.b"], "# + tail).principal().apps == .only(["a.b"]))
        let tenant = Principal(keyID: "k", apps: .only(["a.b"]), allowedMethods: [.ping])
        #expect(tenant.mayActFor(appID: "a.b"))
        #expect(!tenant.mayActFor(appID: "c.d"))
        #expect(!Principal(keyID: "k", apps: .only([]), allowedMethods: [.ping]).mayActFor(appID: "a.b"))
        // Written back the way it was said: "all_apps", and no empty list beside it.
        let encoded = String(decoding: try JSONEncoder().encode(operatorKey), as: UTF8.self)
        #expect(encoded.contains(#""all_apps":true"#))
        #expect(!encoded.contains("app_ids"))
    }

    @Test func base32MatchesRFC4648() {
        // RFC 4648 section 10: BASE32("foobar") = "MZXW6YTBOI======".
        #expect(Base32.encode(Array("foobar".utf8), characters: 9) == "mzxw6ytbo")
        #expect(LiveRelayMethod(methodName: "StartActivity") == .startActivity)
        #expect(LiveRelayMethod.ping.methodName == "Ping")
    }
}
