import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// The store for deployments where several LiveRelay nodes share state: the
/// same tables, rules and durability contract as ``SQLiteActivityStore``, in
/// a PostgreSQL database every node connects to (postgres-nio's pooled
/// `PostgresClient`).
///
/// ## Batches and lanes
/// ``apply(_:now:on:)`` queues the mutation on one of
/// ``PostgresStoreConfiguration/lanes`` writer lanes (chosen by the activity,
/// or the device for push-to-start tokens, so that calls about one activity
/// meet in one lane instead of racing each other in the database). A lane
/// takes everything queued (up to `maxBatch`), leases a pooled connection and
/// runs the batch as one transaction: plans are evaluated in order against
/// ``PostgresStateReader`` (each sees the earlier plans' writes), their reads
/// fetched with a few set-based statements, their net writes sent with one
/// statement per table; then `COMMIT`, and only then are the futures
/// completed. Many concurrent RegisterToken calls thus share a handful of
/// round trips and one WAL flush, and lanes overlap one batch's commit with
/// the next one's planning. Reads outside mutations use other pooled connections.
///
/// ## Races between nodes
/// Batches run at `SERIALIZABLE`: PostgreSQL then guarantees that the
/// committed batches of every node are equivalent to some serial order, so
/// two nodes applying conflicting plans (two Starts of one activity, two
/// updates stamping timestamps, two tokens for one rotation slot) cannot both
/// win; the loser fails with a serialization failure (40001), a deadlock
/// (40P01) or a unique violation (23505, the rotation slots and keys are
/// unique indexes), its whole batch is rolled back, and it is planned again
/// from scratch against the winner's data (`batchAttempts` times, then each
/// mutation alone, `soloAttempts` times, with jittered backoff). Nothing was
/// acknowledged before, so a retry is invisible to callers.
///
/// ## Durability
/// A future succeeds only after `COMMIT` returned, with the server's
/// `synchronous_commit` (on by default: the WAL is flushed before COMMIT
/// returns). A connection lost before `COMMIT` was sent is retried on a new
/// connection (nothing of the batch can have committed); one lost during
/// `COMMIT` fails the batch's futures with
/// ``ActivityStoreError/outcomeUnknown(_:)``, since the outcome is unknown:
/// callers retry with their idempotency keys.
///
/// ## Deadlines
/// Every statement, reads outside mutations included, must answer within
/// ``PostgresStoreConfiguration/statementTimeout``; one that does not has
/// its connection closed (``PostgresSession``). A batch counts that as the
/// connection lost (retried before COMMIT, of unknown outcome in it); a read
/// fails as unavailable. postgres-nio can otherwise wait forever for a
/// backend that died under a statement, and the lane, with every call queued
/// on it, would wait too.
public final class PostgresActivityStore: ActivityStore, @unchecked Sendable {
    /// Counters for tests, benchmarks and diagnostics.
    public struct Statistics: Hashable, Sendable {
        /// Batch transactions committed (with or without writes).
        public var commits = 0
        /// Mutations completed.
        public var mutations = 0
        /// Batches rolled back and retried after a conflict with another transaction.
        public var conflicts = 0
        /// Batches retried after losing their connection before COMMIT.
        public var reconnects = 0
        /// Batch attempts that hit the statement timeout (their connections were closed).
        public var timeouts = 0
        /// The largest batch so far.
        public var largestBatch = 0
    }

    /// The schema version this build writes.
    public static var schemaVersion: Int { PostgresSchema.current }

    public let configuration: PostgresStoreConfiguration
    /// The schema version the database had when this store opened it (0 for a new one).
    public let openedSchemaVersion: Int

    let client: PostgresClient
    let logger: Logger
    /// The database's clock against the rules' (``PostgresClock``): intent leases are kept in the database's.
    let databaseClock: PostgresClock
    private let runTask: Task<Void, Never>
    private var clockTask: Task<Void, Never>?
    private let lanes: [PostgresJobQueue]
    private var laneTasks: [Task<Void, Never>] = []
    private let counters = NIOLockedValueBox(Statistics())
    /// Signalled after each of this node's commits that appended events, and
    /// when another node says its commits did (``PostgresEventRelay``).
    public let eventCommits = EventCommitSignal()
    /// Other nodes' appends, in and out, on a client of its own (two connections).
    let eventRelay: PostgresEventRelay
    private let relayRunTask: Task<Void, Never>

    /// A long poll reads the feed again this often even without a signal: the
    /// net under other nodes' notifications, which are best effort.
    public var eventPollInterval: Duration? { .seconds(1) }

    /// Connects, migrates the schema, measures the database's clock against
    /// `clock` (the one the rules' `now` comes from) and starts the lanes.
    ///
    /// Throws if the server cannot be reached within `startupTimeout`, refuses
    /// the credentials, or holds a newer schema.
    public init(
        configuration: PostgresStoreConfiguration, logger: Logger = Logger(label: "liverelay.postgres"),
        startupTimeout: Duration = .seconds(30), clock: any WallClock = SystemClock()
    ) async throws {
        self.configuration = configuration
        self.logger = logger
        let databaseClock = PostgresClock(clock: clock)
        self.databaseClock = databaseClock
        let client = PostgresClient(configuration: configuration.client, backgroundLogger: logger)
        self.client = client
        runTask = Task { await client.run() }
        do {
            let schema = configuration.schema
            openedSchemaVersion = try await withDeadline(startupTimeout, "connecting to \(configuration)") {
                try await client.withConnection { connection in
                    let version = try await PostgresSchema.migrate(
                        connection, schema: schema, now: SystemClock().now().milliseconds, logger: logger)
                    let session = PostgresSession(connection, timeout: configuration.statementTimeout, logger: logger)
                    let offset = try await databaseClock.measure(on: session)
                    if abs(offset) > 1_000 {
                        logger.warning(
                            "this node's clock and the PostgreSQL server's differ: intent leases use the server's",
                            metadata: ["database_ahead_ms": "\(offset)"])
                    }
                    return version
                }
            }
        } catch let error as DeadlineExceeded {
            // Not awaited: a migration stuck on a dead connection could hold the
            // pool's shutdown, and this init with it, which is what the deadline prevents.
            runTask.cancel()
            throw PostgresStoreError.unavailable(error.description)
        } catch {
            runTask.cancel()
            await runTask.value
            throw error
        }
        var relayClient = configuration.client
        relayClient.options.maximumConnections = 2
        let relayPool = PostgresClient(configuration: relayClient, backgroundLogger: logger)
        relayRunTask = Task { await relayPool.run() }
        eventRelay = PostgresEventRelay(
            client: relayPool, schema: configuration.schema, timeout: configuration.statementTimeout, signal: eventCommits,
            logger: logger)
        eventRelay.start()
        lanes = (0..<configuration.lanes).map { _ in PostgresJobQueue() }
        let runner = PostgresBatchRunner(
            client: client, configuration: configuration, logger: logger, counters: counters, clock: databaseClock,
            eventCommits: eventCommits, eventRelay: eventRelay)
        laneTasks = lanes.map { queue in
            Task { [maxBatch = configuration.maxBatch] in
                while let batch = await queue.take(max: maxBatch) {
                    await runner.run(batch)
                }
            }
        }
        clockTask = Task { [client, configuration, logger] in
            while !Task.isCancelled {
                try? await Task.sleep(for: PostgresClock.refreshInterval)
                do {
                    _ = try await client.withConnection { connection in
                        try await databaseClock.measure(
                            on: PostgresSession(connection, timeout: configuration.statementTimeout, logger: logger))
                    }
                } catch {
                    // The next turn measures again; leases use the last offset meanwhile.
                    logger.debug("could not read the database's clock", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// The counters so far.
    public var statistics: Statistics { counters.withLockedValue { $0 } }

    // MARK: ActivityStore

    public func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        let promise = eventLoop.makePromise(of: M.Outcome.self)
        let job = PostgresJob(
            plan: { reader in
                do throws(DomainError) {
                    let plan = try mutation.plan(reader, now: now)
                    return PlannedJob(writes: plan.writes) { commit in
                        switch commit {
                        case .success: promise.succeed(plan.outcome)
                        case let .failure(error): promise.fail(error)
                        }
                    }
                } catch {
                    return PlannedJob(writes: []) { commit in
                        switch commit {
                        case .success: promise.fail(error)
                        case let .failure(storeError): promise.fail(storeError)
                        }
                    }
                }
            },
            fail: { promise.fail($0) })
        let lane = Self.lane(of: mutation, lanes: lanes.count)
        if !lanes[lane].push(job) { promise.fail(ActivityStoreError.closed) }
        return promise.futureResult
    }

    /// Calls about one activity (or one device's push-to-start slot) share a lane.
    static func lane<M: StoreMutation>(of mutation: M, lanes: Int) -> Int {
        guard lanes > 1 else { return 0 }
        var hasher = Hasher()
        switch mutation {
        case let m as RegisterToken:
            hasher.combine(m.command.appID)
            if m.command.kind == .update { hasher.combine(m.command.activityID) } else { hasher.combine(m.command.deviceID) }
        case let m as StartActivity:
            hasher.combine(m.command.appID); hasher.combine(m.command.activityID)
        case let m as ChangeActivity:
            hasher.combine(m.appID); hasher.combine(m.activityID)
        case let m as PruneToken:
            hasher.combine(m.token)
        default:
            return 0
        }
        return Int(UInt(bitPattern: hasher.finalize()) % UInt(lanes))
    }

    private func read<T: Sendable>(
        on eventLoop: any EventLoop, _ body: @escaping @Sendable (PostgresSession) async throws -> T
    ) -> EventLoopFuture<T> {
        let promise = eventLoop.makePromise(of: T.self)
        guard !lanes[0].isClosed else {
            promise.fail(ActivityStoreError.closed)
            return promise.futureResult
        }
        promise.completeWithTask { [client, configuration, logger] in
            try await client.withConnection { connection in
                do {
                    return try await body(PostgresSession(connection, timeout: configuration.statementTimeout, logger: logger))
                } catch let error as DeadlineExceeded {
                    throw ActivityStoreError.unavailable(error.description)
                }
            }
        }
        return promise.futureResult
    }

    private func fetch(_ key: ReadKey, on eventLoop: any EventLoop) -> EventLoopFuture<ReadValue?> {
        read(on: eventLoop) { session in
            try await PostgresTables.fetch([key], on: session)[key]
        }
    }

    public func token(_ key: TokenKey, on eventLoop: any EventLoop) -> EventLoopFuture<Token?> {
        fetch(.token(key), on: eventLoop).map { if case let .token(token)? = $0 { token } else { nil } }
    }

    public func activity(_ key: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<Activity?> {
        fetch(.activity(key), on: eventLoop).map { if case let .activity(activity)? = $0 { activity } else { nil } }
    }

    public func updateTokens(of activity: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        fetch(.updateTokens(activity), on: eventLoop).map { if case let .tokens(tokens)? = $0 { tokens } else { [] } }
    }

    public func pushToStartTokens(appID: String, attributesType: String, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        fetch(.pushToStartOfType(appID: appID, attributesType: attributesType), on: eventLoop)
            .map { if case let .tokens(tokens)? = $0 { tokens } else { [] } }
    }

    /// One statement for all the users: one snapshot.
    public func pushToStartTokens(
        appID: String, externalUserIDs: [String], attributesType: String, on eventLoop: any EventLoop
    ) -> EventLoopFuture<[Token]> {
        var seenUsers = Set<String>()
        let keys = externalUserIDs.filter { seenUsers.insert($0).inserted }.map {
            ReadKey.pushToStartOfUser(appID: appID, externalUserID: $0, attributesType: attributesType)
        }
        return read(on: eventLoop) { session in
            let answers = try await PostgresTables.fetch(keys, on: session)
            var seen = Set<String>()
            var tokens: [Token] = []
            for key in keys {
                guard case let .tokens(found)? = answers[key] else { continue }
                for token in found where seen.insert(token.hex).inserted { tokens.append(token) }
            }
            return tokens
        }
    }

    /// One statement for every app: one snapshot; each count walks the app's primary-key prefix.
    public func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]> {
        read(on: eventLoop) { session in
            var binds = PostgresBindings(capacity: 3)
            binds.append(appIDs)
            binds.append(Activity.liveStates.map(\.rawValue))
            binds.append(now.milliseconds)
            let sql = """
                SELECT a.app_id,
                       (SELECT count(*) FROM tokens t WHERE t.app_id = a.app_id),
                       (SELECT count(*) FROM activities v WHERE v.app_id = a.app_id AND v.state = ANY($2) AND v.expires_at > $3)
                FROM unnest($1::text[]) AS a(app_id)
                """
            var usage: [String: AppUsage] = [:]
            for row in try await session.query(PostgresQuery(unsafeSQL: sql, binds: binds)) {
                let (appID, tokens, live) = try row.decode((String, Int64, Int64).self)
                usage[appID] = AppUsage(tokens: Int(tokens), liveActivities: Int(live))
            }
            return usage
        }
    }

    public func events(appID: String, after cursor: UInt64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<EventPage> {
        read(on: eventLoop) { session in
            try await PostgresTables.events(appID: appID, after: cursor, limit: limit, on: session)
        }
    }

    public func lastEventCursor(appID: String, on eventLoop: any EventLoop) -> EventLoopFuture<UInt64> {
        read(on: eventLoop) { session in try await PostgresTables.lastEventCursor(appID: appID, on: session) }
    }

    /// On a pooled connection, outside the lanes, ``sweepLimit`` events per statement. Nodes may
    /// trim at once: each deletes what is left, and the retention mark only moves up.
    public func trimEvents(_ retention: EventRetention, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        let chunk = sweepLimit
        return read(on: eventLoop) { session in
            try await PostgresTables.trimEvents(before: now - retention.maxAge, keep: retention.maxPerApp, chunk: chunk, on: session)
        }
    }

    /// Refuses new calls, commits what is queued, closes the pool; idempotent.
    public func close() async throws {
        for lane in lanes { lane.close() }
        for task in laneTasks { await task.value }
        clockTask?.cancel()
        await clockTask?.value
        await eventRelay.stop()
        relayRunTask.cancel()
        await relayRunTask.value
        runTask.cancel()
        await runTask.value
    }

    deinit {
        eventRelay.cancel()
        relayRunTask.cancel()
        clockTask?.cancel()
        for lane in lanes { lane.close() }
        runTask.cancel()
    }
}

extension PostgresActivityStore {
    /// Drops `configuration.schema` and everything in it. For tests and
    /// benchmarks that work in a throwaway schema; never called by `serve`.
    public static func dropSchema(configuration: PostgresStoreConfiguration) async throws {
        try PostgresStoreConfiguration.checkSchema(configuration.schema)
        let client = PostgresClient(configuration: configuration.client)
        let run = Task { await client.run() }
        defer { run.cancel() }
        try await client.withConnection { connection in
            _ = try await connection.query(
                PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(configuration.schema)\" CASCADE"),
                logger: Logger(label: "liverelay.postgres"))
        }
    }
}
