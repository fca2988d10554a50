import LiveRelayAPNs
import LiveRelayPushOutlet

/// What a rule may read from the current state.
///
/// Rules are pure functions of what they read here and of `now`; a store runs
/// them inside its atomic unit (a lock for memory, a transaction for SQL) so
/// that the read and the writes it decides cannot interleave with another
/// call's. The three token lookups are the hot ones: every store keeps an
/// index for each (an activity's update tokens, a type's push-to-start tokens,
/// a user's push-to-start tokens).
public protocol StateReader {
    func token(_ key: TokenKey) -> Token?
    func token(in slot: TokenSlot) -> Token?
    func activity(_ key: ActivityKey) -> Activity?
    func idempotencyRecord(_ activity: ActivityKey, key: String) -> IdempotencyRecord?
    /// Hot lookup 1: the update tokens of an activity, whole.
    func updateTokens(of activity: ActivityKey) -> [Token]
    /// The keys of at most `limit` of the activity's update tokens, in no
    /// particular order: what the sweep deletes a pass at a time, so that an
    /// activity with a million tokens costs a thousand short passes, not one
    /// long one or a thousand reads of a million.
    func updateTokenKeys(of activity: ActivityKey, limit: Int) -> [TokenKey]
    /// Hot lookup 1 as an update's fan-out needs it: where the pushes go (each
    /// update token's hex and environment), without the tokens past their own
    /// expiry at `now`. The same as ``updateTokens(of:)`` filtered and mapped,
    /// but narrow on purpose: a 100,000-token fan-out is answered by a SQL
    /// store from one covering index in one pass, with one `String` per row
    /// (the target's) instead of a whole `Token` (six of them) built and dropped.
    func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget]
    /// Hot lookup 2: the push-to-start tokens of an attributes type, whole.
    func pushToStartTokens(appID: String, attributesType: String) -> [Token]
    /// Hot lookup 2 as a start to `all_devices` needs it: where the pushes go,
    /// without the tokens past their own expiry at `now`. Narrow for the reason
    /// ``updateTargets(of:at:)`` is: whole tokens made a 100,000-device start
    /// hold the memory store's lock for a quarter of a second, every other
    /// app's calls waiting behind it.
    func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) -> [PushTarget]
    /// Hot lookup 3: a user's push-to-start tokens of an attributes type (`external_user_ids`).
    func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token]
    /// Activities whose ``Activity/sweepDeadline`` is at or before `now`, at most `limit`.
    func activitiesDue(at now: UnixTime, limit: Int) -> [Activity]
    /// Tokens whose own `expiresAt` is at or before `now`, at most `limit`.
    func tokensExpired(at now: UnixTime, limit: Int) -> [Token]
    /// Dispatch intents nobody works on (``DispatchIntent/isClaimable(by:evenIfLeased:at:)``),
    /// the longest-expired first, at most `limit`.
    func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) -> [DispatchIntent]
}

/// Token counts a store answers without reading the tokens, each counted no
/// further than a limit: what ``StoreMutation/tokensRead(in:upTo:)`` asks of
/// a store that decides by it where to plan a call.
public protocol TokenCounts {
    /// The activity's update tokens, counted up to `limit`.
    func updateTokenCount(of activity: ActivityKey, upTo limit: Int) -> Int
    /// The type's push-to-start tokens, counted up to `limit`.
    func pushToStartTokenCount(appID: String, attributesType: String, upTo limit: Int) -> Int
}

/// One change a rule asks the store to make. Plans are lists of these so that
/// a SQL store can turn them into prepared statements and batch many calls'
/// plans into one transaction (one fsync).
public enum StoreWrite: Hashable, Sendable {
    /// Insert or replace the token with this (app, hex), re-indexing it.
    case putToken(Token)
    case deleteToken(TokenKey)
    /// Delete every update token of the activity: what an end does, one write
    /// whatever their number, with no key read first (a delete per token would
    /// read every key of a 100,000-token activity and write 100,000 deletes).
    case deleteUpdateTokens(of: ActivityKey)
    /// Insert or replace the activity with this (app, id).
    case putActivity(Activity)
    /// Forget an activity and its idempotency records (its tokens are deleted by their own writes).
    case deleteActivity(ActivityKey)
    /// Insert or replace the record with this (app, activity, key); then, if
    /// the activity has more than ``IdempotencyRecord/keptPerActivity``,
    /// delete those of its oldest calls (lowest reply timestamps) over the cap.
    case putIdempotencyRecord(IdempotencyRecord)
    /// Store `account` as the final account (``StoredReply/account``) of the
    /// idempotency record of the activity's call that stamped `timestamp`:
    /// nothing for a call made without a key (it has no record) or whose
    /// activity was purged since. A call's timestamp is unique within its
    /// activity, so this names one call's record without knowing its key; the
    /// stores index records by it, so a settle does not scan the activity's.
    case settleReply(ActivityKey, timestamp: Int64, account: EnqueueResult)
    /// Record a call's pushes, and delete the intents of the activity it
    /// supersedes (``DispatchIntent/isSuperseded(by:)``).
    case putIntent(DispatchIntent)
    case deleteIntent(IntentKey)
    case leaseIntent(IntentKey, owner: String, until: UnixTime)
    /// Extend the intent's lease if `owner` still holds it (another node may
    /// have claimed it since: its lease is not taken back).
    case renewIntent(IntentKey, owner: String, until: UnixTime)
    /// Add the event to its app's feed, after every event committed before it;
    /// nothing if the feed still holds an event with its ``FeedEvent/dedupeKey``.
    /// Boxed: an event is the largest payload, and every write of every plan
    /// would otherwise be as large as one.
    indirect case appendEvent(FeedEvent)

    /// The app whose state the write changes: how a store kept per app routes it.
    public var appID: String {
        switch self {
        case let .putToken(token): token.appID
        case let .deleteToken(key): key.appID
        case let .deleteUpdateTokens(activity): activity.appID
        case let .putActivity(activity): activity.appID
        case let .deleteActivity(key): key.appID
        case let .putIdempotencyRecord(record): record.appID
        case let .settleReply(activity, _, _): activity.appID
        case let .putIntent(intent): intent.key.appID
        case let .deleteIntent(key): key.appID
        case let .leaseIntent(key, _, _): key.appID
        case let .renewIntent(key, _, _): key.appID
        case let .appendEvent(event): event.appID
        }
    }
}

extension Array where Element == StoreWrite {
    /// The apps whose event feeds these writes add to: whose waiting readers a store wakes once the writes are committed.
    public var fedAppIDs: Set<String> {
        var apps = Set<String>()
        for case let .appendEvent(event) in self { apps.insert(event.appID) }
        return apps
    }
}

/// The result of evaluating a rule: what to write and what to tell the caller.
public struct MutationPlan<Outcome: Sendable>: Sendable {
    /// Empty for replays, unchanged registrations and refusals: a store then
    /// needs no commit and no fsync.
    public var writes: [StoreWrite]
    public var outcome: Outcome

    public init(writes: [StoreWrite] = [], outcome: Outcome) {
        self.writes = writes
        self.outcome = outcome
    }
}

/// A rule that a store applies atomically: read through ``StateReader``, decide,
/// write the plan's ``StoreWrite``s, and only then report the outcome.
///
/// A thrown ``DomainError`` means nothing is written. Stores know nothing of
/// the rules themselves, so every store (memory, SQLite, PostgreSQL) gets the
/// same semantics from the same code.
public protocol StoreMutation: Sendable {
    associatedtype Outcome: Sendable
    /// What the rule reads and writes: one app's state, or every app's.
    /// ``MutationScope/allApps`` unless a rule says otherwise, which is always
    /// correct; a rule that says ``MutationScope/app(_:)`` must read and write
    /// that app's state only.
    var scope: MutationScope { get }
    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Outcome>
    /// How many tokens planning this reads in `state`, counted up to `limit`:
    /// the memory store plans on the caller's event loop, and plans a rule
    /// that reads more than a few thousand (a fan-out, a start to
    /// `all_devices`, an end) off it, so the other calls on that loop are not
    /// held up for the 20–30 ms of a 100,000-token read. 0 unless a rule says.
    func tokensRead(in state: some TokenCounts, upTo limit: Int) -> Int
}

extension StoreMutation {
    public var scope: MutationScope { .allApps }
    public func tokensRead(in state: some TokenCounts, upTo limit: Int) -> Int { 0 }
}

/// A rule about several apps that is one independent rule per app: what it
/// decides for one app reads and writes that app's state only, and it answers
/// nothing. A store kept per app applies it app by app, one app's lock at a
/// time, instead of waiting for every app's lock at once (behind whichever
/// app's large call holds its own).
public protocol SplitsByApp: StoreMutation where Outcome == Void {
    /// The rule's part for each of its apps, each with that app's ``StoreMutation/scope``.
    var partsByApp: [Self] { get }
}

/// A rule across apps that a node runs on a timer and that usually finds
/// nothing to do: the intent claims (every second) and the sweep (every
/// minute). What it does in one app reads and writes that app's state only,
/// up to a limit of work for the whole pass, taking the apps' things in one
/// order (the earliest due first). A store kept per app applies it app by
/// app, one app's lock at a time: it asks each app's state where its first
/// piece of work falls in that order (``firstWork(in:now:)``), then applies
/// the rule to the apps that have some, earliest first, each with what is
/// left of the limit. A poll then never holds every app's lock at once, so
/// one app's mass expiry or claim never makes the other apps' calls wait,
/// and no app's large call makes the poll hold the others'. What appears
/// while the apps are visited is found by the next poll. (A store of one
/// state, SQL, applies it whole, in one transaction.)
public protocol PollsAcrossApps: StoreMutation {
    /// Where the first thing the rule would do in `state` (one app's) falls in
    /// the order a pass takes things across apps; nil when it finds nothing.
    func firstWork(in state: some StateReader, now: UnixTime) -> PollOrder?
    /// What the rule answers when it finds nothing.
    var idleOutcome: Outcome { get }
    /// The most work one pass does, over every app.
    var limit: Int { get }
    /// The same rule with `limit` of work left to it (for one app's part of a pass).
    func limited(to limit: Int) -> Self
    /// How much of the limit `outcome` used.
    func work(of outcome: Outcome) -> Int
    /// Two apps' outcomes as one pass over both reports them.
    func merged(_ outcome: Outcome, _ more: Outcome) -> Outcome
}

extension PollsAcrossApps {
    /// Whether the rule would do anything in `state` (one app's).
    public func findsWork(in state: some StateReader, now: UnixTime) -> Bool { firstWork(in: state, now: now) != nil }
}

/// Where a poll's piece of work falls in the order a pass takes them across
/// apps: by `rank` (a sweep's due activities before its expired tokens), then
/// by `time`, then by `tie`.
public struct PollOrder: Comparable, Sendable {
    public var rank: Int
    public var time: UnixTime
    public var tie: UnixTime

    public init(rank: Int = 0, time: UnixTime, tie: UnixTime = UnixTime(milliseconds: 0)) {
        self.rank = rank
        self.time = time
        self.tie = tie
    }

    public static func < (a: PollOrder, b: PollOrder) -> Bool { (a.rank, a.time, a.tie) < (b.rank, b.time, b.tie) }
}

/// Which apps' state a rule reads and writes.
///
/// Why a store asks: the memory store keeps each app's state
/// behind a lock of its own, so that one app's 100,000-token fan-out (tens of
/// milliseconds under the lock) does not hold up every other app's calls. A
/// call about one app takes that app's lock only; the sweep and the intent
/// claims, which look across apps, take them all when they find work.
public enum MutationScope: Hashable, Sendable {
    case app(String)
    case allApps
}
