import CDescriptorSet
import Foundation

/// Reads the FileDescriptorSet that `protoc --descriptor_set_out` writes, through
/// protobuf-c and the test-support descriptors of descriptor.proto, into a ContractModel
/// that says what the hand-written bindings must be.
enum ProtocContract {
    /// The contract of the .proto files in `protos` (default: the repository's Protos/).
    static func load(protos: URL = ExternalTools.protosDir) throws -> ContractModel {
        try model(fromDescriptorSet: ExternalTools.descriptorSet(protos: protos))
    }

    static func model(fromDescriptorSet bytes: [UInt8]) throws -> ContractModel {
        guard let set = bytes.withUnsafeBufferPointer({ ds_file_descriptor_set_unpack($0.count, $0.baseAddress) }) else {
            throw ExternalTools.Failure(description: "protobuf-c could not unpack protoc's FileDescriptorSet (\(bytes.count) bytes)")
        }
        defer { ds_file_descriptor_set_free(set) }
        var model = ContractModel()
        for file in items(set.pointee.file, set.pointee.n_file) {
            let package = text(file.pointee.package)
            let proto3 = text(file.pointee.syntax) == "proto3"
            for message in items(file.pointee.message_type, file.pointee.n_message_type) {
                add(message: message, prefix: package, proto3: proto3, to: &model)
            }
            for en in items(file.pointee.enum_type, file.pointee.n_enum_type) {
                add(enum: en, prefix: package, to: &model)
            }
            for service in items(file.pointee.service, file.pointee.n_service) {
                let serviceName = qualified(package, text(service.pointee.name))
                for method in items(service.pointee.method, service.pointee.n_method) {
                    let m = method.pointee
                    model.methods["/\(serviceName)/\(text(m.name))"] = ContractModel.Method(
                        request: typeName(m.input_type), reply: typeName(m.output_type),
                        streaming: m.client_streaming != 0 || m.server_streaming != 0)
                }
            }
        }
        return model
    }

    private static func add(message: UnsafeMutablePointer<DSDescriptorProto>, prefix: String, proto3: Bool, to model: inout ContractModel) {
        let d = message.pointee
        let name = qualified(prefix, text(d.name))
        var fields: [String: ContractModel.Field] = [:]
        for fieldPointer in items(d.field, d.n_field) {
            let f = fieldPointer.pointee
            fields[text(f.name)] = field(f, proto3: proto3)
        }
        model.messages[name] = fields
        for nested in items(d.nested_type, d.n_nested_type) {
            add(message: nested, prefix: name, proto3: proto3, to: &model)
        }
        for en in items(d.enum_type, d.n_enum_type) {
            add(enum: en, prefix: name, to: &model)
        }
    }

    /// What protobuf-c must say about one field, following protoc-c's rules.
    private static func field(_ f: DSFieldDescriptorProto, proto3: Bool) -> ContractModel.Field {
        // descriptor.proto: Type 1 = TYPE_DOUBLE ... 18 = TYPE_SINT64; Label 1 optional, 2 required, 3 repeated.
        let scalar =
            ContractModel.scalarNames.indices.contains(Int(f.type) - 1)
            ? ContractModel.scalarNames[Int(f.type) - 1] : "type#\(f.type)"
        let type = scalar == "message" || scalar == "enum" ? "\(scalar) \(typeName(f.type_name))" : scalar
        let proto3Optional = f.has_proto3_optional != 0 && f.proto3_optional != 0
        let label: String
        switch f.label {
        case 3: label = "repeated"
        case 2: label = "required"
        case 1: label = proto3 && !proto3Optional ? "none" : "optional"
        default: label = "label#\(f.label)"
        }
        let packable = label == "repeated" && !["string", "bytes", "message", "group"].contains(scalar)
        let explicitPacked = f.options.flatMap { $0.pointee.has_packed != 0 ? $0.pointee.packed != 0 : nil }
        return ContractModel.Field(
            number: f.number, type: type, label: label,
            packed: packable && (explicitPacked ?? proto3),
            oneof: f.has_oneof_index != 0 && !proto3Optional)
    }

    private static func add(enum en: UnsafeMutablePointer<DSEnumDescriptorProto>, prefix: String, to model: inout ContractModel) {
        let e = en.pointee
        var values: [String: Int32] = [:]
        for value in items(e.value, e.n_value) {
            values[text(value.pointee.name)] = value.pointee.number
        }
        model.enums[qualified(prefix, text(e.name))] = values
    }

    private static func items<T>(_ base: UnsafeMutablePointer<UnsafeMutablePointer<T>?>?, _ count: Int) -> [UnsafeMutablePointer<T>] {
        guard let base, count > 0 else { return [] }
        return UnsafeBufferPointer(start: base, count: count).compactMap { $0 }
    }

    private static func text(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    /// ".liverelay.v1.Alert" → "liverelay.v1.Alert".
    private static func typeName(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        let name = text(pointer)
        return name.hasPrefix(".") ? String(name.dropFirst()) : name
    }

    private static func qualified(_ prefix: String, _ name: String) -> String {
        prefix.isEmpty ? name : "\(prefix).\(name)"
    }
}
