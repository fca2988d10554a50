/*
 * Hand-written protobuf-c bindings for Protos/liverelay/v1/liverelay.proto (proto3),
 * Protos/liverelay/v1/activity.proto (proto2) and Protos/liverelay/admin/v1/admin.proto
 * (proto2; structs LrAdminM, functions lr_admin_m_*).
 *
 * Why by hand: the build must not depend on protoc-c. The contract test compares
 * these descriptors with `protoc --descriptor_set_out`, so they cannot drift.
 *
 * Conventions: struct LrM per message (first member `base`, then the fields in
 * proto order, named as in the proto); proto3 scalars are plain members;
 * proto2 optional scalars carry `has_<name>`; strings are `char *` (proto3
 * default protobuf_c_empty_string, proto2 default NULL); messages are pointers;
 * repeated fields are `n_<name>` + pointer array.
 *
 * Descriptors are reached through accessor functions only: a const C global
 * imported into Swift is a value, and its address would be a temporary copy.
 */
#ifndef LIVERELAY_PROTO_H
#define LIVERELAY_PROTO_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- enums: liverelay.proto ---- */

typedef enum {
  LR_TOKEN_KIND_UNSPECIFIED = 0,
  LR_TOKEN_KIND_PUSH_TO_START = 1,
  LR_TOKEN_KIND_UPDATE = 2
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_TOKEN_KIND)
} LrTokenKind;

typedef enum {
  LR_ENVIRONMENT_UNSPECIFIED = 0,
  LR_ENVIRONMENT_SANDBOX = 1,
  LR_ENVIRONMENT_PRODUCTION = 2
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_ENVIRONMENT)
} LrEnvironment;

typedef enum {
  LR_REGISTER_TOKEN_RESULT_UNSPECIFIED = 0,
  LR_REGISTER_TOKEN_RESULT_CREATED = 1,
  LR_REGISTER_TOKEN_RESULT_ROTATED = 2,
  LR_REGISTER_TOKEN_RESULT_UNCHANGED = 3,
  LR_REGISTER_TOKEN_RESULT_REMOVED = 4,
  LR_REGISTER_TOKEN_RESULT_NOT_FOUND = 5
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_REGISTER_TOKEN_RESULT)
} LrRegisterTokenResult;

typedef enum {
  LR_TARGET_KIND_UNSPECIFIED = 0,
  LR_TARGET_KIND_PUSH_TO_START_TOKEN = 1,
  LR_TARGET_KIND_EXTERNAL_USER_ID = 2,
  LR_TARGET_KIND_ALL_DEVICES = 3
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_TARGET_KIND)
} LrTargetKind;

typedef enum {
  LR_ACTIVITY_STATE_UNSPECIFIED = 0,
  LR_ACTIVITY_STATE_STARTING = 1,
  LR_ACTIVITY_STATE_ACTIVE = 2,
  LR_ACTIVITY_STATE_ENDED = 3,
  LR_ACTIVITY_STATE_EXPIRED = 4,
  LR_ACTIVITY_STATE_DISMISSED = 5
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_ACTIVITY_STATE)
} LrActivityState;

typedef enum {
  LR_CHANNEL_STORAGE_POLICY_UNSPECIFIED = 0,
  LR_CHANNEL_STORAGE_POLICY_NO_STORAGE = 1,
  LR_CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE = 2
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_CHANNEL_STORAGE_POLICY)
} LrChannelStoragePolicy;

typedef enum {
  LR_EVENT_KIND_UNSPECIFIED = 0,
  LR_EVENT_KIND_CALL_SETTLED = 1,
  LR_EVENT_KIND_PUSH_FAILED = 2,
  LR_EVENT_KIND_TOKEN_PRUNED = 3,
  LR_EVENT_KIND_ACTIVITY_ENDED = 4,
  LR_EVENT_KIND_DISPATCH_HELD = 5,
  LR_EVENT_KIND_DISPATCH_RESUMED = 6,
  LR_EVENT_KIND_CHANNEL_DELETED = 7
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_EVENT_KIND)
} LrEventKind;

/* ---- enums: activity.proto ---- */

typedef enum {
  LR_PRIORITY_UNSPECIFIED = 0,
  LR_PRIORITY_LOW = 5,
  LR_PRIORITY_HIGH = 10
  PROTOBUF_C__FORCE_ENUM_TO_BE_INT_SIZE(LR_PRIORITY)
} LrPriority;

/* ---- messages: liverelay.proto (proto3) ---- */

typedef struct LrRegisterTokenRequest {
  ProtobufCMessage base;
  char *app_id;
  LrTokenKind kind;
  char *token;
  LrEnvironment environment;
  char *attributes_type;
  char *activity_id;
  char *external_user_id;
  char *device_id;
  int64_t expires_at;
  protobuf_c_boolean remove;
} LrRegisterTokenRequest;

typedef struct LrRegisterTokenReply {
  ProtobufCMessage base;
  LrRegisterTokenResult result;
  char *replaced_token;
} LrRegisterTokenReply;

typedef struct LrUnresolvedTarget {
  ProtobufCMessage base;
  LrTargetKind kind;
  char *value;
  char *reason;
} LrUnresolvedTarget;

typedef struct LrFailureCount {
  ProtobufCMessage base;
  char *reason;
  uint32_t count;
} LrFailureCount;

typedef struct LrDeliverySummary {
  ProtobufCMessage base;
  uint32_t targeted;
  uint32_t queued;
  uint32_t delivered;
  uint32_t failed;
  size_t n_failures;
  LrFailureCount **failures;
  uint32_t pruned;
  uint32_t superseded;
  uint32_t expired;
  size_t n_unresolved;
  LrUnresolvedTarget **unresolved;
  protobuf_c_boolean complete;
  uint32_t downgraded;
} LrDeliverySummary;

typedef struct LrStartActivityReply {
  ProtobufCMessage base;
  char *activity_id;
  int64_t timestamp;
  LrDeliverySummary *summary;
  protobuf_c_boolean replayed;
  LrActivityState state;
} LrStartActivityReply;

typedef struct LrUpdateActivityReply {
  ProtobufCMessage base;
  int64_t timestamp;
  LrDeliverySummary *summary;
  protobuf_c_boolean replayed;
  LrActivityState state;
} LrUpdateActivityReply;

typedef struct LrEndActivityReply {
  ProtobufCMessage base;
  int64_t timestamp;
  LrDeliverySummary *summary;
  protobuf_c_boolean replayed;
  LrActivityState state;
} LrEndActivityReply;

typedef struct LrPingRequest {
  ProtobufCMessage base;
  ProtobufCBinaryData payload;
} LrPingRequest;

typedef struct LrPingReply {
  ProtobufCMessage base;
  ProtobufCBinaryData payload;
  int64_t server_time_ms;
  char *server_version;
} LrPingReply;

typedef struct LrFieldViolation {
  ProtobufCMessage base;
  char *field;
  char *description;
} LrFieldViolation;

typedef struct LrErrorDetails {
  ProtobufCMessage base;
  size_t n_field_violations;
  LrFieldViolation **field_violations;
  uint32_t retry_after_ms;
  char *reason;
} LrErrorDetails;

typedef struct LrChannel {
  ProtobufCMessage base;
  char *app_id;
  char *channel_id;
  LrEnvironment environment;
  LrChannelStoragePolicy storage_policy;
  int64_t created_at;
} LrChannel;

typedef struct LrCreateChannelRequest {
  ProtobufCMessage base;
  char *app_id;
  LrEnvironment environment;
  LrChannelStoragePolicy storage_policy;
} LrCreateChannelRequest;

typedef struct LrCreateChannelReply {
  ProtobufCMessage base;
  LrChannel *channel;
} LrCreateChannelReply;

typedef struct LrListChannelsRequest {
  ProtobufCMessage base;
  char *app_id;
  LrEnvironment environment;
  uint32_t page_size;
  char *page_token;
} LrListChannelsRequest;

typedef struct LrListChannelsReply {
  ProtobufCMessage base;
  size_t n_channels;
  LrChannel **channels;
  char *next_page_token;
} LrListChannelsReply;

typedef struct LrDeleteChannelRequest {
  ProtobufCMessage base;
  char *app_id;
  char *channel_id;
} LrDeleteChannelRequest;

/* No fields: only the base. */
typedef struct LrDeleteChannelReply {
  ProtobufCMessage base;
} LrDeleteChannelReply;

typedef struct LrEvent {
  ProtobufCMessage base;
  uint64_t cursor;
  LrEventKind kind;
  int64_t time_ms;
  char *activity_id;
  int64_t call_timestamp;
  char *idempotency_key;
  LrDeliverySummary *account;
  char *token;
  LrTokenKind token_kind;
  char *reason;
  int64_t invalid_since_ms;
  LrActivityState activity_state;
  char *channel_id;
} LrEvent;

typedef struct LrListEventsRequest {
  ProtobufCMessage base;
  char *app_id;
  uint64_t after_cursor;
  uint32_t max_events;
  uint32_t wait_ms;
} LrListEventsRequest;

typedef struct LrListEventsReply {
  ProtobufCMessage base;
  size_t n_events;
  LrEvent **events;
  uint64_t next_cursor;
  protobuf_c_boolean more;
} LrListEventsReply;

/* ---- messages: activity.proto (proto2) ---- */

typedef struct LrAlert {
  ProtobufCMessage base;
  char *title;
  char *body;
  char *sound;
} LrAlert;

typedef struct LrTargets {
  ProtobufCMessage base;
  size_t n_push_to_start_tokens;
  char **push_to_start_tokens;
  size_t n_external_user_ids;
  char **external_user_ids;
  protobuf_c_boolean has_all_devices;
  protobuf_c_boolean all_devices;
} LrTargets;

typedef struct LrStartActivityRequest {
  ProtobufCMessage base;
  char *app_id;
  char *activity_id;
  char *attributes_type;
  char *attributes_json;
  char *content_state_json;
  LrAlert *alert;
  protobuf_c_boolean has_stale_date;
  int64_t stale_date;
  protobuf_c_boolean has_dismissal_date;
  int64_t dismissal_date;
  protobuf_c_boolean has_relevance_score;
  double relevance_score;
  protobuf_c_boolean has_priority;
  LrPriority priority;
  LrTargets *targets;
  char *idempotency_key;
  protobuf_c_boolean has_wait_for_delivery;
  protobuf_c_boolean wait_for_delivery;
  char *channel_id;
  protobuf_c_boolean has_input_push_token;
  protobuf_c_boolean input_push_token;
  protobuf_c_boolean has_strict_priority_budget;
  protobuf_c_boolean strict_priority_budget;
} LrStartActivityRequest;

typedef struct LrUpdateActivityRequest {
  ProtobufCMessage base;
  char *app_id;
  char *activity_id;
  char *content_state_json;
  LrAlert *alert;
  protobuf_c_boolean has_stale_date;
  int64_t stale_date;
  protobuf_c_boolean has_dismissal_date;
  int64_t dismissal_date;
  protobuf_c_boolean has_relevance_score;
  double relevance_score;
  protobuf_c_boolean has_priority;
  LrPriority priority;
  protobuf_c_boolean has_end_activity;
  protobuf_c_boolean end_activity;
  char *idempotency_key;
  protobuf_c_boolean has_wait_for_delivery;
  protobuf_c_boolean wait_for_delivery;
  char *channel_id;
  protobuf_c_boolean has_channel_only;
  protobuf_c_boolean channel_only;
  protobuf_c_boolean has_strict_priority_budget;
  protobuf_c_boolean strict_priority_budget;
} LrUpdateActivityRequest;

typedef struct LrEndActivityRequest {
  ProtobufCMessage base;
  char *app_id;
  char *activity_id;
  char *content_state_json;
  protobuf_c_boolean has_dismissal_date;
  int64_t dismissal_date;
  char *idempotency_key;
  protobuf_c_boolean has_wait_for_delivery;
  protobuf_c_boolean wait_for_delivery;
  LrAlert *alert;
  protobuf_c_boolean has_priority;
  LrPriority priority;
  protobuf_c_boolean has_stale_date;
  int64_t stale_date;
  protobuf_c_boolean has_relevance_score;
  double relevance_score;
  char *channel_id;
  protobuf_c_boolean has_channel_only;
  protobuf_c_boolean channel_only;
  protobuf_c_boolean has_strict_priority_budget;
  protobuf_c_boolean strict_priority_budget;
} LrEndActivityRequest;

/* ---- messages: admin/v1/admin.proto (proto2, package liverelay.admin.v1) ---- */

typedef struct LrAdminQuotas {
  ProtobufCMessage base;
  protobuf_c_boolean has_calls_per_second;
  double calls_per_second;
  protobuf_c_boolean has_burst;
  uint32_t burst;
  protobuf_c_boolean has_pushes_per_hour;
  uint64_t pushes_per_hour;
  protobuf_c_boolean has_max_tokens;
  uint64_t max_tokens;
  protobuf_c_boolean has_max_live_activities;
  uint64_t max_live_activities;
  protobuf_c_boolean has_priority_budget_per_hour;
  uint32_t priority_budget_per_hour;
} LrAdminQuotas;

typedef struct LrAdminAPNsCredentialsInfo {
  ProtobufCMessage base;
  char *team_id;
  char *key_id;
  char *endpoint;
  char *key_source;
  char *public_key_sha256;
  protobuf_c_boolean has_updated_at_ms;
  int64_t updated_at_ms;
} LrAdminAPNsCredentialsInfo;

typedef struct LrAdminApp {
  ProtobufCMessage base;
  char *app_id;
  char *bundle_id;
  protobuf_c_boolean has_enabled;
  protobuf_c_boolean enabled;
  protobuf_c_boolean has_queue_capacity;
  uint32_t queue_capacity;
  protobuf_c_boolean has_weight;
  uint32_t weight;
  protobuf_c_boolean has_max_push_lifetime_s;
  uint32_t max_push_lifetime_s;
  LrAdminQuotas *quotas;
  LrAdminAPNsCredentialsInfo *credentials;
  protobuf_c_boolean has_created_at_ms;
  int64_t created_at_ms;
  protobuf_c_boolean has_updated_at_ms;
  int64_t updated_at_ms;
  char *owner;
} LrAdminApp;

typedef struct LrAdminCreateAppRequest {
  ProtobufCMessage base;
  char *app_id;
  char *bundle_id;
  protobuf_c_boolean has_queue_capacity;
  uint32_t queue_capacity;
  protobuf_c_boolean has_weight;
  uint32_t weight;
  protobuf_c_boolean has_max_push_lifetime_s;
  uint32_t max_push_lifetime_s;
  LrAdminQuotas *quotas;
} LrAdminCreateAppRequest;

typedef struct LrAdminUpdateAppRequest {
  ProtobufCMessage base;
  char *app_id;
  char *bundle_id;
  protobuf_c_boolean has_queue_capacity;
  uint32_t queue_capacity;
  protobuf_c_boolean has_weight;
  uint32_t weight;
  protobuf_c_boolean has_max_push_lifetime_s;
  uint32_t max_push_lifetime_s;
  LrAdminQuotas *quotas;
  protobuf_c_boolean has_enabled;
  protobuf_c_boolean enabled;
} LrAdminUpdateAppRequest;

typedef struct LrAdminGetAppRequest {
  ProtobufCMessage base;
  char *app_id;
} LrAdminGetAppRequest;

typedef struct LrAdminDisableAppRequest {
  ProtobufCMessage base;
  char *app_id;
} LrAdminDisableAppRequest;

typedef struct LrAdminAppReply {
  ProtobufCMessage base;
  LrAdminApp *app;
} LrAdminAppReply;

typedef struct LrAdminListAppsRequest {
  ProtobufCMessage base;
  protobuf_c_boolean has_page_size;
  uint32_t page_size;
  char *page_token;
  protobuf_c_boolean has_include_disabled;
  protobuf_c_boolean include_disabled;
} LrAdminListAppsRequest;

typedef struct LrAdminListAppsReply {
  ProtobufCMessage base;
  size_t n_apps;
  LrAdminApp **apps;
  char *next_page_token;
} LrAdminListAppsReply;

typedef struct LrAdminPutAPNsCredentialsRequest {
  ProtobufCMessage base;
  char *app_id;
  char *team_id;
  char *key_id;
  protobuf_c_boolean has_private_key_pem;
  ProtobufCBinaryData private_key_pem;
  char *private_key_file;
  char *private_key_env;
  char *endpoint;
  protobuf_c_boolean has_trust_certificate_pem;
  ProtobufCBinaryData trust_certificate_pem;
} LrAdminPutAPNsCredentialsRequest;

typedef struct LrAdminAPIKey {
  ProtobufCMessage base;
  char *key_id;
  size_t n_app_ids;
  char **app_ids;
  protobuf_c_boolean has_all_apps;
  protobuf_c_boolean all_apps;
  size_t n_allowed_methods;
  char **allowed_methods;
  protobuf_c_boolean has_admin;
  protobuf_c_boolean admin;
  char *label;
  protobuf_c_boolean has_created_at_ms;
  int64_t created_at_ms;
  protobuf_c_boolean has_last_used_at_ms;
  int64_t last_used_at_ms;
  protobuf_c_boolean has_revoked_at_ms;
  int64_t revoked_at_ms;
  char *owner;
} LrAdminAPIKey;

typedef struct LrAdminCreateAPIKeyRequest {
  ProtobufCMessage base;
  size_t n_app_ids;
  char **app_ids;
  protobuf_c_boolean has_all_apps;
  protobuf_c_boolean all_apps;
  size_t n_allowed_methods;
  char **allowed_methods;
  protobuf_c_boolean has_admin;
  protobuf_c_boolean admin;
  char *label;
} LrAdminCreateAPIKeyRequest;

typedef struct LrAdminCreateAPIKeyReply {
  ProtobufCMessage base;
  LrAdminAPIKey *key;
  char *secret;
} LrAdminCreateAPIKeyReply;

typedef struct LrAdminListAPIKeysRequest {
  ProtobufCMessage base;
  char *app_id;
  protobuf_c_boolean has_include_revoked;
  protobuf_c_boolean include_revoked;
  protobuf_c_boolean has_page_size;
  uint32_t page_size;
  char *page_token;
} LrAdminListAPIKeysRequest;

typedef struct LrAdminListAPIKeysReply {
  ProtobufCMessage base;
  size_t n_keys;
  LrAdminAPIKey **keys;
  char *next_page_token;
} LrAdminListAPIKeysReply;

typedef struct LrAdminRevokeAPIKeyRequest {
  ProtobufCMessage base;
  char *key_id;
} LrAdminRevokeAPIKeyRequest;

typedef struct LrAdminAPIKeyReply {
  ProtobufCMessage base;
  LrAdminAPIKey *key;
} LrAdminAPIKeyReply;

typedef struct LrAdminGetAppStatsRequest {
  ProtobufCMessage base;
  char *app_id;
} LrAdminGetAppStatsRequest;

typedef struct LrAdminOutcomeCount {
  ProtobufCMessage base;
  char *outcome;
  char *reason;
  protobuf_c_boolean has_count;
  uint64_t count;
} LrAdminOutcomeCount;

typedef struct LrAdminAppStats {
  ProtobufCMessage base;
  char *app_id;
  protobuf_c_boolean has_queue_depth;
  uint64_t queue_depth;
  protobuf_c_boolean has_queue_capacity;
  uint64_t queue_capacity;
  size_t n_pushes;
  LrAdminOutcomeCount **pushes;
  protobuf_c_boolean has_pushes_last_hour;
  uint64_t pushes_last_hour;
  protobuf_c_boolean has_tokens;
  uint64_t tokens;
  protobuf_c_boolean has_live_activities;
  uint64_t live_activities;
  LrAdminQuotas *quotas;
  protobuf_c_boolean has_nodes;
  uint32_t nodes;
  char *held_reason;
  protobuf_c_boolean has_held_for_ms;
  uint64_t held_for_ms;
  char *webhook_state;
  protobuf_c_boolean has_webhook_backlog;
  uint64_t webhook_backlog;
} LrAdminAppStats;

typedef struct LrAdminWebhook {
  ProtobufCMessage base;
  char *app_id;
  char *url;
  size_t n_event_kinds;
  char **event_kinds;
  protobuf_c_boolean has_created_at_ms;
  int64_t created_at_ms;
  protobuf_c_boolean has_updated_at_ms;
  int64_t updated_at_ms;
  char *state;
  protobuf_c_boolean has_delivered_cursor;
  uint64_t delivered_cursor;
  protobuf_c_boolean has_last_success_at_ms;
  int64_t last_success_at_ms;
  char *last_error;
  protobuf_c_boolean has_failing_since_ms;
  int64_t failing_since_ms;
  protobuf_c_boolean has_attempts;
  uint32_t attempts;
} LrAdminWebhook;

typedef struct LrAdminPutWebhookRequest {
  ProtobufCMessage base;
  char *app_id;
  char *url;
  size_t n_event_kinds;
  char **event_kinds;
  protobuf_c_boolean has_rotate_secret;
  protobuf_c_boolean rotate_secret;
} LrAdminPutWebhookRequest;

typedef struct LrAdminPutWebhookReply {
  ProtobufCMessage base;
  LrAdminWebhook *webhook;
  char *signing_secret;
} LrAdminPutWebhookReply;

typedef struct LrAdminGetWebhookRequest {
  ProtobufCMessage base;
  char *app_id;
} LrAdminGetWebhookRequest;

typedef struct LrAdminDeleteWebhookRequest {
  ProtobufCMessage base;
  char *app_id;
} LrAdminDeleteWebhookRequest;

typedef struct LrAdminResetWebhookRequest {
  ProtobufCMessage base;
  char *app_id;
} LrAdminResetWebhookRequest;

typedef struct LrAdminWebhookReply {
  ProtobufCMessage base;
  LrAdminWebhook *webhook;
} LrAdminWebhookReply;

/* ---- descriptors and init functions ---- */

#define LR_DECLARE_MESSAGE(snake, Type)                                  \
  const ProtobufCMessageDescriptor *lr_##snake##_descriptor(void);       \
  void lr_##snake##_init(Type *message);

LR_DECLARE_MESSAGE(register_token_request, LrRegisterTokenRequest)
LR_DECLARE_MESSAGE(register_token_reply, LrRegisterTokenReply)
LR_DECLARE_MESSAGE(unresolved_target, LrUnresolvedTarget)
LR_DECLARE_MESSAGE(failure_count, LrFailureCount)
LR_DECLARE_MESSAGE(delivery_summary, LrDeliverySummary)
LR_DECLARE_MESSAGE(start_activity_reply, LrStartActivityReply)
LR_DECLARE_MESSAGE(update_activity_reply, LrUpdateActivityReply)
LR_DECLARE_MESSAGE(end_activity_reply, LrEndActivityReply)
LR_DECLARE_MESSAGE(ping_request, LrPingRequest)
LR_DECLARE_MESSAGE(ping_reply, LrPingReply)
LR_DECLARE_MESSAGE(error_details, LrErrorDetails)
LR_DECLARE_MESSAGE(field_violation, LrFieldViolation)
LR_DECLARE_MESSAGE(channel, LrChannel)
LR_DECLARE_MESSAGE(create_channel_request, LrCreateChannelRequest)
LR_DECLARE_MESSAGE(create_channel_reply, LrCreateChannelReply)
LR_DECLARE_MESSAGE(list_channels_request, LrListChannelsRequest)
LR_DECLARE_MESSAGE(list_channels_reply, LrListChannelsReply)
LR_DECLARE_MESSAGE(delete_channel_request, LrDeleteChannelRequest)
LR_DECLARE_MESSAGE(delete_channel_reply, LrDeleteChannelReply)
LR_DECLARE_MESSAGE(event, LrEvent)
LR_DECLARE_MESSAGE(list_events_request, LrListEventsRequest)
LR_DECLARE_MESSAGE(list_events_reply, LrListEventsReply)
LR_DECLARE_MESSAGE(alert, LrAlert)
LR_DECLARE_MESSAGE(targets, LrTargets)
LR_DECLARE_MESSAGE(start_activity_request, LrStartActivityRequest)
LR_DECLARE_MESSAGE(update_activity_request, LrUpdateActivityRequest)
LR_DECLARE_MESSAGE(end_activity_request, LrEndActivityRequest)

LR_DECLARE_MESSAGE(admin_quotas, LrAdminQuotas)
LR_DECLARE_MESSAGE(admin_apns_credentials_info, LrAdminAPNsCredentialsInfo)
LR_DECLARE_MESSAGE(admin_app, LrAdminApp)
LR_DECLARE_MESSAGE(admin_create_app_request, LrAdminCreateAppRequest)
LR_DECLARE_MESSAGE(admin_update_app_request, LrAdminUpdateAppRequest)
LR_DECLARE_MESSAGE(admin_get_app_request, LrAdminGetAppRequest)
LR_DECLARE_MESSAGE(admin_disable_app_request, LrAdminDisableAppRequest)
LR_DECLARE_MESSAGE(admin_app_reply, LrAdminAppReply)
LR_DECLARE_MESSAGE(admin_list_apps_request, LrAdminListAppsRequest)
LR_DECLARE_MESSAGE(admin_list_apps_reply, LrAdminListAppsReply)
LR_DECLARE_MESSAGE(admin_put_apns_credentials_request, LrAdminPutAPNsCredentialsRequest)
LR_DECLARE_MESSAGE(admin_api_key, LrAdminAPIKey)
LR_DECLARE_MESSAGE(admin_create_api_key_request, LrAdminCreateAPIKeyRequest)
LR_DECLARE_MESSAGE(admin_create_api_key_reply, LrAdminCreateAPIKeyReply)
LR_DECLARE_MESSAGE(admin_list_api_keys_request, LrAdminListAPIKeysRequest)
LR_DECLARE_MESSAGE(admin_list_api_keys_reply, LrAdminListAPIKeysReply)
LR_DECLARE_MESSAGE(admin_revoke_api_key_request, LrAdminRevokeAPIKeyRequest)
LR_DECLARE_MESSAGE(admin_api_key_reply, LrAdminAPIKeyReply)
LR_DECLARE_MESSAGE(admin_get_app_stats_request, LrAdminGetAppStatsRequest)
LR_DECLARE_MESSAGE(admin_outcome_count, LrAdminOutcomeCount)
LR_DECLARE_MESSAGE(admin_app_stats, LrAdminAppStats)
LR_DECLARE_MESSAGE(admin_webhook, LrAdminWebhook)
LR_DECLARE_MESSAGE(admin_put_webhook_request, LrAdminPutWebhookRequest)
LR_DECLARE_MESSAGE(admin_put_webhook_reply, LrAdminPutWebhookReply)
LR_DECLARE_MESSAGE(admin_get_webhook_request, LrAdminGetWebhookRequest)
LR_DECLARE_MESSAGE(admin_delete_webhook_request, LrAdminDeleteWebhookRequest)
LR_DECLARE_MESSAGE(admin_reset_webhook_request, LrAdminResetWebhookRequest)
LR_DECLARE_MESSAGE(admin_webhook_reply, LrAdminWebhookReply)

#undef LR_DECLARE_MESSAGE

const ProtobufCEnumDescriptor *lr_token_kind_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_environment_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_register_token_result_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_target_kind_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_activity_state_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_channel_storage_policy_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_event_kind_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_priority_enum_descriptor(void);

/* Registries, for the contract check against protoc's descriptor set: the
 * messages and enums of package liverelay.v1, and apart from them those of
 * liverelay.admin.v1 (which has no enums). */
size_t lr_message_descriptor_count(void);
const ProtobufCMessageDescriptor *lr_message_descriptor_at(size_t i);
size_t lr_enum_descriptor_count(void);
const ProtobufCEnumDescriptor *lr_enum_descriptor_at(size_t i);
size_t lr_admin_message_descriptor_count(void);
const ProtobufCMessageDescriptor *lr_admin_message_descriptor_at(size_t i);

/* The address of protobuf_c_empty_string (an extern array Swift cannot address). */
static inline char *lr_empty_string(void) { return (char *)protobuf_c_empty_string; }

/* Initializes any message from its descriptor: zeroes it, sets the descriptor and
 * points proto3 strings at protobuf_c_empty_string. */
void lr_message_init(ProtobufCMessage *message, const ProtobufCMessageDescriptor *descriptor);

/* ---- codec speed helpers (lr_codec_support.c) ---- */

/*
 * protobuf_c_message_unpack with a bump allocator over a per-thread arena
 * (16 KiB, LR_UNPACK_ARENA_BYTES in liverelay_proto.c; allocated on the thread's
 * first use and freed at thread exit). Allocations that do not fit fall back to malloc. Returns NULL
 * where protobuf_c_message_unpack does. Every non-NULL result must be passed
 * to lr_free_unpacked, on the same thread, before the next lr_unpack on that
 * thread can use the arena again (a nested lr_unpack simply uses malloc).
 */
ProtobufCMessage *lr_unpack(const ProtobufCMessageDescriptor *descriptor, size_t len, const uint8_t *data);

/* protobuf_c_message_free_unpacked with the allocator lr_unpack used; releases the arena. */
void lr_free_unpacked(ProtobufCMessage *message);

/*
 * The same per-thread buffer as scratch memory for encoding (the C structs and
 * the packed bytes). Returns NULL with *capacity 0 when it is in use on this
 * thread (the caller then allocates its own); otherwise release it with
 * lr_scratch_release before the next lr_unpack or lr_scratch_acquire.
 */
void *lr_scratch_acquire(size_t *capacity);
void lr_scratch_release(void *scratch);

#ifdef __cplusplus
}
#endif

#endif /* LIVERELAY_PROTO_H */
