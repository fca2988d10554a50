import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// Carries "these apps' feeds grew" between the nodes sharing a database, so
/// that a long poll (ListEvents) or a webhook waiting on one node wakes within
/// milliseconds of another node's commit instead of at its next poll.
///
/// Why not `NOTIFY` in the batch's own transaction: a notifying transaction
/// takes, at COMMIT, a lock that every notifying commit of the database
/// shares, and nearly every settled call appends an event, so every batch of
/// every node would queue on it. Instead the apps a node's commits appended to
/// are sent after those commits, in notifications of their own, coalesced: one
/// `pg_notify` statement at a time, and the apps of the commits made while it
/// runs go in the next one. A node skips its own notifications (it signalled
/// its readers at its commit).
///
/// Best effort by design: a notification that fails to go out is logged at
/// debug level and dropped, and one lost with the listening connection is
/// covered by waking every reader when it listens again; the store's poll
/// (``PostgresActivityStore/eventPollInterval``) is the net under both.
final class PostgresEventRelay: Sendable {
    /// The notification channel of every store of every schema.
    static let channel = "liverelay_events"
    /// Below PostgreSQL's 8,000-byte payload limit; more apps go in more notifications.
    static let maxPayloadBytes = 7_000

    private let client: PostgresClient
    private let schema: String
    /// Tells this node's notifications from other nodes'.
    private let node: String
    private let timeout: Duration
    private let signal: EventCommitSignal
    private let logger: Logger
    private let pending = NIOLockedValueBox(Set<String>())
    private let kicks: AsyncStream<Void>
    private let kick: AsyncStream<Void>.Continuation
    private let tasks = NIOLockedValueBox<[Task<Void, Never>]>([])
    private let listened = NIOLockedValueBox(0)

    /// How many times `LISTEN` was answered (tests: the listener is in place, or in place again).
    var listens: Int { listened.withLockedValue { $0 } }

    /// Runs on `client`, which it does not own (two connections: the listener's and the sender's).
    init(client: PostgresClient, schema: String, timeout: Duration, signal: EventCommitSignal, logger: Logger) {
        self.client = client
        self.schema = schema
        self.node = Self.makeNodeID()
        self.timeout = timeout
        self.signal = signal
        self.logger = logger
        (kicks, kick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Starts the sender and the listener.
    func start() {
        let listener = PostgresListener(
            client: client, channel: Self.channel, owner: "the event feed's", timeout: timeout, checkEvery: .seconds(10),
            logger: logger,
            check: { [signal, listened] session, justListened in
                if justListened {
                    // Listening again: what other nodes appended meanwhile went unheard, so every
                    // reader reads its feed again. (Before the first LISTEN, the poll is the net.)
                    let again = listened.withLockedValue { $0 } > 0
                    if again { signal.wakeAll() }
                    listened.withLockedValue { $0 += 1 }
                } else {
                    // Proves the connection alive: a dead one is found within `checkEvery`.
                    try await session.query("SELECT 1")
                }
            },
            received: { [signal, schema, node] payload in
                if let appIDs = Self.appIDs(fromPayload: payload, schema: schema, skippingNode: node) {
                    signal.committed(appIDs: appIDs)
                }
            })
        tasks.withLockedValue { tasks in
            tasks = [Task { await listener.run() }, Task { await self.send() }]
        }
    }

    /// After a commit of this node that appended to these apps' feeds.
    func committed(appIDs: Set<String>) {
        guard !appIDs.isEmpty else { return }
        pending.withLockedValue { $0.formUnion(appIDs) }
        kick.yield()
    }

    /// Stops both; what was not sent yet is dropped (other nodes' polls find it).
    func stop() async {
        for task in cancel() { await task.value }
    }

    /// Tells both to stop, without waiting for them (a store released without `close()`).
    @discardableResult
    func cancel() -> [Task<Void, Never>] {
        kick.finish()
        let running = tasks.withLockedValue { tasks in
            defer { tasks = [] }
            return tasks
        }
        for task in running { task.cancel() }
        return running
    }

    private func send() async {
        for await _ in kicks {
            let appIDs = pending.withLockedValue { pending in
                defer { pending = [] }
                return pending
            }
            for payload in Self.payloads(schema: schema, node: node, appIDs: appIDs) {
                do {
                    try await client.withConnection { connection in
                        var binds = PostgresBindings(capacity: 2)
                        binds.append(Self.channel)
                        binds.append(payload)
                        try await PostgresSession(connection, timeout: timeout, logger: logger).query(
                            PostgresQuery(unsafeSQL: "SELECT pg_notify($1, $2)", binds: binds))
                    }
                } catch {
                    guard !Task.isCancelled else { return }
                    logger.debug("could not tell other nodes of new events; their polls will find them", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    // MARK: Payloads

    /// `<schema>\n<node>\n<app>\n<app>…`: app ids never hold a newline (`A-Z a-z 0-9 . _ -`).
    static func payloads(schema: String, node: String, appIDs: Set<String>) -> [String] {
        let head = "\(schema)\n\(node)"
        var payloads: [String] = []
        var current = head
        for appID in appIDs.sorted() {
            if current.utf8.count + 1 + appID.utf8.count > maxPayloadBytes, current != head {
                payloads.append(current)
                current = head
            }
            current += "\n" + appID
        }
        if current != head { payloads.append(current) }
        return payloads
    }

    /// The apps a notification names, if it is another node's of `schema`; nil otherwise.
    static func appIDs(fromPayload payload: String, schema: String, skippingNode node: String) -> Set<String>? {
        let lines = payload.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 3, lines[0] == schema, lines[1] != node else { return nil }
        return Set(lines.dropFirst(2).filter { !$0.isEmpty }.map(String.init))
    }

    private static func makeNodeID() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next(), radix: 36) + String(generator.next(), radix: 36)
    }
}
