/*
 * Private helpers for the hand-written descriptor tables. They only spell out
 * the ProtobufCFieldDescriptor initializers; every table, name order and range
 * is still written by hand in liverelay_v1.c, activity_v1.c and admin_v1.c.
 */
#ifndef LR_DESCRIPTOR_MACROS_H
#define LR_DESCRIPTOR_MACROS_H

#include "liverelay_proto.h"
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#define LR_COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* proto3 singular field (implicit presence): LABEL_NONE. */
#define LR_FIELD_NONE(S, num, fname, TYPE, desc, def)                            \
  { #fname, num, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_##TYPE, 0,               \
    offsetof(S, fname), desc, def, 0, 0, NULL, NULL }

/* proto2 optional scalar, enum or bool: presence in has_<name>. */
#define LR_FIELD_OPT_HAS(S, num, fname, TYPE, desc)                              \
  { #fname, num, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_##TYPE,              \
    offsetof(S, has_##fname), offsetof(S, fname), desc, NULL, 0, 0, NULL, NULL }

/* proto2 optional string or message: presence is a non-NULL pointer. */
#define LR_FIELD_OPT_PTR(S, num, fname, TYPE, desc)                              \
  { #fname, num, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_##TYPE, 0,           \
    offsetof(S, fname), desc, NULL, 0, 0, NULL, NULL }

/* repeated string or message (never packed): count in n_<name>. */
#define LR_FIELD_REPEATED(S, num, fname, TYPE, desc)                             \
  { #fname, num, PROTOBUF_C_LABEL_REPEATED, PROTOBUF_C_TYPE_##TYPE,              \
    offsetof(S, n_##fname), offsetof(S, fname), desc, NULL, 0, 0, NULL, NULL }

#define LR_EMPTY ((const void *)protobuf_c_empty_string)

/*
 * The init functions (protobuf-c's message_init, which unpack calls for every
 * message and sub-message, and lr_<snake>_init for encoding) copy a template
 * made once by lr_message_init: one memcpy instead of a memset and a walk over
 * every field descriptor (2-4% of a small request's decode).
 */
#define LR_INIT_FROM_TEMPLATE(snake, S)                                          \
  static S snake##_template;                                                    \
  static pthread_once_t snake##_template_once = PTHREAD_ONCE_INIT;              \
  static void snake##_make_template(void) {                                     \
    lr_message_init(&snake##_template.base, &snake##_descriptor); }             \
  static void snake##_init_any(ProtobufCMessage *m) {                           \
    pthread_once(&snake##_template_once, snake##_make_template);                \
    memcpy(m, &snake##_template, sizeof(S)); }                                  \
  const ProtobufCMessageDescriptor *lr_##snake##_descriptor(void) {             \
    return &snake##_descriptor; }                                               \
  void lr_##snake##_init(S *message) { snake##_init_any(&message->base); }

/*
 * The message descriptor, its accessor and its init function. Every message
 * here numbers its fields 1..n without gaps, so one range plus the closing
 * {0, n_fields} entry covers them (LR_RANGES_CONTIGUOUS).
 *
 * LR_MESSAGE_IN takes the proto package as a string literal ("liverelay.admin.v1");
 * LR_MESSAGE is the liverelay.v1 case and produces the same tables as before.
 */
#define LR_MESSAGE_IN(pkg, snake, S, Short)                                      \
  static const ProtobufCIntRange snake##_ranges[2] = {                          \
    { 1, 0 }, { 0, LR_COUNT(snake##_fields) } };                                \
  static void snake##_init_any(ProtobufCMessage *m);                            \
  static const ProtobufCMessageDescriptor snake##_descriptor = {                \
    PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,                                       \
    pkg "." #Short, #Short, #S, pkg,                                            \
    sizeof(S), LR_COUNT(snake##_fields), snake##_fields, snake##_by_name,       \
    1, snake##_ranges, snake##_init_any, NULL, NULL, NULL };                    \
  _Static_assert(LR_COUNT(snake##_fields) == LR_COUNT(snake##_by_name),         \
                 #snake ": by-name index size");                                \
  LR_INIT_FROM_TEMPLATE(snake, S)

#define LR_MESSAGE(snake, S, Short) LR_MESSAGE_IN("liverelay.v1", snake, S, Short)

/*
 * A message without fields (DeleteChannelReply). C has no empty arrays, so the
 * field tables are NULL, as protoc-c makes them; the ranges hold only the
 * closing {0, 0} entry (n_field_ranges 0), so that readers of
 * field_ranges[n_field_ranges], the contract check among them, find it.
 */
#define LR_EMPTY_MESSAGE(snake, S, Short)                                        \
  static const ProtobufCIntRange snake##_ranges[1] = { { 0, 0 } };              \
  static void snake##_init_any(ProtobufCMessage *m);                            \
  static const ProtobufCMessageDescriptor snake##_descriptor = {                \
    PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,                                       \
    "liverelay.v1." #Short, #Short, #S, "liverelay.v1",                         \
    sizeof(S), 0, NULL, NULL,                                                   \
    0, snake##_ranges, snake##_init_any, NULL, NULL, NULL };                    \
  static void snake##_init_any(ProtobufCMessage *m) {                           \
    lr_message_init(m, &snake##_descriptor); }                                  \
  const ProtobufCMessageDescriptor *lr_##snake##_descriptor(void) {             \
    return &snake##_descriptor; }                                               \
  void lr_##snake##_init(S *message) {                                          \
    lr_message_init(&message->base, &snake##_descriptor); }

#define LR_ENUM(snake, CName, Short)                                             \
  static const ProtobufCEnumDescriptor snake##_enum_descriptor = {              \
    PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC,                                          \
    "liverelay.v1." #Short, #Short, #CName, "liverelay.v1",                     \
    LR_COUNT(snake##_values), snake##_values,                                   \
    LR_COUNT(snake##_by_name), snake##_by_name,                                 \
    LR_COUNT(snake##_value_ranges) - 1, snake##_value_ranges,                   \
    NULL, NULL, NULL, NULL };                                                   \
  const ProtobufCEnumDescriptor *lr_##snake##_enum_descriptor(void) {           \
    return &snake##_enum_descriptor; }

#endif
