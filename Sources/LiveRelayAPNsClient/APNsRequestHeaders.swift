import LiveRelayAPNs
import NIOHPACK

/// The request headers of a push, built the way a fan-out needs them: the
/// fields every push of one call shares (method, scheme, authority, provider
/// token, the `apns-*` headers, content length) once per call and token
/// generation, and per push only the two that are its own (`:path`,
/// `apns-id`). Formatting the bearer, the priority, the expiry and the
/// content length again for each of 100,000 tokens would be a measurable
/// share of a push's CPU.
struct APNsRequestHeaders {
    /// What the shared fields were built from: a request that matches gets them as they are.
    private struct Key: Equatable {
        var headers: APNsHeaders
        var generation: Int
        var contentLength: Int
    }

    private var key: Key?
    /// `:method`, `:scheme`: before `:path`.
    private var prefix = HPACKHeaders()
    /// `:authority`, `authorization`, the `apns-*` fields: between `:path` and `apns-id`.
    private var middle = HPACKHeaders()
    private var contentLength = HPACKHeaders()
    private var bearer: (generation: Int, value: String)?

    /// The headers of `request` with the provider token `token` of `generation`;
    /// equal, field for field, to ``headers(for:authority:bearer:)``.
    mutating func headers(for request: APNsRequest, authority: String, token: String, generation: Int) -> HPACKHeaders {
        guard request.isDevicePush else {
            return Self.headers(for: request, authority: authority, bearer: token)
        }
        let key = Key(headers: request.headers, generation: generation, contentLength: request.payload.count)
        if self.key != key {
            rebuild(key, authority: authority, token: token)
        }
        var headers = HPACKHeaders()
        headers.reserveCapacity(prefix.count + middle.count + 3)
        headers.add(contentsOf: prefix)
        headers.add(name: ":path", value: request.path, indexing: .nonIndexable)
        headers.add(contentsOf: middle)
        if let apnsID = request.apnsID { headers.add(name: "apns-id", value: apnsID, indexing: .nonIndexable) }
        headers.add(contentsOf: contentLength)
        return headers
    }

    private mutating func rebuild(_ key: Key, authority: String, token: String) {
        if bearer?.generation != key.generation { bearer = (key.generation, "bearer " + token) }
        prefix = [":method": "POST", ":scheme": "https"]
        middle = HPACKHeaders()
        middle.add(name: ":authority", value: authority)
        middle.add(name: "authorization", value: bearer!.value)
        for field in key.headers.fields { middle.add(name: field.name, value: field.value) }
        contentLength = ["content-length": String(key.contentLength)]
        self.key = key
    }

    /// The request headers of one push (or broadcast, or channel management call),
    /// each field built for this request alone. `authorization` is set at stream
    /// open, so a queued or retried request always carries the current token.
    static func headers(for request: APNsRequest, authority: String, bearer: String) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(12)
        headers.add(name: ":method", value: request.method)
        headers.add(name: ":scheme", value: "https")
        // Values unique to one push (the token's path, the apns-id) are sent without
        // indexing: in HPACK's dynamic table they would only evict the entries every
        // push shares (authority, authorization, topic), which then go out in full again.
        headers.add(name: ":path", value: request.path, indexing: .nonIndexable)
        headers.add(name: ":authority", value: authority)
        headers.add(name: "authorization", value: "bearer " + bearer)
        for field in request.headerFields { headers.add(name: field.name, value: field.value) }
        if let apnsID = request.apnsID {
            headers.add(name: request.isDevicePush ? "apns-id" : "apns-request-id", value: apnsID, indexing: .nonIndexable)
        }
        headers.add(name: "content-length", value: String(request.payload.count))
        return headers
    }
}
