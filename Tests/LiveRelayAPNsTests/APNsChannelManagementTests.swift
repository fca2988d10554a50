import Testing

@testable import LiveRelayAPNs

/// The channel management vocabulary: requests on the wire, answers read back, errors judged.
@Suite("APNs channel management values")
struct APNsChannelManagementTests {
    @Test func callsHaveAPNsPathsMethodsHeadersAndBodies() {
        let create = APNsChannelManagementRequest.create(bundleID: "com.example.app", storagePolicy: .noStorage)
        #expect(create.method == .post && create.path == "/1/apps/com.example.app/channels" && create.channelID == nil)
        #expect(String(decoding: create.body, as: UTF8.self) == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        let read = APNsChannelManagementRequest.read(channelID: "abc=", bundleID: "b")
        #expect(read.method == .get && read.path == "/1/apps/b/channels" && read.body.isEmpty)
        #expect(read.headerFields.map(\.name) == ["apns-channel-id"] && read.headerFields.map(\.value) == ["abc="])
        let delete = APNsChannelManagementRequest.delete(channelID: "abc=", bundleID: "b")
        #expect(delete.method == .delete && delete.path == "/1/apps/b/channels" && delete.channelID == "abc=")
        let list = APNsChannelManagementRequest.list(bundleID: "b")
        #expect(list.method == .get && list.path == "/1/apps/b/all-channels" && list.headerFields.isEmpty)
    }

    @Test func aManagementRequestReplacesThePushShape() {
        let call = APNsChannelManagementRequest.delete(channelID: "abc=", bundleID: "b")
        let request = APNsRequest(management: call, environment: .sandbox, requestID: "id")
        #expect(request.method == "DELETE" && request.path == "/1/apps/b/channels" && !request.isDevicePush)
        #expect(request.headerFields.map(\.name) == ["apns-channel-id"])
        #expect(request.payload.bytes.isEmpty && request.environment == .sandbox && request.apnsID == "id")

        let push = APNsRequest(deviceToken: "ab", headers: APNsHeaders(bundleID: "b", expiration: 0), payload: APNsPayload(bytes: [1]))
        #expect(push.method == "POST" && push.isDevicePush && push.path == "/3/device/ab")
        let broadcast = APNsRequest(
            deviceToken: "", headers: APNsHeaders(bundleID: "b", expiration: 9), payload: APNsPayload(bytes: [1]),
            broadcast: APNsBroadcast(channelID: "c=", bundleID: "b", storagePolicy: .noStorage))
        #expect(broadcast.method == "POST" && !broadcast.isDevicePush && broadcast.path == "/4/broadcasts/apps/b")
    }

    @Test func managementAnswersKeepTheirChannelIDAndBody() {
        let created = APNsResponse(managementStatus: 201, requestID: "r", channelID: "c=", body: [])
        #expect(created?.status == 201 && created?.apnsID == "r" && created?.channelID == "c=" && created?.reason == nil)
        #expect(created?.isSuccess == true && created?.disposition == .delivered)
        let listed = APNsResponse(managementStatus: 200, requestID: nil, channelID: nil, body: Array(#"{"channels":[]}"#.utf8))
        #expect(listed?.body == Array(#"{"channels":[]}"#.utf8) && listed?.bodyBytes == listed?.body)
        #expect(APNsResponse(managementStatus: 204, requestID: nil, channelID: nil, body: [])?.disposition == .delivered)
        let refused = APNsResponse(
            managementStatus: 400, requestID: "r", channelID: nil, body: Array(#"{"reason":"ChannelNotRegistered"}"#.utf8))
        #expect(refused == APNsResponse(status: 400, reason: "ChannelNotRegistered", apnsID: "r"))
        #expect(APNsResponse(managementStatus: 400, requestID: nil, channelID: nil, body: []) == nil)
        // A push's answer is read as before: a 200's body is not kept.
        #expect(APNsResponse(status: 200, apnsID: nil, body: Array("x".utf8))?.body == [])
    }

    @Test func managementEndpointsAreApplesOrTheCustomDestination() {
        #expect(APNsDestination.apple.managementEndpoint(for: .sandbox).description == "api-manage-broadcast.sandbox.push.apple.com:2195")
        #expect(APNsDestination.apple.managementEndpoint(for: .production).description == "api-manage-broadcast.push.apple.com:2196")
        let mock = APNsDestination.custom(host: "127.0.0.1", port: 2197)
        #expect(mock.managementEndpoint(for: .sandbox) == .custom(host: "127.0.0.1", port: 2197))
        #expect(mock.managementEndpoint(for: .production) == mock.endpoint(for: .production))
    }

    @Test func retryableErrorsAreThrottlingServerTroubleExpiredTokensAndRetryableTransport() {
        let retryable: [APNsChannelManagementError] = [
            .rejected(status: 429, reason: "TooManyRequests"), .rejected(status: 500, reason: "InternalServerError"),
            .rejected(status: 503, reason: "ServiceUnavailable"), .rejected(status: 403, reason: "ExpiredProviderToken"),
            .transport(.connectionLost), .transport(.timedOut), .transport(.connectFailed("x")),
        ]
        let final: [APNsChannelManagementError] = [
            .rejected(status: 400, reason: "ChannelNotRegistered"), .rejected(status: 400, reason: "CannotCreateChannelConfig"),
            .rejected(status: 403, reason: "InvalidProviderToken"), .rejected(status: 404, reason: "BadPath"),
            .transport(.shutDown), .transport(.expiredBeforeSending), .malformedAnswer("x"),
        ]
        #expect(retryable.map(\.isRetryable) == Array(repeating: true, count: retryable.count))
        #expect(final.map(\.isRetryable) == Array(repeating: false, count: final.count))
        #expect(
            "\(APNsChannelManagementError.rejected(status: 400, reason: "ChannelNotRegistered"))"
                == "APNs answered 400 ChannelNotRegistered")
    }
}
