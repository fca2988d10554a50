import LiveRelayGRPC
import SwiftProtobuf

/// The one request both load generators send: a realistic RegisterToken call
/// (an update token of a running activity), encoded once with swift-protobuf.
/// LiveRelay carries these bytes in a REQUEST frame; gRPC in a length-prefixed
/// DATA frame. Both servers decode them fully.
public enum RequestFixture {
    public static let method = "/liverelay.v1.LiveRelay/RegisterToken"

    public static var message: Liverelay_V1_RegisterTokenRequest {
        var request = Liverelay_V1_RegisterTokenRequest()
        request.appID = "com.example.deliveries"
        request.kind = .update
        // A 32-byte APNs token as 64 lowercase hex characters.
        request.token = "5f2b8c0d9e3a4b1c7d6e5f40312a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f21"
        request.environment = .production
        request.activityID = "order-2f9c1a7e"
        request.externalUserID = "user-84123"
        request.deviceID = "6F1C2D3E-4A5B-4C6D-8E9F-0A1B2C3D4E5F"
        request.expiresAt = 1_767_225_600
        return request
    }

    public static let bytes: [UInt8] = {
        // Deterministic: field order is by number, no map fields.
        try! message.serializedBytes()
    }()

    /// FNV-1a of the bytes, printed by both generators so a report shows they sent the same message.
    public static var fingerprint: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
