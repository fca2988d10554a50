import LiveRelayMessages
import LiveRelayWire
import NIOCore

/// The frame-stream fuzz input: two control bytes, then the bytes a peer sends.
///
/// Byte 0 (mode):
/// - bits 0-1: how the stream is cut into chunks: 0 one chunk, 1 one byte at a
///   time, 2 fixed chunks of `param + 1` bytes, 3 pseudo-random sizes in 1...`param + 1`;
/// - bit 2: the decoder alone, without the server state machine;
/// - bit 3: MAX_FRAME_SIZE 16384 (the smallest allowed) instead of the 1 MiB default;
/// - bit 7: the client side (no preface expected, no state machine).
/// Byte 1 (param): the chunk size parameter and the pseudo-random seed.
public enum FrameStreamInput {
    public static let serverWithStateMachine: UInt8 = 0x00
    public static let oneByteAtATime: UInt8 = 0x01
    public static let fixedChunks: UInt8 = 0x02
    public static let randomChunks: UInt8 = 0x03
    public static let decoderOnly: UInt8 = 0x04
    public static let smallMaxFrameSize: UInt8 = 0x08
    public static let clientSide: UInt8 = 0x80
}

/// Feeds the stream to a FrameDecoder in chunks and, on the server side, the
/// frames to a ServerConnectionStateMachine whose actions are carried out as a
/// channel handler would (authentication and work results arrive a chunk later,
/// so requests pipeline behind HELLO and stay in flight).
///
/// Checks: no crash or trap in the wire code; every decoded frame re-encodes with
/// FrameEncoder to exactly `10 + payloadLength` bytes that decode to the same
/// frame; every frame the state machine writes round-trips the same way through
/// a client-side decoder; after an error the decoder repeats it; what the decoder
/// keeps buffered after draining is less than one frame (no unbounded growth).
public func fuzzFrameStream(_ data: UnsafePointer<UInt8>?, _ size: Int) {
    guard size >= 2, let data else { return }
    let mode = data[0]
    let param = Int(data[1])
    let stream = UnsafeBufferPointer(start: data + 2, count: size - 2)
    let clientSide = mode & FrameStreamInput.clientSide != 0
    let maxFrameSize: UInt32 = mode & FrameStreamInput.smallMaxFrameSize != 0 ? 16_384 : Setting.defaultMaxFrameSize

    var driver = FrameStreamDriver(
        clientSide: clientSide,
        withStateMachine: !clientSide && mode & FrameStreamInput.decoderOnly == 0,
        maxFrameSize: maxFrameSize
    )
    var rng = SplitMix(seed: UInt64(mode) << 8 | UInt64(param))
    var offset = 0
    while offset < stream.count, !driver.closed {
        let chunk: Int
        switch mode & 0x03 {
        case 0: chunk = stream.count
        case 1: chunk = 1
        case 2: chunk = param + 1
        default: chunk = Int(rng.next() % UInt64(param + 1)) + 1
        }
        let end = min(stream.count, offset + chunk)
        driver.feed(UnsafeBufferPointer(rebasing: stream[offset..<end]))
        offset = end
    }
    driver.finish()
}

struct FrameStreamDriver {
    var decoder: FrameDecoder
    var machine: ServerConnectionStateMachine?
    let maxFrameSize: UInt32
    let clientSide: Bool
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    var failure: FrameDecodingError?
    var closed = false
    var paused = false
    /// Results the "handler" delivers at the next chunk, as if work were asynchronous.
    var pendingAuthentication: ByteBuffer?
    var pendingWork: [ServerConnectionStateMachine.Dispatch] = []
    /// Frames the server wrote, re-read by a client-side decoder.
    var written = ByteBuffer()
    var peer = FrameDecoder(expectPreface: false, maxFrameSize: Setting.maxFrameSizeRange.upperBound)

    init(clientSide: Bool, withStateMachine: Bool, maxFrameSize: UInt32) {
        self.clientSide = clientSide
        self.maxFrameSize = maxFrameSize
        if withStateMachine {
            let configuration = ServerConnectionStateMachine.Configuration(
                settings: ServerSettings(maxFrameSize: maxFrameSize, maxRequestsInFlight: 4, idleTimeoutMilliseconds: 2_000),
                helloTimeout: .milliseconds(500),
                maxPingsPerWindow: 3,
                pingWindow: .seconds(1)
            )
            self.machine = ServerConnectionStateMachine(configuration: configuration, now: self.now)
            self.decoder = configuration.makeFrameDecoder()
        } else {
            self.decoder = FrameDecoder(expectPreface: !clientSide, maxFrameSize: maxFrameSize)
        }
    }

    mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.now = self.now + .milliseconds(7)
        self.deliverPendingResults()
        self.fireTimerIfDue()
        var chunk = ByteBuffer()
        chunk.writeBytes(bytes)
        self.decoder.append(chunk)
        self.drain()
    }

    mutating func drain() {
        while !self.closed, !self.paused, self.failure == nil {
            let frame: Frame?
            do {
                frame = try self.decoder.nextFrame()
            } catch {
                self.failure = error
                // The stream is no longer aligned: the decoder must say so again, and buffer nothing.
                do {
                    _ = try self.decoder.nextFrame()
                    fuzzCheck(false, "decoder returned a frame after failing with \(error)")
                } catch let again {
                    fuzzCheck(again == error, "decoder changed its error: \(error) then \(again)")
                }
                fuzzCheck(self.decoder.bufferedBytes == 0, "decoder keeps \(self.decoder.bufferedBytes) bytes after failing")
                _ = error.description
                if var machine = self.machine {
                    let actions = machine.receiveDecodingError(error, now: self.now)
                    self.machine = machine
                    self.perform(actions)
                }
                return
            }
            guard let frame else { break }
            self.checkRoundTrip(frame, maxFrameSize: self.maxFrameSize)
            if var machine = self.machine {
                self.now = self.now + .milliseconds(1)
                let actions = machine.receive(frame, now: self.now)
                self.machine = machine
                self.perform(actions)
            }
        }
        if !self.paused, self.failure == nil {
            // Drained: what is left is part of one frame (its header, or some of its payload).
            let bound = Wire.frameHeaderSize + max(Int(self.maxFrameSize), Wire.maxHelloPayloadSize)
            fuzzCheck(
                self.decoder.bufferedBytes < bound,
                "decoder holds \(self.decoder.bufferedBytes) bytes after draining (bound \(bound))"
            )
        }
    }

    mutating func finish() {
        if self.failure == nil {
            do { try self.decoder.finish() } catch { _ = error.description }
        }
        self.deliverPendingResults()
        if var machine = self.machine {
            self.now = self.now + .seconds(30)
            let timerActions = machine.timerFired(now: self.now)
            self.machine = machine
            self.perform(timerActions)
            if var machine = self.machine {
                let shutdown = machine.beginGracefulShutdown(now: self.now)
                self.machine = machine
                self.perform(shutdown)
            }
            self.deliverPendingResults()
            if var machine = self.machine {
                let actions = machine.peerClosed()
                fuzzCheck(machine.isClosed, "state machine not closed after peerClosed()")
                self.machine = machine
                self.perform(actions)
            }
        }
        // Everything the server wrote has been read back frame by frame.
        do {
            try self.peer.finish()
        } catch {
            fuzzCheck(false, "the server wrote a cut or malformed frame: \(error)")
        }
    }

    /// Re-encodes `frame` and decodes it with a fresh decoder: the same frame, every byte consumed.
    func checkRoundTrip(_ frame: Frame, maxFrameSize: UInt32) {
        var out = ByteBuffer()
        let written = FrameEncoder().encode(frame, into: &out)
        fuzzCheck(written == out.readableBytes, "encode returned \(written), wrote \(out.readableBytes)")
        fuzzCheck(
            written == Wire.frameHeaderSize + FrameEncoder.payloadLength(of: frame),
            "\(frame.type): wrote \(written) bytes, payloadLength says \(FrameEncoder.payloadLength(of: frame))"
        )
        var decoder = FrameDecoder(expectPreface: false, maxFrameSize: maxFrameSize)
        decoder.append(out)
        do {
            let again = try decoder.nextFrame()
            fuzzCheck(again == frame, "\(frame.type) frame changed in a round trip:\n\(frame)\n\(String(describing: again))")
            let extra = try decoder.nextFrame()
            fuzzCheck(extra == nil, "\(frame.type): extra frame after the round trip")
            fuzzCheck(decoder.bufferedBytes == 0, "\(frame.type): \(decoder.bufferedBytes) bytes left after the round trip")
        } catch {
            fuzzCheck(false, "\(frame.type) frame does not decode after re-encoding: \(error)\n\(frame)")
        }
    }

    mutating func perform(_ actions: [ServerConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .write(let frame):
                fuzzCheck(!self.closed, "state machine wrote \(frame.type) after .close")
                self.checkRoundTrip(frame, maxFrameSize: Setting.maxFrameSizeRange.upperBound)
                FrameEncoder().encode(frame, into: &self.written)
                self.peer.append(self.written)
                self.written = ByteBuffer()
                do {
                    let echoed = try self.peer.nextFrame()
                    fuzzCheck(echoed == frame, "written \(frame.type) frame read back differently")
                } catch {
                    fuzzCheck(false, "the server wrote a frame its peer cannot decode: \(error)\n\(frame)")
                }
            case .authenticate(let apiKey, let clientName, _):
                _ = clientName
                fuzzCheck(self.pendingAuthentication == nil, "two authentications at once")
                self.pendingAuthentication = apiKey
            case .dispatch(let dispatch):
                fuzzCheck(
                    !self.pendingWork.contains { $0.id == dispatch.id },
                    "request \(dispatch.id) dispatched twice"
                )
                // What the service will do with the payload: decode it as the method's request.
                if let method = LiveRelayMethod(rawValue: dispatch.method) {
                    _ = decodeRequest(method.requestType, dispatch.payload)
                }
                self.pendingWork.append(dispatch)
            case .cancelWork(let id):
                self.pendingWork.removeAll { $0.id == id }
            case .pauseReading:
                fuzzCheck(!self.paused, "pauseReading twice")
                self.paused = true
            case .resumeReading:
                fuzzCheck(self.paused, "resumeReading while not paused")
                self.paused = false
            case .close:
                self.closed = true
            }
        }
        if self.paused, !self.closed {
            // A handler stops reading; the work it already started finishes and frees slots.
            // (drain()'s loop picks up again once reading resumes.)
            self.deliverPendingResults()
        }
    }

    mutating func deliverPendingResults() {
        guard self.machine != nil else { return }
        if let apiKey = self.pendingAuthentication {
            self.pendingAuthentication = nil
            let accept = apiKey.getInteger(at: apiKey.readerIndex, as: UInt8.self).map { $0 & 1 == 0 } ?? true
            var machine = self.machine!
            let actions =
                accept
                ? machine.authenticationSucceeded(now: self.now)
                : machine.authenticationFailed(message: "invalid API key", now: self.now)
            self.machine = machine
            self.perform(actions)
        }
        while !self.pendingWork.isEmpty {
            let work = self.pendingWork.removeFirst()
            var machine = self.machine!
            let actions: [ServerConnectionStateMachine.Action]
            switch work.id.rawValue % 3 {
            case 0:
                var details = ByteBuffer()
                ErrorDetails(fieldViolations: [FieldViolation(field: "app_id", description: "required")]).serialize(into: &details)
                actions = machine.fail(work.id, status: .invalidArgument, message: "bad request é", details: details, now: self.now)
            default:
                actions = machine.respond(work.id, payload: work.payload, now: self.now)
            }
            self.machine = machine
            self.perform(actions)
        }
    }

    mutating func fireTimerIfDue() {
        guard var machine = self.machine, let deadline = machine.nextTimeout, deadline <= self.now else { return }
        let actions = machine.timerFired(now: self.now)
        self.machine = machine
        self.perform(actions)
    }
}

func decodeRequest<M: LiveRelayMessage>(_ type: M.Type, _ payload: ByteBuffer) -> M? {
    try? M(serializedBytes: payload)
}

/// A small deterministic generator (SplitMix64), so a crash input replays exactly.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
