import ArgumentParser
import LiveRelayClient
import LiveRelayMessages

/// `liverelay events tail`: an app's event feed (ListEvents), one JSON object per line.
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
                Each line carries its cursor: pass the last one printed as --after to go on from
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
                    for event in reply.events { writeStandardOutput(event.json.compact) }
                    cursor = reply.nextCursor
                    if !follow && !reply.more { return }
                }
            }
        }
    }
}

extension Event: JSONRepresentable {
    var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("cursor", .integer(Int64(clamping: self.cursor))), ("kind", .string(self.kind.protoName)),
            ("time_ms", .integer(self.timeMS)),
        ]
        // Only what the kind fills: a line per event stays short.
        if !self.activityID.isEmpty { fields.append(("activity_id", .string(self.activityID))) }
        if self.callTimestamp != 0 { fields.append(("call_timestamp", .integer(self.callTimestamp))) }
        if !self.idempotencyKey.isEmpty { fields.append(("idempotency_key", .string(self.idempotencyKey))) }
        if let account = self.account { fields.append(("account", account.json)) }
        if !self.token.isEmpty { fields.append(("token", .string(self.token))) }
        if self.tokenKind != .unspecified {
            fields.append(("token_kind", .string(self.tokenKind == .update ? "TOKEN_KIND_UPDATE" : "TOKEN_KIND_PUSH_TO_START")))
        }
        if !self.reason.isEmpty { fields.append(("reason", .string(self.reason))) }
        if self.invalidSinceMS != 0 { fields.append(("invalid_since_ms", .integer(self.invalidSinceMS))) }
        if self.activityState != .unspecified { fields.append(("activity_state", .string(self.activityState.protoName))) }
        if !self.channelID.isEmpty { fields.append(("channel_id", .string(self.channelID))) }
        return .object(fields)
    }
}

extension ListEventsReply: JSONRepresentable {
    var json: JSONValue {
        .object([
            ("events", .array(self.events.map(\.json))), ("next_cursor", .integer(Int64(clamping: self.nextCursor))),
            ("more", .bool(self.more)),
        ])
    }
}

extension EventKind {
    var protoName: String {
        switch self {
        case .unspecified: "EVENT_KIND_UNSPECIFIED"
        case .callSettled: "EVENT_KIND_CALL_SETTLED"
        case .pushFailed: "EVENT_KIND_PUSH_FAILED"
        case .tokenPruned: "EVENT_KIND_TOKEN_PRUNED"
        case .activityEnded: "EVENT_KIND_ACTIVITY_ENDED"
        case .dispatchHeld: "EVENT_KIND_DISPATCH_HELD"
        case .dispatchResumed: "EVENT_KIND_DISPATCH_RESUMED"
        case .channelDeleted: "EVENT_KIND_CHANNEL_DELETED"
        case .unrecognized(let n): String(n)
        }
    }
}
