/// The columns of the four tables, in the order the row readers of both SQL
/// stores (SQLite and PostgreSQL) expect: their schemas name the same columns.
package enum StoreColumns {
    package static let token =
        "app_id, hex, kind, environment, attributes_type, activity_id, external_user_id, device_id, created_at, updated_at, expires_at"
    package static let activity =
        "app_id, id, attributes_type, state, last_timestamp, last_content_state, created_at, expires_at, ended_at, dismiss_at"
    package static let record =
        "app_id, activity_id, key, operation, fingerprint, reply_timestamp, reply_state, reply_summary, created_at, reply_targets, reply_account"
    package static let intent =
        "app_id, activity_id, timestamp, version, event, payload, topic, priority, expiration, expires_at, targets, created_at, owner, lease_until"
}
