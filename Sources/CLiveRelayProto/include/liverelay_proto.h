/*
 * Hand-written protobuf-c bindings for Protos/liverelay/v1/liverelay.proto (proto3)
 * and Protos/liverelay/v1/activity.proto (proto2).
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
} LrEndActivityRequest;

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
LR_DECLARE_MESSAGE(alert, LrAlert)
LR_DECLARE_MESSAGE(targets, LrTargets)
LR_DECLARE_MESSAGE(start_activity_request, LrStartActivityRequest)
LR_DECLARE_MESSAGE(update_activity_request, LrUpdateActivityRequest)
LR_DECLARE_MESSAGE(end_activity_request, LrEndActivityRequest)

#undef LR_DECLARE_MESSAGE

const ProtobufCEnumDescriptor *lr_token_kind_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_environment_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_register_token_result_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_target_kind_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_activity_state_enum_descriptor(void);
const ProtobufCEnumDescriptor *lr_priority_enum_descriptor(void);

/* Registries, for the contract check against protoc's descriptor set. */
size_t lr_message_descriptor_count(void);
const ProtobufCMessageDescriptor *lr_message_descriptor_at(size_t i);
size_t lr_enum_descriptor_count(void);
const ProtobufCEnumDescriptor *lr_enum_descriptor_at(size_t i);

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
