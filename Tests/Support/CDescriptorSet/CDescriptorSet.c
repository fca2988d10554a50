// Hand-written protobuf-c descriptors for a subset of descriptor.proto (see
// the header). Tables keep protobuf-c's invariants: fields sorted by number,
// a by-name index in name order, field ranges closed by {0, n_fields}.
#include "CDescriptorSet.h"
#include <stddef.h>

#define DS_FIELD(num, nm, lbl, typ, quant, T, member, desc) \
    { nm, num, PROTOBUF_C_LABEL_##lbl, PROTOBUF_C_TYPE_##typ, quant, \
      offsetof(T, member), desc, NULL, 0, 0, NULL, NULL }
// proto2 optional scalar: presence in has_<member>.
#define DS_SCALAR(num, nm, typ, T, member) \
    DS_FIELD(num, nm, OPTIONAL, typ, offsetof(T, has_##member), T, member, NULL)
// proto2 optional string: presence is a non-NULL pointer.
#define DS_STRING(num, nm, T, member) \
    DS_FIELD(num, nm, OPTIONAL, STRING, 0, T, member, NULL)
#define DS_MESSAGE(num, nm, T, member, desc) \
    DS_FIELD(num, nm, OPTIONAL, MESSAGE, 0, T, member, desc)
#define DS_REPEATED(num, nm, T, member, desc) \
    DS_FIELD(num, nm, REPEATED, MESSAGE, offsetof(T, n_##member), T, member, desc)

#define DS_DESCRIPTOR(var, short, T, fields, by_name, ranges) \
    static const ProtobufCMessageDescriptor var = { \
        PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC, "google.protobuf." short, short, \
        "DS" short, "google.protobuf", sizeof(T), \
        sizeof(fields) / sizeof(fields[0]), fields, by_name, \
        sizeof(ranges) / sizeof(ranges[0]) - 1, ranges, \
        NULL /* unpack initialises generically; nothing here builds messages */, \
        NULL, NULL, NULL }

static const ProtobufCMessageDescriptor file_set_d, file_d, message_d, field_d,
    field_options_d, oneof_d, enum_d, enum_value_d, service_d, method_d;

// FieldOptions
static const ProtobufCFieldDescriptor field_options_fields[] = {
    DS_SCALAR(2, "packed", BOOL, DSFieldOptions, packed),
};
static const unsigned field_options_by_name[] = { 0 };
static const ProtobufCIntRange field_options_ranges[] = { { 2, 0 }, { 0, 1 } };
DS_DESCRIPTOR(field_options_d, "FieldOptions", DSFieldOptions,
              field_options_fields, field_options_by_name, field_options_ranges);

// FieldDescriptorProto
static const ProtobufCFieldDescriptor field_fields[] = {
    DS_STRING(1, "name", DSFieldDescriptorProto, name),
    DS_SCALAR(3, "number", INT32, DSFieldDescriptorProto, number),
    DS_SCALAR(4, "label", INT32, DSFieldDescriptorProto, label),
    DS_SCALAR(5, "type", INT32, DSFieldDescriptorProto, type),
    DS_STRING(6, "type_name", DSFieldDescriptorProto, type_name),
    DS_MESSAGE(8, "options", DSFieldDescriptorProto, options, &field_options_d),
    DS_SCALAR(9, "oneof_index", INT32, DSFieldDescriptorProto, oneof_index),
    DS_STRING(10, "json_name", DSFieldDescriptorProto, json_name),
    DS_SCALAR(17, "proto3_optional", BOOL, DSFieldDescriptorProto, proto3_optional),
};
// json_name, label, name, number, oneof_index, options, proto3_optional, type, type_name
static const unsigned field_by_name[] = { 7, 2, 0, 1, 6, 5, 8, 3, 4 };
static const ProtobufCIntRange field_ranges[] = {
    { 1, 0 }, { 3, 1 }, { 8, 5 }, { 17, 8 }, { 0, 9 },
};
DS_DESCRIPTOR(field_d, "FieldDescriptorProto", DSFieldDescriptorProto,
              field_fields, field_by_name, field_ranges);

// OneofDescriptorProto
static const ProtobufCFieldDescriptor oneof_fields[] = {
    DS_STRING(1, "name", DSOneofDescriptorProto, name),
};
static const unsigned oneof_by_name[] = { 0 };
static const ProtobufCIntRange oneof_ranges[] = { { 1, 0 }, { 0, 1 } };
DS_DESCRIPTOR(oneof_d, "OneofDescriptorProto", DSOneofDescriptorProto,
              oneof_fields, oneof_by_name, oneof_ranges);

// EnumValueDescriptorProto
static const ProtobufCFieldDescriptor enum_value_fields[] = {
    DS_STRING(1, "name", DSEnumValueDescriptorProto, name),
    DS_SCALAR(2, "number", INT32, DSEnumValueDescriptorProto, number),
};
static const unsigned enum_value_by_name[] = { 0, 1 };
static const ProtobufCIntRange enum_value_ranges[] = { { 1, 0 }, { 0, 2 } };
DS_DESCRIPTOR(enum_value_d, "EnumValueDescriptorProto", DSEnumValueDescriptorProto,
              enum_value_fields, enum_value_by_name, enum_value_ranges);

// EnumDescriptorProto
static const ProtobufCFieldDescriptor enum_fields[] = {
    DS_STRING(1, "name", DSEnumDescriptorProto, name),
    DS_REPEATED(2, "value", DSEnumDescriptorProto, value, &enum_value_d),
};
static const unsigned enum_by_name[] = { 0, 1 };
static const ProtobufCIntRange enum_ranges[] = { { 1, 0 }, { 0, 2 } };
DS_DESCRIPTOR(enum_d, "EnumDescriptorProto", DSEnumDescriptorProto,
              enum_fields, enum_by_name, enum_ranges);

// DescriptorProto
static const ProtobufCFieldDescriptor message_fields[] = {
    DS_STRING(1, "name", DSDescriptorProto, name),
    DS_REPEATED(2, "field", DSDescriptorProto, field, &field_d),
    DS_REPEATED(3, "nested_type", DSDescriptorProto, nested_type, &message_d),
    DS_REPEATED(4, "enum_type", DSDescriptorProto, enum_type, &enum_d),
    DS_REPEATED(8, "oneof_decl", DSDescriptorProto, oneof_decl, &oneof_d),
};
// enum_type, field, name, nested_type, oneof_decl
static const unsigned message_by_name[] = { 3, 1, 0, 2, 4 };
static const ProtobufCIntRange message_ranges[] = { { 1, 0 }, { 8, 4 }, { 0, 5 } };
DS_DESCRIPTOR(message_d, "DescriptorProto", DSDescriptorProto,
              message_fields, message_by_name, message_ranges);

// MethodDescriptorProto
static const ProtobufCFieldDescriptor method_fields[] = {
    DS_STRING(1, "name", DSMethodDescriptorProto, name),
    DS_STRING(2, "input_type", DSMethodDescriptorProto, input_type),
    DS_STRING(3, "output_type", DSMethodDescriptorProto, output_type),
    DS_SCALAR(5, "client_streaming", BOOL, DSMethodDescriptorProto, client_streaming),
    DS_SCALAR(6, "server_streaming", BOOL, DSMethodDescriptorProto, server_streaming),
};
// client_streaming, input_type, name, output_type, server_streaming
static const unsigned method_by_name[] = { 3, 1, 0, 2, 4 };
static const ProtobufCIntRange method_ranges[] = { { 1, 0 }, { 5, 3 }, { 0, 5 } };
DS_DESCRIPTOR(method_d, "MethodDescriptorProto", DSMethodDescriptorProto,
              method_fields, method_by_name, method_ranges);

// ServiceDescriptorProto
static const ProtobufCFieldDescriptor service_fields[] = {
    DS_STRING(1, "name", DSServiceDescriptorProto, name),
    DS_REPEATED(2, "method", DSServiceDescriptorProto, method, &method_d),
};
static const unsigned service_by_name[] = { 1, 0 };  // method, name
static const ProtobufCIntRange service_ranges[] = { { 1, 0 }, { 0, 2 } };
DS_DESCRIPTOR(service_d, "ServiceDescriptorProto", DSServiceDescriptorProto,
              service_fields, service_by_name, service_ranges);

// FileDescriptorProto
static const ProtobufCFieldDescriptor file_fields[] = {
    DS_STRING(1, "name", DSFileDescriptorProto, name),
    DS_STRING(2, "package", DSFileDescriptorProto, package),
    DS_REPEATED(4, "message_type", DSFileDescriptorProto, message_type, &message_d),
    DS_REPEATED(5, "enum_type", DSFileDescriptorProto, enum_type, &enum_d),
    DS_REPEATED(6, "service", DSFileDescriptorProto, service, &service_d),
    DS_STRING(12, "syntax", DSFileDescriptorProto, syntax),
};
// enum_type, message_type, name, package, service, syntax
static const unsigned file_by_name[] = { 3, 2, 0, 1, 4, 5 };
static const ProtobufCIntRange file_ranges[] = { { 1, 0 }, { 4, 2 }, { 12, 5 }, { 0, 6 } };
DS_DESCRIPTOR(file_d, "FileDescriptorProto", DSFileDescriptorProto,
              file_fields, file_by_name, file_ranges);

// FileDescriptorSet
static const ProtobufCFieldDescriptor file_set_fields[] = {
    DS_REPEATED(1, "file", DSFileDescriptorSet, file, &file_d),
};
static const unsigned file_set_by_name[] = { 0 };
static const ProtobufCIntRange file_set_ranges[] = { { 1, 0 }, { 0, 1 } };
DS_DESCRIPTOR(file_set_d, "FileDescriptorSet", DSFileDescriptorSet,
              file_set_fields, file_set_by_name, file_set_ranges);

const ProtobufCMessageDescriptor *ds_file_descriptor_set_descriptor(void) {
    return &file_set_d;
}

DSFileDescriptorSet *ds_file_descriptor_set_unpack(size_t len, const uint8_t *data) {
    return (DSFileDescriptorSet *)protobuf_c_message_unpack(&file_set_d, NULL, len, data);
}

void ds_file_descriptor_set_free(DSFileDescriptorSet *set) {
    if (set != NULL) {
        protobuf_c_message_free_unpacked(&set->base, NULL);
    }
}
