import CLiveRelayProto
import Testing

@testable import LiveRelayMessages

/// The invariants protobuf-c silently relies on in hand-written tables.
@Suite struct DescriptorTableTests {
    static var messages: [UnsafePointer<ProtobufCMessageDescriptor>] {
        (0..<lr_message_descriptor_count()).map { lr_message_descriptor_at($0)! }
    }
    static var enums: [UnsafePointer<ProtobufCEnumDescriptor>] {
        (0..<lr_enum_descriptor_count()).map { lr_enum_descriptor_at($0)! }
    }

    @Test func registriesListEverything() {
        #expect(Self.messages.count == 27)
        #expect(Self.enums.count == 8)
        #expect(lr_message_descriptor_at(27) == nil)
        #expect(lr_enum_descriptor_at(8) == nil)
        // The accessor returns the real, stable address (not a copy).
        #expect(lr_alert_descriptor() == lr_alert_descriptor())
    }

    @Test(arguments: 0..<27)
    func messageDescriptorInvariants(index: Int) throws {
        let d = Self.messages[index].pointee
        let name = String(cString: d.name)
        #expect(d.magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        #expect(String(cString: d.package_name) == "liverelay.v1")
        #expect(name == "liverelay.v1." + String(cString: d.short_name))
        #expect(String(cString: d.c_name) == "Lr" + String(cString: d.short_name))
        let n = Int(d.n_fields)
        let fields = (0..<n).map { d.fields[$0] }
        // Sorted by number.
        #expect(zip(fields, fields.dropFirst()).allSatisfy { $0.id < $1.id }, "\(name) fields not sorted")
        // By-name index is a permutation in strcmp order.
        let byName = (0..<n).map { Int(d.fields_sorted_by_name[$0]) }
        #expect(Set(byName) == Set(0..<n))
        let names = byName.map { Array(String(cString: fields[$0].name).utf8) }
        #expect(zip(names, names.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) }, "\(name) by-name order")
        // Ranges closed by {0, n_fields}.
        let ranges = d.field_ranges!
        #expect(ranges[Int(d.n_field_ranges)].orig_index == UInt32(n))
        // Each field is found by number and by name through protobuf-c's own lookups.
        for f in fields {
            let byNumber = protobuf_c_message_descriptor_get_field(Self.messages[index], f.id)
            #expect(byNumber.map { String(cString: $0.pointee.name) } == String(cString: f.name))
            #expect(protobuf_c_message_descriptor_get_field_by_name(Self.messages[index], f.name) != nil)
            let isProto2 = ["Alert", "Targets", "StartActivityRequest", "UpdateActivityRequest", "EndActivityRequest"]
                .contains(String(cString: d.short_name))
            if f.label != PROTOBUF_C_LABEL_REPEATED {
                #expect(f.label == (isProto2 ? PROTOBUF_C_LABEL_OPTIONAL : PROTOBUF_C_LABEL_NONE))
            }
            if !isProto2, f.type == PROTOBUF_C_TYPE_STRING, f.label == PROTOBUF_C_LABEL_NONE {
                #expect(f.default_value == UnsafeRawPointer(lr_empty_string()))
            }
            if f.type == PROTOBUF_C_TYPE_MESSAGE || f.type == PROTOBUF_C_TYPE_ENUM { #expect(f.descriptor != nil) }
        }
        // An empty message unpacks to a struct that passes protobuf_c_message_check.
        #expect(TestWire.check([], Self.messages[index]))
    }

    @Test(arguments: 0..<8)
    func enumDescriptorInvariants(index: Int) {
        let e = Self.enums[index]
        let d = e.pointee
        #expect(d.magic == PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC)
        let values = (0..<Int(d.n_values)).map { d.values[$0] }
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.value < $1.value })
        #expect(d.value_ranges[Int(d.n_value_ranges)].orig_index == d.n_values)
        for v in values {
            #expect(protobuf_c_enum_descriptor_get_value(e, v.value)?.pointee.value == v.value)
            #expect(protobuf_c_enum_descriptor_get_value_by_name(e, v.name)?.pointee.value == v.value)
            #expect(String(cString: v.c_name) == "LR_" + String(cString: v.name))
        }
        #expect(protobuf_c_enum_descriptor_get_value(e, 99) == nil)
    }

    @Test func priorityIsSparse() {
        let d = lr_priority_enum_descriptor()!
        #expect(d.pointee.n_value_ranges == 3)
        #expect(protobuf_c_enum_descriptor_get_value(d, 5)?.pointee.value == 5)
        #expect(protobuf_c_enum_descriptor_get_value(d, 1) == nil)
        #expect(protobuf_c_enum_descriptor_get_value(d, 6) == nil)
    }

    /// DeleteChannelReply has no fields: NULL field tables, as protoc-c makes them, and
    /// only the closing range entry, which protobuf-c's lookups and the invariants read.
    @Test func theEmptyMessageHasNoFieldsAndOneClosingRange() throws {
        let d = lr_delete_channel_reply_descriptor()!
        #expect(d.pointee.n_fields == 0)
        #expect(d.pointee.fields == nil)
        #expect(d.pointee.fields_sorted_by_name == nil)
        #expect(d.pointee.n_field_ranges == 0)
        #expect(d.pointee.field_ranges[0].start_value == 0 && d.pointee.field_ranges[0].orig_index == 0)
        #expect(protobuf_c_message_descriptor_get_field(d, 1) == nil)
        #expect(protobuf_c_message_descriptor_get_field_by_name(d, "channel") == nil)
        // Unknown fields are skipped, as in every message.
        #expect(TestWire.check(TestWire.string(1, "x") + TestWire.int(2, 7), d))
        #expect(try DeleteChannelReply(serializedBytes: TestWire.string(1, "x")) == DeleteChannelReply())
    }

    @Test func channelStoragePolicyIsDense() {
        let d = lr_channel_storage_policy_enum_descriptor()!
        #expect(d.pointee.n_values == 3)
        #expect(d.pointee.n_value_ranges == 1)
        let mostRecent = protobuf_c_enum_descriptor_get_value(d, 2).map { String(cString: $0.pointee.name) }
        #expect(mostRecent == "CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE")
        #expect(protobuf_c_enum_descriptor_get_value(d, 3) == nil)
    }

    @Test func eventKindIsDense() {
        let d = lr_event_kind_enum_descriptor()!
        #expect(d.pointee.n_values == 8)
        #expect(d.pointee.n_value_ranges == 1)
        let deleted = protobuf_c_enum_descriptor_get_value(d, 7).map { String(cString: $0.pointee.name) }
        #expect(deleted == "EVENT_KIND_CHANNEL_DELETED")
        #expect(protobuf_c_enum_descriptor_get_value(d, 8) == nil)
    }

    @Test func initSetsProto3StringDefaults() {
        var m = LrRegisterTokenRequest()
        lr_register_token_request_init(&m)
        #expect(m.app_id == lr_empty_string())
        #expect(m.base.descriptor == lr_register_token_request_descriptor())
        var s = LrStartActivityRequest()
        lr_start_activity_request_init(&s)
        #expect(s.app_id == nil)
        #expect(s.has_priority == 0)
    }

    @Test func methodsNameTheirMessages() {
        #expect(LiveRelayMethod.allCases.count == 9)
        #expect(LiveRelayMethod.registerToken.rawValue == "/liverelay.v1.LiveRelay/RegisterToken")
        #expect(LiveRelayMethod.startActivity.requestProtoName == "liverelay.v1.StartActivityRequest")
        #expect(LiveRelayMethod.ping.replyProtoName == "liverelay.v1.PingReply")
        let registered = Set(Self.messages.map { String(cString: $0.pointee.name) })
        for method in LiveRelayMethod.allCases {
            let bare = method.requestProtoName.dropFirst("liverelay.v1.".count).dropLast("Request".count)
            #expect(method.rawValue == "/liverelay.v1.LiveRelay/" + bare)
            #expect(registered.contains(method.requestProtoName))
            #expect(registered.contains(method.replyProtoName))
        }
    }
}
