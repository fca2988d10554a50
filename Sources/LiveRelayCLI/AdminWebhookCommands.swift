import ArgumentParser
import Foundation
import LiveRelayClient
import LiveRelayMessages

/// `liverelay admin webhook`: an app's webhook, the HTTPS endpoint its event feed is delivered to.
struct AdminWebhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook", abstract: "An app's webhook (its event feed, delivered over HTTPS): put, get, delete, reset.",
        subcommands: [Put.self, Get.self, Delete.self, Reset.self])

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an app's webhook; a new one, or --rotate-secret, prints its signing secret once.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "The endpoint: https://host[:port]/path[?query], at most 2,048 bytes.") var url: String
        @Option(
            name: .customLong("kind"),
            help: ArgumentHelp(
                "An event kind to deliver (repeatable; none: every kind).",
                discussion: Admin.Webhook.eventKindNames.joined(separator: ", ")))
        var kinds: [String] = []
        @Flag(help: "Mint a new signing secret; the old one stops signing within about a second.") var rotateSecret = false

        func run() async throws {
            let request = Admin.PutWebhookRequest(appID: app, url: url, eventKinds: kinds, rotateSecret: rotateSecret ? true : nil)
            let reply = try await connection.withClient { client, timeout throws(LiveRelayClientError) in
                try await client.putWebhook(request, timeout: timeout)
            }
            writeStandardOutput(reply.json.rendered())
            // The server keeps no copy it could show again: say so where a script's
            // captured output does not hide it.
            if reply.signingSecret != nil {
                FileHandle.standardError.write(
                    Data("The signing secret above is shown only now; keep it where the endpoint can check signatures with it.\n".utf8))
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show an app's webhook and how its deliveries are going.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String

        func run() async throws {
            let request = Admin.GetWebhookRequest(appID: app)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.getWebhook(request, timeout: timeout)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop an app's webhook deliveries (its event feed keeps its events).")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String

        func run() async throws {
            let request = Admin.DeleteWebhookRequest(appID: app)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.deleteWebhook(request, timeout: timeout)
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End a failing or retrying webhook's wait: the next delivery is tried at once, with a fresh retry window.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String

        func run() async throws {
            let request = Admin.ResetWebhookRequest(appID: app)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.resetWebhook(request, timeout: timeout)
            }
        }
    }
}
