/// Inbound flow control for the mock APNs, which runs swift-nio-http2 in frame
/// mode. In that mode nio-http2 tracks the windows but sends no WINDOW_UPDATE:
/// that is its stream multiplexer's job, which the mock does not use (a child
/// channel per stream cost more than the push). So it tops its windows up itself, from the window sizes
/// nio-http2 reports in `NIOHTTP2WindowUpdatedEvent`: back up to `target` once a
/// window has fallen to half of it, as nio-http2's own window manager does.
/// Without it the connection's 65,535-byte window is spent after some 2,400 error
/// answers, and every later answer with a body stalls until its timeout.
public enum HTTP2InboundWindow {
    /// The WINDOW_UPDATE increment for a window now at `windowSize`, nil while it is above half of `target`.
    public static func increment(windowSize: Int, target: Int) -> Int? {
        guard windowSize < target else { return nil }
        if windowSize < 0 { return min(-windowSize + target, Int(Int32.max)) }
        let increment = target - windowSize
        return increment >= windowSize ? increment : nil
    }

    /// RFC 9113 §6.9.2: every window starts at 65,535 bytes.
    public static let defaultSize = 65_535
}
