import CLiveRelayProto
import LiveRelayMessages

/// Reads what the hand-written bindings say: the protobuf-c descriptors of
/// CLiveRelayProto, the methods of LiveRelayMethod and AdminMethod and the Swift message types.
enum BindingContract {
    /// Every Swift message type. A message added to the .proto without a type here fails the contract.
    static let swiftTypes: [any LiveRelayMessage.Type] = v1SwiftTypes + adminSwiftTypes

    /// liverelay.v1 (liverelay.proto, activity.proto).
    static let v1SwiftTypes: [any LiveRelayMessage.Type] = [
        RegisterTokenRequest.self, RegisterTokenReply.self,
        StartActivityRequest.self, StartActivityReply.self,
        UpdateActivityRequest.self, UpdateActivityReply.self,
        EndActivityRequest.self, EndActivityReply.self,
        PingRequest.self, PingReply.self,
        DeliverySummary.self, FailureCount.self, UnresolvedTarget.self,
        Alert.self, Targets.self, ErrorDetails.self, FieldViolation.self,
        BroadcastChannel.self, CreateChannelRequest.self, CreateChannelReply.self,
        ListChannelsRequest.self, ListChannelsReply.self, DeleteChannelRequest.self, DeleteChannelReply.self,
        Event.self, ListEventsRequest.self, ListEventsReply.self,
    ]

    /// liverelay.admin.v1 (admin.proto).
    static let adminSwiftTypes: [any LiveRelayMessage.Type] = [
        Admin.Quotas.self, Admin.APNsCredentialsInfo.self, Admin.App.self,
        Admin.CreateAppRequest.self, Admin.UpdateAppRequest.self, Admin.GetAppRequest.self,
        Admin.DisableAppRequest.self, Admin.AppReply.self, Admin.ListAppsRequest.self, Admin.ListAppsReply.self,
        Admin.PutAPNsCredentialsRequest.self, Admin.APIKey.self, Admin.CreateAPIKeyRequest.self,
        Admin.CreateAPIKeyReply.self, Admin.ListAPIKeysRequest.self, Admin.ListAPIKeysReply.self,
        Admin.RevokeAPIKeyRequest.self, Admin.APIKeyReply.self, Admin.GetAppStatsRequest.self,
        Admin.OutcomeCount.self, Admin.AppStats.self, Admin.Webhook.self, Admin.PutWebhookRequest.self,
        Admin.PutWebhookReply.self, Admin.GetWebhookRequest.self, Admin.DeleteWebhookRequest.self,
        Admin.ResetWebhookRequest.self, Admin.WebhookReply.self,
    ]

    /// Both registries: liverelay.v1's, then liverelay.admin.v1's.
    static func messageDescriptors() -> [UnsafePointer<ProtobufCMessageDescriptor>] {
        (0..<lr_message_descriptor_count()).compactMap { lr_message_descriptor_at($0) }
            + (0..<lr_admin_message_descriptor_count()).compactMap { lr_admin_message_descriptor_at($0) }
    }

    static func enumDescriptors() -> [UnsafePointer<ProtobufCEnumDescriptor>] {
        (0..<lr_enum_descriptor_count()).compactMap { lr_enum_descriptor_at($0) }
    }

    static func load() -> ContractModel {
        var model = ContractModel()
        for descriptor in messageDescriptors() {
            let d = descriptor.pointee
            var fields: [String: ContractModel.Field] = [:]
            for f in UnsafeBufferPointer(start: d.fields, count: Int(d.n_fields)) {
                fields[String(cString: f.name)] = field(f)
            }
            model.messages[String(cString: d.name)] = fields
        }
        for descriptor in enumDescriptors() {
            let e = descriptor.pointee
            var values: [String: Int32] = [:]
            for v in UnsafeBufferPointer(start: e.values, count: Int(e.n_values)) {
                values[String(cString: v.name)] = v.value
            }
            model.enums[String(cString: e.name)] = values
        }
        for method in LiveRelayMethod.allCases {
            model.methods[method.rawValue] = ContractModel.Method(
                request: method.requestProtoName, reply: method.replyProtoName)
        }
        for method in AdminMethod.allCases {
            model.methods[method.rawValue] = ContractModel.Method(
                request: method.requestProtoName, reply: method.replyProtoName)
        }
        model.swiftTypes = Set(swiftTypes.map { $0.protoName })
        return model
    }

    private static func field(_ f: ProtobufCFieldDescriptor) -> ContractModel.Field {
        let type: String
        switch f.type {
        case PROTOBUF_C_TYPE_INT32: type = "int32"
        case PROTOBUF_C_TYPE_SINT32: type = "sint32"
        case PROTOBUF_C_TYPE_SFIXED32: type = "sfixed32"
        case PROTOBUF_C_TYPE_INT64: type = "int64"
        case PROTOBUF_C_TYPE_SINT64: type = "sint64"
        case PROTOBUF_C_TYPE_SFIXED64: type = "sfixed64"
        case PROTOBUF_C_TYPE_UINT32: type = "uint32"
        case PROTOBUF_C_TYPE_FIXED32: type = "fixed32"
        case PROTOBUF_C_TYPE_UINT64: type = "uint64"
        case PROTOBUF_C_TYPE_FIXED64: type = "fixed64"
        case PROTOBUF_C_TYPE_FLOAT: type = "float"
        case PROTOBUF_C_TYPE_DOUBLE: type = "double"
        case PROTOBUF_C_TYPE_BOOL: type = "bool"
        case PROTOBUF_C_TYPE_STRING: type = "string"
        case PROTOBUF_C_TYPE_BYTES: type = "bytes"
        case PROTOBUF_C_TYPE_ENUM:
            let e = f.descriptor?.assumingMemoryBound(to: ProtobufCEnumDescriptor.self)
            type = "enum " + (e.map { String(cString: $0.pointee.name) } ?? "<no descriptor>")
        case PROTOBUF_C_TYPE_MESSAGE:
            let m = f.descriptor?.assumingMemoryBound(to: ProtobufCMessageDescriptor.self)
            type = "message " + (m.map { String(cString: $0.pointee.name) } ?? "<no descriptor>")
        default: type = "ctype#\(f.type.rawValue)"
        }
        let label: String
        switch f.label {
        case PROTOBUF_C_LABEL_NONE: label = "none"
        case PROTOBUF_C_LABEL_OPTIONAL: label = "optional"
        case PROTOBUF_C_LABEL_REQUIRED: label = "required"
        case PROTOBUF_C_LABEL_REPEATED: label = "repeated"
        default: label = "clabel#\(f.label.rawValue)"
        }
        return ContractModel.Field(
            number: Int32(bitPattern: f.id), type: type, label: label,
            packed: f.flags & PROTOBUF_C_FIELD_FLAG_PACKED.rawValue != 0,
            oneof: f.flags & PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue != 0)
    }
}
