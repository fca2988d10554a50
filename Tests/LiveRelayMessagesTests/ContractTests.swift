import CLiveRelayProto
import Foundation
import LiveRelayMessages
import Testing

/// The contract check: the hand-written protobuf-c descriptors, LiveRelayMethod, AdminMethod and
/// the Swift message types against the descriptor set protoc makes from Protos/ at test time
/// (liverelay.v1 and liverelay.admin.v1).
@Suite struct ContractTests {
    @Test func bindingsMatchTheProtoFiles() throws {
        let differences = ContractModel.differences(proto: try ProtocContract.load(), bindings: BindingContract.load())
        #expect(differences.isEmpty, "bindings and Protos/ differ:\n\(differences.joined(separator: "\n"))")
    }

    @Test func theProtocSideSeesTheWholeContract() throws {
        // Guards the reader itself: an empty model on both sides would compare equal.
        // (v1 has 27 messages, 8 enums and 9 methods; the contract may only grow.)
        let proto = try ProtocContract.load()
        #expect(proto.messages.keys.filter { $0.hasPrefix("liverelay.v1.") }.count >= 27)
        #expect(proto.enums.count >= 8)
        #expect(proto.methods.keys.filter { $0.hasPrefix("/liverelay.v1.LiveRelay/") }.count >= 9)
        #expect(
            proto.messages["liverelay.v1.StartActivityRequest"]?["alert"]
                == ContractModel.Field(number: 6, type: "message liverelay.v1.Alert", label: "optional"))
        #expect(
            proto.messages["liverelay.v1.RegisterTokenRequest"]?["kind"]
                == ContractModel.Field(number: 2, type: "enum liverelay.v1.TokenKind", label: "none"))
        #expect(
            proto.messages["liverelay.v1.Targets"]?["push_to_start_tokens"]
                == ContractModel.Field(number: 1, type: "string", label: "repeated"))
        #expect(proto.enums["liverelay.v1.Priority"] == ["PRIORITY_UNSPECIFIED": 0, "PRIORITY_LOW": 5, "PRIORITY_HIGH": 10])
        #expect(
            proto.methods["/liverelay.v1.LiveRelay/Ping"]
                == ContractModel.Method(request: "liverelay.v1.PingRequest", reply: "liverelay.v1.PingReply"))
    }

    @Test func theProtocSideSeesTheChannelContract() throws {
        // The broadcast channel RPCs and the channel fields of the activity requests.
        let proto = try ProtocContract.load()
        #expect(
            proto.methods["/liverelay.v1.LiveRelay/DeleteChannel"]
                == ContractModel.Method(request: "liverelay.v1.DeleteChannelRequest", reply: "liverelay.v1.DeleteChannelReply"))
        #expect(proto.messages["liverelay.v1.DeleteChannelReply"] == [:])
        #expect(
            proto.enums["liverelay.v1.ChannelStoragePolicy"]
                == [
                    "CHANNEL_STORAGE_POLICY_UNSPECIFIED": 0, "CHANNEL_STORAGE_POLICY_NO_STORAGE": 1,
                    "CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE": 2,
                ])
        #expect(
            proto.messages["liverelay.v1.Channel"]?["storage_policy"]
                == ContractModel.Field(number: 4, type: "enum liverelay.v1.ChannelStoragePolicy", label: "none"))
        #expect(
            proto.messages["liverelay.v1.ListChannelsReply"]?["channels"]
                == ContractModel.Field(number: 1, type: "message liverelay.v1.Channel", label: "repeated"))
        #expect(
            proto.messages["liverelay.v1.DeliverySummary"]?["downgraded"]
                == ContractModel.Field(number: 11, type: "uint32", label: "none"))
        #expect(
            proto.messages["liverelay.v1.StartActivityRequest"]?["input_push_token"]
                == ContractModel.Field(number: 15, type: "bool", label: "optional"))
        #expect(
            proto.messages["liverelay.v1.UpdateActivityRequest"]?["channel_only"]
                == ContractModel.Field(number: 13, type: "bool", label: "optional"))
        #expect(
            proto.messages["liverelay.v1.EndActivityRequest"]?["relevance_score"]
                == ContractModel.Field(number: 10, type: "double", label: "optional"))
        // The bindings side: the new types are registered and LiveRelayMethod has the new cases.
        let bindings = BindingContract.load()
        #expect(bindings.messages["liverelay.v1.DeleteChannelReply"] == [:])
        #expect(bindings.swiftTypes.contains("liverelay.v1.Channel"))
        #expect(bindings.methods["/liverelay.v1.LiveRelay/CreateChannel"]?.reply == "liverelay.v1.CreateChannelReply")
    }

    @Test func theProtocSideSeesTheEventContract() throws {
        // ListEvents: its messages, EventKind, and Event's reuse of DeliverySummary, TokenKind and ActivityState.
        let proto = try ProtocContract.load()
        #expect(
            proto.methods["/liverelay.v1.LiveRelay/ListEvents"]
                == ContractModel.Method(request: "liverelay.v1.ListEventsRequest", reply: "liverelay.v1.ListEventsReply"))
        #expect(proto.enums["liverelay.v1.EventKind"]?.count == 8)
        #expect(proto.enums["liverelay.v1.EventKind"]?["EVENT_KIND_CHANNEL_DELETED"] == 7)
        #expect(
            proto.messages["liverelay.v1.Event"]?["cursor"] == ContractModel.Field(number: 1, type: "uint64", label: "none"))
        #expect(
            proto.messages["liverelay.v1.Event"]?["account"]
                == ContractModel.Field(number: 7, type: "message liverelay.v1.DeliverySummary", label: "none"))
        #expect(
            proto.messages["liverelay.v1.Event"]?["token_kind"]
                == ContractModel.Field(number: 9, type: "enum liverelay.v1.TokenKind", label: "none"))
        #expect(
            proto.messages["liverelay.v1.Event"]?["activity_state"]
                == ContractModel.Field(number: 12, type: "enum liverelay.v1.ActivityState", label: "none"))
        #expect(
            proto.messages["liverelay.v1.ListEventsReply"]?["events"]
                == ContractModel.Field(number: 1, type: "message liverelay.v1.Event", label: "repeated"))
        #expect(
            proto.messages["liverelay.v1.ListEventsRequest"]?["after_cursor"]
                == ContractModel.Field(number: 2, type: "uint64", label: "none"))
        // The bindings side: the types are registered and LiveRelayMethod has the case.
        let bindings = BindingContract.load()
        let eventTypes: Set = ["liverelay.v1.Event", "liverelay.v1.ListEventsRequest", "liverelay.v1.ListEventsReply"]
        #expect(bindings.swiftTypes.isSuperset(of: eventTypes))
        #expect(bindings.methods["/liverelay.v1.LiveRelay/ListEvents"]?.reply == "liverelay.v1.ListEventsReply")
        #expect(bindings.enums["liverelay.v1.EventKind"] == proto.enums["liverelay.v1.EventKind"])
    }

    @Test func theProtocSideSeesTheAdminContract() throws {
        // admin.proto (liverelay.admin.v1): 28 messages, no enums, 14 methods.
        let proto = try ProtocContract.load()
        #expect(proto.messages.keys.filter { $0.hasPrefix("liverelay.admin.v1.") }.count >= 28)
        #expect(proto.methods.keys.filter { $0.hasPrefix("/liverelay.admin.v1.Admin/") }.count >= 14)
        #expect(
            proto.messages["liverelay.admin.v1.PutAPNsCredentialsRequest"]?["private_key_pem"]
                == ContractModel.Field(number: 4, type: "bytes", label: "optional"))
        #expect(
            proto.messages["liverelay.admin.v1.App"]?["quotas"]
                == ContractModel.Field(number: 7, type: "message liverelay.admin.v1.Quotas", label: "optional"))
        #expect(
            proto.messages["liverelay.admin.v1.APIKey"]?["allowed_methods"]
                == ContractModel.Field(number: 4, type: "string", label: "repeated"))
        #expect(
            proto.methods["/liverelay.admin.v1.Admin/CreateApp"]
                == ContractModel.Method(request: "liverelay.admin.v1.CreateAppRequest", reply: "liverelay.admin.v1.AppReply"))
        #expect(
            proto.messages["liverelay.admin.v1.Webhook"]?["event_kinds"]
                == ContractModel.Field(number: 3, type: "string", label: "repeated"))
        #expect(
            proto.methods["/liverelay.admin.v1.Admin/ResetWebhook"]
                == ContractModel.Method(request: "liverelay.admin.v1.ResetWebhookRequest", reply: "liverelay.admin.v1.WebhookReply"))
        // The bindings side reads both registries and both method enums.
        let bindings = BindingContract.load()
        #expect(bindings.messages.keys.filter { $0.hasPrefix("liverelay.admin.v1.") }.count == lr_admin_message_descriptor_count())
        #expect(bindings.methods.keys.filter { $0.hasPrefix("/liverelay.admin.v1.Admin/") }.count == AdminMethod.allCases.count)
        #expect(bindings.swiftTypes.filter { $0.hasPrefix("liverelay.admin.v1.") }.count == BindingContract.adminSwiftTypes.count)
    }

    /// Each edit of a copy of Protos/ must produce exactly the listed differences.
    @Test(arguments: ProtoMutation.all)
    func aChangedProtoIsReported(_ mutation: ProtoMutation) throws {
        let baseline = Set(ContractModel.differences(proto: try ProtocContract.load(), bindings: BindingContract.load()))
        let mutated = try mutation.apply()
        defer { try? FileManager.default.removeItem(at: mutated.deletingLastPathComponent()) }
        let differences = ContractModel.differences(proto: try ProtocContract.load(protos: mutated), bindings: BindingContract.load())
        #expect(
            Set(differences).subtracting(baseline) == Set(mutation.expected),
            "\(mutation.name): got\n\(differences.joined(separator: "\n"))")
    }

    @Test func changedBindingsAreReported() throws {
        let proto = try ProtocContract.load()
        var bindings = BindingContract.load()
        bindings.messages["liverelay.v1.Alert"]?["title"]?.number = 9
        bindings.messages["liverelay.v1.Targets"]?["all_devices"]?.label = "none"
        bindings.messages["liverelay.v1.PingReply"]?["payload"]?.type = "string"
        bindings.enums["liverelay.v1.TokenKind"]?["TOKEN_KIND_UPDATE"] = nil
        bindings.methods["/liverelay.v1.LiveRelay/Ping"]?.reply = "liverelay.v1.PingRequest"
        bindings.swiftTypes.remove("liverelay.v1.Alert")
        bindings.messages["liverelay.admin.v1.APIKey"]?["app_ids"]?.label = "optional"
        bindings.messages["liverelay.admin.v1.Quotas"]?["calls_per_second"]?.type = "float"
        bindings.methods["/liverelay.admin.v1.Admin/RevokeAPIKey"] = nil
        bindings.swiftTypes.remove("liverelay.admin.v1.AppStats")
        bindings.messages["liverelay.v1.EndActivityRequest"]?["channel_only"]?.number = 11
        bindings.enums["liverelay.v1.ChannelStoragePolicy"]?["CHANNEL_STORAGE_POLICY_NO_STORAGE"] = 0
        bindings.methods["/liverelay.v1.LiveRelay/ListChannels"]?.request = "liverelay.v1.ListChannelsReply"
        let differences = ContractModel.differences(proto: proto, bindings: bindings)
        for expected in [
            "field liverelay.admin.v1.APIKey.app_ids: label repeated in the .proto, optional in the bindings",
            "field liverelay.admin.v1.Quotas.calls_per_second: type double in the .proto, float in the bindings",
            "method /liverelay.admin.v1.Admin/RevokeAPIKey: in the .proto, missing from the bindings",
            "Swift type for message liverelay.admin.v1.AppStats: in the .proto, missing from the bindings",
            "field liverelay.v1.Alert.title: number 1 in the .proto, 9 in the bindings",
            "field liverelay.v1.Targets.all_devices: label optional in the .proto, none in the bindings",
            "field liverelay.v1.PingReply.payload: type bytes in the .proto, string in the bindings",
            "enum value liverelay.v1.TokenKind.TOKEN_KIND_UPDATE: in the .proto, missing from the bindings",
            "method /liverelay.v1.LiveRelay/Ping: reply liverelay.v1.PingReply in the .proto, liverelay.v1.PingRequest in the bindings",
            "Swift type for message liverelay.v1.Alert: in the .proto, missing from the bindings",
            "field liverelay.v1.EndActivityRequest.channel_only: number 12 in the .proto, 11 in the bindings",
            "enum value liverelay.v1.ChannelStoragePolicy.CHANNEL_STORAGE_POLICY_NO_STORAGE: number 1 in the .proto, 0 in the bindings",
            "method /liverelay.v1.LiveRelay/ListChannels: request liverelay.v1.ListChannelsRequest in the .proto, liverelay.v1.ListChannelsReply in the bindings",
        ] {
            #expect(differences.contains(expected), "missing: \(expected)\ngot:\n\(differences.joined(separator: "\n"))")
        }
    }

    @Test func packedFollowsSyntaxAndOption() throws {
        func codes(_ mutation: ProtoMutation, _ message: String) throws -> ContractModel.Field? {
            let dir = try mutation.apply()
            defer { try? FileManager.default.removeItem(at: dir.deletingLastPathComponent()) }
            return try ProtocContract.load(protos: dir).messages[message]?["codes"]
        }
        let proto3 = ProtoMutation.addingToErrorDetails("  repeated uint32 codes = 4;")
        let proto3Unpacked = ProtoMutation.addingToErrorDetails("  repeated uint32 codes = 4 [packed = false];")
        let proto2 = ProtoMutation.addingToTargets("  repeated int32 codes = 4;")
        let proto2Packed = ProtoMutation.addingToTargets("  repeated int32 codes = 4 [packed = true];")
        #expect(try codes(proto3, "liverelay.v1.ErrorDetails")?.packed == true)
        #expect(try codes(proto3Unpacked, "liverelay.v1.ErrorDetails")?.packed == false)
        #expect(try codes(proto2, "liverelay.v1.Targets")?.packed == false)
        #expect(try codes(proto2Packed, "liverelay.v1.Targets")?.packed == true)
    }

    /// protobuf-c's invariants for hand-written tables: what protoc-c would have guaranteed.
    @Test func descriptorTablesAreWellFormed() {
        let problems = DescriptorInvariants.problems()
        #expect(problems.isEmpty, "descriptor tables:\n\(problems.joined(separator: "\n"))")
    }
}
