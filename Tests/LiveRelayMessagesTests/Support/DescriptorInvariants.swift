import CLiveRelayProto
import Foundation

/// The invariants protobuf-c relies on and protoc-c would have guaranteed, checked over every
/// hand-written table in CLiveRelayProto. Returns one line per problem.
enum DescriptorInvariants {
    static func problems() -> [String] {
        var out: [String] = []
        let messages = BindingContract.messageDescriptors()
        let enums = BindingContract.enumDescriptors()
        let messageSet = Set(messages.map { UnsafeRawPointer($0) })
        let enumSet = Set(enums.map { UnsafeRawPointer($0) })
        if messages.isEmpty { out.append("no message descriptors registered") }
        if enums.isEmpty { out.append("no enum descriptors registered") }
        duplicates(messages.map { String(cString: $0.pointee.name) }, "message", into: &out)
        duplicates(enums.map { String(cString: $0.pointee.name) }, "enum", into: &out)

        for descriptor in messages {
            let d = descriptor.pointee
            let name = String(cString: d.name)
            if d.magic != UInt32(PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC) { out.append("\(name): bad magic") }
            names(name, d.package_name, d.short_name, into: &out)
            let fields = Array(UnsafeBufferPointer(start: d.fields, count: Int(d.n_fields)))
            let ids = fields.map { Int($0.id) }
            if ids != ids.sorted() || Set(ids).count != ids.count { out.append("\(name): fields not strictly sorted by number: \(ids)") }
            let byName = Array(UnsafeBufferPointer(start: d.fields_sorted_by_name, count: Int(d.n_fields))).map(Int.init)
            let expectedByName = fields.indices.sorted { strcmpLess(fields[$0].name, fields[$1].name) }
            if byName != expectedByName { out.append("\(name): fields_sorted_by_name \(byName), expected \(expectedByName)") }
            let ranges = Array(UnsafeBufferPointer(start: d.field_ranges, count: Int(d.n_field_ranges) + 1))
            let expected = expectedRanges(ids)
            if ranges.map({ [Int($0.start_value), Int($0.orig_index)] }) != expected {
                out.append("\(name): field_ranges \(ranges.map { [$0.start_value, Int32($0.orig_index)] }), expected \(expected)")
            }
            for f in fields {
                let field = "\(name).\(String(cString: f.name))"
                if f.type == PROTOBUF_C_TYPE_MESSAGE, !(f.descriptor.map { messageSet.contains($0) } ?? false) {
                    out.append("\(field): message descriptor not one of the registered ones")
                }
                if f.type == PROTOBUF_C_TYPE_ENUM, !(f.descriptor.map { enumSet.contains($0) } ?? false) {
                    out.append("\(field): enum descriptor not one of the registered ones")
                }
            }
            emptyMessage(descriptor, name, into: &out)
        }

        for descriptor in enums {
            let e = descriptor.pointee
            let name = String(cString: e.name)
            if e.magic != UInt32(PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC) { out.append("\(name): bad magic") }
            names(name, e.package_name, e.short_name, into: &out)
            let values = Array(UnsafeBufferPointer(start: e.values, count: Int(e.n_values)))
            let numbers = values.map { Int($0.value) }
            if numbers != numbers.sorted() || Set(numbers).count != numbers.count {
                out.append("\(name): values not strictly sorted: \(numbers)")
            }
            let index = Array(UnsafeBufferPointer(start: e.values_by_name, count: Int(e.n_value_names)))
            let indexed = index.map { (String(cString: $0.name), Int($0.index)) }
            let expectedIndex = values.indices.sorted { strcmpLess(values[$0].name, values[$1].name) }
                .map { (String(cString: values[$0].name), $0) }
            if indexed.map(\.0) != expectedIndex.map(\.0) || indexed.map(\.1) != expectedIndex.map(\.1) {
                out.append("\(name): values_by_name \(indexed), expected \(expectedIndex)")
            }
            let ranges = Array(UnsafeBufferPointer(start: e.value_ranges, count: Int(e.n_value_ranges) + 1))
            if ranges.map({ [Int($0.start_value), Int($0.orig_index)] }) != expectedRanges(numbers) {
                out.append(
                    "\(name): value_ranges \(ranges.map { [$0.start_value, Int32($0.orig_index)] }), expected \(expectedRanges(numbers))")
            }
        }
        return out
    }

    /// protobuf-c's ranges: one [first number, index] per run of consecutive numbers, then [0, count].
    static func expectedRanges(_ numbers: [Int]) -> [[Int]] {
        var ranges: [[Int]] = []
        for (i, n) in numbers.enumerated() where i == 0 || numbers[i - 1] + 1 != n {
            ranges.append([n, i])
        }
        return ranges + [[0, numbers.count]]
    }

    /// A freshly initialised message must pass protobuf_c_message_check and pack to nothing.
    private static func emptyMessage(_ descriptor: UnsafePointer<ProtobufCMessageDescriptor>, _ name: String, into out: inout [String]) {
        let size = descriptor.pointee.sizeof_message
        guard size >= MemoryLayout<ProtobufCMessage>.size else {
            out.append("\(name): sizeof_message \(size) is smaller than ProtobufCMessage")
            return
        }
        let raw = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { raw.deallocate() }
        let message = raw.bindMemory(to: ProtobufCMessage.self, capacity: 1)
        lr_message_init(message, descriptor)
        if protobuf_c_message_check(message) == 0 { out.append("\(name): an initialised message fails protobuf_c_message_check") }
        let packed = protobuf_c_message_get_packed_size(message)
        if packed != 0 { out.append("\(name): an initialised message packs to \(packed) bytes, expected 0") }
    }

    private static func names(_ name: String, _ package: UnsafePointer<CChar>?, _ short: UnsafePointer<CChar>?, into out: inout [String]) {
        let package = package.map { String(cString: $0) } ?? ""
        let short = short.map { String(cString: $0) } ?? ""
        if name != "\(package).\(short)" {
            out.append("\(name): package_name \"\(package)\" and short_name \"\(short)\" do not make the name")
        }
    }

    private static func duplicates(_ names: [String], _ kind: String, into out: inout [String]) {
        for (name, count) in Dictionary(names.map { ($0, 1) }, uniquingKeysWith: +) where count > 1 {
            out.append("\(kind) \(name) registered \(count) times")
        }
    }

    private static func strcmpLess(_ a: UnsafePointer<CChar>, _ b: UnsafePointer<CChar>) -> Bool {
        strcmp(a, b) < 0
    }
}
