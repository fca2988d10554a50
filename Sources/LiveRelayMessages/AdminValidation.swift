// The field rules of the admin requests (admin.proto), beside the shared ones in
// Validation.swift. As there, each check names the field by its proto path and
// builds the path only on failure.

import LiveRelayEndpoint

extension Rules {
    static let maxBundleID = 255
    /// Apple's team ids and key ids: exactly 10 of [A-Z0-9].
    static let appleIDLength = 10
    /// A .p8 key is about 250 bytes; 16 KiB leaves room for comments and chains.
    static let maxPrivateKeyPEM = 16 * 1024
    static let privateKeyPEMHeader = "-----BEGIN PRIVATE KEY-----"
    static let maxTrustCertificatePEM = 64 * 1024
    /// PATH_MAX on Linux.
    static let maxKeyFilePath = 4096
    static let maxEnvironmentName = 128
    static let queueCapacities: ClosedRange<UInt32> = 1...10_000_000
    static let weights: ClosedRange<UInt32> = 1...1000
    /// 365 days.
    static let maxPushLifetimeSeconds: UInt32 = 31_536_000
    static let maxKeyLabel = 200
    /// An API key's public id: 12 lowercase base32 characters.
    static let apiKeyIDLength = 12
    static let maxPageSize: UInt32 = 1000
    static let maxPageToken = 512
    /// The longest DNS name; an IPv6 literal in brackets is shorter.
    static let maxEndpointHost = EndpointSyntax.maxHost
    static let maxWebhookURL = WebhookURL.maxLength

    /// [A-Z0-9]
    static var upperAlphanumericSet: ByteSet { ByteSet(low: 0x03FF_0000_0000_0000, high: 0x0000_0000_07FF_FFFE) }
    /// [A-Z_]
    static var environmentNameStartSet: ByteSet { ByteSet(low: 0, high: 0x0000_0000_87FF_FFFE) }
    /// [A-Z0-9_]
    static var environmentNameSet: ByteSet { ByteSet(low: 0x03FF_0000_0000_0000, high: 0x0000_0000_87FF_FFFE) }
    /// [a-z2-7], RFC 4648 base32 in lowercase.
    static var base32Set: ByteSet { ByteSet(low: 0x00FC_0000_0000_0000, high: 0x07FF_FFFE_0000_0000) }

    /// An app id where one may be given but none is needed: absent is fine, present must be valid.
    static func optionalAppID(_ value: String?, _ name: @autoclosure () -> String = "app_id") throws(MessageError) {
        guard let value else { return }
        if value.isEmpty { throw MessageError(.invalidValue, field: name(), detail: "empty: leave it out instead") }
        try appID(value, name())
    }

    /// bundle_id: 1-255 bytes of [A-Za-z0-9.-_], not starting with a dot.
    static func bundleID(_ value: String?, required: Bool, _ name: String = "bundle_id") throws(MessageError) {
        guard let value else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        if value.isEmpty {
            if required { throw MessageError(.missing, field: name) }
            throw MessageError(.invalidValue, field: name, detail: "empty: leave it out to keep the current one")
        }
        let n = value.utf8.count
        if n > maxBundleID { throw MessageError(.tooLong(length: n, max: maxBundleID), field: name) }
        let ok = withBytes(value) { bytes in allInSet(bytes, identifierSet) }
        if !ok {
            throw MessageError(.invalidValue, field: name, detail: "only A-Z, a-z, 0-9, '.', '-' and '_' are allowed")
        }
        if value.utf8.first == UInt8(ascii: ".") {
            throw MessageError(.invalidValue, field: name, detail: "must not start with '.'")
        }
    }

    /// team_id, key_id of APNs credentials: required, exactly 10 of [A-Z0-9].
    static func appleID(_ value: String?, _ name: String) throws(MessageError) {
        guard let value, !value.isEmpty else { throw MessageError(.missing, field: name) }
        let ok = withBytes(value) { bytes in bytes.count == appleIDLength && allInSet(bytes, upperAlphanumericSet) }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "must be exactly 10 characters of A-Z and 0-9") }
    }

    /// An APNs endpoint: Apple's servers, or one host and port (a mock, a proxy).
    enum Endpoint: Equatable {
        case apple
        case hostPort
    }

    /// endpoint: absent (Apple's), "apple", or "host:port": the host a DNS name, a
    /// dotted-quad IPv4 address or an IPv6 address in brackets (`EndpointSyntax`),
    /// the port 1-65535 in decimal digits. A URL (`https://h:443`) or a path
    /// (`h/x:443`) is refused here: the server would fail every connect to it.
    static func endpoint(_ value: String?, _ name: String = "endpoint") throws(MessageError) -> Endpoint {
        guard let value else { return .apple }
        if value == "apple" { return .apple }
        let detail = "must be \"apple\" or \"host:port\""
        let bytes = Array(value.utf8)
        guard let colon = bytes.lastIndex(of: UInt8(ascii: ":")) else {
            throw MessageError(.invalidValue, field: name, detail: detail)
        }
        let host = bytes[..<colon]
        let port = bytes[(colon + 1)...]
        if host.isEmpty { throw MessageError(.invalidValue, field: name, detail: "\(detail): the host is empty") }
        if host.count > maxEndpointHost {
            throw MessageError(.invalidValue, field: name, detail: "\(detail): the host is longer than \(maxEndpointHost) bytes")
        }
        if !EndpointSyntax.isHost(host) {
            throw MessageError(
                .invalidValue, field: name,
                detail: "\(detail): the host must be a DNS name, an IPv4 address or an IPv6 address in brackets ([::1])")
        }
        var number = 0
        for c in port {
            guard c &- UInt8(ascii: "0") < 10, number <= 65_535 else {
                throw MessageError(.invalidValue, field: name, detail: "\(detail): the port must be a number from 1 to 65535")
            }
            number = number * 10 + Int(c &- UInt8(ascii: "0"))
        }
        if port.isEmpty || number < 1 || number > 65_535 {
            throw MessageError(.invalidValue, field: name, detail: "\(detail): the port must be a number from 1 to 65535")
        }
        return .hostPort
    }

    /// An optional number that must lie in `range` when present.
    public static func inRange(_ value: UInt32?, _ range: ClosedRange<UInt32>, _ name: String, prefix: String = "") throws(MessageError) {
        guard let value, !range.contains(value) else { return }
        throw MessageError(
            .outOfRange, field: path(prefix, name), detail: "\(value) is outside \(range.lowerBound)...\(range.upperBound)")
    }

    /// page_size and page_token of the List requests.
    static func page(size: UInt32?, token: String?) throws(MessageError) {
        try inRange(size, 0...maxPageSize, "page_size")
        try text(token, max: maxPageToken, "page_token")
    }

    /// A key's label: at most 200 bytes, no control characters (C0, DEL, C1).
    static func label(_ value: String?, _ name: String = "label") throws(MessageError) {
        guard let value, !value.isEmpty else { return }
        let n = value.utf8.count
        if n > maxKeyLabel { throw MessageError(.tooLong(length: n, max: maxKeyLabel), field: name) }
        try noNUL(value, name)
        let ok = withBytes(value) { bytes in noControlCharacters(bytes) }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "contains a control character") }
    }

    /// An API key's public id: required, exactly 12 of [a-z2-7].
    static func apiKeyID(_ value: String?, _ name: String = "key_id") throws(MessageError) {
        guard let value, !value.isEmpty else { throw MessageError(.missing, field: name) }
        let ok = withBytes(value) { bytes in bytes.count == apiKeyIDLength && allInSet(bytes, base32Set) }
        if !ok {
            throw MessageError(.invalidValue, field: name, detail: "must be exactly 12 characters of a-z and 2-7")
        }
    }

    /// A private key's environment variable: [A-Z_][A-Z0-9_]*.
    static func environmentName(_ value: String, _ name: String) throws(MessageError) {
        let n = value.utf8.count
        if n > maxEnvironmentName { throw MessageError(.tooLong(length: n, max: maxEnvironmentName), field: name) }
        let ok = withBytes(value) { bytes in
            bytes.count > 0 && inSet(bytes[0], environmentNameStartSet) && allInSet(bytes, environmentNameSet)
        }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "must match [A-Z_][A-Z0-9_]*") }
    }

    /// A webhook's url: required, at most 2,048 bytes, no NUL, and an https:// URL
    /// as `WebhookURL` reads one. Whether the addresses its host resolves to may be
    /// reached is the server's check, at every delivery (a name may resolve anew).
    static func webhookURL(_ value: String?, _ name: String = "url") throws(MessageError) {
        guard let value, !value.isEmpty else { throw MessageError(.missing, field: name) }
        try text(value, max: maxWebhookURL, name)
        if case let .failure(error) = WebhookURL.parse(value) {
            throw MessageError(.invalidValue, field: name, detail: error.message)
        }
    }

    /// A webhook's event_kinds: each one of `Admin.Webhook.eventKindNames`, none twice.
    static func eventKinds(_ values: [String], _ name: String = "event_kinds") throws(MessageError) {
        var seen: [String: Int] = [:]
        for (i, kind) in values.enumerated() {
            guard Admin.Webhook.eventKindNames.contains(kind) else {
                try noNUL(kind, "\(name)[\(i)]")
                throw MessageError(
                    .invalidValue, field: "\(name)[\(i)]",
                    detail: "not an event kind (\(Admin.Webhook.eventKindNames.joined(separator: ", ")))")
            }
            if let first = seen.updateValue(i, forKey: kind) {
                throw MessageError(.invalidValue, field: "\(name)[\(i)]", detail: "repeats \(name)[\(first)]")
            }
        }
    }

    /// Whether `bytes` contains `needle` (both short enough for the naive search).
    static func containsText(_ bytes: [UInt8], _ needle: String) -> Bool {
        let pattern = Array(needle.utf8)
        guard !pattern.isEmpty, bytes.count >= pattern.count else { return pattern.isEmpty }
        let first = pattern[0]
        for start in 0...(bytes.count - pattern.count) where bytes[start] == first {
            if bytes[start..<(start + pattern.count)].elementsEqual(pattern) { return true }
        }
        return false
    }
}

extension Rules {
    /// A string of a reply: only NUL is refused (encoding would cut it short).
    @inline(__always)
    static func noNUL(_ value: String?, _ name: @autoclosure () -> String) throws(MessageError) {
        if let value { try noNUL(value, name()) }
    }
}
