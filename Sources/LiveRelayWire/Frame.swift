import NIOCore

/// One frame, decoded: the header's type and request id folded into the case.
///
/// Request-level cases carry their `RequestID`; connection-level cases have
/// none, so a connection-level frame with an id cannot be built. Byte fields
/// (API key, protobuf payloads, error details) are `ByteBuffer` slices of the
/// bytes that arrived, so decoding a RESPONSE or REQUEST never copies its
/// message. Strings are short, validated text (method, names, reasons).
public enum Frame: Hashable, Sendable {
    case hello(Hello)
    case welcome(Welcome)
    case request(RequestID, Request)
    /// The protobuf reply bytes. Status OK is implied: the hot path has no overhead beyond the header.
    case response(RequestID, ByteBuffer)
    case error(RequestID, RequestError)
    case cancel(RequestID)
    /// 8 opaque bytes, held as a big-endian integer so a PING costs no allocation.
    case ping(UInt64)
    /// Echoes the data of the PING it answers.
    case pong(UInt64)
    case goAway(GoAway)

    public var type: FrameType {
        switch self {
        case .hello: return .hello
        case .welcome: return .welcome
        case .request: return .request
        case .response: return .response
        case .error: return .error
        case .cancel: return .cancel
        case .ping: return .ping
        case .pong: return .pong
        case .goAway: return .goAway
        }
    }

    /// The id in the header: 0 for connection-level frames.
    public var requestID: RequestID {
        switch self {
        case .request(let id, _), .response(let id, _), .error(let id, _), .cancel(let id):
            return id
        case .hello, .welcome, .ping, .pong, .goAway:
            return .connection
        }
    }
}

extension Frame {
    /// The first frame of a connection, right after the preface: who the client
    /// is and which versions it speaks. Authentication rides here, not in each
    /// request, so the key is checked once per connection.
    public struct Hello: Hashable, Sendable {
        public var minVersion: UInt16
        public var maxVersion: UInt16
        /// Opaque bytes (1–512); the server compares them with stored hashes.
        public var apiKey: ByteBuffer
        /// For logs only; never used for decisions.
        public var clientName: String
        public var settings: [Setting]

        public init(
            minVersion: UInt16 = ProtocolVersion.supported.lowerBound,
            maxVersion: UInt16 = ProtocolVersion.supported.upperBound,
            apiKey: ByteBuffer,
            clientName: String,
            settings: [Setting] = []
        ) {
            self.minVersion = minVersion
            self.maxVersion = maxVersion
            self.apiKey = apiKey
            self.clientName = clientName
            self.settings = settings
        }
    }

    /// The server's acceptance of a HELLO: the chosen version and its limits.
    public struct Welcome: Hashable, Sendable {
        public var version: UInt16
        public var settings: [Setting]

        public init(version: UInt16, settings: [Setting] = []) {
            self.version = version
            self.settings = settings
        }
    }

    /// One unary call.
    public struct Request: Hashable, Sendable {
        /// Relative, in milliseconds (0 = none), like gRPC's grpc-timeout: each
        /// side measures from its own clock, so clock skew cannot expire a call.
        public var timeoutMilliseconds: UInt32
        /// "/liverelay.v1.LiveRelay/<Method>", printable ASCII, 1–255 bytes.
        public var method: String
        /// The protobuf request bytes, passed through untouched.
        public var payload: ByteBuffer

        public init(timeoutMilliseconds: UInt32 = 0, method: String, payload: ByteBuffer) {
            self.timeoutMilliseconds = timeoutMilliseconds
            self.method = method
            self.payload = payload
        }
    }

    /// A failed call: gRPC's status code and message, plus protobuf details.
    public struct RequestError: Hashable, Sendable {
        /// Never `.ok`: success is a RESPONSE frame.
        public var status: StatusCode
        public var message: String
        /// The bytes of a `liverelay.v1.ErrorDetails`, possibly empty.
        public var details: ByteBuffer

        public init(status: StatusCode, message: String, details: ByteBuffer = ByteBuffer()) {
            self.status = status
            self.message = message
            self.details = details
        }
    }

    /// The end of a connection, announced: which requests the sender will still answer.
    public struct GoAway: Hashable, Sendable {
        /// The highest request id the sender received and will answer; a
        /// client may resend anything above it on another connection.
        public var lastRequestID: RequestID
        public var code: GoAwayCode
        public var reason: String

        public init(lastRequestID: RequestID, code: GoAwayCode, reason: String) {
            self.lastRequestID = lastRequestID
            self.code = code
            self.reason = reason
        }
    }
}
