import LiveRelayTLS

/// How a tenant's server knows a webhook came from LiveRelay and was not replayed.
///
/// Each request carries `LiveRelay-Signature: t=<UNIX seconds>,v1=<hex>`, where
/// the hex is HMAC-SHA256, keyed with the endpoint's secret (the whole
/// `whsec_...` string as UTF-8), of `"<t>."` followed by the exact body bytes.
/// Signing the timestamp with the body lets a receiver refuse an old request
/// replayed word for word; signing the bytes, not a parsed body, lets it check
/// before it parses. A header may carry several `v1=` (one per secret, as
/// ``header(secrets:timestamp:body:)`` writes); a receiver accepts the request
/// if any of them matches. The deliverer signs with the webhook's one secret.
public enum WebhookSignature {
    public static let headerName = "LiveRelay-Signature"

    /// What every secret starts with, so one pasted into a log or a repository is recognisable.
    public static let secretPrefix = "whsec_"

    /// The header value signing `body` at `timestamp` with each of `secrets`
    /// (one in the usual case, two while rotating: the new one first).
    public static func header(secrets: [String], timestamp: Int64, body: some Collection<UInt8>) -> String {
        let message = signedMessage(timestamp: timestamp, body: body)
        let signatures = secrets.map { "v1=" + Hex.encode(Crypto.hmacSHA256(key: Array($0.utf8), message: message)) }
        return (["t=\(timestamp)"] + signatures).joined(separator: ",")
    }

    /// The header value signing `body` at `timestamp` with `secret`.
    public static func header(secret: String, timestamp: Int64, body: some Collection<UInt8>) -> String {
        header(secrets: [secret], timestamp: timestamp, body: body)
    }

    /// Whether `header` signs `body` with `secret` at a time within `tolerance`
    /// seconds of `now`. What a receiver does, here so tests and tools check
    /// the same rule; malformed headers are refused, unknown keys are ignored.
    public static func verify(
        header: String, secret: String, body: some Collection<UInt8>, now: Int64, tolerance: Int64 = 300
    ) -> Bool {
        guard let parsed = parse(header) else { return false }
        let (age, overflow) = now.subtractingReportingOverflow(parsed.timestamp)
        guard !overflow, age.magnitude <= tolerance.magnitude else { return false }
        let expected = Crypto.hmacSHA256(key: Array(secret.utf8), message: signedMessage(timestamp: parsed.timestamp, body: body))
        // Every candidate is compared in full, so the time taken says nothing about which one matched.
        var matched = false
        for candidate in parsed.signatures where Crypto.constantTimeEquals(candidate, expected) { matched = true }
        return matched
    }

    /// A new endpoint secret: `whsec_` and 64 lowercase hex digits from OpenSSL's CSPRNG.
    public static func mintSecret() -> String {
        secretPrefix + Hex.encode(Crypto.randomBytes(32))
    }

    // MARK: - Parts

    /// `t` and every `v1` of a header, or nil unless there is exactly one `t` of
    /// digits and at least one `v1` of 64 hex digits.
    static func parse(_ header: String) -> (timestamp: Int64, signatures: [[UInt8]])? {
        var timestamp: Int64?
        var signatures: [[UInt8]] = []
        for field in header.split(separator: ",", omittingEmptySubsequences: true) {
            let pair = field.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { return nil }
            let key = pair[0].trimmingSpaces()
            let value = pair[1].trimmingSpaces()
            switch key {
            case "t":
                guard timestamp == nil, (1...18).contains(value.utf8.count), value.utf8.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }),
                    let seconds = Int64(value)
                else { return nil }
                timestamp = seconds
            case "v1":
                guard let bytes = Hex.decode(String(value)), bytes.count == 32 else { return nil }
                signatures.append(bytes)
            default:
                continue
            }
        }
        guard let timestamp, !signatures.isEmpty else { return nil }
        return (timestamp, signatures)
    }

    /// `"<t>."` and the body: one copy, for OpenSSL's one-shot HMAC. A batch is
    /// small next to the network round trip it precedes.
    private static func signedMessage(timestamp: Int64, body: some Collection<UInt8>) -> [UInt8] {
        var message = Array("\(timestamp).".utf8)
        message.reserveCapacity(message.count + body.count)
        message.append(contentsOf: body)
        return message
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var result = self
        while result.first == " " { result = result.dropFirst() }
        while result.last == " " { result = result.dropLast() }
        return result
    }
}
