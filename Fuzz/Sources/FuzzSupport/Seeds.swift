import LiveRelayMessages
import LiveRelayWire
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Seed inputs built by the Swift encoders. `scripts/fuzz.sh --make-seeds` runs
/// every fuzz binary with LIVERELAY_FUZZ_WRITE_SEEDS=<dir>: `LLVMFuzzerInitialize`
/// then writes these into <dir>/<target>/ and exits, instead of fuzzing. (The
/// interop vectors are added beside them by the same script, through Python.)
public enum Seeds {
    static let token1 = String(repeating: "0123456789abcdef", count: 4)
    static let token2 = String(repeating: "fedcba9876543210", count: 10)
    static let contentState =
        #"{"homeScore":2,"awayScore":1,"minute":67,"status":"second half","scorer":{"name":"Müller","team":"home"},"events":[{"t":12,"kind":"goal"},{"t":55,"kind":"goal"},{"t":61,"kind":"card"}]}"#
    static let alert = Alert(title: "Goal! 2–1", body: "Müller scores in the 67th minute 🚀", sound: "goal.caf")

    public static let registerToken: [(String, [UInt8])] = [
        (
            "swift-push-to-start",
            RegisterTokenRequest(
                appID: "com.example.scores", kind: .pushToStart, token: token1, environment: .production,
                attributesType: "MatchAttributes", externalUserID: "user-42", deviceID: "device-7f3a",
                expiresAt: 1_767_225_600_000
            ).serializedBytes()
        ),
        (
            "swift-update",
            RegisterTokenRequest(
                appID: "com.example.scores", kind: .update, token: token2, environment: .sandbox,
                activityID: "match-2025-05-17-ars-che"
            ).serializedBytes()
        ),
        (
            "swift-remove",
            RegisterTokenRequest(
                appID: "com.example.scores", kind: .update, token: token1, activityID: "m", remove: true
            ).serializedBytes()
        ),
    ]

    public static let startActivity: [(String, [UInt8])] = [
        (
            "swift-every-field",
            StartActivityRequest(
                appID: "com.example.scores", activityID: "match-2025-05-17-ars-che", attributesType: "MatchAttributes",
                attributesJSON: #"{"home":"Arsenal","away":"Chelsea","venue":"Emirates"}"#,
                contentStateJSON: contentState, alert: alert, staleDate: 1_747_500_000, dismissalDate: 1_747_510_000,
                relevanceScore: 0.75, priority: .high,
                targets: Targets(pushToStartTokens: [token1, token2], externalUserIDs: ["user-1", "user-2", "user-名前"]),
                idempotencyKey: "start-7d1e", waitForDelivery: true
            ).serializedBytes()
        ),
        (
            "swift-all-devices",
            StartActivityRequest(
                appID: "a", activityID: "1", attributesType: "T", attributesJSON: "{}", contentStateJSON: "{}",
                targets: Targets(allDevices: true)
            ).serializedBytes()
        ),
    ]

    public static let updateActivity: [(String, [UInt8])] = [
        (
            "swift-every-field",
            UpdateActivityRequest(
                appID: "com.example.scores", activityID: "match-2025-05-17-ars-che", contentStateJSON: contentState,
                alert: alert, staleDate: 1_747_500_000, dismissalDate: 1_747_510_000, relevanceScore: -1.5,
                priority: .low, endActivity: false, idempotencyKey: "update-0042", waitForDelivery: false
            ).serializedBytes()
        ),
        (
            "swift-end-without-state",
            UpdateActivityRequest(
                appID: "com.example.scores", activityID: "m", endActivity: true
            ).serializedBytes()
        ),
    ]

    public static let endActivity: [(String, [UInt8])] = [
        (
            "swift-every-field",
            EndActivityRequest(
                appID: "com.example.scores", activityID: "match-2025-05-17-ars-che", contentStateJSON: contentState,
                dismissalDate: 1_747_510_000, idempotencyKey: "end-1", waitForDelivery: true, alert: alert,
                priority: .high
            ).serializedBytes()
        ),
        ("swift-minimal", EndActivityRequest(appID: "a", activityID: "b").serializedBytes()),
    ]

    public static let ping: [(String, [UInt8])] = [
        ("swift-empty", PingRequest().serializedBytes()),
        ("swift-every-byte", PingRequest(payload: Array(0...255)).serializedBytes()),
    ]

    /// Frame streams, each prefixed with the two control bytes of `FrameStreamInput`.
    public static var frames: [(String, [UInt8])] {
        let encoder = FrameEncoder()
        var session = ByteBuffer()
        encoder.writePreface(into: &session)
        let hello = Frame.Hello(
            apiKey: ByteBuffer(string: "lr_test_0123456789abcdef"), clientName: "liverelay-fuzz/1.0 ✓",
            settings: [Setting(.maxFrameSize, 65_536), Setting(SettingID(rawValue: 0x7F), 1)])
        encoder.encode(.hello(hello), into: &session)
        let requests: [(LiveRelayMethod, [UInt8])] = [
            (.ping, ping[1].1), (.registerToken, registerToken[0].1), (.startActivity, startActivity[0].1),
            (.updateActivity, updateActivity[0].1), (.endActivity, endActivity[0].1),
        ]
        var id: UInt32 = 1
        for (method, payload) in requests {
            let request = Frame.Request(timeoutMilliseconds: id == 2 ? 5 : 0, method: method.rawValue, payload: ByteBuffer(bytes: payload))
            encoder.encode(.request(RequestID(id), request), into: &session)
            id += 1
        }
        encoder.encode(.cancel(RequestID(3)), into: &session)
        encoder.encode(.ping(0x0102_0304_0506_0708), into: &session)
        encoder.encode(
            .request(RequestID(9), Frame.Request(method: "/liverelay.v1.LiveRelay/Unknown", payload: ByteBuffer())), into: &session)
        encoder.encode(.goAway(Frame.GoAway(lastRequestID: 0, code: .noError, reason: "client done")), into: &session)
        let sessionBytes = Array(session.readableBytesView)

        var rejected = ByteBuffer()
        encoder.writePreface(into: &rejected)
        encoder.encode(.hello(Frame.Hello(apiKey: ByteBuffer(string: "odd-key"), clientName: "x")), into: &rejected)
        encoder.encode(.request(RequestID(1), Frame.Request(method: LiveRelayMethod.ping.rawValue, payload: ByteBuffer())), into: &rejected)

        var client = ByteBuffer()
        encoder.encode(.welcome(Frame.Welcome(version: 1, settings: ServerSettings().settings)), into: &client)
        encoder.encode(
            .response(
                RequestID(1),
                ByteBuffer(bytes: PingReply(payload: [1, 2, 3], serverTimeMS: 1_747_500_000_000, serverVersion: "0.1.0").serializedBytes())),
            into: &client)
        var details = ByteBuffer()
        ErrorDetails(fieldViolations: [FieldViolation(field: "token", description: "not lowercase hex")], retryAfterMS: 100, reason: "bad")
            .serialize(into: &details)
        encoder.encode(
            .error(RequestID(2), Frame.RequestError(status: .invalidArgument, message: "token: not lowercase hex", details: details)),
            into: &client)
        encoder.encode(.pong(42), into: &client)
        encoder.encode(.goAway(Frame.GoAway(lastRequestID: 2, code: .noError, reason: "shutting down")), into: &client)
        let clientBytes = Array(client.readableBytesView)

        let preface = Wire.preface
        return [
            ("session-one-chunk", [FrameStreamInput.serverWithStateMachine, 0] + sessionBytes),
            ("session-byte-by-byte", [FrameStreamInput.oneByteAtATime, 0] + sessionBytes),
            ("session-chunks-of-7", [FrameStreamInput.fixedChunks, 6] + sessionBytes),
            ("session-random-chunks", [FrameStreamInput.randomChunks, 40] + sessionBytes),
            ("session-decoder-only", [FrameStreamInput.decoderOnly | FrameStreamInput.randomChunks, 200] + sessionBytes),
            ("session-small-max-frame", [FrameStreamInput.smallMaxFrameSize | FrameStreamInput.randomChunks, 90] + sessionBytes),
            ("session-rejected-key", [FrameStreamInput.randomChunks, 3] + Array(rejected.readableBytesView)),
            ("client-side", [FrameStreamInput.clientSide | FrameStreamInput.randomChunks, 17] + clientBytes),
            ("bad-preface-tls", [0, 0, 0x16, 0x03, 0x01, 0x00, 0xA5, 0x01]),
            ("oversized-frame", [0, 0] + preface + [0x00, 0x20, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]),
            ("unknown-type", [0, 0] + preface + [0x00, 0x00, 0x00, 0x00, 0x42, 0x00, 0x00, 0x00, 0x00, 0x00]),
            ("truncated-header", [1, 0] + preface + [0x00, 0x00, 0x00]),
        ]
    }

    /// Called from each target's LLVMFuzzerInitialize: writes the seeds and exits when asked to.
    public static func writeIfRequested(target: String, _ seeds: @autoclosure () -> [(String, [UInt8])]) {
        guard let base = getenv("LIVERELAY_FUZZ_WRITE_SEEDS").map({ String(cString: $0) }) else { return }
        let directory = base + "/" + target
        var prefix = ""
        for part in directory.split(separator: "/", omittingEmptySubsequences: false) {
            prefix += (prefix.isEmpty && part.isEmpty) ? "/" : (prefix.hasSuffix("/") || prefix.isEmpty ? "" : "/") + part
            if !prefix.isEmpty { mkdir(prefix, 0o755) }
        }
        for (name, bytes) in seeds() {
            let path = directory + "/" + name
            guard let file = fopen(path, "wb") else {
                writeStandardError("cannot write \(path)\n")
                exit(1)
            }
            _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
        exit(0)
    }
}
