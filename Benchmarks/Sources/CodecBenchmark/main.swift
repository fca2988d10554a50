// Codec microbenchmark: LiveRelayMessages (protobuf-c) vs swift-protobuf 1.39 on the
// same request values, plus FrameDecoder / FrameEncoder throughput. Every figure is
// measured in this one run. Build in release: scripts/bench.sh codec.
#if canImport(Glibc)
import Glibc
#endif
import CLiveRelayProto
import Foundation
import LiveRelayMessages
import LiveRelayWire
import NIOCore
import SwiftProtobuf
import SwiftProtobufMessages

let options = Options(CommandLine.arguments)

// MARK: Messages

struct CodecRow {
    var message: String
    var size: Int
    var op: String
    var protobufC: Measurement
    var swiftProtobuf: Measurement
    var ratio: Double { swiftProtobuf.median / protobufC.median }
}

var rows: [CodecRow] = []
/// The parts of a protobuf-c decode: through the `[UInt8]` extension (the table's
/// figure), through the raw-pointer protocol requirement, and validate() alone.
struct DecodeParts {
    var message: String
    var viaArray: Measurement
    var viaRawPointer: Measurement
    var validate: Measurement
}
var decodeParts: [DecodeParts] = []

/// What a server does with a request: decode plus validation, on both
/// sides, and the parts that bound it.
struct ServerDecodeRow {
    var message: String
    var size: Int
    /// LiveRelayMessages' decode (it validates requests).
    var ours: Measurement
    /// swift-protobuf's decode, then `ServerValidated.validate()` (the same rules).
    var swiftProtobuf: Measurement
    /// swift-protobuf's decode alone.
    var swiftProtobufDecode: Measurement
    /// LiveRelayMessages' validate() alone, on a decoded value.
    var validate: Measurement
    /// `lr_unpack` + `lr_free_unpacked` alone: protobuf-c's part, which no conversion layer removes.
    var unpack: Measurement
    /// Making (and freeing) the message's Swift `String`s from their UTF-8 bytes alone: both sides pay it.
    var strings: Measurement
    /// What no decode through protobuf-c can go below: unpack + strings + validate.
    var floor: Double { unpack.median + strings.median + validate.median }
    var ratio: Double { swiftProtobuf.median / ours.median }
}
var serverRows: [ServerDecodeRow] = []
/// The goal: ours at least this much faster.
let serverGoal = 1.5

/// The UTF-8 bytes of every string in a message value, sub-messages and arrays included.
func stringBytes(of value: Any) -> [[UInt8]] {
    var out: [[UInt8]] = []
    for child in Mirror(reflecting: value).children {
        switch child.value {
        case let s as String: out.append(Array(s.utf8))
        case let s as String?: if let s { out.append(Array(s.utf8)) }
        case let a as [String]: out += a.map { Array($0.utf8) }
        case let v as any LiveRelayMessage: out += stringBytes(of: v)
        case let v as (any LiveRelayMessage)?: if let v { out += stringBytes(of: v) }
        default: break
        }
    }
    return out.filter { !$0.isEmpty }
}

@MainActor
func benchmark<L: LiveRelayMessage, S: SwiftProtobuf.Message & Equatable & ServerValidated>(
    _ name: String, _ lr: L, _ sp: S, descriptor: UnsafePointer<ProtobufCMessageDescriptor>
) {
    if let only = options.only, !name.contains(only) { return }
    let lrBytes = lr.serializedBytes()
    let spBytes: [UInt8] = try! sp.serializedBytes()
    // Same values, same canonical encoding: the comparison is like for like.
    precondition(lrBytes == spBytes, "\(name): the two implementations encode the fixture differently")
    precondition((try? L(serializedBytes: lrBytes)) == lr, "\(name): protobuf-c round trip is not exact")
    precondition((try? S(serializedBytes: spBytes)) == sp, "\(name): swift-protobuf round trip is not exact")
    // Both validations accept the fixture (a throwing one would measure an error path).
    try! lr.validate()
    try! sp.validate()

    if options.verbose { print("\(name) (\(lrBytes.count) bytes)") }
    let pcRoundTrip = measure("\(name) protobuf-c round trip", options: options) { n in
        for _ in 0..<n {
            let bytes = lr.serializedBytes()
            blackHole(try! L(serializedBytes: bytes))
        }
    }
    let spRoundTrip = measure("\(name) swift-protobuf round trip", options: options) { n in
        for _ in 0..<n {
            let bytes: [UInt8] = try! sp.serializedBytes()
            blackHole(try! S(serializedBytes: bytes))
        }
    }
    let pcEncode = measure("\(name) protobuf-c encode", options: options) { n in
        for _ in 0..<n { blackHole(lr.serializedBytes()) }
    }
    let spEncode = measure("\(name) swift-protobuf encode", options: options) { n in
        for _ in 0..<n {
            let bytes: [UInt8] = try! sp.serializedBytes()
            blackHole(bytes)
        }
    }
    let pcDecode = measure("\(name) protobuf-c decode", options: options) { n in
        for _ in 0..<n { blackHole(try! L(serializedBytes: lrBytes)) }
    }
    let spDecode = measure("\(name) swift-protobuf decode", options: options) { n in
        for _ in 0..<n { blackHole(try! S(serializedBytes: spBytes)) }
    }
    let validate = measure("\(name) validate()", options: options) { n in
        for _ in 0..<n { try! lr.validate() }
    }
    let pcDecodeRaw = measure("\(name) protobuf-c decode (raw pointer)", options: options) { n in
        lrBytes.withUnsafeBytes { raw in
            for _ in 0..<n { blackHole(try! L(serializedBytes: raw, limit: MessageLimits.maxMessageBytes)) }
        }
    }
    let spDecodeValidate = measure("\(name) swift-protobuf decode + validate", options: options) { n in
        for _ in 0..<n {
            let message = try! S(serializedBytes: spBytes)
            try! message.validate()
            blackHole(message)
        }
    }
    let unpack = measure("\(name) protobuf-c unpack alone", options: options) { n in
        lrBytes.withUnsafeBufferPointer { p in
            for _ in 0..<n {
                let message = lr_unpack(descriptor, p.count, p.baseAddress!)
                blackHole(message)
                lr_free_unpacked(message)
            }
        }
    }
    let texts = stringBytes(of: lr)
    let strings = measure("\(name) Swift strings alone", options: options) { n in
        for _ in 0..<n {
            for t in texts { blackHole(String(decoding: t, as: UTF8.self)) }
        }
    }
    serverRows.append(
        ServerDecodeRow(
            message: name, size: lrBytes.count, ours: pcDecode, swiftProtobuf: spDecodeValidate,
            swiftProtobufDecode: spDecode, validate: validate, unpack: unpack, strings: strings))
    rows.append(CodecRow(message: name, size: lrBytes.count, op: "round trip", protobufC: pcRoundTrip, swiftProtobuf: spRoundTrip))
    rows.append(CodecRow(message: name, size: lrBytes.count, op: "encode", protobufC: pcEncode, swiftProtobuf: spEncode))
    rows.append(CodecRow(message: name, size: lrBytes.count, op: "decode", protobufC: pcDecode, swiftProtobuf: spDecode))
    decodeParts.append(DecodeParts(message: name, viaArray: pcDecode, viaRawPointer: pcDecodeRaw, validate: validate))
}

benchmark("RegisterTokenRequest", Fixture.lrRegister, Fixture.spRegister, descriptor: lr_register_token_request_descriptor())
benchmark("StartActivityRequest", Fixture.lrStart, Fixture.spStart, descriptor: lr_start_activity_request_descriptor())
benchmark("UpdateActivityRequest", Fixture.lrUpdate, Fixture.spUpdate, descriptor: lr_update_activity_request_descriptor())
benchmark("EndActivityRequest", Fixture.lrEnd, Fixture.spEnd, descriptor: lr_end_activity_request_descriptor())
benchmark("PingRequest", Fixture.lrPing, Fixture.spPing, descriptor: lr_ping_request_descriptor())
benchmark(
    "CreateChannelRequest", Fixture.lrCreateChannel, Fixture.spCreateChannel,
    descriptor: lr_create_channel_request_descriptor())
benchmark(
    "ListChannelsRequest", Fixture.lrListChannels, Fixture.spListChannels,
    descriptor: lr_list_channels_request_descriptor())
benchmark(
    "DeleteChannelRequest", Fixture.lrDeleteChannel, Fixture.spDeleteChannel,
    descriptor: lr_delete_channel_request_descriptor())

// MARK: Frames

/// A server's input: preface, HELLO, then pipelined REQUEST frames cycling through the
/// five requests, cut into 16 KiB chunks held in separate buffers (as socket reads are).
struct FrameWorkload {
    var chunks: [ByteBuffer] = []
    var totalBytes = 0
    var requestFrames = 0
    var frames: [Frame] = []
    var payloadBytes = 0

    init(targetBytes: Int, chunkSize: Int) {
        let requests: [(LiveRelayMethod, [UInt8])] = [
            (.registerToken, Fixture.lrRegister.serializedBytes()),
            (.startActivity, Fixture.lrStart.serializedBytes()),
            (.updateActivity, Fixture.lrUpdate.serializedBytes()),
            (.endActivity, Fixture.lrEnd.serializedBytes()),
            (.ping, Fixture.lrPing.serializedBytes()),
        ]
        let encoder = FrameEncoder()
        var stream = ByteBuffer()
        encoder.writePreface(into: &stream)
        encoder.encode(.hello(Frame.Hello(apiKey: ByteBuffer(string: "lr_live_0123456789abcdef0123456789abcdef"),
                                          clientName: "bench/1.0")), into: &stream)
        var id: UInt32 = 1
        while stream.readableBytes < targetBytes {
            let (method, payload) = requests[Int(id - 1) % requests.count]
            let frame = Frame.request(RequestID(id), Frame.Request(timeoutMilliseconds: 5_000, method: method.rawValue,
                                                                   payload: ByteBuffer(bytes: payload)))
            frames.append(frame)
            payloadBytes += payload.count
            encoder.encode(frame, into: &stream)
            id += 1
        }
        requestFrames = frames.count
        totalBytes = stream.readableBytes
        while stream.readableBytes > 0 {
            let slice = stream.readSlice(length: min(chunkSize, stream.readableBytes))!
            var copy = ByteBuffer()
            copy.writeImmutableBuffer(slice)  // its own storage
            chunks.append(copy)
        }
    }
}

let workload = FrameWorkload(targetBytes: 4 << 20, chunkSize: 16 * 1024)

@inline(never)
func decodeAll(_ workload: FrameWorkload, decodeMessages: Bool) -> Int {
    var decoder = FrameDecoder(expectPreface: true)
    var count = 0
    for chunk in workload.chunks {
        decoder.append(chunk)
        while let frame = try! decoder.nextFrame() {
            if case .request(_, let request) = frame {
                count += 1
                if decodeMessages {
                    switch LiveRelayMethod(rawValue: request.method)! {
                    case .registerToken: blackHole(try! RegisterTokenRequest(serializedBytes: request.payload))
                    case .startActivity: blackHole(try! StartActivityRequest(serializedBytes: request.payload))
                    case .updateActivity: blackHole(try! UpdateActivityRequest(serializedBytes: request.payload))
                    case .endActivity: blackHole(try! EndActivityRequest(serializedBytes: request.payload))
                    case .ping: blackHole(try! PingRequest(serializedBytes: request.payload))
                    case .createChannel: blackHole(try! CreateChannelRequest(serializedBytes: request.payload))
                    case .listChannels: blackHole(try! ListChannelsRequest(serializedBytes: request.payload))
                    case .deleteChannel: blackHole(try! DeleteChannelRequest(serializedBytes: request.payload))
                    case .listEvents: blackHole(try! ListEventsRequest(serializedBytes: request.payload))
                    }
                } else {
                    blackHole(request)
                }
            }
        }
    }
    precondition(count == workload.requestFrames && decoder.bufferedBytes == 0)
    return count
}

struct FrameRow {
    var name: String
    var bytesPerPass: Int
    var framesPerPass: Int
    var perPass: Measurement
    var mbPerSecond: Double { Double(bytesPerPass) / (perPass.median / 1e9) / 1_048_576 }
    var framesPerSecond: Double { Double(framesPerPass) / (perPass.median / 1e9) }
    var nsPerFrame: Double { perPass.median / Double(framesPerPass) }
}

var frameRows: [FrameRow] = []
if options.only == nil || "frames".contains(options.only!) {
    let decode = measure("FrameDecoder, 16 KiB chunks", options: options) { n in
        for _ in 0..<n { blackHole(decodeAll(workload, decodeMessages: false)) }
    }
    frameRows.append(FrameRow(name: "FrameDecoder: REQUEST frames from 16 KiB chunks", bytesPerPass: workload.totalBytes,
                              framesPerPass: workload.requestFrames, perPass: decode))
    let ingest = measure("FrameDecoder + request decode", options: options) { n in
        for _ in 0..<n { blackHole(decodeAll(workload, decodeMessages: true)) }
    }
    frameRows.append(FrameRow(name: "FrameDecoder + LiveRelayMessages decode of each request", bytesPerPass: workload.totalBytes,
                              framesPerPass: workload.requestFrames, perPass: ingest))
    var out = ByteBuffer()
    out.reserveCapacity(workload.totalBytes + 1024)
    let encoder = FrameEncoder()
    let encode = measure("FrameEncoder REQUEST", options: options) { n in
        for _ in 0..<n {
            out.clear()
            for frame in workload.frames { encoder.encode(frame, into: &out) }
            blackHole(out.readableBytes)
        }
    }
    frameRows.append(FrameRow(name: "FrameEncoder: REQUEST frames into one buffer", bytesPerPass: workload.totalBytes - 8,
                              framesPerPass: workload.requestFrames, perPass: encode))
}

// MARK: Report

func machine() -> String {
    var cpu = "unknown CPU"
    if let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
       let line = info.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
       let colon = line.firstIndex(of: ":") {
        cpu = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return "\(cpu), \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores"
}

print("")
print("Machine: \(machine()); \(options.batches) timed batches of ~\(options.batchMilliseconds) ms \(benchmarkClock == CLOCK_MONOTONIC ? "wall-clock" : "thread CPU") time per figure, median reported.")
print("")
if !rows.isEmpty {
    print("| Message | Bytes | Operation | LiveRelayMessages (protobuf-c) ns/op | swift-protobuf ns/op | swift-protobuf / protobuf-c |")
    print("|---|--:|---|--:|--:|--:|")
    for r in rows {
        let ratio = format(r.ratio, 2) + "x"
        let mark = r.op == "round trip" ? (r.ratio >= 2 ? " ✅" : " ❌") : ""
        print("| \(r.message) | \(r.size) | \(r.op) | \(format(r.protobufC.median, 0)) | \(format(r.swiftProtobuf.median, 0)) | \(ratio)\(mark) |")
    }
    print("")
    print("LiveRelayMessages decode includes validate(); swift-protobuf's decode does not validate.")
    let worst = rows.map { max($0.protobufC.spread, $0.swiftProtobuf.spread) }.max() ?? 0
    print("Largest batch spread ((max-min)/median) in the table: \(format(worst * 100, 1))%.")
    let roundTrips = rows.filter { $0.op == "round trip" }
    let missed = roundTrips.filter { $0.ratio < 2 }.map(\.message)
    print(missed.isEmpty
          ? "Goal (protobuf-c round trip at least 2x faster than swift-protobuf): met for every request."
          : "Goal (protobuf-c round trip at least 2x faster than swift-protobuf): NOT met for \(missed.joined(separator: ", ")).")
}
if !decodeParts.isEmpty {
    print("")
    print("Where a LiveRelayMessages decode goes (ns/op; `[UInt8]` is the decode row above):")
    print("")
    print("| Message | decode via `init(serializedBytes: [UInt8])` | via `init(serializedBytes: UnsafeRawBufferPointer, limit:)` | generic entry overhead | validate() alone | decode without validate() | swift-protobuf decode |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for p in decodeParts {
        let sp = rows.first { $0.message == p.message && $0.op == "decode" }!.swiftProtobuf.median
        let a = p.viaArray.median, r = p.viaRawPointer.median, v = p.validate.median
        print("| \(p.message) | \(format(a, 0)) | \(format(r, 0)) | \(format(a - r, 0)) | \(format(v, 0)) | \(format(r - v, 0)) | \(format(sp, 0)) |")
    }
}
if !serverRows.isEmpty {
    print("")
    print("Server decode: decode + validation (ns/op). swift-protobuf's column is its decode followed by")
    print("the same rules (Benchmarks/Sources/CodecBenchmark/SwiftProtobufValidation.swift).")
    print("")
    print("| Message | Bytes | LiveRelayMessages decode + validate | swift-protobuf decode + validate | ratio | validate() alone | protobuf-c unpack alone | Swift strings alone | floor (unpack + strings + validate) | best ratio at the floor | swift-protobuf decode alone |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in serverRows {
        let mark = r.ratio >= serverGoal ? " ✅" : " ❌"
        print("| \(r.message) | \(r.size) | \(format(r.ours.median, 0)) | \(format(r.swiftProtobuf.median, 0)) | \(format(r.ratio, 2))x\(mark) | \(format(r.validate.median, 0)) | \(format(r.unpack.median, 0)) | \(format(r.strings.median, 0)) | \(format(r.floor, 0)) | \(format(r.swiftProtobuf.median / r.floor, 2))x | \(format(r.swiftProtobufDecode.median, 0)) |")
    }
    let missed = serverRows.filter { $0.ratio < serverGoal }.map(\.message)
    print("")
    print(missed.isEmpty
          ? "Goal (decode + validation at least \(serverGoal)x faster than swift-protobuf's): met for every request."
          : "Goal (decode + validation at least \(serverGoal)x faster than swift-protobuf's): NOT met for \(missed.joined(separator: ", ")).")
}
if !frameRows.isEmpty {
    print("")
    print("Frame workload: \(grouped(Double(workload.requestFrames))) REQUEST frames, \(grouped(Double(workload.totalBytes))) bytes "
          + "(mean frame \(workload.totalBytes / workload.requestFrames) bytes), fed in \(workload.chunks.count) chunks of 16 KiB.")
    print("")
    print("| Frame codec | MB/s | frames/s | ns/frame |")
    print("|---|--:|--:|--:|")
    for f in frameRows {
        print("| \(f.name) | \(grouped(f.mbPerSecond)) | \(grouped(f.framesPerSecond)) | \(format(f.nsPerFrame, 0)) |")
    }
}
