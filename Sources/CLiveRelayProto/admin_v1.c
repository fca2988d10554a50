/*
 * Hand-written descriptors for Protos/liverelay/admin/v1/admin.proto (proto2,
 * package liverelay.admin.v1): the admin API's messages.
 *
 * The same conventions as activity_v1.c: proto2 `optional` scalars, bools and
 * bytes use PROTOBUF_C_LABEL_OPTIONAL with quantifier_offset at has_<name>;
 * optional strings and messages use a NULL pointer for "absent" (no default),
 * so a present empty string is still sent. Repeated strings and messages are
 * never packed. Field tables are sorted by number; *_by_name lists the field
 * indices in strcmp order of the names. Every message numbers its fields 1..n,
 * so LR_MESSAGE_IN's single range applies. The contract test compares all of it
 * with protoc's descriptor set.
 */
#include "lr_descriptor_macros.h"

#define LR_ADMIN "liverelay.admin.v1"

/* ---- Quotas ---- */

#define S LrAdminQuotas
static const ProtobufCFieldDescriptor admin_quotas_fields[] = {
  LR_FIELD_OPT_HAS(S, 1, calls_per_second, DOUBLE, NULL),
  LR_FIELD_OPT_HAS(S, 2, burst, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 3, pushes_per_hour, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 4, max_tokens, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 5, max_live_activities, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 6, priority_budget_per_hour, UINT32, NULL),
};
static const unsigned admin_quotas_by_name[] = {
  1 /* burst */, 0 /* calls_per_second */, 4 /* max_live_activities */, 3 /* max_tokens */,
  5 /* priority_budget_per_hour */, 2 /* pushes_per_hour */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_quotas, LrAdminQuotas, Quotas)
#undef S

/* ---- APNsCredentialsInfo ---- */

#define S LrAdminAPNsCredentialsInfo
static const ProtobufCFieldDescriptor admin_apns_credentials_info_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, team_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, key_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 3, endpoint, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 4, key_source, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 5, public_key_sha256, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 6, updated_at_ms, INT64, NULL),
};
static const unsigned admin_apns_credentials_info_by_name[] = {
  2 /* endpoint */, 1 /* key_id */, 3 /* key_source */, 4 /* public_key_sha256 */,
  0 /* team_id */, 5 /* updated_at_ms */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_apns_credentials_info, LrAdminAPNsCredentialsInfo, APNsCredentialsInfo)
#undef S

/* ---- App ---- */

#define S LrAdminApp
static const ProtobufCFieldDescriptor admin_app_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, bundle_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, enabled, BOOL, NULL),
  LR_FIELD_OPT_HAS(S, 4, queue_capacity, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 5, weight, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 6, max_push_lifetime_s, UINT32, NULL),
  LR_FIELD_OPT_PTR(S, 7, quotas, MESSAGE, &admin_quotas_descriptor),
  LR_FIELD_OPT_PTR(S, 8, credentials, MESSAGE, &admin_apns_credentials_info_descriptor),
  LR_FIELD_OPT_HAS(S, 9, created_at_ms, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 10, updated_at_ms, INT64, NULL),
  LR_FIELD_OPT_PTR(S, 11, owner, STRING, NULL),
};
static const unsigned admin_app_by_name[] = {
  0 /* app_id */, 1 /* bundle_id */, 8 /* created_at_ms */, 7 /* credentials */, 2 /* enabled */,
  5 /* max_push_lifetime_s */, 10 /* owner */, 3 /* queue_capacity */, 6 /* quotas */, 9 /* updated_at_ms */,
  4 /* weight */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_app, LrAdminApp, App)
#undef S

/* ---- CreateAppRequest ---- */

#define S LrAdminCreateAppRequest
static const ProtobufCFieldDescriptor admin_create_app_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, bundle_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, queue_capacity, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 4, weight, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 5, max_push_lifetime_s, UINT32, NULL),
  LR_FIELD_OPT_PTR(S, 6, quotas, MESSAGE, &admin_quotas_descriptor),
};
static const unsigned admin_create_app_request_by_name[] = {
  0 /* app_id */, 1 /* bundle_id */, 4 /* max_push_lifetime_s */, 2 /* queue_capacity */,
  5 /* quotas */, 3 /* weight */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_create_app_request, LrAdminCreateAppRequest, CreateAppRequest)
#undef S

/* ---- UpdateAppRequest ---- */

#define S LrAdminUpdateAppRequest
static const ProtobufCFieldDescriptor admin_update_app_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, bundle_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, queue_capacity, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 4, weight, UINT32, NULL),
  LR_FIELD_OPT_HAS(S, 5, max_push_lifetime_s, UINT32, NULL),
  LR_FIELD_OPT_PTR(S, 6, quotas, MESSAGE, &admin_quotas_descriptor),
  LR_FIELD_OPT_HAS(S, 7, enabled, BOOL, NULL),
};
static const unsigned admin_update_app_request_by_name[] = {
  0 /* app_id */, 1 /* bundle_id */, 6 /* enabled */, 4 /* max_push_lifetime_s */,
  2 /* queue_capacity */, 5 /* quotas */, 3 /* weight */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_update_app_request, LrAdminUpdateAppRequest, UpdateAppRequest)
#undef S

/* ---- GetAppRequest, DisableAppRequest, AppReply ---- */

#define S LrAdminGetAppRequest
static const ProtobufCFieldDescriptor admin_get_app_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
};
static const unsigned admin_get_app_request_by_name[] = { 0 /* app_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_get_app_request, LrAdminGetAppRequest, GetAppRequest)
#undef S

#define S LrAdminDisableAppRequest
static const ProtobufCFieldDescriptor admin_disable_app_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
};
static const unsigned admin_disable_app_request_by_name[] = { 0 /* app_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_disable_app_request, LrAdminDisableAppRequest, DisableAppRequest)
#undef S

#define S LrAdminAppReply
static const ProtobufCFieldDescriptor admin_app_reply_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app, MESSAGE, &admin_app_descriptor),
};
static const unsigned admin_app_reply_by_name[] = { 0 /* app */ };
LR_MESSAGE_IN(LR_ADMIN, admin_app_reply, LrAdminAppReply, AppReply)
#undef S

/* ---- ListAppsRequest, ListAppsReply ---- */

#define S LrAdminListAppsRequest
static const ProtobufCFieldDescriptor admin_list_apps_request_fields[] = {
  LR_FIELD_OPT_HAS(S, 1, page_size, UINT32, NULL),
  LR_FIELD_OPT_PTR(S, 2, page_token, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, include_disabled, BOOL, NULL),
};
static const unsigned admin_list_apps_request_by_name[] = {
  2 /* include_disabled */, 0 /* page_size */, 1 /* page_token */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_list_apps_request, LrAdminListAppsRequest, ListAppsRequest)
#undef S

#define S LrAdminListAppsReply
static const ProtobufCFieldDescriptor admin_list_apps_reply_fields[] = {
  LR_FIELD_REPEATED(S, 1, apps, MESSAGE, &admin_app_descriptor),
  LR_FIELD_OPT_PTR(S, 2, next_page_token, STRING, NULL),
};
static const unsigned admin_list_apps_reply_by_name[] = { 0 /* apps */, 1 /* next_page_token */ };
LR_MESSAGE_IN(LR_ADMIN, admin_list_apps_reply, LrAdminListAppsReply, ListAppsReply)
#undef S

/* ---- PutAPNsCredentialsRequest ---- */

#define S LrAdminPutAPNsCredentialsRequest
static const ProtobufCFieldDescriptor admin_put_apns_credentials_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, team_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 3, key_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 4, private_key_pem, BYTES, NULL),
  LR_FIELD_OPT_PTR(S, 5, private_key_file, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 6, private_key_env, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 7, endpoint, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 8, trust_certificate_pem, BYTES, NULL),
};
static const unsigned admin_put_apns_credentials_request_by_name[] = {
  0 /* app_id */, 6 /* endpoint */, 2 /* key_id */, 5 /* private_key_env */,
  4 /* private_key_file */, 3 /* private_key_pem */, 1 /* team_id */, 7 /* trust_certificate_pem */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_put_apns_credentials_request, LrAdminPutAPNsCredentialsRequest,
              PutAPNsCredentialsRequest)
#undef S

/* ---- APIKey ---- */

#define S LrAdminAPIKey
static const ProtobufCFieldDescriptor admin_api_key_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, key_id, STRING, NULL),
  LR_FIELD_REPEATED(S, 2, app_ids, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, all_apps, BOOL, NULL),
  LR_FIELD_REPEATED(S, 4, allowed_methods, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 5, admin, BOOL, NULL),
  LR_FIELD_OPT_PTR(S, 6, label, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 7, created_at_ms, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 8, last_used_at_ms, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 9, revoked_at_ms, INT64, NULL),
  LR_FIELD_OPT_PTR(S, 10, owner, STRING, NULL),
};
static const unsigned admin_api_key_by_name[] = {
  4 /* admin */, 2 /* all_apps */, 3 /* allowed_methods */, 1 /* app_ids */, 6 /* created_at_ms */,
  0 /* key_id */, 5 /* label */, 7 /* last_used_at_ms */, 9 /* owner */, 8 /* revoked_at_ms */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_api_key, LrAdminAPIKey, APIKey)
#undef S

/* ---- CreateAPIKeyRequest, CreateAPIKeyReply ---- */

#define S LrAdminCreateAPIKeyRequest
static const ProtobufCFieldDescriptor admin_create_api_key_request_fields[] = {
  LR_FIELD_REPEATED(S, 1, app_ids, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 2, all_apps, BOOL, NULL),
  LR_FIELD_REPEATED(S, 3, allowed_methods, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 4, admin, BOOL, NULL),
  LR_FIELD_OPT_PTR(S, 5, label, STRING, NULL),
};
static const unsigned admin_create_api_key_request_by_name[] = {
  3 /* admin */, 1 /* all_apps */, 2 /* allowed_methods */, 0 /* app_ids */, 4 /* label */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_create_api_key_request, LrAdminCreateAPIKeyRequest, CreateAPIKeyRequest)
#undef S

#define S LrAdminCreateAPIKeyReply
static const ProtobufCFieldDescriptor admin_create_api_key_reply_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, key, MESSAGE, &admin_api_key_descriptor),
  LR_FIELD_OPT_PTR(S, 2, secret, STRING, NULL),
};
static const unsigned admin_create_api_key_reply_by_name[] = { 0 /* key */, 1 /* secret */ };
LR_MESSAGE_IN(LR_ADMIN, admin_create_api_key_reply, LrAdminCreateAPIKeyReply, CreateAPIKeyReply)
#undef S

/* ---- ListAPIKeysRequest, ListAPIKeysReply ---- */

#define S LrAdminListAPIKeysRequest
static const ProtobufCFieldDescriptor admin_list_api_keys_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 2, include_revoked, BOOL, NULL),
  LR_FIELD_OPT_HAS(S, 3, page_size, UINT32, NULL),
  LR_FIELD_OPT_PTR(S, 4, page_token, STRING, NULL),
};
static const unsigned admin_list_api_keys_request_by_name[] = {
  0 /* app_id */, 1 /* include_revoked */, 2 /* page_size */, 3 /* page_token */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_list_api_keys_request, LrAdminListAPIKeysRequest, ListAPIKeysRequest)
#undef S

#define S LrAdminListAPIKeysReply
static const ProtobufCFieldDescriptor admin_list_api_keys_reply_fields[] = {
  LR_FIELD_REPEATED(S, 1, keys, MESSAGE, &admin_api_key_descriptor),
  LR_FIELD_OPT_PTR(S, 2, next_page_token, STRING, NULL),
};
static const unsigned admin_list_api_keys_reply_by_name[] = { 0 /* keys */, 1 /* next_page_token */ };
LR_MESSAGE_IN(LR_ADMIN, admin_list_api_keys_reply, LrAdminListAPIKeysReply, ListAPIKeysReply)
#undef S

/* ---- RevokeAPIKeyRequest, APIKeyReply ---- */

#define S LrAdminRevokeAPIKeyRequest
static const ProtobufCFieldDescriptor admin_revoke_api_key_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, key_id, STRING, NULL),
};
static const unsigned admin_revoke_api_key_request_by_name[] = { 0 /* key_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_revoke_api_key_request, LrAdminRevokeAPIKeyRequest, RevokeAPIKeyRequest)
#undef S

#define S LrAdminAPIKeyReply
static const ProtobufCFieldDescriptor admin_api_key_reply_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, key, MESSAGE, &admin_api_key_descriptor),
};
static const unsigned admin_api_key_reply_by_name[] = { 0 /* key */ };
LR_MESSAGE_IN(LR_ADMIN, admin_api_key_reply, LrAdminAPIKeyReply, APIKeyReply)
#undef S

/* ---- GetAppStatsRequest, OutcomeCount, AppStats ---- */

#define S LrAdminGetAppStatsRequest
static const ProtobufCFieldDescriptor admin_get_app_stats_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
};
static const unsigned admin_get_app_stats_request_by_name[] = { 0 /* app_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_get_app_stats_request, LrAdminGetAppStatsRequest, GetAppStatsRequest)
#undef S

#define S LrAdminOutcomeCount
static const ProtobufCFieldDescriptor admin_outcome_count_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, outcome, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, reason, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, count, UINT64, NULL),
};
static const unsigned admin_outcome_count_by_name[] = { 2 /* count */, 0 /* outcome */, 1 /* reason */ };
LR_MESSAGE_IN(LR_ADMIN, admin_outcome_count, LrAdminOutcomeCount, OutcomeCount)
#undef S

#define S LrAdminAppStats
static const ProtobufCFieldDescriptor admin_app_stats_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 2, queue_depth, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 3, queue_capacity, UINT64, NULL),
  LR_FIELD_REPEATED(S, 4, pushes, MESSAGE, &admin_outcome_count_descriptor),
  LR_FIELD_OPT_HAS(S, 5, pushes_last_hour, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 6, tokens, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 7, live_activities, UINT64, NULL),
  LR_FIELD_OPT_PTR(S, 8, quotas, MESSAGE, &admin_quotas_descriptor),
  LR_FIELD_OPT_HAS(S, 9, nodes, UINT32, NULL),
  LR_FIELD_OPT_PTR(S, 10, held_reason, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 11, held_for_ms, UINT64, NULL),
  LR_FIELD_OPT_PTR(S, 12, webhook_state, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 13, webhook_backlog, UINT64, NULL),
};
static const unsigned admin_app_stats_by_name[] = {
  0 /* app_id */, 10 /* held_for_ms */, 9 /* held_reason */, 6 /* live_activities */, 8 /* nodes */,
  3 /* pushes */, 4 /* pushes_last_hour */, 2 /* queue_capacity */, 1 /* queue_depth */, 7 /* quotas */,
  5 /* tokens */, 12 /* webhook_backlog */, 11 /* webhook_state */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_app_stats, LrAdminAppStats, AppStats)
#undef S

/* ---- Webhook ---- */

#define S LrAdminWebhook
static const ProtobufCFieldDescriptor admin_webhook_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, url, STRING, NULL),
  LR_FIELD_REPEATED(S, 3, event_kinds, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 4, created_at_ms, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 5, updated_at_ms, INT64, NULL),
  LR_FIELD_OPT_PTR(S, 6, state, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 7, delivered_cursor, UINT64, NULL),
  LR_FIELD_OPT_HAS(S, 8, last_success_at_ms, INT64, NULL),
  LR_FIELD_OPT_PTR(S, 9, last_error, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 10, failing_since_ms, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 11, attempts, UINT32, NULL),
};
static const unsigned admin_webhook_by_name[] = {
  0 /* app_id */, 10 /* attempts */, 3 /* created_at_ms */, 6 /* delivered_cursor */, 2 /* event_kinds */,
  9 /* failing_since_ms */, 8 /* last_error */, 7 /* last_success_at_ms */, 5 /* state */, 4 /* updated_at_ms */,
  1 /* url */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_webhook, LrAdminWebhook, Webhook)
#undef S

/* ---- PutWebhookRequest, PutWebhookReply ---- */

#define S LrAdminPutWebhookRequest
static const ProtobufCFieldDescriptor admin_put_webhook_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, url, STRING, NULL),
  LR_FIELD_REPEATED(S, 3, event_kinds, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 4, rotate_secret, BOOL, NULL),
};
static const unsigned admin_put_webhook_request_by_name[] = {
  0 /* app_id */, 2 /* event_kinds */, 3 /* rotate_secret */, 1 /* url */,
};
LR_MESSAGE_IN(LR_ADMIN, admin_put_webhook_request, LrAdminPutWebhookRequest, PutWebhookRequest)
#undef S

#define S LrAdminPutWebhookReply
static const ProtobufCFieldDescriptor admin_put_webhook_reply_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, webhook, MESSAGE, &admin_webhook_descriptor),
  LR_FIELD_OPT_PTR(S, 2, signing_secret, STRING, NULL),
};
static const unsigned admin_put_webhook_reply_by_name[] = { 1 /* signing_secret */, 0 /* webhook */ };
LR_MESSAGE_IN(LR_ADMIN, admin_put_webhook_reply, LrAdminPutWebhookReply, PutWebhookReply)
#undef S

/* ---- GetWebhookRequest, DeleteWebhookRequest, ResetWebhookRequest, WebhookReply ---- */

#define S LrAdminGetWebhookRequest
static const ProtobufCFieldDescriptor admin_get_webhook_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
};
static const unsigned admin_get_webhook_request_by_name[] = { 0 /* app_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_get_webhook_request, LrAdminGetWebhookRequest, GetWebhookRequest)
#undef S

#define S LrAdminDeleteWebhookRequest
static const ProtobufCFieldDescriptor admin_delete_webhook_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
};
static const unsigned admin_delete_webhook_request_by_name[] = { 0 /* app_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_delete_webhook_request, LrAdminDeleteWebhookRequest, DeleteWebhookRequest)
#undef S

#define S LrAdminResetWebhookRequest
static const ProtobufCFieldDescriptor admin_reset_webhook_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
};
static const unsigned admin_reset_webhook_request_by_name[] = { 0 /* app_id */ };
LR_MESSAGE_IN(LR_ADMIN, admin_reset_webhook_request, LrAdminResetWebhookRequest, ResetWebhookRequest)
#undef S

#define S LrAdminWebhookReply
static const ProtobufCFieldDescriptor admin_webhook_reply_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, webhook, MESSAGE, &admin_webhook_descriptor),
};
static const unsigned admin_webhook_reply_by_name[] = { 0 /* webhook */ };
LR_MESSAGE_IN(LR_ADMIN, admin_webhook_reply, LrAdminWebhookReply, WebhookReply)
#undef S
