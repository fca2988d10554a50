import Foundation
import LiveRelayAPNs
import LiveRelayMessages
import NIOPosix
import Testing

@testable import LiveRelayMockAPNs

/// Channel management, broadcasts and their fan-out over real TLS + HTTP/2 on
/// loopback, driven by `TestAPNsConnection` (not the project's APNs client).
@Suite("Mock APNs channels over TLS and HTTP/2")
struct MockAPNsChannelServerTests {
    static let group = MultiThreadedEventLoopGroup.singleton

    func withMock<T>(
        _ configure: (inout MockAPNsConfiguration) -> Void = { _ in },
        _ body: (MockAPNsServer, TestAPNsConnection) async throws -> T
    ) async throws -> T {
        var configuration = MockAPNsConfiguration(apps: [Fixture.app, Fixture.otherApp])
        configuration.clock = MockAPNsClock { Fixture.nowMilliseconds }
        configure(&configuration)
        let server = try await MockAPNsServer.start(configuration: configuration, group: Self.group)
        do {
            let c = try await TestAPNsConnection.connect(port: server.port, certificatePEM: server.certificatePEM, group: Self.group)
            let result = try await body(server, c)
            await c.close()
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    func create(_ c: TestAPNsConnection, policy: Int = 1, bundleID: String = Fixture.bundleID) async throws -> TestResponse {
        try await c.send(
            method: "POST", path: "/1/apps/\(bundleID)/channels", headers: Fixture.managementHeaders(),
            body: Array(Fixture.createBody(policy: policy).utf8))
    }

    func broadcast(
        _ c: TestAPNsConnection, channelID: String, expiration: String = "0", body: String = Fixture.updateBody
    ) async throws -> TestResponse {
        try await c.send(
            path: Fixture.broadcastPath, headers: Fixture.broadcastHeaders(channelID: channelID, expiration: expiration),
            body: Array(body.utf8))
    }

    func push(_ c: TestAPNsConnection, token: String, body: String) async throws -> TestResponse {
        try await c.send(path: "/3/device/" + token, headers: Fixture.headers(), body: Array(body.utf8))
    }

    @Test("create answers 201 with the id in apns-channel-id; read, list and delete follow it")
    func lifecycle() async throws {
        try await withMock { server, c in
            let requestID = "7d4f0b6a-2e1c-4a55-9f00-1b2c3d4e5f60"
            let created = try await c.send(
                path: Fixture.channelsPath, headers: Fixture.managementHeaders(extra: [("apns-request-id", requestID)]),
                body: Array(Fixture.createBody(policy: 0).utf8))
            #expect(created.status == 201 && created.body.isEmpty)
            #expect(created.header("apns-request-id") == requestID)
            let id = try #require(created.header("apns-channel-id"))
            #expect(id.utf8.count == 24 && BroadcastChannel.isValidID(id))
            let second = try #require(try await create(c).header("apns-channel-id"))

            let read = try await c.send(
                method: "GET", path: Fixture.channelsPath, headers: Fixture.managementHeaders(channelID: id), body: [])
            #expect(read.status == 200 && read.bodyText == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
            #expect(read.header("apns-request-id") != nil)
            let list = try await c.send(method: "GET", path: Fixture.allChannelsPath, headers: Fixture.managementHeaders(), body: [])
            #expect(list.status == 200 && list.bodyText == "{\"channels\":[\"\(id)\",\"\(second)\"]}")
            #expect(server.channels(bundleID: Fixture.bundleID).map(\.storagePolicy) == [.noStorage, .mostRecentMessage])

            let deleted = try await c.send(
                method: "DELETE", path: Fixture.channelsPath, headers: Fixture.managementHeaders(channelID: id), body: [])
            #expect(deleted.status == 204 && deleted.body.isEmpty)
            let again = try await c.send(
                method: "DELETE", path: Fixture.channelsPath, headers: Fixture.managementHeaders(channelID: id), body: [])
            #expect(again.status == 400 && again.bodyText == #"{"reason":"ChannelNotRegistered"}"#)

            // The management calls are recorded like pushes, with their channel.
            let records = server.received
            #expect(records.map(\.method) == ["POST", "POST", "GET", "GET", "DELETE", "DELETE"])
            #expect(records.map(\.status) == [201, 201, 200, 200, 204, 400])
            #expect(records.map(\.channelID) == [id, second, id, nil, id, id])
        }
    }

    @Test("every channel rejection of the rule table comes back over HTTP/2 with its status and JSON reason")
    func everyReason() async throws {
        try await withMock { server, c in
            for item in MockAPNsChannelRuleTests.rejections {
                let r = item.request
                let response = try await c.send(method: r.method!, path: r.path!, headers: r.headers, body: r.body)
                #expect(response.status == item.status, "\(item.name)")
                #expect(response.bodyText == "{\"reason\":\"\(item.reason)\"}", "\(item.name)")
                #expect(response.header("apns-request-id") != nil, "\(item.name)")
            }
            #expect(server.received.map(\.reason) == MockAPNsChannelRuleTests.rejections.map { Optional($0.reason) })
        }
    }

    @Test("unknown, other-app and no-storage channels: ChannelNotRegistered and BadExpirationDate; the limit: CannotCreateChannelConfig")
    func registryAnswers() async throws {
        try await withMock({ $0.maxChannelsPerApp = 2 }) { server, c in
            let none = try #require(try await create(c, policy: 0).header("apns-channel-id"))
            let stored = try #require(try await create(c, policy: 1).header("apns-channel-id"))
            let full = try await create(c)
            #expect(full.status == 400 && full.bodyText == #"{"reason":"CannotCreateChannelConfig"}"#)
            let otherApp = try #require(try await create(c, bundleID: Fixture.otherBundleID).header("apns-channel-id"))

            #expect(try await broadcast(c, channelID: none).status == 200)
            let late = try await broadcast(c, channelID: none, expiration: "1795395600")
            #expect(late.status == 400 && late.bodyText == #"{"reason":"BadExpirationDate"}"#)
            #expect(try await broadcast(c, channelID: stored, expiration: "1795395600").status == 200)
            for unknown in [Fixture.unknownChannelID, otherApp] {
                let response = try await broadcast(c, channelID: unknown)
                #expect(response.status == 400 && response.bodyText == #"{"reason":"ChannelNotRegistered"}"#)
            }
            #expect(server.channels(bundleID: Fixture.bundleID).count == 2)
        }
    }

    @Test("a broadcast fans out to the tokens whose push-to-start named its channel, in order with their own pushes")
    func fanOut() async throws {
        let recordFile = FileManager.default.temporaryDirectory.appendingPathComponent("mock-channels-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: recordFile) }
        let (a, b, loner) = (String(repeating: "a1", count: 32), String(repeating: "B2", count: 32), String(repeating: "c3", count: 32))
        try await withMock({ $0.recordFile = recordFile }) { server, c in
            let id = try #require(try await create(c, policy: 0).header("apns-channel-id"))
            let other = try #require(try await create(c, policy: 0).header("apns-channel-id"))
            #expect(try await push(c, token: a, body: Fixture.startBody(subscribingTo: id)).status == 200)
            #expect(try await push(c, token: b, body: Fixture.startBody(subscribingTo: id)).status == 200)
            #expect(try await push(c, token: loner, body: Fixture.startBody(subscribingTo: other)).status == 200)
            // A channel this app does not have subscribes nobody.
            #expect(try await push(c, token: loner, body: Fixture.startBody(subscribingTo: Fixture.unknownChannelID)).status == 200)
            #expect(server.subscribers(of: id) == [a, b.lowercased()])
            #expect(server.subscribers(of: other) == [loner])

            #expect(try await broadcast(c, channelID: id).status == 200)
            #expect(try await push(c, token: a, body: Fixture.endBody).status == 200)
            #expect(try await broadcast(c, channelID: id, expiration: "5").status == 400)  // refused: reaches nobody
            #expect(try await broadcast(c, channelID: id, body: Fixture.endBody).status == 200)

            let toA = server.deliveries(to: a)
            #expect(toA.map(\.channelID) == [nil, id, nil, id])
            #expect(toA.map(\.bodyText) == [Fixture.startBody(subscribingTo: id), Fixture.updateBody, Fixture.endBody, Fixture.endBody])
            #expect(server.deliveries(to: b).map(\.channelID) == [nil, id, id])
            #expect(server.deliveries(to: loner).map(\.channelID) == [nil, nil])
            let broadcasts = server.received.filter { $0.path == Fixture.broadcastPath && $0.status == 200 }
            #expect(broadcasts.map(\.fannedOutTo) == [[a, b.lowercased()], [a, b.lowercased()]])

            // Deleting the channel ends its subscriptions.
            _ = try await c.send(method: "DELETE", path: Fixture.channelsPath, headers: Fixture.managementHeaders(channelID: id), body: [])
            #expect(server.subscribers(of: id).isEmpty)
        }
        let lines = try String(contentsOfFile: recordFile, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.contains("\"subscribed_to\":") && $0.contains(a) })
        #expect(lines.contains { $0.contains("\"fanned_out_to\":[\"\(a)\",\"\(b.lowercased())\"]") })
        #expect(lines.first?.contains("\"status\":201,") == true && lines.first?.contains("\"channel_id\":") == true)
    }

    @Test("injected errors replace a broadcast's 200 like a push's; management calls are answered as made")
    func faults() async throws {
        try await withMock({ $0.injectedErrors = [MockAPNsInjectedError(reason: "ServiceUnavailable", rate: 1)] }) { server, c in
            let created = try await create(c, policy: 0)
            #expect(created.status == 201)
            let id = try #require(created.header("apns-channel-id"))
            let token = String(repeating: "d4", count: 32)
            #expect(try await push(c, token: token, body: Fixture.startBody(subscribingTo: id)).status == 503)
            let sent = try await broadcast(c, channelID: id)
            #expect(sent.status == 503 && sent.bodyText == #"{"reason":"ServiceUnavailable"}"#)
            #expect(server.subscribers(of: id).isEmpty && server.deliveries(to: token).isEmpty)
        }
    }

    @Test("two mocks sharing a channel store: a sandbox channel is not registered in production")
    func environments() async throws {
        let store = MockAPNsChannelStore()
        try await withMock({ $0.channelStore = store }) { sandbox, c in
            let id = try #require(try await create(c).header("apns-channel-id"))
            try await withMock({
                $0.channelStore = store
                $0.environment = .production
            }) { production, p in
                let response = try await broadcast(p, channelID: id, expiration: "1795395600")
                #expect(response.status == 400 && response.bodyText == #"{"reason":"ChannelNotRegistered"}"#)
                #expect(production.channels(bundleID: Fixture.bundleID).isEmpty)
            }
            #expect(sandbox.channels(bundleID: Fixture.bundleID).map(\.id) == [id])
            #expect(store.channels(bundleID: Fixture.bundleID, environment: .sandbox).map(\.environment) == [.sandbox])
        }
    }
}
