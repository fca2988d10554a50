@_spi(Benchmarks) import LiveRelayMessages
import SwiftProtobufMessages

// The validation a server runs after swift-protobuf's decode: LiveRelayMessages'
// `validate()` rules, written against swift-protobuf's generated types and calling
// the very same rule functions (`Rules`, SPI of LiveRelayMessages), so both sides of
// the "decode + validation" comparison run identical checks, strict JSON scan included.
//
// Two differences are in the types, not in the checks:
// - swift-protobuf checks UTF-8 while decoding (as LiveRelayMessages does); a NUL
//   inside a string is left to the rules, which refuse it in every string field
//   (identifier, token, JSON and control-character sets, `Rules.text`, `Rules.noNUL`).
// - proto2 enums: swift-protobuf moves an undefined `priority` value to the unknown
//   fields, so there is no value left to refuse (LiveRelayMessages refuses it).
//   The fixtures use defined values, so no check is skipped in the measurement.

/// A swift-protobuf request with the server's validation.
protocol ServerValidated {
    func validate() throws(MessageError)
}

@inline(__always)
private func optional<T>(_ has: Bool, _ value: @autoclosure () -> T) -> T? { has ? value() : nil }

@inline(__always)
private func enumOutOfRange(_ n: Int, _ field: String) -> MessageError {
    MessageError(.enumOutOfRange(Int32(truncatingIfNeeded: n)), field: field)
}

extension Liverelay_V1_RegisterTokenRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(appID)
        switch kind {
        case .unspecified: throw MessageError(.missing, field: "kind")
        case let .UNRECOGNIZED(n): throw enumOutOfRange(n, "kind")
        case .pushToStart, .update: break
        }
        try Rules.token(token, "token")
        switch environment {
        case .unspecified: if !remove { throw MessageError(.missing, field: "environment") }
        case let .UNRECOGNIZED(n): throw enumOutOfRange(n, "environment")
        case .sandbox, .production: break
        }
        try Rules.typeName(attributesType, required: kind == .pushToStart)
        try Rules.activityID(activityID, required: kind == .update)
        try Rules.text(externalUserID, max: Rules.maxUserID, "external_user_id")
        try Rules.text(deviceID, max: Rules.maxIdentifier, "device_id")
        try Rules.nonNegative(expiresAt, "expires_at")
    }
}

extension Liverelay_V1_Alert {
    func validate(prefix: String) throws(MessageError) {
        try Rules.text(optional(hasTitle, title), max: Rules.maxAlertText, "title", prefix: prefix)
        try Rules.text(optional(hasBody, body), max: Rules.maxAlertText, "body", prefix: prefix)
        try Rules.text(optional(hasSound, sound), max: Rules.maxAlertText, "sound", prefix: prefix)
    }
}

extension Liverelay_V1_Targets {
    var isEmpty: Bool { pushToStartTokens.isEmpty && externalUserIds.isEmpty && !(hasAllDevices && allDevices) }

    func validate(prefix: String) throws(MessageError) {
        let max = MessageLimits.maxTargets
        if pushToStartTokens.count > max {
            throw MessageError(.tooMany(count: pushToStartTokens.count, max: max), field: prefix + "push_to_start_tokens")
        }
        for i in pushToStartTokens.indices {
            try Rules.token(pushToStartTokens[i], "\(prefix)push_to_start_tokens[\(i)]")
        }
        if externalUserIds.count > max {
            throw MessageError(.tooMany(count: externalUserIds.count, max: max), field: prefix + "external_user_ids")
        }
        for i in externalUserIds.indices {
            let id = externalUserIds[i]
            if id.isEmpty { throw MessageError(.invalidValue, field: "\(prefix)external_user_ids[\(i)]", detail: "empty") }
            let n = id.utf8.count
            if n > Rules.maxUserID {
                throw MessageError(.tooLong(length: n, max: Rules.maxUserID), field: "\(prefix)external_user_ids[\(i)]")
            }
            try Rules.noNUL(id, "\(prefix)external_user_ids[\(i)]")
        }
    }
}

extension Liverelay_V1_StartActivityRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(optional(hasAppID, appID))
        try Rules.activityID(optional(hasActivityID, activityID), required: true)
        try Rules.typeName(optional(hasAttributesType, attributesType), required: true)
        try Rules.jsonObject(optional(hasAttributesJson, attributesJson), required: true, "attributes_json")
        try Rules.jsonObject(optional(hasContentStateJson, contentStateJson), required: true, "content_state_json")
        if hasAlert { try alert.validate(prefix: "alert.") }
        try Rules.nonNegative(optional(hasStaleDate, staleDate), "stale_date")
        try Rules.nonNegative(optional(hasDismissalDate, dismissalDate), "dismissal_date")
        try Rules.finite(optional(hasRelevanceScore, relevanceScore), "relevance_score")
        guard hasTargets else { throw MessageError(.missing, field: "targets") }
        if targets.isEmpty {
            throw MessageError(.missing, field: "targets", detail: "needs push_to_start_tokens, external_user_ids or all_devices")
        }
        try targets.validate(prefix: "targets.")
        try Rules.idempotencyKey(optional(hasIdempotencyKey, idempotencyKey))
        let channel = optional(hasChannelID, channelID)
        try Rules.channelID(channel, required: false)
        if hasInputPushToken, !inputPushToken, channel == nil {
            throw MessageError(
                .invalidValue, field: "input_push_token",
                detail: "false needs channel_id: an activity without an update token or a channel could never be updated")
        }
    }
}

extension Liverelay_V1_UpdateActivityRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(optional(hasAppID, appID))
        try Rules.activityID(optional(hasActivityID, activityID), required: true)
        try Rules.jsonObject(
            optional(hasContentStateJson, contentStateJson), required: !(hasEndActivity && endActivity), "content_state_json")
        if hasAlert { try alert.validate(prefix: "alert.") }
        try Rules.nonNegative(optional(hasStaleDate, staleDate), "stale_date")
        try Rules.nonNegative(optional(hasDismissalDate, dismissalDate), "dismissal_date")
        try Rules.finite(optional(hasRelevanceScore, relevanceScore), "relevance_score")
        try Rules.idempotencyKey(optional(hasIdempotencyKey, idempotencyKey))
        try Rules.channel(optional(hasChannelID, channelID), only: optional(hasChannelOnly, channelOnly))
    }
}

extension Liverelay_V1_EndActivityRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(optional(hasAppID, appID))
        try Rules.activityID(optional(hasActivityID, activityID), required: true)
        try Rules.jsonObject(optional(hasContentStateJson, contentStateJson), required: false, "content_state_json")
        try Rules.nonNegative(optional(hasDismissalDate, dismissalDate), "dismissal_date")
        try Rules.idempotencyKey(optional(hasIdempotencyKey, idempotencyKey))
        if hasAlert { try alert.validate(prefix: "alert.") }
        try Rules.nonNegative(optional(hasStaleDate, staleDate), "stale_date")
        try Rules.finite(optional(hasRelevanceScore, relevanceScore), "relevance_score")
        try Rules.channel(optional(hasChannelID, channelID), only: optional(hasChannelOnly, channelOnly))
    }
}

extension Liverelay_V1_PingRequest: ServerValidated {
    /// Nothing to check: any payload within the size limit is valid.
    func validate() throws(MessageError) {}
}

extension Liverelay_V1_CreateChannelRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(appID)
        switch environment {
        case .unspecified: throw MessageError(.missing, field: "environment")
        case let .UNRECOGNIZED(n): throw enumOutOfRange(n, "environment")
        case .sandbox, .production: break
        }
        switch storagePolicy {
        case .unspecified: throw MessageError(.missing, field: "storage_policy")
        case let .UNRECOGNIZED(n): throw enumOutOfRange(n, "storage_policy")
        case .noStorage, .mostRecentMessage: break
        }
    }
}

extension Liverelay_V1_ListChannelsRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(appID)
        if case let .UNRECOGNIZED(n) = environment { throw enumOutOfRange(n, "environment") }
        try Rules.inRange(pageSize, 0...ListChannelsRequest.maxPageSize, "page_size")
        try Rules.text(pageToken, max: ListChannelsRequest.maxPageTokenBytes, "page_token")
    }
}

extension Liverelay_V1_DeleteChannelRequest: ServerValidated {
    func validate() throws(MessageError) {
        try Rules.appID(appID)
        try Rules.channelID(channelID, required: true)
    }
}
