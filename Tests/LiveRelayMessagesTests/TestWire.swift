import CLiveRelayProto

@testable import LiveRelayMessages

/// A tiny hand encoder for building wire bytes in tests (including broken ones).
enum TestWire {
    static func varint(_ v: UInt64) -> [UInt8] {
        var v = v
        var out: [UInt8] = []
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
        return out
    }

    static func tag(_ number: UInt64, _ wireType: UInt64) -> [UInt8] { varint(number << 3 | wireType) }

    /// A length-delimited field.
    static func bytes(_ number: UInt64, _ payload: [UInt8]) -> [UInt8] {
        tag(number, 2) + varint(UInt64(payload.count)) + payload
    }

    static func string(_ number: UInt64, _ s: String) -> [UInt8] { bytes(number, Array(s.utf8)) }

    static func int(_ number: UInt64, _ v: UInt64) -> [UInt8] { tag(number, 0) + varint(v) }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format2($0)) }.joined() }

    private static func format2(_ b: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(b >> 4)], digits[Int(b & 15)]])
    }

    /// Decodes without the semantic validation (what a reply gets), to look at raw values.
    static func decodeUnvalidated<M: CMessageConvertible>(_ bytes: [UInt8], as _: M.Type = M.self) throws -> M {
        try bytes.withUnsafeBytes { raw throws -> M in try Codec.decode(raw, limit: 1 << 20) }
    }

    /// Unpacks with protobuf-c directly and runs protobuf_c_message_check.
    static func check(_ bytes: [UInt8], _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>) -> Bool {
        let storage = bytes.isEmpty ? [0] : bytes  // a real address even for an empty message
        return storage.withUnsafeBufferPointer { buffer -> Bool in
            guard let message = protobuf_c_message_unpack(descriptor, nil, bytes.count, buffer.baseAddress!) else {
                return false
            }
            defer { protobuf_c_message_free_unpacked(message, nil) }
            return protobuf_c_message_check(message) != 0
        }
    }
}

/// Valid requests to mutate one field at a time in the validation tests.
enum Fixtures {
    static let token = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
    static let token2 = "00112233445566778899aabbccddeeff"
    /// A broadcast channel id as APNs makes them: base64 of 16 bytes.
    static let channel = "dHdvLWNoYW5uZWwtaWQtMQ=="

    static var register: RegisterTokenRequest {
        RegisterTokenRequest(
            appID: "com.example.app", kind: .pushToStart, token: token, environment: .sandbox,
            attributesType: "DeliveryAttributes", externalUserID: "user-1", deviceID: "device-1",
            expiresAt: 1_900_000_000)
    }

    static var start: StartActivityRequest {
        StartActivityRequest(
            appID: "com.example.app", activityID: "order-42", attributesType: "Module.DeliveryAttributes",
            attributesJSON: #"{"orderID":"42"}"#, contentStateJSON: #"{"eta":12,"status":"cooking"}"#,
            alert: Alert(title: "Order", body: "Cooking", sound: "default"), staleDate: 1_900_000_100,
            dismissalDate: 1_900_000_200, relevanceScore: 0.5, priority: .high,
            targets: Targets(pushToStartTokens: [token, token2], externalUserIDs: ["user-1"], allDevices: false),
            idempotencyKey: "key-1", waitForDelivery: true, channelID: channel, inputPushToken: false,
            strictPriorityBudget: true)
    }

    static var update: UpdateActivityRequest {
        UpdateActivityRequest(
            appID: "com.example.app", activityID: "order-42", contentStateJSON: #"{"eta":5}"#,
            alert: Alert(title: "Soon", body: "5 minutes"), staleDate: 1_900_000_300, dismissalDate: 0,
            relevanceScore: 1, priority: .low, endActivity: false, idempotencyKey: "key-2", waitForDelivery: false,
            channelID: channel, channelOnly: true, strictPriorityBudget: false)
    }

    static var end: EndActivityRequest {
        EndActivityRequest(
            appID: "com.example.app", activityID: "order-42", contentStateJSON: #"{"status":"delivered"}"#,
            dismissalDate: 1_900_000_400, idempotencyKey: "key-3", waitForDelivery: true,
            alert: Alert(title: "Delivered"), priority: .high, staleDate: 1_900_000_500, relevanceScore: 0.25,
            channelID: channel, channelOnly: false, strictPriorityBudget: true)
    }

    static var summary: DeliverySummary {
        DeliverySummary(
            targeted: 5, queued: 1, delivered: 2, failed: 2,
            failures: [FailureCount(reason: "BadDeviceToken", count: 1), FailureCount(reason: "QueueFull", count: 1)],
            pruned: 1, superseded: 3, expired: 4,
            unresolved: [
                UnresolvedTarget(kind: .externalUserID, value: "user-9", reason: "no push-to-start token registered"),
                UnresolvedTarget(kind: .allDevices, value: "", reason: "none"),
            ],
            complete: true, downgraded: 2)
    }
}
