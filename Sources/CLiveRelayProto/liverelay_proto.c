/*
 * Shared parts of the hand-written bindings: the generic init and the
 * registries that the contract check walks.
 */
#include "liverelay_proto.h"
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
  lr_alert_descriptor,
  lr_targets_descriptor,
  lr_start_activity_request_descriptor,
  lr_update_activity_request_descriptor,
  lr_end_activity_request_descriptor,
};

static const lr_enum_accessor lr_enums[] = {
  lr_token_kind_enum_descriptor,
  lr_environment_enum_descriptor,
  lr_register_token_result_enum_descriptor,
  lr_target_kind_enum_descriptor,
  lr_activity_state_enum_descriptor,
  lr_priority_enum_descriptor,
};

size_t lr_message_descriptor_count(void) { return sizeof(lr_messages) / sizeof(lr_messages[0]); }

const ProtobufCMessageDescriptor *lr_message_descriptor_at(size_t i) {
  return i < lr_message_descriptor_count() ? lr_messages[i]() : NULL;
}

size_t lr_enum_descriptor_count(void) { return sizeof(lr_enums) / sizeof(lr_enums[0]); }

const ProtobufCEnumDescriptor *lr_enum_descriptor_at(size_t i) {
  return i < lr_enum_descriptor_count() ? lr_enums[i]() : NULL;
}
