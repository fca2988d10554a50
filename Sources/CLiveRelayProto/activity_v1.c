/*
 * Hand-written descriptors for Protos/liverelay/v1/activity.proto (proto2).
 *
 * proto2 `optional` scalars, enums and bools use PROTOBUF_C_LABEL_OPTIONAL with
 * quantifier_offset at has_<name>; optional strings and messages use a NULL
 * pointer for "absent" (quantifier_offset 0, no default), so a present empty
 * string is still sent. Repeated strings are never packed.
 */
#include "lr_descriptor_macros.h"

/* Priority is sparse (0, 5, 10): one value range per value, then the closing entry. */
static const ProtobufCEnumValue priority_values[] = {
  { "PRIORITY_UNSPECIFIED", "LR_PRIORITY_UNSPECIFIED", 0 },
  { "PRIORITY_LOW", "LR_PRIORITY_LOW", 5 },
  { "PRIORITY_HIGH", "LR_PRIORITY_HIGH", 10 },
};
static const ProtobufCEnumValueIndex priority_by_name[] = {
  { "PRIORITY_HIGH", 2 },
  { "PRIORITY_LOW", 1 },
  { "PRIORITY_UNSPECIFIED", 0 },
};
static const ProtobufCIntRange priority_value_ranges[] = { { 0, 0 }, { 5, 1 }, { 10, 2 }, { 0, 3 } };
LR_ENUM(priority, LrPriority, Priority)

/* ---- Alert ---- */

#define S LrAlert
static const ProtobufCFieldDescriptor alert_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, title, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, body, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 3, sound, STRING, NULL),
};
static const unsigned alert_by_name[] = { 1 /* body */, 2 /* sound */, 0 /* title */ };
LR_MESSAGE(alert, LrAlert, Alert)
#undef S

/* ---- Targets ---- */

#define S LrTargets
static const ProtobufCFieldDescriptor targets_fields[] = {
  LR_FIELD_REPEATED(S, 1, push_to_start_tokens, STRING, NULL),
  LR_FIELD_REPEATED(S, 2, external_user_ids, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 3, all_devices, BOOL, NULL),
};
static const unsigned targets_by_name[] = {
  2 /* all_devices */, 1 /* external_user_ids */, 0 /* push_to_start_tokens */,
};
LR_MESSAGE(targets, LrTargets, Targets)
#undef S

/* ---- StartActivityRequest ---- */

#define S LrStartActivityRequest
static const ProtobufCFieldDescriptor start_activity_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, activity_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 3, attributes_type, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 4, attributes_json, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 5, content_state_json, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 6, alert, MESSAGE, &alert_descriptor),
  LR_FIELD_OPT_HAS(S, 7, stale_date, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 8, dismissal_date, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 9, relevance_score, DOUBLE, NULL),
  LR_FIELD_OPT_HAS(S, 10, priority, ENUM, &priority_enum_descriptor),
  LR_FIELD_OPT_PTR(S, 11, targets, MESSAGE, &targets_descriptor),
  LR_FIELD_OPT_PTR(S, 12, idempotency_key, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 13, wait_for_delivery, BOOL, NULL),
  LR_FIELD_OPT_PTR(S, 14, channel_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 15, input_push_token, BOOL, NULL),
  LR_FIELD_OPT_HAS(S, 16, strict_priority_budget, BOOL, NULL),
};
static const unsigned start_activity_request_by_name[] = {
  1 /* activity_id */, 5 /* alert */, 0 /* app_id */, 3 /* attributes_json */,
  2 /* attributes_type */, 13 /* channel_id */, 4 /* content_state_json */, 7 /* dismissal_date */,
  11 /* idempotency_key */, 14 /* input_push_token */, 9 /* priority */, 8 /* relevance_score */,
  6 /* stale_date */, 15 /* strict_priority_budget */, 10 /* targets */, 12 /* wait_for_delivery */,
};
LR_MESSAGE(start_activity_request, LrStartActivityRequest, StartActivityRequest)
#undef S

/* ---- UpdateActivityRequest ---- */

#define S LrUpdateActivityRequest
static const ProtobufCFieldDescriptor update_activity_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, activity_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 3, content_state_json, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 4, alert, MESSAGE, &alert_descriptor),
  LR_FIELD_OPT_HAS(S, 5, stale_date, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 6, dismissal_date, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 7, relevance_score, DOUBLE, NULL),
  LR_FIELD_OPT_HAS(S, 8, priority, ENUM, &priority_enum_descriptor),
  LR_FIELD_OPT_HAS(S, 9, end_activity, BOOL, NULL),
  LR_FIELD_OPT_PTR(S, 10, idempotency_key, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 11, wait_for_delivery, BOOL, NULL),
  LR_FIELD_OPT_PTR(S, 12, channel_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 13, channel_only, BOOL, NULL),
  LR_FIELD_OPT_HAS(S, 14, strict_priority_budget, BOOL, NULL),
};
static const unsigned update_activity_request_by_name[] = {
  1 /* activity_id */, 3 /* alert */, 0 /* app_id */, 11 /* channel_id */, 12 /* channel_only */,
  2 /* content_state_json */, 5 /* dismissal_date */, 8 /* end_activity */, 9 /* idempotency_key */,
  7 /* priority */, 6 /* relevance_score */, 4 /* stale_date */, 13 /* strict_priority_budget */,
  10 /* wait_for_delivery */,
};
LR_MESSAGE(update_activity_request, LrUpdateActivityRequest, UpdateActivityRequest)
#undef S

/* ---- EndActivityRequest ---- */

#define S LrEndActivityRequest
static const ProtobufCFieldDescriptor end_activity_request_fields[] = {
  LR_FIELD_OPT_PTR(S, 1, app_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 2, activity_id, STRING, NULL),
  LR_FIELD_OPT_PTR(S, 3, content_state_json, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 4, dismissal_date, INT64, NULL),
  LR_FIELD_OPT_PTR(S, 5, idempotency_key, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 6, wait_for_delivery, BOOL, NULL),
  LR_FIELD_OPT_PTR(S, 7, alert, MESSAGE, &alert_descriptor),
  LR_FIELD_OPT_HAS(S, 8, priority, ENUM, &priority_enum_descriptor),
  LR_FIELD_OPT_HAS(S, 9, stale_date, INT64, NULL),
  LR_FIELD_OPT_HAS(S, 10, relevance_score, DOUBLE, NULL),
  LR_FIELD_OPT_PTR(S, 11, channel_id, STRING, NULL),
  LR_FIELD_OPT_HAS(S, 12, channel_only, BOOL, NULL),
  LR_FIELD_OPT_HAS(S, 13, strict_priority_budget, BOOL, NULL),
};
static const unsigned end_activity_request_by_name[] = {
  1 /* activity_id */, 6 /* alert */, 0 /* app_id */, 10 /* channel_id */, 11 /* channel_only */,
  2 /* content_state_json */, 3 /* dismissal_date */, 4 /* idempotency_key */, 7 /* priority */,
  9 /* relevance_score */, 8 /* stale_date */, 12 /* strict_priority_budget */, 5 /* wait_for_delivery */,
};
LR_MESSAGE(end_activity_request, LrEndActivityRequest, EndActivityRequest)
#undef S
