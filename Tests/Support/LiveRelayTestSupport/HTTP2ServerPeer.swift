import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2

/// swift-nio-http2 as the server, in frame mode on an `EmbeddedChannel`: the
/// independent peer of the nghttp2 client's unit tests. The client's bytes go in
/// through ``receive(_:)``, which returns the frames nio-http2 decoded from them;
/// frames given to ``send(_:)`` come back as the bytes for the client.
public final class HTTP2ServerPeer {
    public let channel = EmbeddedChannel()

    public init(settings: HTTP2Settings = [HTTP2Setting(parameter: .maxConcurrentStreams, value: 100)]) throws {
        try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: settings))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
    }

    /// Reads the client's bytes; returns the frames they carried, in order.
    public func receive(_ bytes: ByteBuffer) throws -> [HTTP2Frame] {
        try channel.writeInbound(bytes)
        var frames: [HTTP2Frame] = []
        while let frame = try channel.readInbound(as: HTTP2Frame.self) { frames.append(frame) }
        return frames
    }

    /// Writes `frames` and returns every byte the server has written since the last call (its own SETTINGS and acknowledgements included).
    public func send(_ frames: [HTTP2Frame]) throws -> ByteBuffer {
        for frame in frames { channel.write(frame, promise: nil) }
        channel.flush()
        return try output()
    }

    /// The bytes the server has written and the client has not yet read.
    public func output() throws -> ByteBuffer {
        var bytes = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
        return bytes
    }

    /// An answer's frames: HEADERS with `:status` and `fields`, then the body as DATA when there is one.
    public static func answer(
        _ streamID: HTTP2StreamID, status: String, fields: [(String, String)] = [], body: String? = nil
    ) -> [HTTP2Frame] {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: status)
        for (name, value) in fields { headers.add(name: name, value: value) }
        var frames = [HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: body == nil)))]
        if let body {
            frames.append(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: body)), endStream: true))))
        }
        return frames
    }
}
