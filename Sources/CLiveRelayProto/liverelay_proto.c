/*
 * Shared parts of the hand-written bindings: the generic init, the
 * registries that the contract check walks, and the unpack arena.
 */
#include "liverelay_proto.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void lr_message_init(ProtobufCMessage *message, const ProtobufCMessageDescriptor *descriptor) {
  memset(message, 0, descriptor->sizeof_message);
  message->descriptor = descriptor;
  for (unsigned i = 0; i < descriptor->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &descriptor->fields[i];
    /* Only proto3 strings have a default here (protobuf_c_empty_string). */
    if (f->type == PROTOBUF_C_TYPE_STRING && f->label != PROTOBUF_C_LABEL_REPEATED &&
        f->default_value != NULL) {
      *(const char **)((char *)message + f->offset) = (const char *)f->default_value;
    }
  }
}

typedef const ProtobufCMessageDescriptor *(*lr_message_accessor)(void);
typedef const ProtobufCEnumDescriptor *(*lr_enum_accessor)(void);

/* Every message of package liverelay.v1, in .proto order (liverelay.proto, then activity.proto). */
static const lr_message_accessor lr_messages[] = {
  lr_register_token_request_descriptor,
  lr_register_token_reply_descriptor,
  lr_unresolved_target_descriptor,
  lr_failure_count_descriptor,
  lr_delivery_summary_descriptor,
  lr_start_activity_reply_descriptor,
  lr_update_activity_reply_descriptor,
  lr_end_activity_reply_descriptor,
  lr_ping_request_descriptor,
  lr_ping_reply_descriptor,
  lr_error_details_descriptor,
  lr_field_violation_descriptor,
  lr_channel_descriptor,
  lr_create_channel_request_descriptor,
  lr_create_channel_reply_descriptor,
  lr_list_channels_request_descriptor,
  lr_list_channels_reply_descriptor,
  lr_delete_channel_request_descriptor,
  lr_delete_channel_reply_descriptor,
  lr_event_descriptor,
  lr_list_events_request_descriptor,
  lr_list_events_reply_descriptor,
  lr_alert_descriptor,
  lr_targets_descriptor,
  lr_start_activity_request_descriptor,
  lr_update_activity_request_descriptor,
  lr_end_activity_request_descriptor,
};

/* Every message of package liverelay.admin.v1, in .proto order (admin.proto). */
static const lr_message_accessor lr_admin_messages[] = {
  lr_admin_quotas_descriptor,
  lr_admin_apns_credentials_info_descriptor,
  lr_admin_app_descriptor,
  lr_admin_create_app_request_descriptor,
  lr_admin_update_app_request_descriptor,
  lr_admin_get_app_request_descriptor,
  lr_admin_disable_app_request_descriptor,
  lr_admin_app_reply_descriptor,
  lr_admin_list_apps_request_descriptor,
  lr_admin_list_apps_reply_descriptor,
  lr_admin_put_apns_credentials_request_descriptor,
  lr_admin_api_key_descriptor,
  lr_admin_create_api_key_request_descriptor,
  lr_admin_create_api_key_reply_descriptor,
  lr_admin_list_api_keys_request_descriptor,
  lr_admin_list_api_keys_reply_descriptor,
  lr_admin_revoke_api_key_request_descriptor,
  lr_admin_api_key_reply_descriptor,
  lr_admin_get_app_stats_request_descriptor,
  lr_admin_outcome_count_descriptor,
  lr_admin_app_stats_descriptor,
  lr_admin_webhook_descriptor,
  lr_admin_put_webhook_request_descriptor,
  lr_admin_put_webhook_reply_descriptor,
  lr_admin_get_webhook_request_descriptor,
  lr_admin_delete_webhook_request_descriptor,
  lr_admin_reset_webhook_request_descriptor,
  lr_admin_webhook_reply_descriptor,
};

static const lr_enum_accessor lr_enums[] = {
  lr_token_kind_enum_descriptor,
  lr_environment_enum_descriptor,
  lr_register_token_result_enum_descriptor,
  lr_target_kind_enum_descriptor,
  lr_activity_state_enum_descriptor,
  lr_channel_storage_policy_enum_descriptor,
  lr_event_kind_enum_descriptor,
  lr_priority_enum_descriptor,
};

size_t lr_message_descriptor_count(void) { return sizeof(lr_messages) / sizeof(lr_messages[0]); }

const ProtobufCMessageDescriptor *lr_message_descriptor_at(size_t i) {
  return i < lr_message_descriptor_count() ? lr_messages[i]() : NULL;
}

size_t lr_admin_message_descriptor_count(void) {
  return sizeof(lr_admin_messages) / sizeof(lr_admin_messages[0]);
}

const ProtobufCMessageDescriptor *lr_admin_message_descriptor_at(size_t i) {
  return i < lr_admin_message_descriptor_count() ? lr_admin_messages[i]() : NULL;
}

size_t lr_enum_descriptor_count(void) { return sizeof(lr_enums) / sizeof(lr_enums[0]); }

const ProtobufCEnumDescriptor *lr_enum_descriptor_at(size_t i) {
  return i < lr_enum_descriptor_count() ? lr_enums[i]() : NULL;
}

/*
 * A bump allocator for protobuf_c_message_unpack, and the same per-thread
 * buffer as scratch space for building the C structs that pack encodes.
 *
 * Why: with the default allocator every unpacked string, sub-message and
 * repeated-field array is its own malloc, and protobuf_c_message_free_unpacked
 * frees each one again: 10-13% of a request decode. Here they come from one
 * per-thread buffer that is reset on every decode; free is a no-op for arena
 * pieces and free() for the malloc fallback (messages larger than the arena),
 * so protobuf_c_message_free_unpacked still releases everything it must.
 * When no piece of a decode fell back to malloc, that walk would only call the
 * no-op free: lr_free_unpacked then just releases the arena (3-4% of a decode).
 */

#define LR_UNPACK_ARENA_BYTES (16 * 1024)

typedef struct {
  ProtobufCAllocator allocator;
  unsigned char *base;
  size_t used;
  size_t last;   /* offset of the most recent arena allocation (for LIFO frees) */
  size_t fallbacks; /* malloc fallbacks since the last lr_unpack */
  int busy;
} lr_arena;

static pthread_key_t lr_arena_key;
static pthread_once_t lr_arena_once = PTHREAD_ONCE_INIT;
static _Thread_local lr_arena *lr_tls_arena;

static void lr_arena_destroy(void *p) {
  lr_arena *a = p;
  lr_tls_arena = NULL; /* runs on the exiting thread: no use after free from later destructors */
  if (a) {
    free(a->base);
    free(a);
  }
}

static void lr_arena_make_key(void) { (void)pthread_key_create(&lr_arena_key, lr_arena_destroy); }

static void *lr_arena_alloc(void *data, size_t size) {
  lr_arena *a = data;
  size_t rounded = (size + 15) & ~(size_t)15;
  if (rounded >= size && rounded <= LR_UNPACK_ARENA_BYTES - a->used) {
    a->last = a->used;
    a->used += rounded;
    return a->base + a->last;
  }
  a->fallbacks++;
  return malloc(size);
}

static void lr_arena_free(void *data, void *pointer) {
  lr_arena *a = data;
  unsigned char *p = pointer;
  if (p >= a->base && p < a->base + LR_UNPACK_ARENA_BYTES) {
    /* Arena piece: nothing to free; give back the top one (scratch slabs). */
    if (p == a->base + a->last && a->last < a->used) a->used = a->last;
    return;
  }
  free(pointer);
}

static lr_arena *lr_arena_get(void) {
  lr_arena *a = lr_tls_arena;
  if (a) return a;
  pthread_once(&lr_arena_once, lr_arena_make_key);
  a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->base = malloc(LR_UNPACK_ARENA_BYTES);
  if (!a->base) {
    free(a);
    return NULL;
  }
  a->allocator.alloc = lr_arena_alloc;
  a->allocator.free = lr_arena_free;
  a->allocator.allocator_data = a;
  if (pthread_setspecific(lr_arena_key, a) != 0) {
    lr_arena_destroy(a);
    return NULL;
  }
  lr_tls_arena = a;
  return a;
}

ProtobufCMessage *lr_unpack(const ProtobufCMessageDescriptor *descriptor, size_t len, const uint8_t *data) {
  lr_arena *a = lr_arena_get();
  if (!a || a->busy) return protobuf_c_message_unpack(descriptor, NULL, len, data);
  a->busy = 1;
  a->used = 0;
  a->last = 0;
  a->fallbacks = 0;
  ProtobufCMessage *message = protobuf_c_message_unpack(descriptor, &a->allocator, len, data);
  if (!message) a->busy = 0;
  return message;
}

void *lr_scratch_acquire(size_t *capacity) {
  lr_arena *a = lr_arena_get();
  if (!a || a->busy) {
    *capacity = 0;
    return NULL;
  }
  a->busy = 1;
  *capacity = LR_UNPACK_ARENA_BYTES;
  return a->base;
}

void lr_scratch_release(void *scratch) {
  lr_arena *a = lr_tls_arena;
  if (scratch && a && scratch == a->base) a->busy = 0;
}

void lr_free_unpacked(ProtobufCMessage *message) {
  if (!message) return;
  lr_arena *a = lr_tls_arena;
  unsigned char *p = (unsigned char *)message;
  if (a && a->busy && p >= a->base && p < a->base + LR_UNPACK_ARENA_BYTES) {
    /* Every piece in the arena: protobuf-c's free walk would free nothing. */
    if (a->fallbacks != 0) protobuf_c_message_free_unpacked(message, &a->allocator);
    a->busy = 0;
    return;
  }
  /* Unpacked with malloc: nested decode, no arena, or the top struct itself did not fit. */
  protobuf_c_message_free_unpacked(message, NULL);
}
