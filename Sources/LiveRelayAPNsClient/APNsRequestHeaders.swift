import LiveRelayAPNs
import LiveRelayHTTP2

/// The request headers of a push, built the way a fan-out needs them: the
/// fields every push of one call shares (method, scheme, authority, provider
/// token, the `apns-*` headers, content length) once per call and token
/// generation, and per push only the two values that are its own (`:path`,
/// `apns-id`), written at the end of the same list. Formatting the bearer, the
/// priority, the expiry and the content length again, or copying the shared
/// fields, for each of 100,000 tokens would be a measurable share of a push's CPU.
///
/// Order: the pseudo-headers first (RFC 9113 §8.3), `:path` last of them; the
/// shared regular fields; then `apns-id`.
struct APNsRequestHeaders {
    /// What the shared fields were built from: a request that matches gets them as they are.
    private struct Key: Equatable {
        var headers: APNsHeaders
        var generation: Int
        var contentLength: Int
        var hasAPNsID: Bool
    }

    private var key: Key?
    /// The shared fields' bytes first, then this push's path and apns-id.
    private var template = HTTP2HeaderList()
    private var sharedBytes = 0
    private var pathField = 0
    private var bearer: (generation: Int, value: String)?

    /// The headers of `request` with the provider token `token` of `generation`;
    /// equal, field for field, to ``headers(for:authority:bearer:)``.
    mutating func headers(for request: APNsRequest, authority: String, token: String, generation: Int) -> HTTP2HeaderList {
        guard request.isDevicePush else {
            return Self.headers(for: request, authority: authority, bearer: token)
        }
        let key = Key(
            headers: request.headers, generation: generation, contentLength: request.payload.count,
            hasAPNsID: request.apnsID != nil)
        if self.key != key {
            rebuild(key, authority: authority, token: token)
        }
        template.truncateBytes(to: sharedBytes)
        template.setValue(ofField: pathField, valuePrefix: "/3/device/", value: request.deviceToken)
        if let apnsID = request.apnsID { template.setValue(ofField: template.count - 1, value: apnsID) }
        return template
    }

    private mutating func rebuild(_ key: Key, authority: String, token: String) {
        if bearer?.generation != key.generation { bearer = (key.generation, "bearer " + token) }
        template = HTTP2HeaderList()
        template.append(name: ":method", value: "POST")
        template.append(name: ":scheme", value: "https")
        template.append(name: ":authority", value: authority)
        // Values unique to one push are not indexed: in HPACK's dynamic table they would only
        // evict the entries every push shares (authorization, topic), which then go out in full again.
        pathField = template.count
        template.append(name: ":path", value: "", indexable: false)
        template.append(name: "authorization", value: bearer!.value)
        for field in key.headers.fields { template.append(name: field.name, value: field.value) }
        template.append(name: "content-length", value: String(key.contentLength))
        if key.hasAPNsID { template.append(name: "apns-id", value: "", indexable: false) }
        sharedBytes = template.byteCount
        self.key = key
    }

    /// The request headers of one push (or broadcast, or channel management call),
    /// each field built for this request alone. `authorization` is set at stream
    /// open, so a queued or retried request always carries the current token.
    static func headers(for request: APNsRequest, authority: String, bearer: String) -> HTTP2HeaderList {
        var headers = HTTP2HeaderList()
        headers.append(name: ":method", value: request.method)
        headers.append(name: ":scheme", value: "https")
        headers.append(name: ":authority", value: authority)
        headers.append(name: ":path", value: request.path, indexable: false)
        headers.append(name: "authorization", value: "bearer " + bearer)
        for field in request.headerFields { headers.append(name: field.name, value: field.value) }
        headers.append(name: "content-length", value: String(request.payload.count))
        if let apnsID = request.apnsID {
            headers.append(name: request.isDevicePush ? "apns-id" : "apns-request-id", value: apnsID, indexable: false)
        }
        return headers
    }
}
