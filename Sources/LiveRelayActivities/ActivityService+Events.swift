import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import NIOCore

// The event feed's RPC: ListEvents, a long poll over the app's feed in the store.
extension ActivityService {
    /// How long one wait of a long poll lasts before it looks again whether the
    /// caller cancelled or the server began to drain: a poll that nobody reads
    /// any more must not hold a connection's drain for the rest of its wait.
    static let eventWaitSlice: TimeAmount = .seconds(1)

    /// Room left before the call's deadline: the empty answer of a wait that
    /// ran to its end must reach the caller before the deadline does.
    static let eventWaitMargin: TimeAmount = .milliseconds(50)

    /// A disabled app's feed can still be read (what became of its last calls
    /// is what an operator looks at); an unknown app's is NOT_FOUND. The call
    /// counts against the app's `calls_per_second` but takes no admission slot:
    /// a long poll waits, it does not work.
    public func listEvents(_ request: ListEventsRequest, context: CallContext) -> EventLoopFuture<ListEventsReply> {
        let appID = request.appID
        return measured("ListEvents", appID: appID, context: context) {
            if let error = context.principal.checkApp(appID) { return context.fail(error) }
            let directory = apps.withLockedValue { $0 }
            guard directory.app(appID) != nil || directory.isDisabled(appID) else {
                let unknown = DomainError.unknownApp(appID: appID)
                return context.fail(RPCError(.notFound, unknown.message, details: ErrorDetails(reason: unknown.reason)))
            }
            if case let .refused(refusal) = quotas.admitCall(appID: appID, pushes: false, adding: nil) {
                return context.fail(refusal)
            }
            var waitUntil: NIODeadline?
            if request.waitMS > 0 {
                waitUntil = NIODeadline.now() + .milliseconds(Int64(request.waitMS))
                if let deadline = context.deadline { waitUntil = min(waitUntil!, deadline - Self.eventWaitMargin) }
            }
            return pollEvents(
                appID: appID, after: request.afterCursor, limit: request.effectiveMaxEvents, until: waitUntil, context: context)
        }
    }

    /// Reads the feed; with nothing after the cursor and time left, waits for
    /// the app's next commit of events (or the store's poll interval, or a
    /// slice) and reads again. The generation is taken before the read, so an
    /// event committed between the read and the wait ends the wait at once.
    private func pollEvents(
        appID: String, after cursor: UInt64, limit: Int, until: NIODeadline?, context: CallContext
    ) -> EventLoopFuture<ListEventsReply> {
        let generation = store.eventCommits.generation(of: appID)
        return store.events(appID: appID, after: cursor, limit: limit, on: context.eventLoop).flatMapError { error in
            context.eventLoop.makeFailedFuture(Self.rpcError(error, call: "ListEvents", quotas: self.quotas, logger: self.logger))
        }.flatMap { page in
            if cursor > 0, cursor < page.trimmedThrough {
                let oldest = page.entries.first.map { "\($0.cursor)" } ?? "none yet"
                return context.fail(
                    RPCError(
                        .failedPrecondition,
                        "the events after cursor \(cursor) up to \(page.trimmedThrough) were deleted by the feed's retention; "
                            + "the oldest kept is \(oldest): read again from cursor 0",
                        details: ErrorDetails(reason: "CursorExpired")))
            }
            let now = NIODeadline.now()
            // Rows this build cannot read (a newer build's kinds) answer at once too: the reply's
            // cursor moves past them, so a reader is never held below them.
            guard page.entries.isEmpty, page.scannedThrough <= cursor, let until, now < until, !context.cancellation.isCancelled,
                !self.sink.isShuttingDown
            else {
                return context.eventLoop.makeSucceededFuture(Self.reply(page, after: cursor))
            }
            var wakeAt = min(until, now + Self.eventWaitSlice)
            if let interval = self.store.eventPollInterval { wakeAt = min(wakeAt, now + interval) }
            return self.store.eventCommits.wait(appID: appID, after: generation, until: wakeAt, on: context.eventLoop).flatMap { _ in
                self.pollEvents(appID: appID, after: cursor, limit: limit, until: until, context: context)
            }
        }
    }

    static func reply(_ page: EventPage, after cursor: UInt64) -> ListEventsReply {
        ListEventsReply(
            events: page.entries.map(Self.event), nextCursor: page.nextCursor(after: cursor), more: page.more)
    }

    /// An event of the feed as the protocol shows it.
    public static func event(_ entry: FeedEntry) -> Event {
        let fact = entry.event
        return Event(
            cursor: entry.cursor, kind: EventKind(rawValue: Int32(fact.kind.rawValue)), timeMS: fact.time.milliseconds,
            activityID: fact.activityID ?? "", callTimestamp: fact.callTimestamp ?? 0,
            idempotencyKey: fact.idempotencyKey ?? "",
            // A settled account has nothing queued: `summary` marks it complete.
            account: fact.account.map { summary(DeliverySummary(targeted: UInt32(clamping: $0.total)), after: $0) },
            token: fact.token ?? "",
            tokenKind: fact.tokenKind.map { $0 == .update ? TokenKind.update : .pushToStart } ?? .unspecified,
            reason: fact.reason ?? "", invalidSinceMS: fact.invalidSince?.milliseconds ?? 0,
            activityState: fact.activityState?.proto ?? .unspecified, channelID: fact.channelID ?? "")
    }
}
