import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

/// The memory store's compact token table (``InMemoryState``'s tokens) against
/// a plain model of what it must answer: tokens and slots in dictionaries.
@Suite struct TokenTableTests {
    /// The plain representation, as simple as possible: every lookup a filter.
    struct Model {
        var tokens: [TokenKey: Token] = [:]
        var slots: [TokenSlot: String] = [:]

        mutating func apply(_ write: StoreWrite) {
            switch write {
            case let .putToken(token):
                remove(token.key)
                tokens[token.key] = token
                if let slot = token.slot { slots[slot] = token.hex }
            case let .deleteToken(key):
                remove(key)
            case let .deleteUpdateTokens(activity):
                for (key, token) in tokens
                where token.kind == .update && token.activityID == activity.activityID && key.appID == activity.appID {
                    remove(key)
                }
            default:
                break
            }
        }

        private mutating func remove(_ key: TokenKey) {
            guard let old = tokens.removeValue(forKey: key) else { return }
            if let slot = old.slot, slots[slot] == old.hex { slots[slot] = nil }
        }

        func token(in slot: TokenSlot) -> Token? {
            let appID: String
            switch slot {
            case let .update(app, _, _), let .pushToStart(app, _, _): appID = app
            }
            return slots[slot].flatMap { tokens[TokenKey(appID: appID, hex: $0)] }
        }
    }

    static let hexes = [
        hex(1), hex(2), hex(3), hex(4), "ab", "0123456789abcdef", String(repeating: "f", count: 64),
        // Not packable: kept as interned strings, answered the same.
        "ABCDEF0123456789", "abc", "", String(repeating: "e", count: 66), "zz",
    ]

    @Test func answersWhatTheDictionariesAnswered() {
        var state = InMemoryState()
        var model = Model()
        var seed: UInt64 = 42
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        func pick<T>(_ xs: [T]) -> T { xs[next(xs.count)] }
        let apps = ["app.a", "app.b"], activities = ["order-1", "order-2"], types = ["T1", "T2"]
        let users: [String?] = [nil, "u1", "u2"], devices: [String?] = [nil, "d1", "d2", "a-device-id-longer-than-15-bytes"]
        let now = UnixTime(seconds: 1_700_000_000)
        for step in 0..<3_000 {
            let key = TokenKey(appID: pick(apps), hex: pick(Self.hexes))
            let write: StoreWrite
            if next(40) == 0 {
                // An end: every update token of one activity, whichever way each came to be there.
                write = .deleteUpdateTokens(of: ActivityKey(appID: pick(apps), activityID: pick(activities)))
            } else if next(4) == 0 {
                write = .deleteToken(key)
            } else {
                let pushToStart = next(2) == 0
                write = .putToken(
                    Token(
                        kind: pushToStart ? .pushToStart : .update, hex: key.hex, environment: next(2) == 0 ? .sandbox : .production,
                        appID: key.appID, attributesType: next(5) == 0 ? nil : pick(types),
                        activityID: pushToStart ? nil : (next(8) == 0 ? nil : pick(activities)), externalUserID: pick(users),
                        deviceID: pick(devices), createdAt: now + .seconds(Int64(step)), updatedAt: now + .seconds(Int64(step + 1)),
                        expiresAt: next(3) == 0 ? now + .seconds(Int64(next(4000))) : nil))
            }
            state.apply([write])
            model.apply(write)
            if step % 50 == 0 { check(state, model, apps: apps, activities: activities, types: types, users: users, devices: devices) }
        }
        check(state, model, apps: apps, activities: activities, types: types, users: users, devices: devices)
        // Everything deleted: nothing left anywhere.
        state.apply(model.tokens.keys.map { .deleteToken($0) })
        model = Model()
        check(state, model, apps: apps, activities: activities, types: types, users: users, devices: devices)
        #expect(state.tokenCount == 0)
    }

    func check(
        _ state: InMemoryState, _ model: Model, apps: [String], activities: [String], types: [String], users: [String?],
        devices: [String?]
    ) {
        #expect(state.tokenCount == model.tokens.count)
        for app in apps {
            let now = UnixTime(seconds: 1_700_000_000)
            #expect(state.usage(of: app, at: now).tokens == model.tokens.keys.filter { $0.appID == app }.count)
            for hex in Self.hexes {
                let key = TokenKey(appID: app, hex: hex)
                #expect(state.token(key) == model.tokens[key])
            }
            let all = model.tokens.values.filter { $0.appID == app }
            for activity in activities {
                let expected = all.filter { $0.kind == .update && $0.activityID == activity }
                #expect(Set(state.updateTokens(of: ActivityKey(appID: app, activityID: activity))) == Set(expected))
                for device in devices.compactMap({ $0 }) {
                    let slot = TokenSlot.update(appID: app, activityID: activity, deviceID: device)
                    #expect(state.token(in: slot) == model.token(in: slot))
                }
            }
            for type in types {
                let expected = all.filter { $0.kind == .pushToStart && $0.attributesType == type }
                #expect(Set(state.pushToStartTokens(appID: app, attributesType: type)) == Set(expected))
                for user in users.compactMap({ $0 }) {
                    #expect(
                        Set(state.pushToStartTokens(appID: app, externalUserID: user, attributesType: type))
                            == Set(expected.filter { $0.externalUserID == user }))
                }
                for device in devices.compactMap({ $0 }) {
                    let slot = TokenSlot.pushToStart(appID: app, deviceID: device, attributesType: type)
                    #expect(state.token(in: slot) == model.token(in: slot))
                }
            }
        }
        let later = UnixTime(seconds: 1_700_002_000)
        #expect(Set(state.tokensExpired(at: later, limit: .max)) == Set(model.tokens.values.filter { $0.isExpired(at: later) }))
    }
}
