import ArgumentParser
import LiveRelayClient
import LiveRelayMessages
import LiveRelayWebhookDelivery

/// `liverelay events tail`: an app's event feed (ListEvents), one JSON object per line, as a webhook
/// delivers each event.
struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events", abstract: "Read an app's event feed: what became of its calls after their replies.",
        subcommands: [Tail.self])

    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the app's events after a cursor (ListEvents), one JSON object per line.",
            discussion: """
                Without --follow, prints every event the feed holds after --after and exits. With
                --follow, then waits for new ones (long polls of --wait seconds) until interrupted.
                Each line is the event as a webhook delivers it (docs/PROTOCOL.md, "Webhooks") and
                carries its cursor: pass the last one printed as --after to go on from
                there. A cursor older than the feed keeps fails with FAILED_PRECONDITION
                (CursorExpired); --after 0 starts from the oldest event kept.
                """)

        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "Print the events after this cursor (0: from the oldest kept).") var after: UInt64 = 0
        @Flag(help: "Keep waiting for new events.") var follow = false
        @Option(help: "Seconds one long poll waits for an event with --follow (at most 60).") var wait: UInt32 = 30
        @Option(help: "Events per call (at most 1,000).") var pageSize: UInt32 = 100

        func validate() throws {
            guard (1...60).contains(wait) else { throw ValidationError("--wait must be 1 to 60 seconds") }
            guard (1...ListEventsRequest.maxEventsLimit).contains(pageSize) else {
                throw ValidationError("--page-size must be 1 to \(ListEventsRequest.maxEventsLimit)")
            }
        }

        func run() async throws {
            let (app, after, follow, pageSize, waitMS) = (self.app, self.after, self.follow, self.pageSize, self.wait * 1000)
            try await connection.withClient { client, timeout throws(LiveRelayClientError) in
                var cursor = after
                while true {
                    let waiting = follow ? waitMS : 0
                    let reply = try await client.listEvents(
                        ListEventsRequest(appID: app, afterCursor: cursor, maxEvents: pageSize, waitMS: waiting),
                        timeout: timeout + .milliseconds(waiting))
                    for event in reply.events { writeStandardOutput(WebhookPayload.json(event, appID: app)) }
                    cursor = reply.nextCursor
                    if !follow && !reply.more { return }
                }
            }
        }
    }
}
