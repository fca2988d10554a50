/// A neutral description of a protobuf contract, built once from protoc's
/// descriptor set and once from the hand-written bindings, then compared.
struct ContractModel: Equatable {
    struct Field: Equatable {
        var number: Int32
        /// "string", "int64", ..., "message liverelay.v1.Alert", "enum liverelay.v1.Priority".
        var type: String
        /// protobuf-c's label: "none" (proto3 singular), "optional", "required", "repeated".
        var label: String
        var packed = false
        var oneof = false
    }

    struct Method: Equatable {
        var request: String
        var reply: String
        var streaming = false
    }

    /// Full message name → field name → field.
    var messages: [String: [String: Field]] = [:]
    /// Full enum name → value name → number.
    var enums: [String: [String: Int32]] = [:]
    /// Wire path ("/liverelay.v1.LiveRelay/Ping") → method.
    var methods: [String: Method] = [:]
    /// Full names of the messages that have a Swift type.
    var swiftTypes: Set<String> = []

    /// Every difference between the .proto (`proto`) and the bindings, one readable line each;
    /// empty when they agree. Both directions: something on one side only is a difference.
    static func differences(proto: ContractModel, bindings: ContractModel) -> [String] {
        var out: [String] = []
        compareKeyed("message", proto.messages, bindings.messages, into: &out) { name, p, b, out in
            compareKeyed("field \(name).", p, b, into: &out, separator: "") { field, pf, bf, out in
                let what = "field \(name).\(field)"
                attribute(what, "number", pf.number, bf.number, into: &out)
                attribute(what, "type", pf.type, bf.type, into: &out)
                attribute(what, "label", pf.label, bf.label, into: &out)
                attribute(what, "packed", pf.packed, bf.packed, into: &out)
                attribute(what, "oneof", pf.oneof, bf.oneof, into: &out)
            }
        }
        compareKeyed("enum", proto.enums, bindings.enums, into: &out) { name, p, b, out in
            compareKeyed("enum value \(name).", p, b, into: &out, separator: "") { value, pn, bn, out in
                attribute("enum value \(name).\(value)", "number", pn, bn, into: &out)
            }
        }
        compareKeyed("method", proto.methods, bindings.methods, into: &out) { path, p, b, out in
            attribute("method \(path)", "request", p.request, b.request, into: &out)
            attribute("method \(path)", "reply", p.reply, b.reply, into: &out)
            attribute("method \(path)", "streaming", p.streaming, b.streaming, into: &out)
        }
        let swift = Dictionary(uniqueKeysWithValues: bindings.swiftTypes.map { ($0, true) })
        let messages = proto.messages.mapValues { _ in true }
        compareKeyed("Swift type for message", messages, swift, into: &out) { _, _, _, _ in }
        return out
    }

    private static func compareKeyed<V>(
        _ kind: String, _ proto: [String: V], _ bindings: [String: V], into out: inout [String],
        separator: String = " ", matching: (String, V, V, inout [String]) -> Void
    ) {
        for key in Set(proto.keys).union(bindings.keys).sorted() {
            switch (proto[key], bindings[key]) {
            case let (p?, b?): matching(key, p, b, &out)
            case (_?, nil): out.append("\(kind)\(separator)\(key): in the .proto, missing from the bindings")
            case (nil, _?): out.append("\(kind)\(separator)\(key): in the bindings, not in the .proto")
            case (nil, nil): break
            }
        }
    }

    private static func attribute<T: Equatable>(
        _ what: String, _ name: String, _ proto: T, _ bindings: T, into out: inout [String]
    ) {
        if proto != bindings {
            out.append("\(what): \(name) \(proto) in the .proto, \(bindings) in the bindings")
        }
    }

    /// The neutral name of a scalar type, shared by both readers.
    static let scalarNames = [
        "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool",
        "string", "group", "message", "bytes", "uint32", "enum", "sfixed32", "sfixed64",
        "sint32", "sint64",
    ]
}
