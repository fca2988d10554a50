import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import LiveRelayStorePostgres
import LiveRelayTestSupport
import Logging
import NIOCore
import NIOPosix
import Testing

/// A COMMIT of unknown outcome on a real PostgreSQL: the call is answered UNAVAILABLE
/// OutcomeUnknown, yet its intent row landed, leased to this node. The node must send it
/// while it lives (PROTOCOL.md, "Delivery guarantees"), and a resend that finds the store
/// busy with that transaction is UNAVAILABLE, never INTERNAL.
///
/// The unknown outcome is made the way it happens: the store's role commits with
/// `synchronous_commit = on` while `synchronous_standby_names` names a standby that does not
/// exist, so its COMMIT is written locally and then waits, past the store's statement
/// timeout, for a standby that never answers. Every other role of the test server commits
/// with `synchronous_commit = local` meanwhile, so the other suites never wait. This needs
/// the server's superuser, which scripts/postgres.sh gives over its socket directory
/// (`LIVERELAY_POSTGRES_DIR`).
@Suite(.serialized) struct UnknownCommitPostgresTests {
    static let role = "liverelay_sync_test"
    static let password = "liverelay-sync-test"

    @Test func anIntentWhoseCommitGotNoAnswerIsSentByItsOwnNode() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["LIVERELAY_POSTGRES_URL"], let directory = environment["LIVERELAY_POSTGRES_DIR"],
            let parts = URLComponents(string: url), let port = parts.port
        else {
            Issue.record(
                "LIVERELAY_POSTGRES_URL and LIVERELAY_POSTGRES_DIR are not set (scripts/test.sh starts a PostgreSQL with scripts/postgres.sh)"
            )
            return
        }
        let database = String(parts.path.dropFirst())
        let superuser = Superuser(directory: directory, port: port, database: database)
        try superuser.run(
            """
            DO $$ BEGIN
              IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(Self.role)') THEN
                CREATE ROLE \(Self.role) LOGIN PASSWORD '\(Self.password)';
              END IF;
            END $$
            """,
            "ALTER ROLE \(Self.role) SET synchronous_commit = on",
            "GRANT CREATE ON DATABASE \(database) TO \(Self.role)",
            "ALTER SYSTEM SET synchronous_commit = local", "SELECT pg_reload_conf()")
        defer {
            try? superuser.run(
                "ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()", "ALTER SYSTEM RESET synchronous_commit",
                "SELECT pg_reload_conf()")
        }

        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.username = Self.role
        configuration.password = Self.password
        configuration.schema = "lrtest_sync_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        configuration.statementTimeout = .seconds(2)
        let store = try await PostgresActivityStore(configuration: configuration)
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let clock = SystemClock()
        let lease = IntentLease(owner: "node-sync", duration: .seconds(3))
        func apply<M: StoreMutation>(_ mutation: M) async throws -> M.Outcome {
            try await store.apply(mutation, now: clock.now(), on: loop).get()
        }
        let app = App(id: "app", bundleID: "com.example.app")
        try await apply(
            StartActivity(
                StartActivityRequest(
                    appID: "app", activityID: "game", attributesType: "Score", attributesJSON: "{}", contentStateJSON: #"{"s":0}"#,
                    targets: Targets(allDevices: true)),
                app: app))
        try await apply(
            RegisterToken(
                RegisterTokenRequest(
                    appID: "app", kind: .update, token: hex(1), environment: .production, activityID: "game", deviceID: "d")))
        let update = UpdateActivityRequest(
            appID: "app", activityID: "game", contentStateJSON: #"{"s":1}"#, idempotencyKey: "update-1")

        // The COMMIT lands locally and then gets no answer.
        try superuser.run("ALTER SYSTEM SET synchronous_standby_names = 'liverelay_absent_standby'", "SELECT pg_reload_conf()")
        await #expect(throws: ActivityStoreError.self) { try await apply(ChangeActivity(update, app: app, intents: lease)) }
        // The resend waits on the first transaction's locks until the store gives up: unavailable, not internal.
        do {
            _ = try await apply(ChangeActivity(update, app: app, intents: lease))
            Issue.record("the resend was applied while the first transaction still held its locks")
        } catch let error as ActivityStoreError {
            switch error {
            case .unavailable, .outcomeUnknown: break
            case .closed: Issue.record("\(error)")
            }
        }
        try superuser.run("ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()")

        // The first transaction committed: its row is this node's, and nothing was handed to the dispatcher.
        let sink = RecordingPushSink()
        let intents = DispatchIntents(
            configuration: DispatchIntents.Configuration(lease: lease, takeOverAtStart: false, claimInterval: .milliseconds(100)),
            store: store, clock: clock, logger: Logger(label: "unknown-commit-test"), on: loop)
        intents.attach(sink)
        let running = Task { try await intents.run() }
        // Renewals (every second here) and claims run; the row's lease lapses and the node claims it.
        let deadline = ContinuousClock.now + .seconds(60)
        while sink.batches.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
        running.cancel()
        _ = try? await running.value
        #expect(sink.batches.map(\.activityID) == ["game"], "the landed update was never sent")
        #expect(sink.batches.first?.targets.map(\.token) == [hex(1)])
        try await store.close()
    }
}

/// The test server's superuser, through `psql` over the server's socket directory.
struct Superuser {
    var directory: String
    var port: Int
    var database: String

    func run(_ statements: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.psql())
        process.arguments =
            ["-h", directory, "-p", String(port), "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-q"]
            + statements.flatMap { ["-c", $0] }
        let output = try ChildProcesses.start(process, output: .combined).output!
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw SuperuserError(message: "psql failed (\(process.terminationStatus)): \(text)")
        }
    }

    static func psql() throws -> String {
        var candidates = ["/usr/bin/psql"]
        if let versions = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            candidates += versions.sorted(by: >).map { "/usr/lib/postgresql/\($0)/bin/psql" }
        }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw SuperuserError(message: "no psql in \(candidates)")
        }
        return found
    }
}

struct SuperuserError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
