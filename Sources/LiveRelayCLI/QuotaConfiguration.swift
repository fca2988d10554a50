import LiveRelayActivities
import LiveRelayDomain

/// The config file's `"quotas"` section (the defaults of every app) and an
/// app's own `"quotas"` (its overrides):
///
/// ```json
/// "quotas": { "calls_per_second": 500, "burst": 1000, "pushes_per_hour": 250000,
///             "max_tokens": 1000000, "max_live_activities": 50000,
///             "priority_budget_per_hour": 60, "nodes": 2 }
/// ```
///
/// Each limit is a number or `"unlimited"`; one left out is the default's
/// (for an app: the section's). With a config file `pushes_per_hour`
/// defaults to 250,000 and the others to unlimited. `nodes` (top level only,
/// default 1) is how many nodes serve the apps: each enforces its share of the
/// rates, so the deployment as a whole holds them.
///
/// `priority_budget_per_hour` is not split over the nodes: it is per activity
/// and per channel, and an activity's calls are rarely spread over nodes. Like
/// the other limits, an app's own goes into the tenant registry with the app,
/// and an app added through the admin API has the section's.
struct QuotaConfiguration: Decodable {
    /// A limit, or no limit said by name (to lift a default).
    enum Limit: Decodable {
        case unlimited
        case value(Double)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                guard text == "unlimited" else {
                    throw DecodingError.dataCorruptedError(
                        in: container, debugDescription: "a number or \"unlimited\", not \"\(text)\"")
                }
                self = .unlimited
            } else {
                self = .value(try container.decode(Double.self))
            }
        }
    }

    var callsPerSecond: Limit?
    var burst: Limit?
    var pushesPerHour: Limit?
    var maxTokens: Limit?
    var maxLiveActivities: Limit?
    var priorityBudgetPerHour: Limit?
    var nodes: Int?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case callsPerSecond = "calls_per_second", burst, pushesPerHour = "pushes_per_hour", maxTokens = "max_tokens"
        case maxLiveActivities = "max_live_activities", priorityBudgetPerHour = "priority_budget_per_hour", nodes
    }

    /// `base` with this section's limits on top: a limit left out keeps `base`'s, "unlimited" lifts it.
    func quota(over base: AppQuota, where place: String) throws -> AppQuota {
        AppQuota(try registered(where: place, topLevel: true), over: base)
    }

    /// This section as the registry keeps an app's quotas: left out is nil (the
    /// default), "unlimited" is 0. A limit of 0 is refused: the registry reads 0
    /// as "no limit", and an app that may do nothing is a disabled app.
    func registered(where place: String, topLevel: Bool = false) throws -> RegisteredQuotas {
        func value(_ limit: Limit?, _ key: CodingKeys) throws -> Int? {
            switch limit {
            case nil: return nil
            case .unlimited: return 0
            case let .value(number):
                guard number >= 1, number <= Double(Int32.max), number == number.rounded() else {
                    throw CLIError("\(place).\(key.rawValue) must be a whole number from 1 to \(Int32.max), or \"unlimited\"")
                }
                return Int(number)
            }
        }
        if !topLevel, nodes != nil { throw CLIError("\(place).nodes: \"nodes\" belongs in the top-level \"quotas\"") }
        var rate: Double?
        switch callsPerSecond {
        case nil: rate = nil
        case .unlimited: rate = 0
        case let .value(number):
            guard number > 0, number <= 10_000_000 else {
                throw CLIError("\(place).calls_per_second must be above 0 and at most 10000000, or \"unlimited\"")
            }
            rate = number
        }
        return RegisteredQuotas(
            callsPerSecond: rate, burst: try value(burst, .burst), pushesPerHour: try value(pushesPerHour, .pushesPerHour),
            maxTokens: try value(maxTokens, .maxTokens), maxLiveActivities: try value(maxLiveActivities, .maxLiveActivities),
            priorityBudgetPerHour: try value(priorityBudgetPerHour, .priorityBudgetPerHour))
    }

    /// The file's "quotas" section over the production defaults, and how many nodes share the rates.
    /// (Each app's own section goes into the tenant registry with the app: ``registered(where:)``.)
    static func defaults(section: QuotaConfiguration?) throws -> (quota: AppQuota, nodes: Int) {
        let production = AppQuota(pushesPerHour: AppQuota.defaultPushesPerHour)
        let defaults = try section?.quota(over: production, where: "quotas") ?? production
        if let nodes = section?.nodes, nodes < 1 { throw CLIError("quotas.nodes must be at least 1") }
        return (defaults, section?.nodes ?? 1)
    }
}
