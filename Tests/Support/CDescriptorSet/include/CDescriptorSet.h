// Test support: hand-written protobuf-c descriptors for the subset of
// google/protobuf/descriptor.proto that the contract check reads from
// `protoc --descriptor_set_out`. Every field not declared here (options,
// source info, dependencies, ...) is an unknown field to protobuf-c and is
// kept aside untouched. The enums `label` and `type` are read as int32: the
// wire encoding is the same varint. json_name is unpacked but not compared:
// protobuf-c has no JSON names.
#ifndef CDESCRIPTORSET_H
#define CDESCRIPTORSET_H

#include <protobuf-c/protobuf-c.h>

typedef struct DSFieldOptions {
    ProtobufCMessage base;
    protobuf_c_boolean has_packed;
    protobuf_c_boolean packed;                       // 2
} DSFieldOptions;

typedef struct DSFieldDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    protobuf_c_boolean has_number;
    int32_t number;                                  // 3
    protobuf_c_boolean has_label;
    int32_t label;                                   // 4 (FieldDescriptorProto.Label)
    protobuf_c_boolean has_type;
    int32_t type;                                    // 5 (FieldDescriptorProto.Type)
    char *type_name;                                 // 6
    DSFieldOptions *options;                         // 8
    protobuf_c_boolean has_oneof_index;
    int32_t oneof_index;                             // 9
    char *json_name;                                 // 10
    protobuf_c_boolean has_proto3_optional;
    protobuf_c_boolean proto3_optional;              // 17
} DSFieldDescriptorProto;

typedef struct DSOneofDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
} DSOneofDescriptorProto;

typedef struct DSEnumValueDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    protobuf_c_boolean has_number;
    int32_t number;                                  // 2
} DSEnumValueDescriptorProto;

typedef struct DSEnumDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    size_t n_value;
    DSEnumValueDescriptorProto **value;              // 2
} DSEnumDescriptorProto;

typedef struct DSDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    size_t n_field;
    DSFieldDescriptorProto **field;                  // 2
    size_t n_nested_type;
    struct DSDescriptorProto **nested_type;          // 3
    size_t n_enum_type;
    DSEnumDescriptorProto **enum_type;               // 4
    size_t n_oneof_decl;
    DSOneofDescriptorProto **oneof_decl;             // 8
} DSDescriptorProto;

typedef struct DSMethodDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    char *input_type;                                // 2
    char *output_type;                               // 3
    protobuf_c_boolean has_client_streaming;
    protobuf_c_boolean client_streaming;             // 5
    protobuf_c_boolean has_server_streaming;
    protobuf_c_boolean server_streaming;             // 6
} DSMethodDescriptorProto;

typedef struct DSServiceDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    size_t n_method;
    DSMethodDescriptorProto **method;                // 2
} DSServiceDescriptorProto;

typedef struct DSFileDescriptorProto {
    ProtobufCMessage base;
    char *name;                                      // 1
    char *package;                                   // 2
    size_t n_message_type;
    DSDescriptorProto **message_type;                // 4
    size_t n_enum_type;
    DSEnumDescriptorProto **enum_type;               // 5
    size_t n_service;
    DSServiceDescriptorProto **service;              // 6
    char *syntax;                                    // 12
} DSFileDescriptorProto;

typedef struct DSFileDescriptorSet {
    ProtobufCMessage base;
    size_t n_file;
    DSFileDescriptorProto **file;                    // 1
} DSFileDescriptorSet;

/// The descriptor of google.protobuf.FileDescriptorSet (its real address).
const ProtobufCMessageDescriptor *ds_file_descriptor_set_descriptor(void);

/// Unpacks a serialized FileDescriptorSet; NULL when the bytes do not parse.
/// Free the result with ds_file_descriptor_set_free.
DSFileDescriptorSet *ds_file_descriptor_set_unpack(size_t len, const uint8_t *data);

void ds_file_descriptor_set_free(DSFileDescriptorSet *set);

#endif
