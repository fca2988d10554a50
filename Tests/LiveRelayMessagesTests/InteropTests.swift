import Foundation
import LiveRelayMessages
import LiveRelayTestSupport
import Testing

/// Interop with Google's implementation: Python's protobuf package, with classes protoc
/// generates at test time from Protos/, against the Swift types over protobuf-c.
/// The cases are Vectors/cases.json (plus the large ones interop.py generates); the Swift
/// value each must decode to is written out in InteropCases.swift.
@Suite struct InteropTests {
    @Test func everyPythonCaseHasASwiftValueAndViceVersa() async throws {
        let python = try await PythonInterop.encoded
        let pythonNames = Set(python.valid.map(\.name))
        let swiftNames = Set(InteropCases.expected.keys)
        #expect(pythonNames.subtracting(swiftNames).isEmpty, "cases without a Swift value: \(pythonNames.subtracting(swiftNames).sorted())")
        #expect(swiftNames.subtracting(pythonNames).isEmpty, "Swift values without a case: \(swiftNames.subtracting(pythonNames).sorted())")
        // Every message type is covered in both directions.
        let types = Set(python.valid.map(\.type))
        #expect(
            types == Set(BindingContract.swiftTypes.map { $0.protoName }),
            "types without a case: \(Set(BindingContract.swiftTypes.map { $0.protoName }).subtracting(types).sorted())")
    }

    /// (a) Python encodes, Swift decodes: the value equals the one written in Swift.
    @Test(arguments: InteropCases.names)
    func pythonBytesDecodeToTheSwiftValue(_ name: String) async throws {
        let entry = try #require(try await PythonInterop.encoded.valid.first { $0.name == name }, "no Python case \(name)")
        let expected = try #require(InteropCases.expected[name])
        #expect(type(of: expected).protoName == entry.type)
        let decoded = try type(of: expected).init(serializedBytes: PythonInterop.bytes(hex: entry.hex))
        let differences = InteropCases.differences(expected, decoded)
        #expect(differences.isEmpty, "\(name): \(differences.joined(separator: "; "))")
    }

    /// (b) Swift encodes the same value: byte-identical with Python's canonical encoding.
    @Test(arguments: InteropCases.names)
    func swiftBytesEqualPythonsCanonicalBytes(_ name: String) async throws {
        let entry = try #require(try await PythonInterop.encoded.valid.first { $0.name == name }, "no Python case \(name)")
        let expected = try #require(InteropCases.expected[name])
        let swift = PythonInterop.hex(expected.serializedBytes())
        #expect(
            swift == entry.canonicalHex,
            "\(name): Swift \(swift.prefix(160))… (\(swift.count / 2) bytes), Python \(entry.canonicalHex.prefix(160))… (\(entry.canonicalHex.count / 2) bytes)"
        )
    }

    /// (c) Swift encodes, Python decodes: field-equal (Python's ==) to the case.
    @Test func pythonDecodesSwiftsBytesToTheCase() async throws {
        let entries = InteropCases.names.map { (name: $0, bytes: InteropCases.expected[$0]!.serializedBytes()) }
        let report = try await onThread { try PythonInterop.decode(entries) }
        #expect(Set(report.keys) == Set(InteropCases.names), "Python did not answer for every case")
        for (name, differences) in report.sorted(by: { $0.key < $1.key }) {
            #expect(differences.isEmpty, "\(name): Python sees \(differences.joined(separator: "; "))")
        }
    }

    /// (d) Requests Python encodes with a broken field are refused, naming the field.
    @Test func pythonEncodedInvalidRequestsAreRejected() async throws {
        let cases = try await PythonInterop.encoded.invalid
        #expect(!cases.isEmpty)
        for entry in cases {
            let expect = try #require(entry.expect, "\(entry.name): no expected error")
            let type = try #require(BindingContract.swiftTypes.first { $0.protoName == entry.type }, "no Swift type \(entry.type)")
            do {
                let accepted = try type.init(serializedBytes: PythonInterop.bytes(hex: entry.hex))
                Issue.record("\(entry.name): accepted \(accepted)")
            } catch {
                #expect(error.field == expect.field, "\(entry.name): field \(error.field), expected \(expect.field) (\(error))")
                #expect(String(describing: error.kind) == expect.kind, "\(entry.name): kind \(error.kind), expected \(expect.kind)")
            }
        }
    }
}
