import ArgumentParser
import LiveRelayClient
import LiveRelayMessages

/// The options start, update and end share for broadcast channels and the priority-10 budget.
struct ChannelTargetOptions: ParsableArguments {
    @Option(help: "A broadcast channel of the app (an id `liverelay channels create` printed).") var channel: String?
    @Flag(help: "Refuse (RESOURCE_EXHAUSTED) instead of sending at priority 5 when the priority-10 budget is spent.")
    var strictPriorityBudget = false
}

/// `liverelay channels create|list|delete`: an app's broadcast channels (iOS 18).
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels", abstract: "Manage an app's broadcast channels (iOS 18).",
        subcommands: [Create.self, List.self, Delete.self])

    enum PolicyOption: String, ExpressibleByArgument, CaseIterable {
        case noStorage = "no-storage", mostRecentMessage = "most-recent-message"
        var wire: BroadcastStoragePolicy { self == .noStorage ? .noStorage : .mostRecentMessage }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a channel at APNs (CreateChannel); prints its id.",
            discussion: """
                no-storage channels keep nothing for offline devices (every send goes with
                apns-expiration 0) and get a higher budget; most-recent-message channels keep
                the latest message up to 8 hours.
                """)

        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "The APNs environment: sandbox or production.") var environment: EnvironmentOption = .sandbox
        @Option(help: "no-storage or most-recent-message.") var storagePolicy: PolicyOption = .mostRecentMessage

        func run() async throws {
            let request = CreateChannelRequest(
                appID: app, environment: environment.wire, storagePolicy: storagePolicy.wire)
            try await connection.run { client, timeout throws(LiveRelayClientError) in
                try await client.createChannel(request, timeout: timeout)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's channels (ListChannels), a page at a time.")

        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "Only this environment: sandbox or production (default: both).") var environment: EnvironmentOption?
        @Option(help: "Channels per page (at most 1,000).") var pageSize: UInt32 = 100
        @Option(help: "The next_page_token of the previous page.") var pageToken = ""

        func run() async throws {
            let request = ListChannelsRequest(
                appID: app, environment: environment?.wire ?? .unspecified,
                pageSize: pageSize, pageToken: pageToken)
            try await connection.run { client, timeout throws(LiveRelayClientError) in
                try await client.listChannels(request, timeout: timeout)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel at APNs and from LiveRelay (DeleteChannel).")

        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "The channel id.") var channel: String

        func run() async throws {
            let request = DeleteChannelRequest(appID: app, channelID: channel)
            try await connection.run { client, timeout throws(LiveRelayClientError) in
                try await client.deleteChannel(request, timeout: timeout)
            }
        }
    }
}
