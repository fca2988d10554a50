/*
 * Hand-written descriptors for Protos/liverelay/v1/liverelay.proto (proto3).
 *
 * proto3 singular fields use PROTOBUF_C_LABEL_NONE: protobuf-c then omits zero
 * values when packing, as proto3 requires. Strings default to
 * protobuf_c_empty_string, which lr_message_init also sets. Field tables are
 * sorted by number; *_by_name lists field indices in strcmp order of the names.
 * The contract test checks all of it against protoc's descriptor set.
 */
#include "lr_descriptor_macros.h"

/* ---- enums ---- */

static const ProtobufCEnumValue token_kind_values[] = {
  { "TOKEN_KIND_UNSPECIFIED", "LR_TOKEN_KIND_UNSPECIFIED", 0 },
  { "TOKEN_KIND_PUSH_TO_START", "LR_TOKEN_KIND_PUSH_TO_START", 1 },
  { "TOKEN_KIND_UPDATE", "LR_TOKEN_KIND_UPDATE", 2 },
};
static const ProtobufCEnumValueIndex token_kind_by_name[] = {
  { "TOKEN_KIND_PUSH_TO_START", 1 },
  { "TOKEN_KIND_UNSPECIFIED", 0 },
  { "TOKEN_KIND_UPDATE", 2 },
};
static const ProtobufCIntRange token_kind_value_ranges[] = { { 0, 0 }, { 0, 3 } };
LR_ENUM(token_kind, LrTokenKind, TokenKind)

static const ProtobufCEnumValue environment_values[] = {
  { "ENVIRONMENT_UNSPECIFIED", "LR_ENVIRONMENT_UNSPECIFIED", 0 },
  { "ENVIRONMENT_SANDBOX", "LR_ENVIRONMENT_SANDBOX", 1 },
  { "ENVIRONMENT_PRODUCTION", "LR_ENVIRONMENT_PRODUCTION", 2 },
};
static const ProtobufCEnumValueIndex environment_by_name[] = {
  { "ENVIRONMENT_PRODUCTION", 2 },
  { "ENVIRONMENT_SANDBOX", 1 },
  { "ENVIRONMENT_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange environment_value_ranges[] = { { 0, 0 }, { 0, 3 } };
LR_ENUM(environment, LrEnvironment, Environment)

static const ProtobufCEnumValue register_token_result_values[] = {
  { "REGISTER_TOKEN_RESULT_UNSPECIFIED", "LR_REGISTER_TOKEN_RESULT_UNSPECIFIED", 0 },
  { "REGISTER_TOKEN_RESULT_CREATED", "LR_REGISTER_TOKEN_RESULT_CREATED", 1 },
  { "REGISTER_TOKEN_RESULT_ROTATED", "LR_REGISTER_TOKEN_RESULT_ROTATED", 2 },
  { "REGISTER_TOKEN_RESULT_UNCHANGED", "LR_REGISTER_TOKEN_RESULT_UNCHANGED", 3 },
  { "REGISTER_TOKEN_RESULT_REMOVED", "LR_REGISTER_TOKEN_RESULT_REMOVED", 4 },
  { "REGISTER_TOKEN_RESULT_NOT_FOUND", "LR_REGISTER_TOKEN_RESULT_NOT_FOUND", 5 },
};
static const ProtobufCEnumValueIndex register_token_result_by_name[] = {
  { "REGISTER_TOKEN_RESULT_CREATED", 1 },
  { "REGISTER_TOKEN_RESULT_NOT_FOUND", 5 },
  { "REGISTER_TOKEN_RESULT_REMOVED", 4 },
  { "REGISTER_TOKEN_RESULT_ROTATED", 2 },
  { "REGISTER_TOKEN_RESULT_UNCHANGED", 3 },
  { "REGISTER_TOKEN_RESULT_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange register_token_result_value_ranges[] = { { 0, 0 }, { 0, 6 } };
LR_ENUM(register_token_result, LrRegisterTokenResult, RegisterTokenResult)

static const ProtobufCEnumValue target_kind_values[] = {
  { "TARGET_KIND_UNSPECIFIED", "LR_TARGET_KIND_UNSPECIFIED", 0 },
  { "TARGET_KIND_PUSH_TO_START_TOKEN", "LR_TARGET_KIND_PUSH_TO_START_TOKEN", 1 },
  { "TARGET_KIND_EXTERNAL_USER_ID", "LR_TARGET_KIND_EXTERNAL_USER_ID", 2 },
  { "TARGET_KIND_ALL_DEVICES", "LR_TARGET_KIND_ALL_DEVICES", 3 },
};
static const ProtobufCEnumValueIndex target_kind_by_name[] = {
  { "TARGET_KIND_ALL_DEVICES", 3 },
  { "TARGET_KIND_EXTERNAL_USER_ID", 2 },
  { "TARGET_KIND_PUSH_TO_START_TOKEN", 1 },
  { "TARGET_KIND_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange target_kind_value_ranges[] = { { 0, 0 }, { 0, 4 } };
LR_ENUM(target_kind, LrTargetKind, TargetKind)

static const ProtobufCEnumValue activity_state_values[] = {
  { "ACTIVITY_STATE_UNSPECIFIED", "LR_ACTIVITY_STATE_UNSPECIFIED", 0 },
  { "ACTIVITY_STATE_STARTING", "LR_ACTIVITY_STATE_STARTING", 1 },
  { "ACTIVITY_STATE_ACTIVE", "LR_ACTIVITY_STATE_ACTIVE", 2 },
  { "ACTIVITY_STATE_ENDED", "LR_ACTIVITY_STATE_ENDED", 3 },
  { "ACTIVITY_STATE_EXPIRED", "LR_ACTIVITY_STATE_EXPIRED", 4 },
  { "ACTIVITY_STATE_DISMISSED", "LR_ACTIVITY_STATE_DISMISSED", 5 },
};
static const ProtobufCEnumValueIndex activity_state_by_name[] = {
  { "ACTIVITY_STATE_ACTIVE", 2 },
  { "ACTIVITY_STATE_DISMISSED", 5 },
  { "ACTIVITY_STATE_ENDED", 3 },
  { "ACTIVITY_STATE_EXPIRED", 4 },
  { "ACTIVITY_STATE_STARTING", 1 },
  { "ACTIVITY_STATE_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange activity_state_value_ranges[] = { { 0, 0 }, { 0, 6 } };
LR_ENUM(activity_state, LrActivityState, ActivityState)

static const ProtobufCEnumValue channel_storage_policy_values[] = {
  { "CHANNEL_STORAGE_POLICY_UNSPECIFIED", "LR_CHANNEL_STORAGE_POLICY_UNSPECIFIED", 0 },
  { "CHANNEL_STORAGE_POLICY_NO_STORAGE", "LR_CHANNEL_STORAGE_POLICY_NO_STORAGE", 1 },
  { "CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE", "LR_CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE", 2 },
};
static const ProtobufCEnumValueIndex channel_storage_policy_by_name[] = {
  { "CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE", 2 },
  { "CHANNEL_STORAGE_POLICY_NO_STORAGE", 1 },
  { "CHANNEL_STORAGE_POLICY_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange channel_storage_policy_value_ranges[] = { { 0, 0 }, { 0, 3 } };
LR_ENUM(channel_storage_policy, LrChannelStoragePolicy, ChannelStoragePolicy)

static const ProtobufCEnumValue event_kind_values[] = {
  { "EVENT_KIND_UNSPECIFIED", "LR_EVENT_KIND_UNSPECIFIED", 0 },
  { "EVENT_KIND_CALL_SETTLED", "LR_EVENT_KIND_CALL_SETTLED", 1 },
  { "EVENT_KIND_PUSH_FAILED", "LR_EVENT_KIND_PUSH_FAILED", 2 },
  { "EVENT_KIND_TOKEN_PRUNED", "LR_EVENT_KIND_TOKEN_PRUNED", 3 },
  { "EVENT_KIND_ACTIVITY_ENDED", "LR_EVENT_KIND_ACTIVITY_ENDED", 4 },
  { "EVENT_KIND_DISPATCH_HELD", "LR_EVENT_KIND_DISPATCH_HELD", 5 },
  { "EVENT_KIND_DISPATCH_RESUMED", "LR_EVENT_KIND_DISPATCH_RESUMED", 6 },
  { "EVENT_KIND_CHANNEL_DELETED", "LR_EVENT_KIND_CHANNEL_DELETED", 7 },
};
static const ProtobufCEnumValueIndex event_kind_by_name[] = {
  { "EVENT_KIND_ACTIVITY_ENDED", 4 },
  { "EVENT_KIND_CALL_SETTLED", 1 },
  { "EVENT_KIND_CHANNEL_DELETED", 7 },
  { "EVENT_KIND_DISPATCH_HELD", 5 },
  { "EVENT_KIND_DISPATCH_RESUMED", 6 },
  { "EVENT_KIND_PUSH_FAILED", 2 },
  { "EVENT_KIND_TOKEN_PRUNED", 3 },
  { "EVENT_KIND_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange event_kind_value_ranges[] = { { 0, 0 }, { 0, 8 } };
LR_ENUM(event_kind, LrEventKind, EventKind)

/* ---- RegisterTokenRequest ---- */

#define S LrRegisterTokenRequest
static const ProtobufCFieldDescriptor register_token_request_fields[] = {
  LR_FIELD_NONE(S, 1, app_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, kind, ENUM, &token_kind_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 3, token, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 4, environment, ENUM, &environment_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 5, attributes_type, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 6, activity_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 7, external_user_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 8, device_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 9, expires_at, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 10, remove, BOOL, NULL, NULL),
};
static const unsigned register_token_request_by_name[] = {
  5 /* activity_id */, 0 /* app_id */, 4 /* attributes_type */, 7 /* device_id */,
  3 /* environment */, 8 /* expires_at */, 6 /* external_user_id */, 1 /* kind */,
  9 /* remove */, 2 /* token */,
};
LR_MESSAGE(register_token_request, LrRegisterTokenRequest, RegisterTokenRequest)
#undef S

/* ---- RegisterTokenReply ---- */

#define S LrRegisterTokenReply
static const ProtobufCFieldDescriptor register_token_reply_fields[] = {
  LR_FIELD_NONE(S, 1, result, ENUM, &register_token_result_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 2, replaced_token, STRING, NULL, LR_EMPTY),
};
static const unsigned register_token_reply_by_name[] = { 1 /* replaced_token */, 0 /* result */ };
LR_MESSAGE(register_token_reply, LrRegisterTokenReply, RegisterTokenReply)
#undef S

/* ---- UnresolvedTarget ---- */

#define S LrUnresolvedTarget
static const ProtobufCFieldDescriptor unresolved_target_fields[] = {
  LR_FIELD_NONE(S, 1, kind, ENUM, &target_kind_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 2, value, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 3, reason, STRING, NULL, LR_EMPTY),
};
static const unsigned unresolved_target_by_name[] = { 0 /* kind */, 2 /* reason */, 1 /* value */ };
LR_MESSAGE(unresolved_target, LrUnresolvedTarget, UnresolvedTarget)
#undef S

/* ---- FailureCount ---- */

#define S LrFailureCount
static const ProtobufCFieldDescriptor failure_count_fields[] = {
  LR_FIELD_NONE(S, 1, reason, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, count, UINT32, NULL, NULL),
};
static const unsigned failure_count_by_name[] = { 1 /* count */, 0 /* reason */ };
LR_MESSAGE(failure_count, LrFailureCount, FailureCount)
#undef S

/* ---- DeliverySummary ---- */

#define S LrDeliverySummary
static const ProtobufCFieldDescriptor delivery_summary_fields[] = {
  LR_FIELD_NONE(S, 1, targeted, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 2, queued, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 3, delivered, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 4, failed, UINT32, NULL, NULL),
  LR_FIELD_REPEATED(S, 5, failures, MESSAGE, &failure_count_descriptor),
  LR_FIELD_NONE(S, 6, pruned, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 7, superseded, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 8, expired, UINT32, NULL, NULL),
  LR_FIELD_REPEATED(S, 9, unresolved, MESSAGE, &unresolved_target_descriptor),
  LR_FIELD_NONE(S, 10, complete, BOOL, NULL, NULL),
  LR_FIELD_NONE(S, 11, downgraded, UINT32, NULL, NULL),
};
static const unsigned delivery_summary_by_name[] = {
  9 /* complete */, 2 /* delivered */, 10 /* downgraded */, 7 /* expired */, 3 /* failed */,
  4 /* failures */, 5 /* pruned */, 1 /* queued */, 6 /* superseded */, 0 /* targeted */,
  8 /* unresolved */,
};
LR_MESSAGE(delivery_summary, LrDeliverySummary, DeliverySummary)
#undef S

/* ---- StartActivityReply ---- */

#define S LrStartActivityReply
static const ProtobufCFieldDescriptor start_activity_reply_fields[] = {
  LR_FIELD_NONE(S, 1, activity_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, timestamp, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 3, summary, MESSAGE, &delivery_summary_descriptor, NULL),
  LR_FIELD_NONE(S, 4, replayed, BOOL, NULL, NULL),
  LR_FIELD_NONE(S, 5, state, ENUM, &activity_state_enum_descriptor, NULL),
};
static const unsigned start_activity_reply_by_name[] = {
  0 /* activity_id */, 3 /* replayed */, 4 /* state */, 2 /* summary */, 1 /* timestamp */,
};
LR_MESSAGE(start_activity_reply, LrStartActivityReply, StartActivityReply)
#undef S

/* ---- UpdateActivityReply and EndActivityReply (same shape) ---- */

#define S LrUpdateActivityReply
static const ProtobufCFieldDescriptor update_activity_reply_fields[] = {
  LR_FIELD_NONE(S, 1, timestamp, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 2, summary, MESSAGE, &delivery_summary_descriptor, NULL),
  LR_FIELD_NONE(S, 3, replayed, BOOL, NULL, NULL),
  LR_FIELD_NONE(S, 4, state, ENUM, &activity_state_enum_descriptor, NULL),
};
static const unsigned update_activity_reply_by_name[] = {
  2 /* replayed */, 3 /* state */, 1 /* summary */, 0 /* timestamp */,
};
LR_MESSAGE(update_activity_reply, LrUpdateActivityReply, UpdateActivityReply)
#undef S

#define S LrEndActivityReply
static const ProtobufCFieldDescriptor end_activity_reply_fields[] = {
  LR_FIELD_NONE(S, 1, timestamp, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 2, summary, MESSAGE, &delivery_summary_descriptor, NULL),
  LR_FIELD_NONE(S, 3, replayed, BOOL, NULL, NULL),
  LR_FIELD_NONE(S, 4, state, ENUM, &activity_state_enum_descriptor, NULL),
};
static const unsigned end_activity_reply_by_name[] = {
  2 /* replayed */, 3 /* state */, 1 /* summary */, 0 /* timestamp */,
};
LR_MESSAGE(end_activity_reply, LrEndActivityReply, EndActivityReply)
#undef S

/* ---- PingRequest, PingReply ---- */

#define S LrPingRequest
static const ProtobufCFieldDescriptor ping_request_fields[] = {
  LR_FIELD_NONE(S, 1, payload, BYTES, NULL, NULL),
};
static const unsigned ping_request_by_name[] = { 0 /* payload */ };
LR_MESSAGE(ping_request, LrPingRequest, PingRequest)
#undef S

#define S LrPingReply
static const ProtobufCFieldDescriptor ping_reply_fields[] = {
  LR_FIELD_NONE(S, 1, payload, BYTES, NULL, NULL),
  LR_FIELD_NONE(S, 2, server_time_ms, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 3, server_version, STRING, NULL, LR_EMPTY),
};
static const unsigned ping_reply_by_name[] = {
  0 /* payload */, 1 /* server_time_ms */, 2 /* server_version */,
};
LR_MESSAGE(ping_reply, LrPingReply, PingReply)
#undef S

/* ---- FieldViolation, ErrorDetails ---- */

#define S LrFieldViolation
static const ProtobufCFieldDescriptor field_violation_fields[] = {
  LR_FIELD_NONE(S, 1, field, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, description, STRING, NULL, LR_EMPTY),
};
static const unsigned field_violation_by_name[] = { 1 /* description */, 0 /* field */ };
LR_MESSAGE(field_violation, LrFieldViolation, FieldViolation)
#undef S

#define S LrErrorDetails
static const ProtobufCFieldDescriptor error_details_fields[] = {
  LR_FIELD_REPEATED(S, 1, field_violations, MESSAGE, &field_violation_descriptor),
  LR_FIELD_NONE(S, 2, retry_after_ms, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 3, reason, STRING, NULL, LR_EMPTY),
};
static const unsigned error_details_by_name[] = {
  0 /* field_violations */, 2 /* reason */, 1 /* retry_after_ms */,
};
LR_MESSAGE(error_details, LrErrorDetails, ErrorDetails)
#undef S

/* ---- Channel ---- */

#define S LrChannel
static const ProtobufCFieldDescriptor channel_fields[] = {
  LR_FIELD_NONE(S, 1, app_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, channel_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 3, environment, ENUM, &environment_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 4, storage_policy, ENUM, &channel_storage_policy_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 5, created_at, INT64, NULL, NULL),
};
static const unsigned channel_by_name[] = {
  0 /* app_id */, 1 /* channel_id */, 4 /* created_at */, 2 /* environment */, 3 /* storage_policy */,
};
LR_MESSAGE(channel, LrChannel, Channel)
#undef S

/* ---- CreateChannelRequest, CreateChannelReply ---- */

#define S LrCreateChannelRequest
static const ProtobufCFieldDescriptor create_channel_request_fields[] = {
  LR_FIELD_NONE(S, 1, app_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, environment, ENUM, &environment_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 3, storage_policy, ENUM, &channel_storage_policy_enum_descriptor, NULL),
};
static const unsigned create_channel_request_by_name[] = {
  0 /* app_id */, 1 /* environment */, 2 /* storage_policy */,
};
LR_MESSAGE(create_channel_request, LrCreateChannelRequest, CreateChannelRequest)
#undef S

#define S LrCreateChannelReply
static const ProtobufCFieldDescriptor create_channel_reply_fields[] = {
  LR_FIELD_NONE(S, 1, channel, MESSAGE, &channel_descriptor, NULL),
};
static const unsigned create_channel_reply_by_name[] = { 0 /* channel */ };
LR_MESSAGE(create_channel_reply, LrCreateChannelReply, CreateChannelReply)
#undef S

/* ---- ListChannelsRequest, ListChannelsReply ---- */

#define S LrListChannelsRequest
static const ProtobufCFieldDescriptor list_channels_request_fields[] = {
  LR_FIELD_NONE(S, 1, app_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, environment, ENUM, &environment_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 3, page_size, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 4, page_token, STRING, NULL, LR_EMPTY),
};
static const unsigned list_channels_request_by_name[] = {
  0 /* app_id */, 1 /* environment */, 2 /* page_size */, 3 /* page_token */,
};
LR_MESSAGE(list_channels_request, LrListChannelsRequest, ListChannelsRequest)
#undef S

#define S LrListChannelsReply
static const ProtobufCFieldDescriptor list_channels_reply_fields[] = {
  LR_FIELD_REPEATED(S, 1, channels, MESSAGE, &channel_descriptor),
  LR_FIELD_NONE(S, 2, next_page_token, STRING, NULL, LR_EMPTY),
};
static const unsigned list_channels_reply_by_name[] = { 0 /* channels */, 1 /* next_page_token */ };
LR_MESSAGE(list_channels_reply, LrListChannelsReply, ListChannelsReply)
#undef S

/* ---- DeleteChannelRequest, DeleteChannelReply ---- */

#define S LrDeleteChannelRequest
static const ProtobufCFieldDescriptor delete_channel_request_fields[] = {
  LR_FIELD_NONE(S, 1, app_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, channel_id, STRING, NULL, LR_EMPTY),
};
static const unsigned delete_channel_request_by_name[] = { 0 /* app_id */, 1 /* channel_id */ };
LR_MESSAGE(delete_channel_request, LrDeleteChannelRequest, DeleteChannelRequest)
#undef S

LR_EMPTY_MESSAGE(delete_channel_reply, LrDeleteChannelReply, DeleteChannelReply)

/* ---- Event, ListEventsRequest, ListEventsReply ---- */

#define S LrEvent
static const ProtobufCFieldDescriptor event_fields[] = {
  LR_FIELD_NONE(S, 1, cursor, UINT64, NULL, NULL),
  LR_FIELD_NONE(S, 2, kind, ENUM, &event_kind_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 3, time_ms, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 4, activity_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 5, call_timestamp, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 6, idempotency_key, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 7, account, MESSAGE, &delivery_summary_descriptor, NULL),
  LR_FIELD_NONE(S, 8, token, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 9, token_kind, ENUM, &token_kind_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 10, reason, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 11, invalid_since_ms, INT64, NULL, NULL),
  LR_FIELD_NONE(S, 12, activity_state, ENUM, &activity_state_enum_descriptor, NULL),
  LR_FIELD_NONE(S, 13, channel_id, STRING, NULL, LR_EMPTY),
};
static const unsigned event_by_name[] = {
  6 /* account */, 3 /* activity_id */, 11 /* activity_state */, 4 /* call_timestamp */,
  12 /* channel_id */, 0 /* cursor */, 5 /* idempotency_key */, 10 /* invalid_since_ms */,
  1 /* kind */, 9 /* reason */, 2 /* time_ms */, 7 /* token */, 8 /* token_kind */,
};
LR_MESSAGE(event, LrEvent, Event)
#undef S

#define S LrListEventsRequest
static const ProtobufCFieldDescriptor list_events_request_fields[] = {
  LR_FIELD_NONE(S, 1, app_id, STRING, NULL, LR_EMPTY),
  LR_FIELD_NONE(S, 2, after_cursor, UINT64, NULL, NULL),
  LR_FIELD_NONE(S, 3, max_events, UINT32, NULL, NULL),
  LR_FIELD_NONE(S, 4, wait_ms, UINT32, NULL, NULL),
};
static const unsigned list_events_request_by_name[] = {
  1 /* after_cursor */, 0 /* app_id */, 2 /* max_events */, 3 /* wait_ms */,
};
LR_MESSAGE(list_events_request, LrListEventsRequest, ListEventsRequest)
#undef S

#define S LrListEventsReply
static const ProtobufCFieldDescriptor list_events_reply_fields[] = {
  LR_FIELD_REPEATED(S, 1, events, MESSAGE, &event_descriptor),
  LR_FIELD_NONE(S, 2, next_cursor, UINT64, NULL, NULL),
  LR_FIELD_NONE(S, 3, more, BOOL, NULL, NULL),
};
static const unsigned list_events_reply_by_name[] = { 0 /* events */, 2 /* more */, 1 /* next_cursor */ };
LR_MESSAGE(list_events_reply, LrListEventsReply, ListEventsReply)
#undef S
