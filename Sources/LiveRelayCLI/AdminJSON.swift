import LiveRelayMessages

// The admin API's replies as JSON, with admin.proto's field names; absent
// optional fields are left out (proto2 presence), so "not set" and "zero" differ.

/// An object of the fields that are present, in .proto order.
private func present(_ fields: [(String, JSONValue?)]) -> JSONValue {
    .object(fields.compactMap { name, value in value.map { (name, $0) } })
}

extension Admin.Quotas: JSONRepresentable {
    var json: JSONValue {
        present([
            ("calls_per_second", callsPerSecond.map { .double($0) }), ("burst", burst.map { .integer(Int64($0)) }),
            ("pushes_per_hour", pushesPerHour.map { .integer(Int64(clamping: $0)) }),
            ("max_tokens", maxTokens.map { .integer(Int64(clamping: $0)) }),
            ("max_live_activities", maxLiveActivities.map { .integer(Int64(clamping: $0)) }),
            ("priority_budget_per_hour", priorityBudgetPerHour.map { .integer(Int64($0)) }),
        ])
    }
}

extension Admin.App: JSONRepresentable {
    var json: JSONValue {
        present([
            ("app_id", appID.map { .string($0) }), ("bundle_id", bundleID.map { .string($0) }), ("enabled", enabled.map { .bool($0) }),
            ("queue_capacity", queueCapacity.map { .integer(Int64($0)) }), ("weight", weight.map { .integer(Int64($0)) }),
            ("max_push_lifetime_s", maxPushLifetimeSeconds.map { .integer(Int64($0)) }), ("quotas", quotas?.json),
            (
                "credentials",
                credentials.map {
                    present([
                        ("team_id", $0.teamID.map { .string($0) }), ("key_id", $0.keyID.map { .string($0) }),
                        ("endpoint", $0.endpoint.map { .string($0) }), ("key_source", $0.keySource.map { .string($0) }),
                        ("public_key_sha256", $0.publicKeySHA256.map { .string($0) }),
                        ("updated_at_ms", $0.updatedAtMS.map { .integer($0) }),
                    ])
                }
            ),
            ("created_at_ms", createdAtMS.map { .integer($0) }), ("updated_at_ms", updatedAtMS.map { .integer($0) }),
            ("owner", owner.map { .string($0) }),
        ])
    }
}

extension Admin.AppReply: JSONRepresentable {
    var json: JSONValue { present([("app", app?.json)]) }
}

extension Admin.ListAppsReply: JSONRepresentable {
    var json: JSONValue { present([("apps", .array(apps.map(\.json))), ("next_page_token", nextPageToken.map { .string($0) })]) }
}

extension Admin.APIKey: JSONRepresentable {
    var json: JSONValue {
        present([
            ("key_id", keyID.map { .string($0) }), ("app_ids", appIDs.isEmpty ? nil : .array(appIDs.map { .string($0) })),
            ("all_apps", allApps.map { .bool($0) }),
            ("allowed_methods", allowedMethods.isEmpty ? nil : .array(allowedMethods.map { .string($0) })),
            ("admin", admin.map { .bool($0) }), ("label", label.map { .string($0) }), ("created_at_ms", createdAtMS.map { .integer($0) }),
            ("last_used_at_ms", lastUsedAtMS.map { .integer($0) }), ("revoked_at_ms", revokedAtMS.map { .integer($0) }),
            ("owner", owner.map { .string($0) }),
        ])
    }
}

extension Admin.CreateAPIKeyReply: JSONRepresentable {
    var json: JSONValue { present([("key", key?.json), ("secret", secret.map { .string($0) })]) }
}

extension Admin.ListAPIKeysReply: JSONRepresentable {
    var json: JSONValue { present([("keys", .array(keys.map(\.json))), ("next_page_token", nextPageToken.map { .string($0) })]) }
}

extension Admin.APIKeyReply: JSONRepresentable {
    var json: JSONValue { present([("key", key?.json)]) }
}

extension Admin.AppStats: JSONRepresentable {
    var json: JSONValue {
        present([
            ("app_id", appID.map { .string($0) }), ("queue_depth", queueDepth.map { .integer(Int64(clamping: $0)) }),
            ("queue_capacity", queueCapacity.map { .integer(Int64(clamping: $0)) }),
            (
                "pushes",
                .array(
                    pushes.map {
                        present([
                            ("outcome", $0.outcome.map { .string($0) }), ("reason", $0.reason.map { .string($0) }),
                            ("count", $0.count.map { .integer(Int64(clamping: $0)) }),
                        ])
                    })
            ),
            ("pushes_last_hour", pushesLastHour.map { .integer(Int64(clamping: $0)) }),
            ("tokens", tokens.map { .integer(Int64(clamping: $0)) }),
            ("live_activities", liveActivities.map { .integer(Int64(clamping: $0)) }), ("quotas", quotas?.json),
            ("nodes", nodes.map { .integer(Int64($0)) }),
            ("held_reason", heldReason.map { .string($0) }), ("held_for_ms", heldForMS.map { .integer(Int64(clamping: $0)) }),
            ("webhook_state", webhookState.map { .string($0) }),
            ("webhook_backlog", webhookBacklog.map { .integer(Int64(clamping: $0)) }),
        ])
    }
}

extension Admin.Webhook: JSONRepresentable {
    var json: JSONValue {
        present([
            ("app_id", appID.map { .string($0) }), ("url", url.map { .string($0) }),
            ("event_kinds", eventKinds.isEmpty ? nil : .array(eventKinds.map { .string($0) })),
            ("created_at_ms", createdAtMS.map { .integer($0) }), ("updated_at_ms", updatedAtMS.map { .integer($0) }),
            ("state", state.map { .string($0) }), ("delivered_cursor", deliveredCursor.map { .integer(Int64(clamping: $0)) }),
            ("last_success_at_ms", lastSuccessAtMS.map { .integer($0) }), ("last_error", lastError.map { .string($0) }),
            ("failing_since_ms", failingSinceMS.map { .integer($0) }), ("attempts", attempts.map { .integer(Int64($0)) }),
        ])
    }
}

extension Admin.PutWebhookReply: JSONRepresentable {
    var json: JSONValue { present([("webhook", webhook?.json), ("signing_secret", signingSecret.map { .string($0) })]) }
}

extension Admin.WebhookReply: JSONRepresentable {
    var json: JSONValue { present([("webhook", webhook?.json)]) }
}
