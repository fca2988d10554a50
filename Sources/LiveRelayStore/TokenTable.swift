import LiveRelayAPNs
import LiveRelayCollections
import LiveRelayDomain
import LiveRelayPushOutlet

/// The tokens of ``InMemoryState``, compact: one fixed-size record per token
/// in one array, with the key, the rotation slots and the three hot lookups
/// as indexes of record numbers (with their hashes), so that a token costs
/// about 260-280 bytes instead of the 1.2 KB of `Token` values in dictionaries
/// keyed by strings (measured: docs/BENCHMARKS.md, "Memory").
///
/// It answers exactly what dictionaries of `Token`s would: the `Token`s
/// are rebuilt on the way out (the hex unpacked, the strings taken from the
/// pool). A value type like the state that holds it: copying is a snapshot.
struct TokenTable: Sendable {
    /// One token. Strings shared by many tokens are ``StringPool`` ids (0: nil);
    /// the device id, mostly one per token, stays a `String` (inline up to 15 bytes).
    private struct Record: Sendable {
        var hex: PackedHex
        /// Bit 0 push-to-start, bit 1 production, bit 2 has its own expiry, bit 3 free.
        var flags: UInt8
        /// The interned hex when ``hex`` cannot pack it; 0 otherwise.
        var hexID: UInt32
        var app: UInt32
        var activity: UInt32
        var type: UInt32
        var user: UInt32
        /// The hot lookup's list: an update token's activity, a push-to-start token's type.
        var next: Int32, prev: Int32
        /// A push-to-start token's list of its user's tokens of its type.
        var userNext: Int32, userPrev: Int32
        var device: String?
        var createdAt: Int64, updatedAt: Int64, expiresAt: Int64

        var isPushToStart: Bool { flags & 1 != 0 }
        var hasExpiry: Bool { flags & 4 != 0 }
        var isFree: Bool { flags & 8 != 0 }
        /// What the rotation slot is scoped by (activity or type); 0: no slot.
        var slotScope: UInt32 { device == nil ? 0 : isPushToStart ? type : activity }
    }

    private struct Pair: Hashable, Sendable { var app, id: UInt32 }
    private struct Triple: Hashable, Sendable { var app, user, type: UInt32 }
    /// A doubly linked list through the records, in insertion order.
    private struct Ends: Sendable { var head, tail: Int32 }

    private var records = ChunkedArray<Record>()
    private var freeRecords: [Int32] = []
    private var pool = StringPool()
    private var byKey = RecordIndex()
    private var bySlot = RecordIndex()
    private var byActivity = RecordMap<Pair, Ends>()
    private var byType = RecordMap<Pair, Ends>()
    private var byUser = RecordMap<Triple, Ends>()
    /// Tokens with their own expiry: the only ones the token sweep must look at.
    private var expiring = ExpiryIndex()
    private var perApp: [UInt32: Int] = [:]
    private(set) var count = 0
    /// The pool ids of the app and of the scope (attributes type or activity)
    /// of the last token written. Most calls name the app, and often the
    /// scope, of the call before, and comparing a string with the pool's costs
    /// a fraction of hashing it: without the hints a RegisterToken hashes six
    /// strings.
    /// Only hints: ``StringPool/id(of:hint:)`` checks them.
    private var appHint: UInt32 = 0, scopeHint: UInt32 = 0

    // MARK: Hashes

    private static func keyHash(_ app: UInt32, _ hex: PackedHex, _ hexID: UInt32) -> Int {
        var h = Hasher()
        h.combine(app)
        h.combine(hex)
        h.combine(hexID)
        return h.finalize()
    }

    private static func slotHash(_ app: UInt32, _ pushToStart: Bool, _ scope: UInt32, _ device: String) -> Int {
        var h = Hasher()
        h.combine(app)
        h.combine(pushToStart)
        h.combine(scope)
        h.combine(device)
        return h.finalize()
    }

    private static func keyHash(of r: Record) -> Int { keyHash(r.app, r.hex, r.hexID) }

    private static func slotHash(of r: Record) -> Int { slotHash(r.app, r.isPushToStart, r.slotScope, r.device ?? "") }

    // MARK: Reads

    private func find(_ key: TokenKey) -> Int32? {
        guard let app = pool.id(of: key.appID, hint: appHint) else { return nil }
        var hex = PackedHex.none
        var hexID: UInt32 = 0
        if let packed = PackedHex(key.hex) {
            hex = packed
        } else {
            guard let id = pool.id(of: key.hex) else { return nil }
            hexID = id
        }
        return find(app: app, hex: hex, hexID: hexID, hash: Self.keyHash(app, hex, hexID))
    }

    /// The record with this key, its hash given (a write has it already).
    private func find(app: UInt32, hex: PackedHex, hexID: UInt32, hash: Int) -> Int32? {
        byKey.find(hash: hash) {
            records[Int($0)].app == app && records[Int($0)].hexID == hexID && records[Int($0)].hex == hex
        }
    }

    /// The record's hex as a string: unpacked, or the interned one.
    private func hex(of r: Record) -> String { r.hexID == 0 ? r.hex.string : pool[r.hexID] ?? "" }

    /// Record `i`'s hex, its fields read in place. Reads that walk many records take their
    /// fields this way, never `let r = records[i]`: a copy of a record retains its device id,
    /// a cache miss on another object per record (41% of a 100,000-token fan-out's read).
    private func hex(at i: Int32) -> String {
        let id = records[Int(i)].hexID
        return id == 0 ? records[Int(i)].hex.string : pool[id] ?? ""
    }

    private func token(at i: Int32) -> Token {
        let r = records[Int(i)]
        return Token(
            kind: r.isPushToStart ? .pushToStart : .update, hex: hex(of: r),
            environment: r.flags & 2 != 0 ? .production : .sandbox, appID: pool[r.app] ?? "",
            attributesType: pool[r.type], activityID: pool[r.activity], externalUserID: pool[r.user],
            deviceID: r.device, createdAt: UnixTime(milliseconds: r.createdAt),
            updatedAt: UnixTime(milliseconds: r.updatedAt),
            expiresAt: r.hasExpiry ? UnixTime(milliseconds: r.expiresAt) : nil)
    }

    /// Every token, in record order: what a snapshot of the table writes out.
    func forEachToken(_ body: (Token) -> Void) {
        for i in 0..<records.count where !records[i].isFree { body(token(at: Int32(i))) }
    }

    /// The first `limit` records of a list, in order.
    private func walk(_ ends: Ends?, user: Bool, limit: Int = .max, _ body: (Int32) -> Void) {
        var i = ends?.head ?? -1
        var left = limit
        while i >= 0, left > 0 {
            body(i)
            left -= 1
            i = user ? records[Int(i)].userNext : records[Int(i)].next
        }
    }

    private func tokens(_ ends: Ends?, user: Bool = false) -> [Token] {
        var found: [Token] = []
        walk(ends, user: user) { found.append(token(at: $0)) }
        return found
    }

    func token(_ key: TokenKey) -> Token? { find(key).map(token(at:)) }

    func token(in slot: TokenSlot) -> Token? {
        let appID: String, pushToStart: Bool, scopeString: String, device: String
        switch slot {
        case let .update(a, activity, d): (appID, pushToStart, scopeString, device) = (a, false, activity, d)
        case let .pushToStart(a, d, type): (appID, pushToStart, scopeString, device) = (a, true, type, d)
        }
        guard let app = pool.id(of: appID, hint: appHint), let scope = pool.id(of: scopeString, hint: scopeHint)
        else { return nil }
        let found = bySlot.find(hash: Self.slotHash(app, pushToStart, scope, device)) {
            let r = records[Int($0)]
            return r.app == app && r.isPushToStart == pushToStart && r.slotScope == scope && r.device == device
        }
        return found.map(token(at:))
    }

    private func pair(_ appID: String, _ id: String) -> Pair? {
        guard let app = pool.id(of: appID, hint: appHint), let id = pool.id(of: id, hint: scopeHint) else { return nil }
        return Pair(app: app, id: id)
    }

    func updateTokens(of activity: ActivityKey) -> [Token] {
        tokens(pair(activity.appID, activity.activityID).flatMap { byActivity[$0] })
    }

    /// The first `limit` of the activity's list, as keys.
    func updateTokenKeys(of activity: ActivityKey, limit: Int) -> [TokenKey] {
        var keys: [TokenKey] = []
        walk(pair(activity.appID, activity.activityID).flatMap { byActivity[$0] }, user: false, limit: limit) {
            keys.append(TokenKey(appID: activity.appID, hex: hex(at: $0)))
        }
        return keys
    }

    /// How many update tokens the activity has, counted up to `limit` (a walk of at most `limit`).
    func updateTokenCount(of activity: ActivityKey, upTo limit: Int) -> Int {
        count(pair(activity.appID, activity.activityID).flatMap { byActivity[$0] }, upTo: limit)
    }

    /// How many push-to-start tokens the type has, counted up to `limit`.
    func pushToStartTokenCount(appID: String, attributesType: String, upTo limit: Int) -> Int {
        count(pair(appID, attributesType).flatMap { byType[$0] }, upTo: limit)
    }

    private func count(_ ends: Ends?, upTo limit: Int) -> Int {
        var counted = 0
        walk(ends, user: false, limit: limit) { _ in counted += 1 }
        return counted
    }

    /// The fan-out: one pass over the activity's list, one `String` (the hex) per live token.
    func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        guard let key = pair(activity.appID, activity.activityID) else { return [] }
        return liveTargets(byActivity[key], at: now)
    }

    /// A start to `all_devices`: one pass over the type's list, as ``updateTargets(of:at:)``.
    func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) -> [PushTarget] {
        guard let key = pair(appID, attributesType) else { return [] }
        return liveTargets(byType[key], at: now)
    }

    /// The tokens of a main list (an activity's or a type's) not past their own expiry, as targets.
    private func liveTargets(_ ends: Ends?, at now: UnixTime) -> [PushTarget] {
        guard let ends else { return [] }
        var targets: [PushTarget] = []
        walk(ends, user: false) { i in
            guard !records[Int(i)].hasExpiry || records[Int(i)].expiresAt > now.milliseconds else { return }
            let environment: APNsEnvironment = records[Int(i)].flags & 2 != 0 ? .production : .sandbox
            targets.append(PushTarget(token: hex(at: i), environment: environment))
        }
        return targets
    }

    func pushToStartTokens(appID: String, attributesType: String) -> [Token] {
        tokens(pair(appID, attributesType).flatMap { byType[$0] })
    }

    func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token] {
        guard let app = pool.id(of: appID), let user = pool.id(of: externalUserID), let type = pool.id(of: attributesType)
        else { return [] }
        return tokens(byUser[Triple(app: app, user: user, type: type)], user: true)
    }

    func tokensExpired(at now: UnixTime, limit: Int) -> [Token] {
        var due: [Token] = []
        guard limit > 0 else { return due }
        expiring.forEach(dueBy: now.milliseconds) { i in
            if records[Int(i)].expiresAt <= now.milliseconds { due.append(token(at: i)) }
            return due.count < limit
        }
        return due
    }

    func count(ofApp appID: String) -> Int { pool.id(of: appID).flatMap { perApp[$0] } ?? 0 }

    // MARK: Writes

    /// Inserts or replaces the token with this (app, hex), re-indexing it.
    mutating func put(_ token: Token) {
        // Retain the new strings before releasing the old ones: an unchanged string keeps its id.
        let record = makeRecord(token)
        // Looked up by the record's ids (the strings are retained already): the hex is packed once per write.
        let keyHash = Self.keyHash(of: record)
        if let i = find(app: record.app, hex: record.hex, hexID: record.hexID, hash: keyHash) {
            unindex(i)
            release(records[Int(i)])
            records[Int(i)] = record
            index(i)
            return
        }
        let i: Int32
        if let reused = freeRecords.popLast() {
            i = reused
            records[Int(i)] = record
        } else {
            i = Int32(records.count)
            records.append(record)
        }
        byKey.insert(i, hash: keyHash)
        index(i)
        perApp[record.app, default: 0] += 1
        count += 1
    }

    mutating func delete(_ key: TokenKey) {
        guard let i = find(key) else { return }
        delete(at: i)
    }

    /// Deletes every update token of the activity (an end): its list, walked once.
    mutating func deleteUpdateTokens(of activity: ActivityKey) {
        guard let key = pair(activity.appID, activity.activityID) else { return }
        var doomed: [Int32] = []
        walk(byActivity[key], user: false) { doomed.append($0) }
        for i in doomed { delete(at: i) }
    }

    private mutating func delete(at i: Int32) {
        unindex(i)
        byKey.remove(i, hash: Self.keyHash(of: records[Int(i)]))
        let record = records[Int(i)]
        perApp[record.app, default: 1] -= 1
        if perApp[record.app] == 0 { perApp[record.app] = nil }
        release(record)
        records[Int(i)].device = nil
        records[Int(i)].flags = 8
        freeRecords.append(i)
        count -= 1
    }

    private mutating func makeRecord(_ token: Token) -> Record {
        var hex = PackedHex.none
        var hexID: UInt32 = 0
        if let packed = PackedHex(token.hex) { hex = packed } else { hexID = pool.retain(token.hex) }
        let flags: UInt8 =
            (token.kind == .pushToStart ? 1 : 0) | (token.environment == .production ? 2 : 0) | (token.expiresAt != nil ? 4 : 0)
        let app = pool.retain(token.appID, hint: appHint)
        let activity = pool.retain(token.activityID, hint: scopeHint)
        let type = pool.retain(token.attributesType, hint: scopeHint)
        let scope = token.kind == .pushToStart ? type : activity
        appHint = app
        if scope != 0 { scopeHint = scope }
        return Record(
            hex: hex, flags: flags, hexID: hexID, app: app, activity: activity,
            type: type, user: pool.retain(token.externalUserID),
            next: -1, prev: -1, userNext: -1, userPrev: -1, device: token.deviceID,
            createdAt: token.createdAt.milliseconds, updatedAt: token.updatedAt.milliseconds,
            expiresAt: token.expiresAt?.milliseconds ?? 0)
    }

    private mutating func release(_ r: Record) {
        pool.release(r.hexID)
        pool.release(r.app)
        pool.release(r.activity)
        pool.release(r.type)
        pool.release(r.user)
    }

    /// The lists a record belongs in: its activity's or type's list, and its user's list.
    private func lists(of r: Record) -> (main: Pair?, mainIsType: Bool, user: Triple?) {
        if !r.isPushToStart { return (r.activity == 0 ? nil : Pair(app: r.app, id: r.activity), false, nil) }
        guard r.type != 0 else { return (nil, true, nil) }
        return (Pair(app: r.app, id: r.type), true, r.user == 0 ? nil : Triple(app: r.app, user: r.user, type: r.type))
    }

    private mutating func index(_ i: Int32) {
        let r = records[Int(i)]
        if let device = r.device, r.slotScope != 0 {
            // A slot names one token: a newer one in it takes the slot over, as `slots[slot] = hex` did.
            let hash = Self.slotHash(r.app, r.isPushToStart, r.slotScope, device)
            let occupant = bySlot.find(hash: hash) {
                let o = records[Int($0)]
                return o.app == r.app && o.isPushToStart == r.isPushToStart && o.slotScope == r.slotScope && o.device == device
            }
            if let occupant { bySlot.remove(occupant, hash: hash) }
            bySlot.insert(i, hash: hash)
        }
        if r.hasExpiry { expiring.insert(i, expiresAt: r.expiresAt) }
        let (main, isType, user) = lists(of: r)
        if let main {
            if isType {
                byType[main] = append(i, to: byType[main], user: false)
            } else {
                byActivity[main] = append(i, to: byActivity[main], user: false)
            }
        }
        if let user { byUser[user] = append(i, to: byUser[user], user: true) }
    }

    private mutating func unindex(_ i: Int32) {
        let r = records[Int(i)]
        if r.device != nil, r.slotScope != 0 { bySlot.remove(i, hash: Self.slotHash(of: r)) }
        if r.hasExpiry, let word = expiring.remove(i, expiresAt: r.expiresAt) {
            // `i` had its word's earliest expiry: the next earliest is among the word's other
            // records, and one with the same expiry ends the search (tokens registered
            // together share one, and each would read the whole word again).
            var earliest = Int64.max
            expiring.forEachMember(ofWord: word) {
                earliest = min(earliest, records[Int($0)].expiresAt)
                return earliest > r.expiresAt
            }
            expiring.setEarliest(earliest, ofWord: word)
        }
        let (main, isType, user) = lists(of: r)
        if let main {
            if isType {
                if let ends = byType[main] { byType[main] = unlink(i, from: ends, user: false) }
            } else if let ends = byActivity[main] {
                byActivity[main] = unlink(i, from: ends, user: false)
            }
        }
        if let user, let ends = byUser[user] { byUser[user] = unlink(i, from: ends, user: true) }
    }

    private mutating func setLinks(_ i: Int32, prev: Int32, next: Int32, user: Bool) {
        if user {
            records[Int(i)].userPrev = prev
            records[Int(i)].userNext = next
        } else {
            records[Int(i)].prev = prev
            records[Int(i)].next = next
        }
    }

    private func links(_ i: Int32, user: Bool) -> (prev: Int32, next: Int32) {
        user ? (records[Int(i)].userPrev, records[Int(i)].userNext) : (records[Int(i)].prev, records[Int(i)].next)
    }

    private mutating func append(_ i: Int32, to ends: Ends?, user: Bool) -> Ends {
        guard var ends else {
            setLinks(i, prev: -1, next: -1, user: user)
            return Ends(head: i, tail: i)
        }
        let tail = links(ends.tail, user: user)
        setLinks(ends.tail, prev: tail.prev, next: i, user: user)
        setLinks(i, prev: ends.tail, next: -1, user: user)
        ends.tail = i
        return ends
    }

    /// The list without `i`; nil when it is empty.
    private mutating func unlink(_ i: Int32, from ends: Ends, user: Bool) -> Ends? {
        let (prev, next) = links(i, user: user)
        if prev >= 0 { setLinks(prev, prev: links(prev, user: user).prev, next: next, user: user) }
        if next >= 0 { setLinks(next, prev: prev, next: links(next, user: user).next, user: user) }
        setLinks(i, prev: -1, next: -1, user: user)
        var ends = ends
        if ends.head == i { ends.head = next }
        if ends.tail == i { ends.tail = prev }
        return ends.head < 0 ? nil : ends
    }
}
